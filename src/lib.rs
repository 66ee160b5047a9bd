//! upcommit: direct-to-S3 media uploads in two phases — presign, then commit — that keep the
//! bucket clean by construction. See `docs/architecture.md` for one upload's path through
//! these modules.

pub mod auth;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod jail;
pub mod metrics;
pub mod outbound;
pub mod pause;
pub mod render;
pub mod services;
pub mod signing;
pub mod startup;
pub mod state;
pub mod storage;
pub mod telemetry;

pub use startup::Application;
