//! Reconciliation as a pure, incremental merge-join: the bucket's keys and the catalog's handle
//! keys, both in S3's byte order, are consumed page by page in constant memory. Keys are compared
//! as bytes and matched exactly — never by prefix — so `media/images/…` and `media/images2/…`,
//! keys with spaces, `+` or any Unicode stay apart. An input out of order is an error: the join
//! refuses rather than report doubtful findings.

use std::cmp::Ordering;
use std::collections::VecDeque;

use chrono::{DateTime, Duration, Utc};

use super::prefixes::{CACHE_PREFIX, QUARANTINE_PREFIX, TMP_PREFIX};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketKey {
    pub key: String,
    pub size: i64,
    pub last_modified: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleKey {
    pub key: String,
    /// The first (smallest) id of the handles sharing the key.
    pub file_id: String,
    pub size: i64,
    /// How many handles share the key (copies): one key is one object, matched or missing once.
    pub handles: i64,
    /// When the first of them was recorded (the object has existed since: copies share it).
    pub recorded_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// An object under a final prefix that no file handle records.
    Unindexed(BucketKey),
    /// A file handle whose object is gone: a data-loss alarm.
    Missing(HandleKey),
    /// A tmp object older than the lifecycle rule allows: the rule is not running.
    TmpPastLifecycle(BucketKey),
    /// An object outside every prefix the service knows (tmp, quarantine, final and legacy
    /// prefixes, lifecycle rule prefixes): data with no owner.
    Stray(BucketKey),
    /// An object under `cache/`: a rendition, which belongs to the file its key names. Whether
    /// that file is still there is the catalog's to say (by id, not by the join's key order).
    Rendition(BucketKey),
}

#[derive(Debug, Clone)]
pub struct ReconcilePolicy {
    pub final_prefixes: Vec<String>,
    /// Every other prefix the service owns (tmp/, quarantine/, lifecycle rule prefixes): an
    /// object under none of these nor a final prefix is stray.
    pub known_prefixes: Vec<String>,
    pub now: DateTime<Utc>,
    /// Unindexed objects younger than this are skipped: a commit may be in flight.
    pub grace: Duration,
    /// Tmp objects older than this mean the lifecycle rule is not working.
    pub tmp_max_age: Duration,
    /// When the bucket side was taken, if before the run (an S3 inventory's
    /// `creationTimestamp`): a handle recorded after it is not expected in it, and is left to
    /// a later inventory rather than judged (or checked with a HEAD) now.
    pub taken_at: Option<DateTime<Utc>>,
}

impl ReconcilePolicy {
    fn older_than(&self, k: &BucketKey, age: Duration) -> bool {
        k.last_modified.is_some_and(|t| t + age <= self.now)
    }

    /// What an object no handle records means, if anything.
    fn unrecorded(&self, k: BucketKey) -> Option<Finding> {
        if k.key.starts_with(TMP_PREFIX) {
            return self
                .older_than(&k, self.tmp_max_age)
                .then_some(Finding::TmpPastLifecycle(k));
        }
        if k.key.starts_with(CACHE_PREFIX) {
            return Some(Finding::Rendition(k));
        }
        let under = |prefixes: &[String]| {
            prefixes
                .iter()
                .any(|p| !p.is_empty() && k.key.as_bytes().starts_with(p.as_bytes()))
        };
        if under(&self.final_prefixes) {
            return self
                .older_than(&k, self.grace)
                .then_some(Finding::Unindexed(k));
        }
        if under(&self.known_prefixes) || k.key.starts_with(QUARANTINE_PREFIX) {
            return None;
        }
        // The same grace as unindexed objects: an admin's commit to a custom key may be in flight.
        self.older_than(&k, self.grace).then_some(Finding::Stray(k))
    }

    /// Whether a handle the bucket side did not show was recorded after that side was taken.
    fn recorded_since_taken(&self, h: &HandleKey) -> bool {
        self.taken_at.is_some_and(|t| h.recorded_at > t)
    }
}

/// How far ahead of the database's clock an inventory's `creationTimestamp` may be (clock skew)
/// before it is taken for a wrong unit or a wrong manifest.
pub const INVENTORY_CLOCK_SKEW: Duration = Duration::hours(1);

/// The time an inventory was taken, checked before a run trusts it to leave handles recorded
/// since to a later inventory: never in the future (past the clocks' skew: seconds, micro-
/// seconds or another manifest), never older than `max_age` (0, a negative value, seconds read
/// as milliseconds, a manifest reused for weeks — each would leave every loss since unreported).
pub fn inventory_taken_at(
    taken_at: DateTime<Utc>,
    now: DateTime<Utc>,
    max_age: Duration,
) -> Result<DateTime<Utc>, String> {
    if taken_at > now + INVENTORY_CLOCK_SKEW {
        return Err(format!(
            "the manifest's creationTimestamp ({}) is in the future (now {}): is it in milliseconds, and is this the bucket's manifest?",
            taken_at.to_rfc3339(),
            now.to_rfc3339()
        ));
    }
    if now - taken_at > max_age {
        return Err(format!(
            "the inventory was taken at {}, more than --inventory-max-age ({} s) ago: the files committed since would not be judged; pass a newer inventory, or a larger --inventory-max-age",
            taken_at.to_rfc3339(),
            max_age.num_seconds()
        ));
    }
    Ok(taken_at)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinError {
    OutOfOrder {
        side: &'static str,
        previous: String,
        next: String,
    },
}

impl std::fmt::Display for JoinError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JoinError::OutOfOrder {
                side,
                previous,
                next,
            } => write!(
                f,
                "the {side} keys are not in byte order ({previous:?} before {next:?}); refusing to reconcile"
            ),
        }
    }
}

