//! The keys a legacy import walks, in key order, from reconcile's readers: a listing of each
//! listing prefix in turn (`ListingSource`), or an S3 Inventory (`InventorySource`) narrowed to
//! those prefixes. Both start after a resumed run's checkpoint. Every key read must come
//! strictly after the one before it, in byte order (reconcile's check): a checkpoint means
//! "every key before it was judged" only then, so a key out of order (or twice) ends the run
//! before it is judged.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::domain::reconcile::{check_order, BucketKey, JoinError};
use crate::services::bucket_source::{BucketSource, ListingSource};
use crate::storage::{ObjectStore, StoreError};

pub struct Keys {
    store: Arc<dyn ObjectStore>,
    /// Prefixes still to list (listing mode), in key order.
    pending: VecDeque<String>,
    prefixes: Vec<String>,
    current: Option<Box<dyn BucketSource>>,
    after: Option<String>,
    buffered: VecDeque<BucketKey>,
    /// Inventory keys outside every listing prefix, since the last [`Keys::take_outside`].
    outside: u64,
    /// The last key read, to check the order of the next.
    last: Option<String>,
}

/// The start of the message of a run refused for keys out of order.
pub const OUT_OF_ORDER: &str = "keys out of byte order";

/// The keys under `prefixes` (sorted, none inside another), after `after`.
pub fn keys_in_order(
    store: Arc<dyn ObjectStore>,
    prefixes: &[String],
    inventory: Option<Box<dyn BucketSource>>,
    after: Option<String>,
) -> Keys {
    let inventory_mode = inventory.is_some();
    Keys {
        store,
        pending: if inventory_mode {
            VecDeque::new()
        } else {
            prefixes.iter().cloned().collect()
        },
        prefixes: prefixes.to_vec(),
        current: inventory,
        after,
        buffered: VecDeque::new(),
        outside: 0,
        last: None,
    }
}

impl Keys {
    /// How many inventory keys were outside every listing prefix since the last call.
    pub fn take_outside(&mut self) -> u64 {
        std::mem::take(&mut self.outside)
    }

    /// Up to `n` keys, in key order; empty at the end.
    pub async fn next_batch(&mut self, n: usize) -> Result<Vec<BucketKey>, StoreError> {
        while self.buffered.len() < n {
            if !self.fill().await? {
                break;
            }
        }
        let take = n.min(self.buffered.len());
        Ok(self.buffered.drain(..take).collect())
    }

    /// Reads one more page; `false` at the end of every source.
    async fn fill(&mut self) -> Result<bool, StoreError> {
        loop {
            if self.current.is_none() {
                let Some(prefix) = self.pending.pop_front() else {
                    return Ok(false);
                };
                // A checkpoint past this prefix's keys makes its listing empty.
                let start = self
                    .after
                    .clone()
                    .filter(|a| a.as_bytes() > prefix.as_bytes());
                self.current = Some(Box::new(ListingSource::under(
                    self.store.clone(),
                    prefix,
                    start,
                )));
            }
            let Some(source) = self.current.as_mut() else {
                return Ok(false);
            };
            match source.next_page().await? {
                Some(page) => {
                    let name = source.name();
                    for k in page {
                        // Before anything skips it: a key out of order behind the checkpoint
                        // would otherwise be skipped as judged.
                        if let Err(JoinError::OutOfOrder { previous, next, .. }) =
                            check_order("bucket", &mut self.last, &k.key)
                        {
                            return Err(StoreError::Other(format!(
                                "{OUT_OF_ORDER}: the {name} lists {next:?} after {previous:?} \
                                 (each key must come strictly after the one before it, and only \
                                 once); refusing to import"
                            )));
                        }
                        // An inventory cannot start mid-way: skip what the stopped run judged.
                        if self
                            .after
                            .as_deref()
                            .is_some_and(|a| k.key.as_bytes() <= a.as_bytes())
                        {
                            continue;
                        }
                        if !self.prefixes.iter().any(|p| k.key.starts_with(p.as_str())) {
                            self.outside += 1;
                            continue;
                        }
                        self.buffered.push_back(k);
                    }
                    return Ok(true);
                }
                None => self.current = None,
            }
        }
    }
}
