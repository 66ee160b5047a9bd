//! The events catalog's contract: the transactional outbox (sequencing, the feed) and event
//! delivery (endpoints, the workers' claims and outcomes). Its SQL, shared by both backends, is
//! in `event_queries` and `delivery_queries`.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::CatalogError;

/// The transactional outbox: events are written by the transactions that make their changes
/// (inside the other traits' methods); this is the rest — alarms that are no catalog change,
/// the sequencer, and the feed.
#[async_trait]
pub trait EventOutbox: Send + Sync + 'static {
    /// Records an event that goes with no catalog change (an operator alarm), on its own;
    /// idempotent by event id (an alarm whose id derives from its cause is recorded once).
    async fn record_event(
        &self,
        event: &crate::domain::events::NewEvent,
    ) -> Result<(), CatalogError>;
    /// Gives up to `limit` committed, unpositioned events their feed positions, in the order
    /// they were written, and creates their deliveries to every enabled endpoint subscribed to
    /// their type (due at once and retried until `retry_window_secs` from then, both on the
    /// database's clock, which the claims compare with), in one transaction. One replica at a
    /// time sequences; the others answer `Ok(0)` at once. Returns how many it positioned.
    async fn sequence_events(
        &self,
        limit: i64,
        retry_window_secs: i64,
    ) -> Result<u64, CatalogError>;
    /// Up to `limit` positioned events after position `after`, in feed order.
    async fn events_after(
        &self,
        after: i64,
        limit: i64,
    ) -> Result<Vec<crate::domain::events::StoredEvent>, CatalogError>;
    /// Events written but not positioned yet (the outbox's depth before fan-out).
    async fn unsequenced_events(&self) -> Result<i64, CatalogError>;
}

/// One event endpoint as stored: a webhook (`kind` = `webhook`, `secret` = `whsec_…`) or a
/// queue (`kind` = `sqs`, `url` = the queue URL). `event_types`: `*` or `,a,b,`
/// ([`crate::domain::events::subscription_text`]).
#[derive(Clone, PartialEq, Eq)]
pub struct EndpointSpec {
    pub id: String,
    pub kind: String,
    pub url: String,
    pub secret: Option<String>,
    pub event_types: String,
}

/// Never prints the secret.
impl std::fmt::Debug for EndpointSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointSpec")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("url", &self.url)
            .field("secret", &self.secret.as_ref().map(|_| "[redacted]"))
            .field("event_types", &self.event_types)
            .finish()
    }
}

/// A delivery a worker claimed: what one attempt sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedDelivery {
    pub endpoint_id: String,
    pub position: i64,
    /// The `webhook-id`: the receivers' deduplication key.
    pub event_id: String,
    pub subject: String,
    pub event_type: String,
    /// Attempts made before this one.
    pub attempts: i32,
    /// The body sent, byte for byte as stored.
    pub payload: String,
}

/// How an attempt failed.
#[derive(Debug, Clone)]
pub struct FailedAttempt<'a> {
    /// The receiver's status, when it answered.
    pub status: Option<i32>,
    pub error: &'a str,
    /// The next attempt is due this many milliseconds from the database's now.
    pub retry_in_ms: i64,
}

/// The outbox's depth for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeliveryGauges {
    /// Deliveries to enabled endpoints not delivered yet, still retried.
    pub pending: i64,
    /// Deliveries past their retry window (kept until retried).
    pub failed: i64,
    /// Deliveries to disabled endpoints not delivered (kept for the retention, then
    /// discarded by the prune).
    pub disabled: i64,
    /// Deliveries the prune discarded undelivered, all endpoints, ever.
    pub discarded: i64,
    /// Events written but not positioned yet.
    pub unsequenced: i64,
    /// When the oldest of those events (unsequenced, or with a pending or failed delivery)
    /// happened.
    pub oldest_undelivered: Option<DateTime<Utc>>,
}

