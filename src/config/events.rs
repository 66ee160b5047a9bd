//! Events: the webhook and SQS queue endpoints they are delivered to, and how hard delivery
//! is pushed (retry window, timeout, concurrency, backoff).

use super::file::{FileQueue, FileSettings, FileWebhook};
use super::source::{ConfigError, SecretString, Source};

/// Event delivery: where events go and how hard they are pushed.
#[derive(Debug, Clone)]
pub struct EventSettings {
    /// Webhook endpoints (TOML `[[events.webhooks]]`: `id`, `url`, `secret`, `types`; or one
    /// from the environment, `UPCOMMIT_WEBHOOK_URL` with `UPCOMMIT_WEBHOOK_SECRET`,
    /// `UPCOMMIT_WEBHOOK_TYPES` and `UPCOMMIT_WEBHOOK_ID`, which replaces the file's list).
    /// Written into the catalog at start; endpoints of the settings no longer listed are
    /// disabled.
    pub webhooks: Vec<WebhookSettings>,
    /// SQS queue endpoints (TOML `[[events.queues]]`: `id`, `queue_url`, `types`; or one from
    /// the environment, `UPCOMMIT_EVENT_QUEUE_URL` with `UPCOMMIT_EVENT_QUEUE_TYPES` and
    /// `UPCOMMIT_EVENT_QUEUE_ID`, which replaces the file's list). Sent with the S3 client's
    /// credentials, region and endpoint override.
    pub queues: Vec<QueueSettings>,
    /// How long a delivery is retried before it is marked failed and kept
    /// (`UPCOMMIT_EVENT_RETRY_WINDOW`, a duration, default `24h`, at least `1s`).
    pub retry_window_secs: u64,
    /// One webhook request's timeout (`UPCOMMIT_WEBHOOK_TIMEOUT_SECS`, default 10, 1..=300).
    pub webhook_timeout_secs: u64,
    /// Requests in flight at once per endpoint on this replica, also the deliveries one claim
    /// takes (`UPCOMMIT_WEBHOOK_CONCURRENCY`, default 8, at most 256; 0 = this replica
    /// delivers nothing, the others do).
    pub webhook_concurrency: usize,
    /// The first retry waits up to this many milliseconds, doubled per failed attempt
    /// (`UPCOMMIT_WEBHOOK_RETRY_BASE_MS`, default 5000, at least 1) …
    pub retry_base_ms: u64,
    /// … up to this many seconds (`UPCOMMIT_WEBHOOK_RETRY_CAP_SECS`, default 3600, at least 1).
    pub retry_cap_secs: u64,
}

impl EventSettings {
    pub fn backoff(&self) -> crate::domain::webhooks::Backoff {
        crate::domain::webhooks::Backoff {
            base: std::time::Duration::from_millis(self.retry_base_ms),
            cap: std::time::Duration::from_secs(self.retry_cap_secs)
                .max(std::time::Duration::from_millis(self.retry_base_ms)),
        }
    }
}

/// One webhook endpoint of the settings.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Its name: 1–64 of `a-z`, `0-9`, `-`, `_`; unique.
    pub id: String,
    /// `http://` or `https://`.
    pub url: String,
    /// `whsec_` and the base64 of 24–64 bytes.
    pub secret: SecretString,
    /// The event types it receives (`["*"]`: all).
    pub types: Vec<crate::domain::events::EventType>,
}

/// One SQS queue receiving events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSettings {
    /// Its name, as a webhook's (unique among every endpoint).
    pub id: String,
    /// `https://sqs.<region>.amazonaws.com/<account>/<name>` (a `.fifo` name keeps each file's
    /// order), or a queue under the endpoint override.
    pub queue_url: String,
    pub types: Vec<crate::domain::events::EventType>,
}

impl EventSettings {
    /// The retry window, the webhooks, the queues (whose ids must not be a webhook's), then
    /// the delivery numbers, each refused out of range rather than clamped.
    pub(super) fn load(src: &Source<'_>, f: &mut FileSettings) -> Result<Self, ConfigError> {
        let retry_window_secs = src.duration(
            "UPCOMMIT_EVENT_RETRY_WINDOW",
            f.event_retry_window.take(),
            "24h",
            1,
        )?;
        let (file_webhooks, file_queues) = f
            .events
            .take()
            .map(|e| (e.webhooks, e.queues))
            .unwrap_or_default();
        let webhooks = webhooks(src, file_webhooks)?;
        let events = EventSettings {
            queues: queues(src, file_queues, &webhooks)?,
            webhooks,
            retry_window_secs,
            webhook_timeout_secs: src.number(
                "UPCOMMIT_WEBHOOK_TIMEOUT_SECS",
                f.webhook_timeout_secs,
                10,
                1..=300,
            )?,
            webhook_concurrency: src.number(
                "UPCOMMIT_WEBHOOK_CONCURRENCY",
                f.webhook_concurrency,
                8,
                0..=256,
            )?,
            // A day between attempts at most: the retry window is what bounds a delivery.
            retry_base_ms: src.number(
                "UPCOMMIT_WEBHOOK_RETRY_BASE_MS",
                f.webhook_retry_base_ms,
                5000,
                1..=86_400_000,
            )?,
            retry_cap_secs: src.number(
                "UPCOMMIT_WEBHOOK_RETRY_CAP_SECS",
                f.webhook_retry_cap_secs,
                3600,
                1..=86_400,
            )?,
        };
        Ok(events)
    }
}

