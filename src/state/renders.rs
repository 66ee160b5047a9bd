//! This replica's renders (issue 37): at most `limit` at once (a request past it answers 503
//! with `Retry-After` rather than queueing CPU work behind the others), and one render per
//! rendition key at a time (a second request for it waits for the first, then finds it in the
//! store), and at most a budget of memory between them (each render's peak estimated before it
//! decodes: `render::budget`). Per replica by design: replicas that render the same rendition
//! at once each write the same bytes, and the conditional PUT keeps the first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A rendition this replica saw in `cache/` (by a HEAD, or by writing it): its size and
/// dimensions, and when it was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    pub size: i64,
    pub width: u32,
    pub height: u32,
}

/// How long a seen rendition is answered without asking the store again. A rendition leaves
/// `cache/` only with its file (whose state the route reads from the database on every
/// request), by reconcile's removal of a gone file's renditions, or by the lifecycle rule after
/// 30 days: within this window of the last look, a URL may point at a rendition the rule has
/// just expired (the client's GET answers 404 and the next request after the window renders it
/// again).
pub const KNOWN_FOR: std::time::Duration = std::time::Duration::from_secs(300);

/// Renditions remembered at most; past it the oldest half is forgotten.
const KNOWN_MAX: usize = 50_000;

pub struct RenderGate {
    known: Mutex<HashMap<String, (Known, std::time::Instant)>>,
    slots: Arc<Semaphore>,
    limit: usize,
    /// The memory renders may hold at once, one permit per KiB.
    memory: Arc<Semaphore>,
    memory_kib: u32,
    keys: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
}

/// Memory a render holds, reserved from the replica's budget until dropped (with the render's
/// thread's work, like its slot).
pub type MemoryHeld = OwnedSemaphorePermit;

impl RenderGate {
    /// `limit` renders at once, holding at most `memory_bytes` between them.
    pub fn new(limit: usize, memory_bytes: u64) -> Self {
        let limit = limit.max(1);
        let memory_kib = u32::try_from(memory_bytes / 1024)
            .unwrap_or(u32::MAX)
            .clamp(1, Semaphore::MAX_PERMITS as u32);
        Self {
            known: Mutex::new(HashMap::new()),
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            memory: Arc::new(Semaphore::new(memory_kib as usize)),
            memory_kib,
            keys: Mutex::new(HashMap::new()),
        }
    }

    /// The rendition at `key`, when this replica saw it in the store within [`KNOWN_FOR`].
    pub fn known(&self, key: &str) -> Option<Known> {
        let known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        known
            .get(key)
            .filter(|(_, at)| at.elapsed() < KNOWN_FOR)
            .map(|(k, _)| *k)
    }

    /// Remembers that the rendition at `key` is in the store now.
    pub fn remember(&self, key: &str, rendition: Known) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() >= KNOWN_MAX {
            known.retain(|_, (_, at)| at.elapsed() < KNOWN_FOR);
            if known.len() >= KNOWN_MAX {
                let mut ages: Vec<std::time::Instant> = known.values().map(|(_, at)| *at).collect();
                ages.sort_unstable();
                let cut = ages[ages.len() / 2];
                known.retain(|_, (_, at)| *at > cut);
            }
        }
        known.insert(key.to_owned(), (rendition, std::time::Instant::now()));
    }

    /// The memory renders may hold at once, in bytes.
    pub fn memory_budget(&self) -> u64 {
        u64::from(self.memory_kib) * 1024
    }

    /// The memory renders hold now, in bytes.
    pub fn memory_held(&self) -> u64 {
        (u64::from(self.memory_kib) - self.memory.available_permits() as u64) * 1024
    }

    /// `bytes` (rounded up to whole KiB) of the budget, or `None` when they do not fit beside
    /// what running renders hold (or ever: more than the whole budget).
    pub fn try_memory(&self, bytes: u64) -> Option<MemoryHeld> {
        let kib = u32::try_from(bytes.div_ceil(1024)).ok()?.max(1);
        if kib > self.memory_kib {
            return None;
        }
        self.memory.clone().try_acquire_many_owned(kib).ok()
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
        let gate = RenderGate::new(2, 1 << 20);
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

    #[test]
    fn a_seen_rendition_is_remembered_and_the_memory_stays_bounded() {
        let gate = RenderGate::new(1, 1 << 20);
        let k = Known {
            size: 10,
            width: 2,
            height: 3,
        };
        assert_eq!(gate.known("cache/a/thumb-1.jpg"), None);
        gate.remember("cache/a/thumb-1.jpg", k);
        gate.remember("cache/b/thumb-1.jpg", k);
        assert_eq!(gate.known("cache/a/thumb-1.jpg"), Some(k));
        assert_eq!(gate.known("cache/b/thumb-1.jpg"), Some(k));
        for i in 0..KNOWN_MAX + 10 {
            gate.remember(&format!("cache/{i}/x"), k);
        }
        let n = gate.known.lock().expect("known").len();
        assert!(n <= KNOWN_MAX, "{n}");
        assert_eq!(
            gate.known(&format!("cache/{}/x", KNOWN_MAX + 9)),
            Some(k),
            "the newest stays"
        );
    }

    #[test]
    fn memory_is_held_until_given_back_and_never_past_the_budget() {
        let gate = RenderGate::new(4, 10 * 1024 * 1024);
        assert_eq!(gate.memory_budget(), 10 * 1024 * 1024);
        let a = gate.try_memory(6 * 1024 * 1024).expect("fits");
        assert_eq!(gate.memory_held(), 6 * 1024 * 1024);
        assert!(
            gate.try_memory(5 * 1024 * 1024).is_none(),
            "not beside the first"
        );
        let b = gate.try_memory(4 * 1024 * 1024).expect("the rest");
        assert!(gate.try_memory(1).is_none(), "all of it held");
        drop((a, b));
        assert_eq!(gate.memory_held(), 0);
        assert!(
            gate.try_memory(11 * 1024 * 1024).is_none(),
            "never more than the budget"
        );
        assert!(gate.try_memory(u64::MAX).is_none());
        assert!(
            gate.try_memory(10 * 1024 * 1024).is_some(),
            "the whole budget, alone"
        );
    }
}
