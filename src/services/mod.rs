//! The two workflows, independent of HTTP: presign (validate, sign, record) and commit
//! (validate the uploaded object, promote it to its paired final key, record the handle).

pub mod commit;
pub mod presign;
