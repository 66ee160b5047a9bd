//! Where the bucket's keys come from, in byte order: the bucket side of reconcile's join and
//! the legacy import's key source. A listing (here), a ranged listing
//! (`services::ranged_listing`) or an S3 Inventory (`services::inventory`).

use std::sync::Arc;

use async_trait::async_trait;

use crate::domain::reconcile::BucketKey;
use crate::storage::{ObjectStore, StoreError};

/// Keys asked for per listing call (S3's largest page).
pub const PAGE: i32 = 1000;

/// Where the bucket's keys come from.
#[async_trait]
pub trait BucketSource: Send {
    /// The next page of keys in byte order, `None` at the end.
    async fn next_page(&mut self) -> Result<Option<Vec<BucketKey>>, StoreError>;
    fn name(&self) -> &'static str;
    /// Listing calls made so far, where the source counts them.
    fn requests(&self) -> Option<u64> {
        None
    }
}

/// ListObjectsV2 over the whole bucket (or one prefix of it), from a key on.
pub struct ListingSource {
    store: Arc<dyn ObjectStore>,
    prefix: String,
    start_after: Option<String>,
    token: Option<String>,
    done: bool,
    requests: u64,
}

impl ListingSource {
    pub fn new(store: Arc<dyn ObjectStore>, start_after: Option<String>) -> Self {
        Self::under(store, String::new(), start_after)
    }

    /// The keys under `prefix` only (the legacy import lists each legacy prefix).
    pub fn under(store: Arc<dyn ObjectStore>, prefix: String, start_after: Option<String>) -> Self {
        Self {
            store,
            prefix,
            start_after,
            token: None,
            done: false,
            requests: 0,
        }
    }
}

#[async_trait]
impl BucketSource for ListingSource {
    async fn next_page(&mut self) -> Result<Option<Vec<BucketKey>>, StoreError> {
        if self.done {
            return Ok(None);
        }
        self.requests += 1;
        let page = self
            .store
            .list_objects(
                &self.prefix,
                self.start_after.take(),
                self.token.take(),
                PAGE,
            )
            .await?;
        match page.next {
            Some(t) => self.token = Some(t),
            None => self.done = true,
        }
        Ok(Some(
            page.objects
                .into_iter()
                .map(|o| BucketKey {
                    key: o.key,
                    size: o.size,
                    last_modified: o.last_modified,
                })
                .collect(),
        ))
    }

    fn name(&self) -> &'static str {
        "listing"
    }

    fn requests(&self) -> Option<u64> {
        Some(self.requests)
    }
}