/// One endpoint and its deliveries by state, for `upcommit events list`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EndpointCounts {
    pub id: String,
    pub kind: String,
    pub url: String,
    pub source: String,
    /// `*` or `,a,b,`.
    pub event_types: String,
    pub enabled: bool,
    pub pending: i64,
    pub failed: i64,
    pub delivered: i64,
    /// When the oldest delivery still pending or failed was created (the outbox's age for
    /// this endpoint); `None` when nothing is owed.
    pub oldest_undelivered_at: Option<DateTime<Utc>>,
}

/// Event delivery: endpoints, and the workers' claims and outcomes. Every lease and due time
/// is judged on the database's clock, the one every replica shares.
#[async_trait]
pub trait EventDeliveryCatalog: Send + Sync + 'static {
    /// Writes the settings' endpoints (`source = 'settings'`, enabled) and disables every other
    /// endpoint of the settings, in one transaction. An id an admin-API endpoint holds is
    /// refused.
    async fn sync_settings_endpoints(
        &self,
        endpoints: &[EndpointSpec],
        now: DateTime<Utc>,
    ) -> Result<(), CatalogError>;
    async fn enabled_endpoints(&self) -> Result<Vec<EndpointSpec>, CatalogError>;
    /// Leases up to `limit` due deliveries of `endpoint` to `token` for `lease_secs`, in
    /// position order: pending, due, not leased (or the lease ran out), and no earlier
    /// delivery of the same subject to the endpoint undelivered (pending or failed).
    async fn claim_deliveries(
        &self,
        endpoint: &str,
        token: &str,
        lease_secs: i64,
        limit: i64,
    ) -> Result<Vec<ClaimedDelivery>, CatalogError>;
    /// `pending → delivered` while `token` holds the lease. `Ok(false)`: it does not any more
    /// (another worker took the delivery over); nothing changed.
    async fn mark_delivered(
        &self,
        endpoint: &str,
        position: i64,
        token: &str,
        status: i32,
    ) -> Result<bool, CatalogError>;
    /// Counts a failed attempt while `token` holds the lease: due again after the backoff, or
    /// `failed` once the retry window has passed. `Ok(None)`: the lease was lost, nothing
    /// changed; `Ok(Some(true))`: the delivery is now failed.
    async fn mark_attempt_failed(
        &self,
        endpoint: &str,
        position: i64,
        token: &str,
        outcome: &FailedAttempt<'_>,
    ) -> Result<Option<bool>, CatalogError>;
    /// `failed → pending` for every failed delivery of `endpoint`, due now, retried for
    /// another `retry_window_secs`; how many. `None` (nothing changed) when the endpoint does
    /// not exist or is disabled, judged in the same transaction as the write, which a disable
    /// waits for.
    async fn retry_failed_deliveries(
        &self,
        endpoint: &str,
        retry_window_secs: i64,
    ) -> Result<Option<u64>, CatalogError>;
    async fn delivery_gauges(&self) -> Result<DeliveryGauges, CatalogError>;
    /// Every endpoint (enabled or not) with its deliveries counted by state, in id order.
    async fn endpoint_counts(&self) -> Result<Vec<EndpointCounts>, CatalogError>;
    /// Sends `endpoint` again every event after feed position `after` it subscribes to: a
    /// delivery is created where none exists, and an existing one (delivered or failed) is
    /// pending again, due now, retried for `retry_window_secs`. With `dry_run`, only counts.
    /// Returns how many events that is; `None` (nothing changed) when the endpoint does not
    /// exist or is disabled, as for `retry_failed_deliveries`.
    async fn replay_deliveries(
        &self,
        endpoint: &str,
        after: i64,
        retry_window_secs: i64,
        dry_run: bool,
    ) -> Result<Option<u64>, CatalogError>;
    /// Inserts an endpoint of the admin API (`source = 'api'`, enabled). `Ok(false)`: an
    /// endpoint (of either source, enabled or not) already has this id; nothing changed.
    async fn create_api_endpoint(
        &self,
        endpoint: &EndpointSpec,
        now: DateTime<Utc>,
    ) -> Result<bool, CatalogError>;
    /// Disables an endpoint of the admin API (idempotent; its deliveries are kept). Returns the
    /// endpoint's source, `None` when no endpoint has this id; a `settings` one is left as is.
    async fn disable_api_endpoint(
        &self,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<String>, CatalogError>;
}
