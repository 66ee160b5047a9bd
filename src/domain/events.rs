//! Events: what changed, as the outbox records it in the same transaction as the change, and
//! as webhooks, the queue sink and the pull feed carry it. Pure: ids, types, payloads.
//!
//! A payload follows the Standard Webhooks shape, `{"type", "timestamp", "data"}`; `data` is the
//! file handle exactly as the API returns it (for `file.*`), or the upload's facts (`upload.*`,
//! `multipart.*`), or the alarm's facts (`reconcile.*`, `bucket.*`). The event id is the
//! receivers' deduplication key: one per change, the same on every delivery attempt, every
//! endpoint and the feed.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use super::records::FileHandle;

/// Every kind of event. The string forms are the API's (`type` in the payload, endpoint
/// subscriptions, the feed's filter) and stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A commit recorded a handle (also a legacy import's commit).
    FileCommitted,
    /// `POST /v1/files/{id}/copies` recorded a handle sharing another's object.
    FileCopied,
    /// Hygiene: `available → unlinked` (nothing linked it past the grace period).
    FileUnlinked,
    FileArchived,
    /// Back to `available`: a restore, or a link scan vouching for an unlinked handle.
    FileRestored,
    FileDeleted,
    /// A temporary file's time to live passed and the sweep marked it.
    FileExpired,
    /// Commit refused the bytes for good (`data.code` says why).
    UploadRejected,
    /// The sweep removed a never-committed upload's tmp object.
    UploadExpired,
    MultipartAborted,
    /// Reconcile found handles whose object is missing from the bucket.
    ReconcileMissing,
    /// The bucket check (lifecycle rule, versioning…) started failing.
    BucketCheckFailed,
}

impl EventType {
    pub const ALL: [EventType; 12] = [
        Self::FileCommitted,
        Self::FileCopied,
        Self::FileUnlinked,
        Self::FileArchived,
        Self::FileRestored,
        Self::FileDeleted,
        Self::FileExpired,
        Self::UploadRejected,
        Self::UploadExpired,
        Self::MultipartAborted,
        Self::ReconcileMissing,
        Self::BucketCheckFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::FileCommitted => "file.committed",
            Self::FileCopied => "file.copied",
            Self::FileUnlinked => "file.unlinked",
            Self::FileArchived => "file.archived",
            Self::FileRestored => "file.restored",
            Self::FileDeleted => "file.deleted",
            Self::FileExpired => "file.expired",
            Self::UploadRejected => "upload.rejected",
            Self::UploadExpired => "upload.expired",
            Self::MultipartAborted => "multipart.aborted",
            Self::ReconcileMissing => "reconcile.missing",
            Self::BucketCheckFailed => "bucket.check_failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The event a handle's new status means, for the status changes hygiene and the sweep
    /// make (`available` is a restore).
    pub fn for_status(status: super::records::HandleStatus) -> Self {
        use super::records::HandleStatus as S;
        match status {
            S::Available => Self::FileRestored,
            S::Unlinked => Self::FileUnlinked,
            S::Archived => Self::FileArchived,
            S::Deleted => Self::FileDeleted,
            S::Expired => Self::FileExpired,
        }
    }
}

/// A fresh event id: `evt_` and a UUID v7 (time-ordered, so ids sort roughly by creation).
pub fn new_event_id() -> String {
    format!("evt_{}", uuid::Uuid::now_v7().simple())
}

/// One event about to be written by the transaction that makes its change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    pub id: String,
    pub event_type: EventType,
    /// What the event is about: the file id, the upload id, or the alarm's scope. Deliveries
    /// to one endpoint keep the order of the events of one subject.
    pub subject: String,
    pub occurred_at: DateTime<Utc>,
    /// The whole payload, `{"type","timestamp","data"}`, as JSON text.
    pub payload: String,
}

#[derive(Serialize)]
struct Payload<'a, D: Serialize> {
    #[serde(rename = "type")]
    event_type: &'a str,
    timestamp: String,
    data: D,
}

/// The payload text: the Standard Webhooks shape.
fn payload_of<D: Serialize>(event_type: EventType, at: DateTime<Utc>, data: &D) -> String {
    serde_json::to_string(&Payload {
        event_type: event_type.as_str(),
        timestamp: at.to_rfc3339_opts(SecondsFormat::Micros, true),
        data,
    })
    // Serializing plain structs of strings and numbers cannot fail.
    .unwrap_or_else(|_| String::from("{}"))
}

impl NewEvent {
    pub fn new<D: Serialize>(
        event_type: EventType,
        subject: &str,
        at: DateTime<Utc>,
        data: &D,
    ) -> Self {
        Self {
            id: new_event_id(),
            event_type,
            subject: subject.to_owned(),
            occurred_at: at,
            payload: payload_of(event_type, at, data),
        }
    }