/// The queue endpoints: the environment's one (`UPCOMMIT_EVENT_QUEUE_URL` set) or the file's
/// list, each checked: a name not taken by a webhook, a queue URL, known types.
fn queues(
    src: &Source<'_>,
    file: Vec<FileQueue>,
    webhooks: &[WebhookSettings],
) -> Result<Vec<QueueSettings>, ConfigError> {
    let raw: Vec<FileQueue> = match (src.env)("UPCOMMIT_EVENT_QUEUE_URL").filter(|v| !v.is_empty())
    {
        Some(queue_url) => {
            let types = src.list("UPCOMMIT_EVENT_QUEUE_TYPES", None);
            vec![FileQueue {
                id: src.string("UPCOMMIT_EVENT_QUEUE_ID", None, "queue"),
                queue_url,
                types: if types.is_empty() {
                    vec!["*".into()]
                } else {
                    types
                },
            }]
        }
        None => file,
    };
    let mut out: Vec<QueueSettings> = Vec::with_capacity(raw.len());
    for q in raw {
        let name = format!("queue {:?}", q.id);
        crate::domain::webhooks::check_endpoint_id(&q.id)
            .map_err(|e| ConfigError(format!("{name}: {e}")))?;
        if out.iter().any(|o| o.id == q.id) || webhooks.iter().any(|w| w.id == q.id) {
            return Err(ConfigError(format!(
                "{name}: an endpoint id is listed twice"
            )));
        }
        crate::domain::webhooks::check_url(&q.queue_url)
            .ok()
            .and_then(|()| crate::domain::queue::QueueUrl::parse(&q.queue_url).ok())
            .ok_or_else(|| {
                ConfigError(format!(
                    "{name}: queue_url: expected https://sqs.<region>.amazonaws.com/<account>/<name> or a queue under UPCOMMIT_S3_ENDPOINT, got {:?}",
                    q.queue_url
                ))
            })?;
        let types = crate::domain::events::parse_subscription(&q.types)
            .map_err(|e| ConfigError(format!("{name}: types: {e}")))?;
        out.push(QueueSettings {
            id: q.id,
            queue_url: q.queue_url,
            types,
        });
    }
    Ok(out)
}

