//! Reconcile's bucket side listed by several workers at once, handed to the join in key order,
//! in bounded memory.
//!
//! The key space is a sequence of adjacent ranges (`domain::key_ranges`), kept in key order.
//! A worker lists one range with one ListObjectsV2 call (`start_after` = the range's start, one
//! page); a page that stops short of the range's end leaves the rest of the range cut into
//! pieces at the page's key density, which other workers take up. Workers always take the
//! earliest range not yet listed, and no more than [`AHEAD_PER_WORKER`] listed pages per worker
//! wait for the join: memory is bounded by the workers and the page size, never by the bucket.
//! The join reads pages from the front only, so it sees exactly the keys, in exactly the order,
//! of one sequential listing.

use std::collections::VecDeque;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::task::JoinSet;

use crate::domain::key_ranges::{split_rest, KeyRange};
use crate::domain::reconcile::BucketKey;
use crate::services::bucket_source::BucketSource;
use crate::storage::{ObjectStore, StoreError};

/// Listed pages per worker that may wait for the join.
pub const AHEAD_PER_WORKER: usize = 4;
/// Ranges known per worker (listed or not); past it, a page's rest is not cut further.
const RANGES_PER_WORKER: usize = 64;

enum Segment {
    Pending(KeyRange),
    Listing(u64),
    Listed(Vec<BucketKey>),
}

struct Listed {
    keys: Vec<BucketKey>,
    /// What is left of the range, cut into pieces; empty when the page reached its end.
    rest: Vec<KeyRange>,
}

pub struct RangedListing {
    store: Arc<dyn ObjectStore>,
    workers: usize,
    page: i32,
    /// In key order; the join's next page is at the front.
    segments: VecDeque<Segment>,
    tasks: JoinSet<(u64, Result<Listed, StoreError>)>,
    next_id: u64,
    /// ListObjectsV2 calls made.
    pub requests: u64,
}

impl RangedListing {
    /// Lists everything after `start_after` (a crashed run's checkpoint) with `workers`
    /// workers and pages of `page` keys.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        workers: usize,
        page: i32,
        start_after: Option<String>,
    ) -> Self {
        Self {
            store,
            workers: workers.max(1),
            page: page.max(1),
            segments: VecDeque::from([Segment::Pending(KeyRange::from(start_after))]),
            tasks: JoinSet::new(),
            next_id: 0,
            requests: 0,
        }
    }

    /// Starts listing the earliest ranges not yet listed, within the bounds.
    fn launch(&mut self) {
        loop {
            let (mut listing, mut listed) = (0, 0);
            for s in &self.segments {
                match s {
                    Segment::Listing(_) => listing += 1,
                    Segment::Listed(_) => listed += 1,
                    Segment::Pending(_) => {}
                }
            }
            if listing >= self.workers {
                return;
            }
            let Some(i) = self
                .segments
                .iter()
                .position(|s| matches!(s, Segment::Pending(_)))
            else {
                return;
            };
            // The front is what the join waits for: it is always listed, whatever waits behind.
            if i > 0 && listing + listed >= self.workers * AHEAD_PER_WORKER {
                return;
            }
            let id = self.next_id;
            self.next_id += 1;
            let Segment::Pending(range) =
                std::mem::replace(&mut self.segments[i], Segment::Listing(id))
            else {
                return;
            };
            let pieces = if self.segments.len() < self.workers * RANGES_PER_WORKER {
                self.workers
            } else {
                0
            };
            let (store, page) = (self.store.clone(), self.page);
            self.requests += 1;
            self.tasks
                .spawn(async move { (id, list_range(store.as_ref(), &range, page, pieces).await) });
        }
    }
}

/// One page of `range`, and the rest of the range cut into `pieces` (+1) if the page did not
/// reach its end.
async fn list_range(
    store: &dyn ObjectStore,
    range: &KeyRange,
    page: i32,
    pieces: usize,
) -> Result<Listed, StoreError> {
    let listed = store
        .list_objects("", range.after.clone(), None, page)
        .await?;
    let mut ended = listed.next.is_none();
    let mut keys = Vec::with_capacity(listed.objects.len());
    for o in listed.objects {
        if !range.reaches(&o.key) {
            ended = true;
            break;
        }
        keys.push(BucketKey {
            key: o.key,
            size: o.size,
            last_modified: o.last_modified,
        });
    }
    if ended {
        return Ok(Listed {
            keys,
            rest: Vec::new(),
        });
    }
    let (Some(first), Some(last)) = (keys.first(), keys.last()) else {
        return Err(StoreError::Other(
            "ListObjectsV2 answered an empty page that it says is truncated".into(),
        ));
    };
    let rest = split_rest(range, &first.key, &last.key, pieces);
    Ok(Listed { keys, rest })
}

#[async_trait]
impl BucketSource for RangedListing {
    async fn next_page(&mut self) -> Result<Option<Vec<BucketKey>>, StoreError> {
        loop {
            self.launch();
            match self.segments.front() {
                None => return Ok(None),
                Some(Segment::Listed(_)) => {
                    if let Some(Segment::Listed(keys)) = self.segments.pop_front() {
                        if !keys.is_empty() {
                            return Ok(Some(keys));
                        }
                    }
                    continue;
                }
                Some(_) => {}
            }
            let Some(joined) = self.tasks.join_next().await else {
                return Err(StoreError::Other("no listing in flight".into()));
            };
            let (id, result) =
                joined.map_err(|e| StoreError::Other(format!("listing task: {e}")))?;
            let listed = result?;
            let at = self
                .segments
                .iter()
                .position(|s| matches!(s, Segment::Listing(i) if *i == id))
                .ok_or_else(|| StoreError::Other("a listing finished twice".into()))?;
            self.segments[at] = Segment::Listed(listed.keys);
            for (n, range) in listed.rest.into_iter().enumerate() {
                self.segments.insert(at + 1 + n, Segment::Pending(range));
            }
        }
    }

    fn name(&self) -> &'static str {
        "listing"
    }

    fn requests(&self) -> Option<u64> {
        Some(self.requests)
    }
}
