//! Readiness from a recent result: `/readyz` needs no token, so a flood of probes must not become
//! a flood of database queries and S3 calls. The database ping and the bucket's HeadBucket run at
//! most once per [`TTL`]; concurrent probes share one refresh (one in flight at a time, the others
//! answered from the previous result), and a failure is cached like a success, so a cached
//! failure still answers 503.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::catalog::Catalog;
use crate::storage::ObjectStore;

/// How old a readiness result may be when it is served.
pub const TTL: Duration = Duration::from_secs(1);

/// One check of the database and the bucket: `Err` holds the reason (logged, never served).
#[derive(Debug, Clone)]
pub struct Probe {
    pub at: Instant,
    pub database: Result<(), String>,
    pub bucket: Result<(), String>,
}

impl Probe {
    async fn run(catalog: &dyn Catalog, store: &dyn ObjectStore) -> Self {
        let (db, bucket) = tokio::join!(catalog.ping(), store.check_bucket());
        let probe = Probe {
            at: Instant::now(),
            database: db.map_err(|e| e.to_string()),
            bucket: bucket.map_err(|e| e.to_string()),
        };
        // Logged once per refresh, not once per probe.
        if let Err(e) = &probe.database {
            tracing::warn!(check = "database", error.detail = %e, "readiness check failed");
        }
        if let Err(e) = &probe.bucket {
            tracing::warn!(check = "bucket", error.detail = %e, "readiness check failed");
        }
        probe
    }
}

/// The latest probe, shared by every `/readyz` of this server.
#[derive(Debug)]
pub struct Readiness {
    ttl: Duration,
    latest: RwLock<Option<Arc<Probe>>>,
    /// Held by the one refresh in flight.
    refreshing: tokio::sync::Mutex<()>,
}

impl Default for Readiness {
    fn default() -> Self {
        Self::new(TTL)
    }
}

impl Readiness {
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            latest: RwLock::new(None),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    fn latest(&self) -> Option<Arc<Probe>> {
        match self.latest.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn fresh(&self) -> Option<Arc<Probe>> {
        self.latest().filter(|p| p.at.elapsed() < self.ttl)
    }

    fn keep(&self, probe: Arc<Probe>) {
        match self.latest.write() {
            Ok(mut guard) => *guard = Some(probe),
            Err(poisoned) => *poisoned.into_inner() = Some(probe),
        }
    }

    /// A result at most `ttl` old — or, while another probe refreshes it, the previous one.
    pub async fn current(&self, catalog: &dyn Catalog, store: &dyn ObjectStore) -> Arc<Probe> {
        loop {
            if let Some(p) = self.fresh() {
                return p;
            }
            match self.refreshing.try_lock() {
                Ok(_refresh) => {
                    // Another probe may have refreshed between our read and the lock.
                    if let Some(p) = self.fresh() {
                        return p;
                    }
                    let probe = Arc::new(Probe::run(catalog, store).await);
                    self.keep(probe.clone());
                    return probe;
                }
                Err(_) => {
                    if let Some(p) = self.latest() {
                        return p;
                    }
                    // The first probe of this server: wait for the refresh in flight, then read
                    // what it kept (or, had it been cancelled, refresh ourselves).
                    drop(self.refreshing.lock().await);
                }
            }
        }
    }
}
