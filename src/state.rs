//! The state every handler shares: cheap to clone, `Arc`s inside.

use std::sync::Arc;

use crate::catalog::Catalog;
use crate::config::Settings;
use crate::services::bucket_watch::BucketWatch;
use crate::storage::ObjectStore;

#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    pub catalog: Arc<dyn Catalog>,
    pub store: Arc<dyn ObjectStore>,
    /// The latest check of the live bucket's configuration.
    pub bucket_watch: Arc<BucketWatch>,
}
