//! This replica's renders (issue 37): at most `limit` at once (a request past it answers 503
//! with `Retry-After` rather than queueing CPU work behind the others), and one render per
//! rendition key at a time (a second request for it waits for the first, then finds it in the
//! store). Per replica by design: replicas that render the same rendition at once each write
//! the same bytes, and the conditional PUT keeps the first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub struct RenderGate {
    slots: Arc<Semaphore>,
    limit: usize,
    keys: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

impl RenderGate {
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// Renders at once at most.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Renders running now.
    pub fn in_flight(&self) -> usize {
        self.limit - self.slots.available_permits()
    }

    /// A render slot, or `None` when every one is taken. The permit goes with the render's
    /// thread and is given back when the work ends (not when a caller stops waiting).
    pub fn try_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.slots.clone().try_acquire_owned().ok()
    }

    /// The lock every render of `key` on this replica takes.
    pub fn key_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut keys = self.keys.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(lock) = keys.get(key).and_then(Weak::upgrade) {
            return lock;
        }
        // Forget the keys nobody holds any more before adding one.
        keys.retain(|_, w| w.strong_count() > 0);
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        keys.insert(key.to_owned(), Arc::downgrade(&lock));
        lock
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_run_out_and_come_back_and_keys_share_one_lock_while_held() {
        let gate = RenderGate::new(2);
        let a = gate.try_slot().expect("one");
        let _b = gate.try_slot().expect("two");
        assert!(gate.try_slot().is_none(), "a third waits for none");
        assert_eq!(gate.in_flight(), 2);
        drop(a);
        assert!(gate.try_slot().is_some());
        let l1 = gate.key_lock("cache/x/thumb");
        let l2 = gate.key_lock("cache/x/thumb");
        assert!(Arc::ptr_eq(&l1, &l2));
        drop((l1, l2));
        let l3 = gate.key_lock("cache/y/thumb");
        assert_eq!(
            gate.keys.lock().expect("keys").len(),
            1,
            "unheld keys are forgotten"
        );
        drop(l3);
    }
}