/// Which side the join needs another page of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Bucket,
    Catalog,
    /// Both sides are exhausted and every key is judged.
    Done,
}

/// The merge-join's state: a page of each side and the last key seen on each (to check order).
#[derive(Debug)]
pub struct Join {
    policy: ReconcilePolicy,
    bucket: VecDeque<BucketKey>,
    catalog: VecDeque<HandleKey>,
    bucket_done: bool,
    catalog_done: bool,
    last_bucket: Option<String>,
    last_catalog: Option<String>,
    /// Keys present on both sides.
    pub matched: u64,
    /// Handle keys the bucket side did not show, recorded after it was taken: not judged.
    pub recorded_since_taken: u64,
}

/// Checks that `next` comes strictly after `last` in byte order (a repeated key is out of order
/// too) and makes it the last key: reconcile's check of each side, and the legacy import's.
pub fn check_order(
    side: &'static str,
    last: &mut Option<String>,
    next: &str,
) -> Result<(), JoinError> {
    if let Some(prev) = last {
        if prev.as_bytes().cmp(next.as_bytes()) != Ordering::Less {
            return Err(JoinError::OutOfOrder {
                side,
                previous: prev.clone(),
                next: next.to_owned(),
            });
        }
    }
    *last = Some(next.to_owned());
    Ok(())
}

impl Join {
    pub fn new(policy: ReconcilePolicy) -> Self {
        Self {
            policy,
            bucket: VecDeque::new(),
            catalog: VecDeque::new(),
            bucket_done: false,
            catalog_done: false,
            last_bucket: None,
            last_catalog: None,
            matched: 0,
            recorded_since_taken: 0,
        }
    }

    /// Adds the bucket's next page; `None` marks its end.
    pub fn feed_bucket(&mut self, page: Option<Vec<BucketKey>>) -> Result<(), JoinError> {
        match page {
            None => self.bucket_done = true,
            Some(keys) => {
                for k in keys {
                    check_order("bucket", &mut self.last_bucket, &k.key)?;
                    self.bucket.push_back(k);
                }
            }
        }
        Ok(())
    }

    /// Adds the catalog's next page; `None` marks its end.
    pub fn feed_catalog(&mut self, page: Option<Vec<HandleKey>>) -> Result<(), JoinError> {
        match page {
            None => self.catalog_done = true,
            Some(keys) => {
                for k in keys {
                    check_order("catalog", &mut self.last_catalog, &k.key)?;
                    self.catalog.push_back(k);
                }
            }
        }
        Ok(())
    }

    /// Judges every key it can with what it holds, into `out`, and says what it needs next.
    pub fn advance(&mut self, out: &mut Vec<Finding>) -> Need {
        loop {
            match (self.bucket.front(), self.catalog.front()) {
                (Some(b), Some(c)) => match b.key.as_bytes().cmp(c.key.as_bytes()) {
                    Ordering::Equal => {
                        self.bucket.pop_front();
                        self.catalog.pop_front();
                        self.matched += 1;
                    }
                    Ordering::Less => {
                        if let Some(b) = self.bucket.pop_front() {
                            out.extend(self.policy.unrecorded(b));
                        }
                    }
                    Ordering::Greater => {
                        if let Some(c) = self.catalog.pop_front() {
                            self.unlisted(c, out);
                        }
                    }
                },
                (None, _) if !self.bucket_done => return Need::Bucket,
                (_, None) if !self.catalog_done => return Need::Catalog,
                (Some(_), None) => {
                    if let Some(b) = self.bucket.pop_front() {
                        out.extend(self.policy.unrecorded(b));
                    }
                }
                (None, Some(_)) => {
                    if let Some(c) = self.catalog.pop_front() {
                        self.unlisted(c, out);
                    }
                }
                (None, None) => return Need::Done,
            }
        }
    }

