//! Delivery workers: on every replica, one loop per enabled endpoint claims that endpoint's due
//! deliveries from the catalog (leases on the database's clock; `FOR UPDATE SKIP LOCKED` on
//! PostgreSQL, so the replicas share the work without a coordinator), sends them concurrently,
//! and records each outcome only while its lease still holds. A slow or failing receiver slows
//! only its own endpoint's loop; commits never wait for delivery (the event is already in the
//! outbox).
//!
//! At least once: a receiver may see an event again (an answer lost, a lease that ran out
//! while the request was in flight, a crash before the outcome was written). The event id
//! (`webhook-id`) stays the same, so receivers deduplicate on it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::catalog::{Catalog, CatalogError, ClaimedDelivery, EndpointSpec, FailedAttempt};
use crate::config::EventSettings;
use crate::domain::events::subscription_text;
use crate::domain::webhooks::{self, Backoff};
use crate::metrics::{Metrics, OutboxGauges};
use crate::storage::sqs::SqsSender;

use super::sequencer::Sequenced;

/// How often the endpoint list is read again (endpoints added or disabled elsewhere) and the
/// outbox gauges refreshed.
const REFRESH_EVERY: Duration = Duration::from_secs(5);
/// An idle endpoint loop looks for due deliveries at least this often (retries come due, other
/// replicas sequence events) even when this replica's sequencer says nothing.
const IDLE_POLL: Duration = Duration::from_secs(1);
/// The longest `last_error` kept.
const MAX_ERROR_CHARS: usize = 500;

/// What the workers need from the settings.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    pub concurrency: usize,
    pub timeout: Duration,
    pub backoff: Backoff,
    /// The SQS client, when queue endpoints are configured.
    pub sqs: Option<Arc<SqsSender>>,
    /// The process's outgoing HTTP client (`crate::outbound`); each webhook call is held to
    /// `timeout` on its own.
    pub http: reqwest::Client,
}

impl DeliveryConfig {
    pub fn from_settings(
        events: &EventSettings,
        sqs: Option<Arc<SqsSender>>,
        http: reqwest::Client,
    ) -> Self {
        Self {
            concurrency: events.webhook_concurrency,
            timeout: Duration::from_secs(events.webhook_timeout_secs),
            backoff: events.backoff(),
            sqs,
            http,
        }
    }

    /// A claim's lease: twice the request timeout and a second, so a worker that is only slow
    /// still holds its deliveries when it records their outcomes (the requests end by the
    /// timeout); one that died frees them that long after it claimed them.
    fn lease_secs(&self) -> i64 {
        i64::try_from(self.timeout.as_secs().saturating_mul(2).saturating_add(1))
            .unwrap_or(i64::MAX / 2)
    }
}

/// The settings' endpoints as the catalog stores them.
pub fn settings_endpoints(events: &EventSettings) -> Vec<EndpointSpec> {
    events
        .webhooks
        .iter()
        .map(|w| EndpointSpec {
            id: w.id.clone(),
            kind: "webhook".into(),
            url: w.url.clone(),
            secret: Some(w.secret.expose().to_owned()),
            event_types: subscription_text(&w.types),
        })
        .chain(events.queues.iter().map(|q| EndpointSpec {
            id: q.id.clone(),
            kind: "sqs".into(),
            url: q.queue_url.clone(),
            secret: None,
            event_types: subscription_text(&q.types),
        }))
        .collect()
}

/// Writes the settings' endpoints into the catalog and disables the settings' endpoints no
/// longer listed (their deliveries stay, undelivered, until the endpoint comes back).
pub async fn sync_endpoints(
    catalog: &Arc<dyn Catalog>,
    events: &EventSettings,
) -> Result<(), CatalogError> {
    let specs = settings_endpoints(events);
    catalog
        .sync_settings_endpoints(&specs, crate::domain::records::now())
        .await?;
    if !specs.is_empty() {
        tracing::info!(
            endpoints = %specs.iter().map(|s| s.id.as_str()).collect::<Vec<_>>().join(","),
            "event endpoints of the settings"
        );
    }
    Ok(())
}

/// How one endpoint kind sends.
enum Sender {
    Webhook {
        url: String,
        key: Vec<u8>,
    },
    /// One message per event; on a FIFO queue grouped by the event's subject (each file's
    /// events in order) and deduplicated by its id.
    Sqs {
        queue_url: String,
        sqs: Arc<SqsSender>,
    },
}

