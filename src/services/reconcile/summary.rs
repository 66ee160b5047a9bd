//! A reconcile's report: its counts by finding, what a checkpoint saves of them, and how a
//! resumed run adds the crashed run's counts to its own.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::domain::reconcile::Join;
use crate::services::bucket_source::BucketSource;

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReconcileSummary {
    pub source: &'static str,
    pub resumed: bool,
    pub quarantine: bool,
    pub grace_secs: i64,
    pub keys_listed: u64,
    /// Workers that listed the bucket (1: one sequential listing).
    pub list_workers: usize,
    /// ListObjectsV2 calls made (absent for an inventory).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list_requests: Option<u64>,
    pub handles_read: u64,
    pub matched: u64,
    pub unindexed: u64,
    pub unindexed_bytes: u64,
    pub missing: u64,
    pub missing_bytes: u64,
    /// Handles the listing (or the inventory) did not show whose object a HEAD then found:
    /// committed while the run listed, or after the inventory was taken. Not missing.
    pub appeared: u64,
    /// When the inventory was taken (its manifest's `creationTimestamp`), when it says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inventory_taken_at: Option<DateTime<Utc>>,
    /// Handles the inventory did not show, recorded after it was taken: not judged (no HEAD);
    /// the next inventory has them.
    pub recorded_after_inventory: u64,
    pub tmp_past_lifecycle: u64,
    pub tmp_past_lifecycle_bytes: u64,
    /// Objects outside every prefix the service knows.
    pub stray: u64,
    pub stray_bytes: u64,
    pub quarantine_stray: bool,
    pub quarantined: u64,
    /// Stray objects moved under `quarantine/` (`--quarantine-stray`).
    pub stray_quarantined: u64,
    /// Findings left in place because an upload record names them (a commit may come).
    pub named_by_upload: u64,
    /// Renditions (under `cache/`) of files that are there.
    pub renditions: u64,
    /// Renditions of files that are gone (not recorded, deleted or expired).
    pub orphan_renditions: u64,
    pub orphan_rendition_bytes: u64,
    /// Whether the run removes them (`--remove-orphan-renditions`).
    pub remove_orphan_renditions: bool,
    /// Of `orphan_renditions`, those removed, and every version removed with them.
    pub orphan_renditions_removed: u64,
    pub rendition_versions_removed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ReconcileSummary {
    /// Adds the counts a crashed run checkpointed (its `summary`) to this resumed run's: the
    /// keys up to the checkpoint are not judged again, so without them a loss found before the
    /// crash would vanish from the totals, the exit code and the `reconcile.missing` alarm.
    pub(super) fn carry_over(&mut self, saved: &serde_json::Value) {
        let n = |field: &str| saved.get(field).and_then(serde_json::Value::as_u64);
        let counters: [(&str, &mut u64); 21] = [
            ("keys_listed", &mut self.keys_listed),
            ("handles_read", &mut self.handles_read),
            ("matched", &mut self.matched),
            ("unindexed", &mut self.unindexed),
            ("unindexed_bytes", &mut self.unindexed_bytes),
            ("missing", &mut self.missing),
            ("missing_bytes", &mut self.missing_bytes),
            ("appeared", &mut self.appeared),
            (
                "recorded_after_inventory",
                &mut self.recorded_after_inventory,
            ),
            ("tmp_past_lifecycle", &mut self.tmp_past_lifecycle),
            (
                "tmp_past_lifecycle_bytes",
                &mut self.tmp_past_lifecycle_bytes,
            ),
            ("stray", &mut self.stray),
            ("stray_bytes", &mut self.stray_bytes),
            ("quarantined", &mut self.quarantined),
            ("stray_quarantined", &mut self.stray_quarantined),
            ("named_by_upload", &mut self.named_by_upload),
            ("renditions", &mut self.renditions),
            ("orphan_renditions", &mut self.orphan_renditions),
            ("orphan_rendition_bytes", &mut self.orphan_rendition_bytes),
            (
                "orphan_renditions_removed",
                &mut self.orphan_renditions_removed,
            ),
            (
                "rendition_versions_removed",
                &mut self.rendition_versions_removed,
            ),
        ];
        for (field, count) in counters {
            *count += n(field).unwrap_or(0);
        }
        if let Some(before) = n("list_requests") {
            self.list_requests = Some(before + self.list_requests.unwrap_or(0));
        }
    }

    /// This summary with the join's counts so far added (a checkpoint's, or the end's), and
    /// the source's listing calls; the handles read ahead of the last key judged are not
    /// counted (a resumed run reads them again).
    pub(super) fn with_join(&self, join: &Join, source: &dyn BucketSource) -> Self {
        let mut out = self.clone();
        out.matched += join.matched;
        out.recorded_after_inventory += join.recorded_since_taken;
        out.handles_read = out
            .handles_read
            .saturating_sub(join.catalog_pending() as u64);
        // The crashed run's calls (`carry_over`), then this run's.
        out.list_requests = match (self.list_requests, source.requests()) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        out
    }
}