    /// A handle key the bucket side did not show: missing, unless recorded after that side
    /// was taken.
    fn unlisted(&mut self, c: HandleKey, out: &mut Vec<Finding>) {
        if self.policy.recorded_since_taken(&c) {
            self.recorded_since_taken += 1;
        } else {
            out.push(Finding::Missing(c));
        }
    }

    /// Handle keys read and not judged yet: all after the last bucket key, so a run resumed
    /// from that key reads them again.
    pub fn catalog_pending(&self) -> usize {
        self.catalog.len()
    }

    /// The last bucket key judged, for a checkpoint.
    pub fn last_bucket_key(&self) -> Option<&str> {
        self.last_bucket.as_deref()
    }
}

/// Runs a join over two in-memory page sequences (tests and the benchmark use it).
pub fn join_pages(
    policy: ReconcilePolicy,
    mut bucket: impl Iterator<Item = Vec<BucketKey>>,
    mut catalog: impl Iterator<Item = Vec<HandleKey>>,
    mut sink: impl FnMut(Finding),
) -> Result<u64, JoinError> {
    let mut join = Join::new(policy);
    let mut out = Vec::new();
    loop {
        let need = join.advance(&mut out);
        for f in out.drain(..) {
            sink(f);
        }
        match need {
            Need::Bucket => join.feed_bucket(bucket.next())?,
            Need::Catalog => join.feed_catalog(catalog.next())?,
            Need::Done => return Ok(join.matched),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-11-29T12:00:00Z")
            .expect("time")
            .with_timezone(&Utc)
    }

    fn policy() -> ReconcilePolicy {
        ReconcilePolicy {
            final_prefixes: vec!["media/images/".into(), "media/recordings/".into()],
            known_prefixes: vec!["tmp/".into(), "quarantine/".into(), String::new()],
            now: now(),
            grace: Duration::hours(24),
            tmp_max_age: Duration::days(8),
            taken_at: None,
        }
    }

    fn b(key: &str, days_old: i64) -> BucketKey {
        BucketKey {
            key: key.into(),
            size: 10,
            last_modified: Some(now() - Duration::days(days_old)),
        }
    }

    fn h(key: &str) -> HandleKey {
        HandleKey {
            key: key.into(),
            file_id: format!("id-{key}"),
            size: 10,
            handles: 1,
            recorded_at: now() - Duration::days(30),
        }
    }

    fn sorted_b(mut v: Vec<BucketKey>) -> Vec<BucketKey> {
        v.sort_by(|x, y| x.key.as_bytes().cmp(y.key.as_bytes()));
        v
    }

    fn run(bucket: Vec<BucketKey>, catalog: Vec<HandleKey>, page: usize) -> (Vec<Finding>, u64) {
        let mut found = Vec::new();
        let bp: Vec<Vec<BucketKey>> = bucket.chunks(page).map(<[_]>::to_vec).collect();
        let cp: Vec<Vec<HandleKey>> = catalog.chunks(page).map(<[_]>::to_vec).collect();
        let matched =
            join_pages(policy(), bp.into_iter(), cp.into_iter(), |f| found.push(f)).expect("join");
        (found, matched)
    }

    /// The keys of the findings `pick` selects, in order.
    fn keys_of(found: &[Finding], pick: fn(&Finding) -> Option<&str>) -> Vec<&str> {
        found.iter().filter_map(pick).collect()
    }

    fn missing(f: &Finding) -> Option<&str> {
        match f {
            Finding::Missing(k) => Some(k.key.as_str()),
            _ => None,
        }
    }

    #[test]
    fn a_key_shared_by_copies_is_one_object_matched_or_missing_once() {
        let shared = |key: &str| HandleKey {
            handles: 3,
            ..h(key)
        };
        let bucket = vec![b("media/images/a.png", 3), b("media/images/c.png", 3)];
        let catalog = vec![
            h("media/images/a.png"),
            shared("media/images/b.png"),
            shared("media/images/c.png"),
        ];
        for page in [1, 2, 100] {
            let (found, matched) = run(bucket.clone(), catalog.clone(), page);
            assert_eq!(matched, 2, "page {page}");
            assert_eq!(
                found,
                vec![Finding::Missing(shared("media/images/b.png"))],
                "page {page}"
            );
        }
        // Two rows of one key are an input error, never two matches.
        let doubled = vec![h("media/images/a.png"), h("media/images/a.png")];
        let mut join = Join::new(policy());
        assert!(join.feed_catalog(Some(doubled)).is_err());
    }

    #[test]
    fn handles_read_ahead_of_the_last_bucket_key_are_pending_for_a_resume() {
        let mut join = Join::new(policy());
        let mut found = Vec::new();
        assert_eq!(join.advance(&mut found), Need::Bucket);
        join.feed_bucket(Some(vec![b("media/images/b.png", 3)]))
            .expect("bucket");
        assert_eq!(join.advance(&mut found), Need::Catalog);
        let page = ["a", "b", "c", "d"].map(|k| h(&format!("media/images/{k}.png")));
        join.feed_catalog(Some(page.to_vec())).expect("catalog");
        // a is judged (missing), b matched; c and d wait for the bucket's next page.
        assert_eq!(join.advance(&mut found), Need::Bucket);
        assert_eq!(join.last_bucket_key(), Some("media/images/b.png"));
        assert_eq!(join.catalog_pending(), 2);
        assert_eq!(keys_of(&found, missing), vec!["media/images/a.png"]);
        join.feed_bucket(None).expect("end");
        assert_eq!(join.advance(&mut found), Need::Catalog);
        join.feed_catalog(None).expect("end");
        assert_eq!(join.advance(&mut found), Need::Done);
        assert_eq!(join.catalog_pending(), 0);
    }

    #[test]
    fn an_inventory_time_in_the_future_or_past_its_age_is_refused() {
        let max = Duration::days(10);
        let ok = |t| inventory_taken_at(t, now(), max);
        for fine in [
            now(),
            now() - Duration::days(10),
            now() - Duration::hours(30),
            now() + Duration::minutes(59),
        ] {
            assert_eq!(ok(fine), Ok(fine), "{fine}");
        }
        let epoch = DateTime::<Utc>::UNIX_EPOCH;
        for bad in [
            now() - Duration::days(10) - Duration::seconds(1),
            now() - Duration::days(30),
            epoch,
            epoch - Duration::milliseconds(1),
            // Seconds read as milliseconds: January 1970.
            epoch + Duration::milliseconds(now().timestamp()),
            now() + Duration::minutes(61),
            // Microseconds read as milliseconds: tens of thousands of years ahead.
            epoch + Duration::milliseconds(now().timestamp_micros()),
        ] {
            assert!(ok(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn handles_recorded_after_an_inventory_was_taken_are_left_to_a_later_one() {
        let taken = now() - Duration::days(2);
        let at = |key: &str, recorded_at| HandleKey {
            recorded_at,
            ..h(key)
        };
        let bucket = vec![b("media/images/a.png", 3), b("media/images/d.png", 3)];
        let catalog = vec![
            at("media/images/a.png", taken - Duration::hours(1)),
            // Before the inventory and not in it: missing.
            at("media/images/b.png", taken - Duration::seconds(1)),
            // Recorded at the very moment: it should be in it, so it is judged.
            at("media/images/c.png", taken),
            // In the inventory although recorded after it was taken: matched, never unindexed.
            at("media/images/d.png", taken + Duration::seconds(1)),
            // After it and not in it: not judged.
            at("media/images/e.png", taken + Duration::seconds(1)),
        ];
        for page in [1, 2, 100] {
            let mut join = Join::new(ReconcilePolicy {
                taken_at: Some(taken),
                ..policy()
            });
            let mut bp = bucket.chunks(page).map(<[_]>::to_vec);
            let mut cp = catalog.chunks(page).map(<[_]>::to_vec);
            let mut found = Vec::new();
            loop {
                match join.advance(&mut found) {
                    Need::Bucket => join.feed_bucket(bp.next()).expect("bucket"),
                    Need::Catalog => join.feed_catalog(cp.next()).expect("catalog"),
                    Need::Done => break,
                }
            }
            assert_eq!(
                keys_of(&found, missing),
                vec!["media/images/b.png", "media/images/c.png"],
                "page {page}"
            );
            assert_eq!(found.len(), 2, "nothing unindexed: {found:?}");
            assert_eq!(join.matched, 2);
            assert_eq!(join.recorded_since_taken, 1);
        }
        // A listing is taken during the run: every handle it did not show is judged.
        let (found, _) = run(bucket, catalog, 100);
        assert_eq!(found.len(), 3, "{found:?}");
    }

    #[test]
    fn keys_sharing_a_textual_prefix_are_matched_exactly() {
        let bucket = sorted_b(vec![
            b("media/images/a b.png", 3),
            b("media/images/a+b.png", 3),
            b("media/images/a.png", 3),
            b("media/images2/a.png", 3),
            b("media/images/é.png", 3),
            b("media/images/a.png.bak", 3),
        ]);
        let mut catalog = vec![
            h("media/images/a b.png"),
            h("media/images/a.png"),
            h("media/images/é.png"),
            h("media/images/ab.png"),
        ];
        catalog.sort_by(|x, y| x.key.as_bytes().cmp(y.key.as_bytes()));
        for page in [1, 2, 3, 100] {
            let (found, matched) = run(bucket.clone(), catalog.clone(), page);
            assert_eq!(matched, 3, "page {page}");
            let unindexed: Vec<&str> = found
                .iter()
                .filter_map(|f| match f {
                    Finding::Unindexed(k) => Some(k.key.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(
                unindexed,
                vec!["media/images/a+b.png", "media/images/a.png.bak"],
                "media/images2/ is not a final prefix; page {page}"
            );
            assert_eq!(keys_of(&found, missing), vec!["media/images/ab.png"]);
            let stray: Vec<&str> = found
                .iter()
                .filter_map(|f| match f {
                    Finding::Stray(k) => Some(k.key.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(stray, vec!["media/images2/a.png"], "page {page}");
        }
    }

    #[test]
    fn young_unindexed_objects_and_young_tmp_objects_are_not_findings() {
        let bucket = sorted_b(vec![
            b("media/images/new.png", 0),
            b("media/images/old.png", 2),
            b("tmp/2026/11/28/x/a.png", 1),
            b("tmp/2026/11/01/x/a.png", 28),
            b("cache/thumb.png", 90),
            b("quarantine/media/images/q.png", 90),
        ]);
        let (found, _) = run(bucket, Vec::new(), 2);
        assert_eq!(
            found,
            vec![
                Finding::Rendition(b("cache/thumb.png", 90)),
                Finding::Unindexed(b("media/images/old.png", 2)),
                Finding::TmpPastLifecycle(b("tmp/2026/11/01/x/a.png", 28)),
            ]
        );
    }

    #[test]
    fn objects_outside_every_known_prefix_are_stray_once_past_the_grace_period() {
        let bucket = sorted_b(vec![
            b("exports/x.csv", 3),
            b("exports/young.csv", 0),
            b("media/images2/x.jpg", 3),
            b("media/imagesx", 3),
            b("quarantine/exports/x.csv", 3),
            b("tmp/2026/11/28/x/a.png", 3),
            b("media/images/x.jpg", 3),
        ]);
        let (found, _) = run(bucket, Vec::new(), 3);
        let stray: Vec<&str> = found
            .iter()
            .filter_map(|f| match f {
                Finding::Stray(k) => Some(k.key.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            stray,
            vec!["exports/x.csv", "media/images2/x.jpg", "media/imagesx"]
        );
        assert!(found.contains(&Finding::Unindexed(b("media/images/x.jpg", 3))));
    }

    #[test]
    fn every_handle_without_its_object_is_missing() {
        let catalog = vec![h("a/1"), h("a/2"), h("b/1")];
        let (found, matched) = run(vec![b("a/2", 1)], catalog, 1);
        assert_eq!(matched, 1);
        assert_eq!(
            found,
            vec![Finding::Missing(h("a/1")), Finding::Missing(h("b/1"))]
        );
    }

    #[test]
    fn an_input_out_of_byte_order_is_refused() {
        let bucket = vec![vec![b("media/images/b", 3)], vec![b("media/images/a", 3)]];
        let err = join_pages(policy(), bucket.into_iter(), std::iter::empty(), |_| {})
            .expect_err("refused");
        assert!(matches!(err, JoinError::OutOfOrder { side: "bucket", .. }));
        // Unicode sorts after ASCII in byte order, which is S3's.
        let ok = vec![vec![b("media/images/z", 3), b("media/images/é", 3)]];
        assert!(join_pages(policy(), ok.into_iter(), std::iter::empty(), |_| {}).is_ok());
    }
}