impl Sender {
    /// `None` (with a warning) for a kind this build does not send, or a stored secret that
    /// does not parse: its deliveries wait.
    fn for_endpoint(spec: &EndpointSpec, sqs: Option<&Arc<SqsSender>>) -> Option<Self> {
        match spec.kind.as_str() {
            "sqs" => match sqs {
                Some(sqs) => Some(Sender::Sqs {
                    queue_url: spec.url.clone(),
                    sqs: sqs.clone(),
                }),
                None => {
                    tracing::error!(endpoint = %spec.id, "no SQS client on this replica (no queue in its settings); this queue's deliveries wait for a replica that has one");
                    None
                }
            },
            "webhook" => {
                let key = spec
                    .secret
                    .as_deref()
                    .ok_or_else(|| "no secret".to_owned())
                    .and_then(webhooks::secret_key);
                match key {
                    Ok(key) => Some(Sender::Webhook {
                        url: spec.url.clone(),
                        key,
                    }),
                    Err(e) => {
                        tracing::error!(endpoint = %spec.id, error = %e, "webhook endpoint not usable; its deliveries wait");
                        None
                    }
                }
            }
            other => {
                tracing::warn!(endpoint = %spec.id, kind = other, "no sender for this endpoint kind on this replica; its deliveries wait");
                None
            }
        }
    }

    /// One attempt: `Ok(status)` for a 2xx answer, `Err((status, error))` otherwise.
    async fn send(
        &self,
        http: &reqwest::Client,
        timeout: Duration,
        d: &ClaimedDelivery,
    ) -> Result<i32, (Option<i32>, String)> {
        match self {
            Sender::Webhook { url, key } => {
                let timestamp = chrono::Utc::now().timestamp();
                let signature =
                    webhooks::signature(key, &d.event_id, timestamp, d.payload.as_bytes());
                let resp = http
                    .post(url)
                    .timeout(timeout)
                    .header("content-type", "application/json")
                    .header("webhook-id", &d.event_id)
                    .header("webhook-timestamp", timestamp.to_string())
                    .header("webhook-signature", signature)
                    .body(d.payload.clone())
                    .send()
                    .await
                    .map_err(|e| (None, describe(e)))?;
                let status = resp.status();
                let code = i32::from(status.as_u16());
                if status.is_success() {
                    Ok(code)
                } else {
                    Err((Some(code), format!("answered {status}")))
                }
            }
            Sender::Sqs { queue_url, sqs } => {
                // Every failure is retried with backoff until the retry window closes, the
                // permanent ones too (a queue created or a permission granted late still gets
                // the events); SQS's code is kept in `last_error`.
                sqs.send(queue_url, &d.payload, &d.event_id, &d.subject)
                    .await
                    .map(|()| 200)
                    .map_err(|e| {
                        let mut s = e.to_string();
                        s.truncate(MAX_ERROR_CHARS);
                        (e.status.map(i32::from), s)
                    })
            }
        }
    }
}

/// A request error without the URL's query (it may carry a token of the receiver's).
fn describe(e: reqwest::Error) -> String {
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    let mut s = format!("{what}: {}", e.without_url());
    s.truncate(MAX_ERROR_CHARS);
    s
}

/// A uniform draw in `[0, 1)` for the backoff's jitter.
fn draw() -> f64 {
    // The low 64 bits of a v4 UUID are random but for the variant's two bits.
    let bits = u64::try_from(uuid::Uuid::new_v4().as_u128() & u128::from(u64::MAX)).unwrap_or(0);
    webhooks::unit_draw(bits.rotate_left(11))
}

