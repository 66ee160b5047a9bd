//! The render jail (issue 46): every step that hands a source's bytes to a C library (decode,
//! ICC transform, resize, encode, HEIF parsing) runs in a worker process of this same binary,
//! with no secrets in its environment, a data limit the kernel enforces, a lower CPU priority,
//! and a seccomp filter that leaves it only what decoding needs. A worker that dies costs its
//! render only. `pool` is the server's side, `worker` the worker's, `protocol` what they say,
//! `filter` the seccomp programs. docs/images.md says what the jail covers and what it does not.

pub mod filter;
pub mod pool;
pub mod protocol;
pub mod worker;

pub use pool::{Death, Outcome, Pool, PoolConfig, PoolEvents};
pub use protocol::Job;
