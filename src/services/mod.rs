//! The two workflows, independent of HTTP: presign (validate, sign, record) and commit
//! (validate the uploaded object, promote it to its paired final key, record the handle), and
//! the checks of the live bucket's configuration.

pub mod apply_lifecycle;
pub mod bucket_source;
pub mod commit;
pub mod copies;
pub mod events;
pub mod heartbeat;
pub mod hygiene;
pub mod inventory;
pub mod jobs;
pub mod legacy_import;
pub mod multipart;
pub mod presign;
pub mod prune;
pub mod ranged_listing;
pub mod reconcile;
pub mod recovery;
pub mod render_failures;
pub mod renditions;
pub mod report;
pub mod sweep;
pub mod tmp_cleanup;