/// The webhook endpoints: the environment's one (`UPCOMMIT_WEBHOOK_URL` set) or the file's
/// list, each checked: a name, an http(s) URL, a `whsec_` secret of 24–64 bytes, known types.
fn webhooks(src: &Source<'_>, file: Vec<FileWebhook>) -> Result<Vec<WebhookSettings>, ConfigError> {
    let raw: Vec<FileWebhook> = match (src.env)("UPCOMMIT_WEBHOOK_URL").filter(|v| !v.is_empty()) {
        Some(url) => {
            let types = src.list("UPCOMMIT_WEBHOOK_TYPES", None);
            vec![FileWebhook {
                id: src.string("UPCOMMIT_WEBHOOK_ID", None, "default"),
                url,
                secret: src.string("UPCOMMIT_WEBHOOK_SECRET", None, ""),
                types: if types.is_empty() {
                    vec!["*".into()]
                } else {
                    types
                },
            }]
        }
        None => file,
    };
    let mut out: Vec<WebhookSettings> = Vec::with_capacity(raw.len());
    for w in raw {
        let name = format!("webhook {:?}", w.id);
        crate::domain::webhooks::check_endpoint_id(&w.id)
            .map_err(|e| ConfigError(format!("{name}: {e}")))?;
        if out.iter().any(|o| o.id == w.id) {
            return Err(ConfigError(format!("{name}: listed twice")));
        }
        crate::domain::webhooks::check_webhook_url(&w.url)
            .map_err(|e| ConfigError(format!("{name}: url: {e}, got {:?}", w.url)))?;
        crate::domain::webhooks::secret_key(&w.secret)
            .map_err(|e| ConfigError(format!("{name}: secret: {e}")))?;
        let types = crate::domain::events::parse_subscription(&w.types)
            .map_err(|e| ConfigError(format!("{name}: types: {e}")))?;
        out.push(WebhookSettings {
            id: w.id,
            url: w.url,
            secret: SecretString::new(w.secret),
            types,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::config::source::env;
    use crate::config::Settings;

    #[test]
    fn webhook_delivery_numbers_out_of_range_stop_the_start() {
        for (name, value) in [
            ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "0"),
            ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "301"),
            ("UPCOMMIT_WEBHOOK_CONCURRENCY", "257"),
            ("UPCOMMIT_WEBHOOK_RETRY_BASE_MS", "0"),
            ("UPCOMMIT_WEBHOOK_RETRY_CAP_SECS", "0"),
        ] {
            let vars = env(&[("UPCOMMIT_JWT_SECRET", "0123456789abcdef"), (name, value)]);
            let err = Settings::from_sources(None, &|k| vars.get(k).cloned())
                .expect_err("refused, not clamped");
            assert!(err.to_string().contains(name), "{name}={value}: {err}");
        }
        let vars = env(&[
            ("UPCOMMIT_JWT_SECRET", "0123456789abcdef"),
            ("UPCOMMIT_WEBHOOK_CONCURRENCY", "0"),
            ("UPCOMMIT_WEBHOOK_TIMEOUT_SECS", "300"),
        ]);
        let s = Settings::from_sources(None, &|k| vars.get(k).cloned()).expect("in range");
        assert_eq!(s.events.webhook_concurrency, 0);
        assert_eq!(s.events.webhook_timeout_secs, 300);
    }

    #[test]
    fn webhooks_are_refused_at_start_unless_every_field_is_sound() {
        let good = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let file = |id: &str, url: &str, secret: &str, types: &str| {
            format!(
                "[[events.webhooks]]\nid = {id:?}\nurl = {url:?}\nsecret = {secret:?}\ntypes = {types}\n"
            )
        };
        let load = |text: &str| {
            let vars = env(&[("UPCOMMIT_JWT_SECRET", "0123456789abcdef")]);
            Settings::from_sources(Some(text), &|k| vars.get(k).cloned()).map(|s| s.events)
        };
        let ok = load(&file(
            "app",
            "https://app.example/hooks",
            good,
            r#"["file.committed", "file.deleted"]"#,
        ))
        .expect("sound");
        assert_eq!(ok.webhooks.len(), 1);
        assert_eq!(ok.webhooks[0].types.len(), 2);
        assert_eq!(ok.retry_window_secs, 86_400);
        assert_eq!(ok.webhook_timeout_secs, 10);
        let all = load(&file("app", "http://127.0.0.1:9/x", good, r#"["*"]"#)).expect("all");
        assert_eq!(
            all.webhooks[0].types.len(),
            crate::domain::events::EventType::ALL.len()
        );
        for (text, what) in [
            (file("app", "ftp://app.example/", good, r#"["*"]"#), "url"),
            (file("app", "https:///x", good, r#"["*"]"#), "url"),
            (
                file(
                    "app",
                    "https://a.example/",
                    "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                    r#"["*"]"#,
                ),
                "secret",
            ),
            (
                file("app", "https://a.example/", "whsec_c2hvcnQ=", r#"["*"]"#),
                "secret",
            ),
            (
                file("app", "https://a.example/", "whsec_%%%", r#"["*"]"#),
                "secret",
            ),
            (
                file("app", "https://a.example/", good, r#"["file.nope"]"#),
                "types",
            ),
            (file("app", "https://a.example/", good, "[]"), "types"),
            (file("App!", "https://a.example/", good, r#"["*"]"#), "id"),
            (
                format!(
                    "{}{}",
                    file("app", "https://a.example/", good, r#"["*"]"#),
                    file("app", "https://b.example/", good, r#"["*"]"#)
                ),
                "twice",
            ),
        ] {
            let err = load(&text).expect_err(what).0;
            assert!(err.contains(what), "{what}: {err}");
            assert!(
                !err.contains("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
                "no secret in {err}"
            );
        }
        // The environment's one endpoint replaces the file's.
        let vars = env(&[
            ("UPCOMMIT_JWT_SECRET", "0123456789abcdef"),
            ("UPCOMMIT_WEBHOOK_URL", "http://127.0.0.1:1/hook"),
            ("UPCOMMIT_WEBHOOK_SECRET", good),
            ("UPCOMMIT_WEBHOOK_TYPES", "file.committed, upload.rejected"),
            ("UPCOMMIT_EVENT_RETRY_WINDOW", "90s"),
        ]);
        let from_env = Settings::from_sources(
            Some(&file("app", "https://a.example/", good, r#"["*"]"#)),
            &|k| vars.get(k).cloned(),
        )
        .expect("env")
        .events;
        assert_eq!(from_env.webhooks.len(), 1);
        assert_eq!(from_env.webhooks[0].id, "default");
        assert_eq!(from_env.webhooks[0].types.len(), 2);
        assert_eq!(from_env.retry_window_secs, 90);
        assert!(format!("{:?}", from_env.webhooks[0]).contains("[redacted]"));
    }
}