/// One endpoint's loop: claim, send, record, until aborted.
async fn endpoint_loop(
    catalog: Arc<dyn Catalog>,
    spec: EndpointSpec,
    config: DeliveryConfig,
    http: reqwest::Client,
    sequenced: Arc<Sequenced>,
    metrics: Arc<Metrics>,
) {
    let Some(sender) = Sender::for_endpoint(&spec, config.sqs.as_ref()) else {
        // Parked rather than ended, so the supervisor does not start (and log) it again every
        // few seconds; a changed endpoint replaces it.
        std::future::pending::<()>().await;
        return;
    };
    let limit = i64::try_from(config.concurrency.max(1)).unwrap_or(1);
    let mut failing = false;
    loop {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let claimed = match catalog
            .claim_deliveries(&spec.id, &token, config.lease_secs(), limit)
            .await
        {
            Ok(c) => {
                if failing {
                    tracing::info!(endpoint = %spec.id, "claiming deliveries works again");
                }
                failing = false;
                c
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(endpoint = %spec.id, error = %e, "could not claim deliveries; retrying");
                }
                failing = true;
                tokio::time::sleep(IDLE_POLL).await;
                continue;
            }
        };
        if claimed.is_empty() {
            sequenced.wait(IDLE_POLL).await;
            continue;
        }
        let sends = claimed.iter().map(|d| {
            let (sender, http, catalog, metrics, token) = (&sender, &http, &catalog, &metrics, &token);
            let (backoff, timeout) = (config.backoff, config.timeout);
            async move {
                let started = Instant::now();
                let outcome = sender.send(http, timeout, d).await;
                let elapsed = started.elapsed();
                let recorded = match outcome {
                    Ok(status) => catalog
                        .mark_delivered(&d.endpoint_id, d.position, token, status)
                        .await
                        .map(|held| if held { "delivered" } else { "lease_lost" }),
                    Err((status, error)) => {
                        let attempts = u32::try_from(d.attempts).unwrap_or(0).saturating_add(1);
                        let wait = backoff.delay(attempts, draw());
                        let failed = FailedAttempt {
                            status,
                            error: &error,
                            retry_in_ms: i64::try_from(wait.as_millis()).unwrap_or(i64::MAX / 2),
                        };
                        tracing::debug!(endpoint = %d.endpoint_id, event = %d.event_id, attempts, error = %error, "delivery attempt failed");
                        catalog
                            .mark_attempt_failed(&d.endpoint_id, d.position, token, &failed)
                            .await
                            .map(|r| match r {
                                None => "lease_lost",
                                Some(true) => "failed",
                                Some(false) => "retry",
                            })
                    }
                };
                match recorded {
                    Ok(result) => {
                        if result == "failed" {
                            tracing::warn!(endpoint = %d.endpoint_id, event = %d.event_id, "delivery failed for good: its retry window passed (kept; `upcommit events retry` sends it again)");
                        }
                        metrics.delivery(&d.endpoint_id, result, elapsed);
                    }
                    // The lease runs out and another attempt follows: at least once.
                    Err(e) => tracing::warn!(endpoint = %d.endpoint_id, event = %d.event_id, error = %e, "could not record a delivery's outcome; it will be sent again"),
                }
            }
        });
        futures_util::future::join_all(sends).await;
    }
}

/// Starts the workers and returns the supervisor's handle: it (re)reads the enabled endpoints
/// every few seconds, runs one loop per endpoint, and refreshes the outbox gauges. With a
/// concurrency of 0 this replica sends nothing (the gauges are still read).
pub fn spawn(
    catalog: Arc<dyn Catalog>,
    config: DeliveryConfig,
    sequenced: Arc<Sequenced>,
    metrics: Arc<Metrics>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let http = config.http.clone();
        let mut loops: HashMap<String, (EndpointSpec, JoinHandle<()>)> = HashMap::new();
        let mut ticks = tokio::time::interval(REFRESH_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut guard = AbortOnDrop(Vec::new());
        loop {
            ticks.tick().await;
            let read = async {
                refresh_gauges(&catalog, &metrics).await;
                if config.concurrency == 0 {
                    return None;
                }
                match catalog.enabled_endpoints().await {
                    Ok(e) => Some(e),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not read the event endpoints; retrying");
                        None
                    }
                }
            };
            let Some(Some(endpoints)) =
                crate::state::supervise::catching("event_delivery", Some(&metrics), read).await
            else {
                continue;
            };
            loops.retain(|id, (spec, task)| {
                let keep = endpoints.iter().any(|e| e == spec) && !task.is_finished();
                if !keep {
                    tracing::debug!(endpoint = %id, "endpoint loop stopped");
                    task.abort();
                }
                keep
            });
            for spec in endpoints {
                if loops.contains_key(&spec.id) {
                    continue;
                }
                // A loop that panicked has finished: the next refresh starts it again.
                let work = endpoint_loop(
                    catalog.clone(),
                    spec.clone(),
                    config.clone(),
                    http.clone(),
                    sequenced.clone(),
                    metrics.clone(),
                );
                let counted = metrics.clone();
                let task = tokio::spawn(async move {
                    crate::state::supervise::catching("event_delivery", Some(&counted), work).await;
                });
                loops.insert(spec.id.clone(), (spec, task));
            }
            guard.0 = loops.values().map(|(_, t)| t.abort_handle()).collect();
        }
    })
}

/// Aborts the endpoint loops when the supervisor is aborted (the server stops).
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

async fn refresh_gauges(catalog: &Arc<dyn Catalog>, metrics: &Metrics) {
    match catalog.delivery_gauges().await {
        Ok(g) => {
            let age = g.oldest_undelivered.map_or(0.0, |at| {
                (crate::domain::records::now() - at)
                    .to_std()
                    .map_or(0.0, |d| d.as_secs_f64())
            });
            metrics.set_outbox(OutboxGauges {
                unsequenced: g.unsequenced,
                pending: g.pending,
                failed: g.failed,
                disabled: g.disabled,
                discarded: g.discarded,
                oldest_undelivered_age_secs: age,
            });
        }
        Err(e) => tracing::debug!(error = %e, "could not read the outbox gauges"),
    }
}
