//! What storage holds: file handles (count and bytes), tmp bytes by age, unindexed bytes from
//! the last reconcile, the last sweep and prune, an estimated monthly cost from per-GiB prices,
//! and the catalog's table sizes (what years of growth look like).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::catalog::{Catalog, CatalogError, DayOfUploads, HandleDimension, Share};
use crate::config::Settings;
use crate::domain::records;
use crate::storage::{ObjectStore, StoreError};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Ages of tmp partitions, in days: `[0, 1)`, `[1, 7)`, `[7, 30)`, `[30, ∞)`.
const AGE_BUCKETS: [(&str, i64); 4] = [
    ("under_1d", 1),
    ("1d_to_7d", 7),
    ("7d_to_30d", 30),
    ("over_30d", i64::MAX),
];

#[derive(Debug, Clone, Serialize)]
pub struct Amount {
    pub count: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct AgeBucket {
    pub age: &'static str,
    pub objects: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LastRun {
    pub run_id: String,
    pub state: &'static str,
    pub finished_at: Option<DateTime<Utc>>,
    pub summary: serde_json::Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct StorageReport {
    pub generated_at: DateTime<Utc>,
    pub bucket: String,
    /// File handles by status.
    pub handles: Vec<(String, Amount)>,
    /// Handles that left `available`, by the month they did (`YYYY-MM`, count).
    pub unlinked_per_month: Vec<(String, i64)>,
    pub tmp_by_age: Vec<AgeBucket>,
    /// From the last reconcile; absent when none has run.
    pub unindexed: Option<Amount>,
    pub last_reconcile: Option<LastRun>,
    pub last_sweep: Option<LastRun>,
    /// Estimated monthly storage cost of handles, tmp and unindexed bytes, in the price unit.
    pub estimated_monthly_cost: f64,
    pub price_per_gib: Vec<(String, f64)>,
    /// Every table of the catalog: rows, and bytes with indexes where the database can tell.
    pub tables: Vec<crate::catalog::TableSize>,
    pub last_prune: Option<LastRun>,
    /// Objects of handles that are not deleted or expired (copies share one), by the handles'
    /// status, storage class and profile.
    pub by_status: Vec<Share>,
    pub by_storage_class: Vec<Share>,
    pub by_profile: Vec<Share>,
    /// The last [`UPLOAD_DAYS`] UTC days (today included) with any upload: presigned,
    /// committed, bytes committed.
    pub uploads_per_day: Vec<DayOfUploads>,
}

/// How many days of uploads the report shows.
pub const UPLOAD_DAYS: i64 = 30;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

async fn last_run(catalog: &Arc<dyn Catalog>, job: &str) -> Result<Option<LastRun>, CatalogError> {
    Ok(catalog.last_run(job).await?.map(|r| LastRun {
        run_id: r.id,
        state: r.state.as_str(),
        finished_at: r.finished_at,
        summary: r
            .summary
            .as_deref()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or(serde_json::Value::Null),
    }))
}

/// Tmp objects summed per partition age (the partition's day, not each object's time).
async fn tmp_by_age(
    store: &dyn ObjectStore,
    now: DateTime<Utc>,
) -> Result<Vec<AgeBucket>, StoreError> {
    let mut buckets: Vec<AgeBucket> = AGE_BUCKETS
        .iter()
        .map(|(age, _)| AgeBucket {
            age,
            objects: 0,
            bytes: 0,
        })
        .collect();
    let (days, other) = crate::services::sweep::partitions(store).await?;
    let dated = days.into_iter().map(|(d, p)| (Some(d), p));
    for (day, prefix) in dated.chain(other.into_iter().map(|p| (None, p))) {
        // Anything not dated like a partition counts as the oldest.
        let age = day.map_or(i64::MAX - 1, |d| (now.date_naive() - d).num_days().max(0));
        let slot = AGE_BUCKETS
            .iter()
            .position(|(_, limit)| age < *limit)
            .unwrap_or(AGE_BUCKETS.len() - 1);
        let mut token = None;
        loop {
            let page = store
                .list_objects(&prefix, None, token.take(), 1000)
                .await?;
            for o in &page.objects {
                buckets[slot].objects += 1;
                buckets[slot].bytes += u64::try_from(o.size).unwrap_or(0);
            }
            match page.next {
                Some(t) => token = Some(t),
                None => break,
            }
        }
    }
    Ok(buckets)
}

pub async fn storage_report(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    settings: &Settings,
) -> Result<StorageReport, ReportError> {
    let now = records::now();
    let handles: Vec<(String, Amount)> = catalog
        .handle_totals_by_status()
        .await?
        .into_iter()
        .map(|(status, count, bytes)| {
            (
                status,
                Amount {
                    count: u64::try_from(count).unwrap_or(0),
                    bytes: u64::try_from(bytes).unwrap_or(0),
                },
            )
        })
        .collect();
    let unlinked_per_month = catalog.unlinked_per_month().await?;
    let tmp = tmp_by_age(store.as_ref(), now).await?;
    let last_reconcile = last_run(catalog, crate::services::reconcile::JOB).await?;
    let unindexed = last_reconcile.as_ref().map(|r| Amount {
        count: r.summary["unindexed"].as_u64().unwrap_or(0),
        bytes: r.summary["unindexed_bytes"].as_u64().unwrap_or(0),
    });
    let standard = settings
        .jobs
        .price_per_gib
        .iter()
        .find(|(c, _)| c == "STANDARD")
        .map_or(0.0, |(_, p)| *p);
    let price = |class: &str| {
        settings
            .jobs
            .price_per_gib
            .iter()
            .find(|(c, _)| c == class)
            .map_or(standard, |(_, p)| *p)
    };
    // Archived handles sit in the archive class (small ones stay in STANDARD: an estimate);
    // deleted ones hold nothing.
    let archive_price = price(&settings.jobs.archive_storage_class);
    let cost_bytes = |bytes: u64, per_gib: f64| {
        #[allow(clippy::cast_precision_loss)]
        let c = bytes as f64 / GIB * per_gib;
        c
    };
    let mut cost = 0.0;
    for (status, a) in &handles {
        cost += match status.as_str() {
            // An expired temporary file's object is the lifecycle rule's to remove (within a day).
            "deleted" | "expired" => 0.0,
            "archived" => cost_bytes(a.bytes, archive_price),
            _ => cost_bytes(a.bytes, standard),
        };
    }
    let loose =
        tmp.iter().map(|b| b.bytes).sum::<u64>() + unindexed.as_ref().map_or(0, |u| u.bytes);
    cost += cost_bytes(loose, standard);
    Ok(StorageReport {
        generated_at: now,
        bucket: store.bucket().to_owned(),
        handles,
        unlinked_per_month,
        tmp_by_age: tmp,
        unindexed,
        last_reconcile,
        last_sweep: last_run(catalog, crate::services::sweep::JOB).await?,
        estimated_monthly_cost: (cost * 100.0).round() / 100.0,
        price_per_gib: settings.jobs.price_per_gib.clone(),
        tables: catalog.table_sizes().await?,
        last_prune: last_run(catalog, crate::services::prune::JOB).await?,
        by_status: catalog.storage_by(HandleDimension::Status).await?,
        by_storage_class: catalog.storage_by(HandleDimension::StorageClass).await?,
        by_profile: catalog.storage_by(HandleDimension::Profile).await?,
        uploads_per_day: catalog.uploads_per_day(first_day_shown(now)).await?,
    })
}

/// Midnight UTC of the first of the [`UPLOAD_DAYS`] days shown.
fn first_day_shown(now: DateTime<Utc>) -> DateTime<Utc> {
    let day = now.date_naive() - chrono::Duration::days(UPLOAD_DAYS - 1);
    day.and_hms_opt(0, 0, 0).map_or(now, |t| t.and_utc())
}
