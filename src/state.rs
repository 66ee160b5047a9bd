//! The state every handler shares: cheap to clone, `Arc`s inside.

use std::sync::{Arc, Mutex};

use crate::catalog::Catalog;
use crate::config::Settings;
use crate::domain::rate::RateLimiter;
use crate::metrics::Metrics;
use crate::services::bucket_watch::BucketWatch;
use crate::storage::ObjectStore;

#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    pub catalog: Arc<dyn Catalog>,
    pub store: Arc<dyn ObjectStore>,
    /// The latest check of the live bucket's configuration.
    pub bucket_watch: Arc<BucketWatch>,
    /// Presigns per user on this replica.
    pub presign_limiter: Arc<Mutex<RateLimiter>>,
    /// This server's counters and histograms (`GET /metrics`).
    pub metrics: Arc<Metrics>,
}