    /// A `file.*` event: the handle as the API returns it, after the change.
    pub fn file(event_type: EventType, handle: &FileHandle, at: DateTime<Utc>) -> Self {
        Self::new(event_type, handle.id.as_str(), at, handle)
    }
}

/// An upload's facts, for `upload.*` and `multipart.*` events.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct UploadFacts {
    pub upload_id: String,
    pub owner: String,
    pub profile: String,
    pub key: String,
    /// Why it was refused (`upload.rejected` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

impl UploadFacts {
    pub fn event(self, event_type: EventType, at: DateTime<Utc>) -> NewEvent {
        let subject = self.upload_id.clone();
        NewEvent::new(event_type, &subject, at, &self)
    }
}

/// One event as stored, positioned in the feed's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The feed position: assigned once the event's transaction committed, in the order the
    /// events became visible; the pull feed's cursor.
    pub position: i64,
    pub id: String,
    pub event_type: String,
    pub subject: String,
    pub occurred_at: DateTime<Utc>,
    pub payload: String,
}

/// An endpoint's subscription: every type, or the listed ones. Stored as `*` or as
/// `,a,b,` so that SQL can match one type with `LIKE '%,' || type || ',%'`.
pub fn subscription_text(types: &[EventType]) -> String {
    if types.is_empty() || types.len() == EventType::ALL.len() {
        return "*".into();
    }
    let mut s = String::from(",");
    for t in types {
        s.push_str(t.as_str());
        s.push(',');
    }
    s
}

/// Parses a subscription list as written in settings or the admin API: `*`, or type names.
pub fn parse_subscription(items: &[String]) -> Result<Vec<EventType>, String> {
    if items.iter().any(|i| i == "*") {
        return Ok(EventType::ALL.to_vec());
    }
    let mut out = Vec::new();
    for i in items {
        let t = EventType::parse(i).ok_or_else(|| format!("unknown event type {i:?}"))?;
        if !out.contains(&t) {
            out.push(t);
        }
    }
    if out.is_empty() {
        return Err("no event types".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::records::HandleStatus;

    #[test]
    fn every_type_parses_back_and_names_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for t in EventType::ALL {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
            assert!(seen.insert(t.as_str()));
            assert!(t
                .as_str()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'.' || b == b'_'));
        }
        assert_eq!(EventType::parse("file.Committed"), None);
        assert_eq!(EventType::parse(""), None);
    }

    #[test]
    fn statuses_map_to_their_events() {
        assert_eq!(
            EventType::for_status(HandleStatus::Available),
            EventType::FileRestored
        );
        assert_eq!(
            EventType::for_status(HandleStatus::Archived),
            EventType::FileArchived
        );
        assert_eq!(
            EventType::for_status(HandleStatus::Deleted),
            EventType::FileDeleted
        );
        assert_eq!(
            EventType::for_status(HandleStatus::Unlinked),
            EventType::FileUnlinked
        );
        assert_eq!(
            EventType::for_status(HandleStatus::Expired),
            EventType::FileExpired
        );
    }

    #[test]
    fn payload_has_the_standard_webhooks_shape() {
        let at = DateTime::parse_from_rfc3339("2026-12-01T10:00:00.123456Z")
            .expect("time")
            .with_timezone(&Utc);
        let e = UploadFacts {
            upload_id: "u1".into(),
            owner: "alice".into(),
            profile: "image".into(),
            key: "tmp/x".into(),
            code: Some("content_type_mismatch".into()),
        }
        .event(EventType::UploadRejected, at);
        assert!(e.id.starts_with("evt_") && e.id.len() == 36);
        assert_eq!(e.subject, "u1");
        let v: serde_json::Value = serde_json::from_str(&e.payload).expect("json");
        assert_eq!(v["type"], "upload.rejected");
        assert_eq!(v["timestamp"], "2026-12-01T10:00:00.123456Z");
        assert_eq!(v["data"]["code"], "content_type_mismatch");
        assert_eq!(v["data"]["owner"], "alice");
    }

    #[test]
    fn subscriptions_round_trip_and_refuse_unknown_types() {
        assert_eq!(subscription_text(&EventType::ALL), "*");
        assert_eq!(subscription_text(&[]), "*");
        assert_eq!(
            subscription_text(&[EventType::FileCommitted, EventType::FileDeleted]),
            ",file.committed,file.deleted,"
        );
        assert_eq!(
            parse_subscription(&["*".into()]).expect("all").len(),
            EventType::ALL.len()
        );
        assert!(parse_subscription(&["file.nope".into()]).is_err());
        assert!(parse_subscription(&[]).is_err());
        assert_eq!(
            parse_subscription(&["file.committed".into(), "file.committed".into()]).expect("dedup"),
            vec![EventType::FileCommitted]
        );
    }
}
