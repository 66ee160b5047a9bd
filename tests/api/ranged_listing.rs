//! Reconcile's parallel listing against the real bucket: the keys, their order and the findings
//! are those of one sequential listing, with keys planted exactly on the ranges' boundaries
//! and just past them.

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;
use upcommit::config::Settings;
use upcommit::domain::key_ranges::{split_rest, KeyRange};
use upcommit::services::bucket_source::{BucketSource, ListingSource};
use upcommit::services::ranged_listing::RangedListing;
use upcommit::services::reconcile::{
    reconcile, ReconcileOptions, ReconcileOutcome, ReconcileSummary,
};
use upcommit::storage::{ObjectStore, S3Store};

use crate::helpers::{media, spawn_app, TestApp};
use crate::reconcile::{keys, reconcile_cli};

/// Keys per page of the parallel listing here: small, so a few dozen keys make many ranges.
const PAGE: i32 = 5;
const WORKERS: usize = 8;

async fn store(app: &TestApp) -> Arc<dyn ObjectStore> {
    let settings = Settings::from_map(&app.env).expect("settings");
    Arc::new(S3Store::connect(&settings.s3).await.expect("store"))
}

async fn drain(mut source: Box<dyn BucketSource>) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(page) = source.next_page().await.expect("page") {
        out.extend(page.into_iter().map(|k| k.key));
    }
    out
}

async fn run(app: &TestApp, source: Box<dyn BucketSource>) -> (ReconcileSummary, Vec<Value>) {
    let settings = Settings::from_map(&app.env).expect("settings");
    let options = ReconcileOptions {
        grace: chrono::Duration::zero(),
        quarantine: false,
        quarantine_stray: false,
        workers: 1,
        inventory_taken_at: None,
        remove_orphan_renditions: false,
    };
    let store = store(app).await;
    match reconcile(&app.catalog, &store, &settings, &options, Some(source))
        .await
        .expect("reconcile")
    {
        ReconcileOutcome::Ran { run, summary } => {
            let items = app.catalog.job_items(&run.id).await.expect("items");
            let mut items: Vec<Value> = items
                .iter()
                .map(|i| serde_json::json!([i.action, i.key, i.bytes]))
                .collect();
            items.sort_by_key(|v| v.to_string());
            (*summary, items)
        }
        ReconcileOutcome::Busy => panic!("busy"),
    }
}

/// A cluster of keys like the service's (UUID v7 ids share their time prefix), stray and odd
/// keys around it.
fn planted() -> Vec<String> {
    let mut keys: Vec<String> = (0..40)
        .map(|i| format!("media/images/019ad3f2{:04x}7000a{i:03}/x.png", i * 37))
        .collect();
    keys.extend(
        [
            "n-stray.txt",
            "media/images/019ad3f3/",
            "media/images/019ad3f3 x.png",
            "media/images/019ad3f2~.png",
            "media/images/é.png",
            "media/images2/x.png",
            "media/recordings/019ad3f30001/a.mp3",
            "tmp/2026/12/01/019ad3f2000000/x.png",
            "zzz",
        ]
        .map(str::to_owned),
    );
    keys
}

#[tokio::test]
async fn a_parallel_listing_yields_the_sequential_listings_keys_and_findings() {
    let app = spawn_app().await;
    let token = app.token("alice");
    let (_, kept) = app
        .upload_and_commit(&token, "image", "image/png", 300)
        .await;
    let (_, lost) = app
        .upload_and_commit(&token, "image", "image/png", 300)
        .await;
    let lost = lost["key"].as_str().expect("key").to_owned();
    let kept = kept["key"].as_str().expect("key").to_owned();
    let mut all: BTreeSet<String> = planted().into_iter().collect();
    all.insert(kept.clone());
    // The first page of the parallel listing is the first PAGE keys; the ranges its rest is cut
    // into are known before listing: plant keys exactly on those boundaries and just past them
    // (planting after the first page leaves that page, and so the cut, unchanged).
    let sorted: Vec<&String> = all.iter().collect();
    let first_page = &sorted[..PAGE as usize];
    let cuts = split_rest(
        &KeyRange::from(None),
        first_page[0],
        first_page[PAGE as usize - 1],
        WORKERS,
    );
    assert!(cuts.len() > 2, "the first page's rest is cut: {cuts:?}");
    let mut on_boundaries = Vec::new();
    for c in &cuts[..cuts.len() - 1] {
        let b = c.through.clone().expect("bounded");
        on_boundaries.push(b.clone());
        on_boundaries.push(format!("{b}0"));
    }
    all.extend(on_boundaries.iter().cloned());
    for k in all.iter().filter(|k| **k != kept) {
        app.put_object(k, media("image/png", 40), "image/png").await;
    }
    app.lose_object(&lost).await;
    let store = store(&app).await;

    // The bucket also holds the two uploads' tmp objects.
    let expected = drain(Box::new(ListingSource::new(store.clone(), None))).await;
    assert_eq!(expected.len(), all.len() + 2);
    assert!(all.iter().all(|k| expected.contains(k)));
    let mut bytes_sorted = expected.clone();
    bytes_sorted.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_eq!(bytes_sorted, expected, "S3's byte order");
    let mut parallel = RangedListing::new(store.clone(), WORKERS, PAGE, None);
    let mut got = Vec::new();
    while let Some(page) = parallel.next_page().await.expect("page") {
        assert!(page.len() <= PAGE as usize);
        got.extend(page.into_iter().map(|k| k.key));
    }
    assert_eq!(got, expected, "the same keys in the same order");
    assert!(
        parallel.requests > (expected.len() / PAGE as usize) as u64,
        "listed in many ranges: {} calls",
        parallel.requests
    );
    // From a checkpoint on a boundary: exactly what follows it.
    let from = on_boundaries[0].clone();
    let resumed = drain(Box::new(RangedListing::new(
        store.clone(),
        WORKERS,
        PAGE,
        Some(from.clone()),
    )))
    .await;
    let after: Vec<String> = expected
        .iter()
        .filter(|k| k.as_bytes() > from.as_bytes())
        .cloned()
        .collect();
    assert_eq!(resumed, after);

    let (one, one_items) = run(&app, Box::new(ListingSource::new(store.clone(), None))).await;
    let (many, many_items) = run(
        &app,
        Box::new(RangedListing::new(store.clone(), WORKERS, PAGE, None)),
    )
    .await;
    assert_eq!(one_items, many_items, "the same findings");
    assert!(one.missing == 1 && one.matched == 1, "{one:?}");
    assert!(one.unindexed > 0 && one.stray > 0, "{one:?}");
    for (a, b) in [
        (one.keys_listed, many.keys_listed),
        (one.handles_read, many.handles_read),
        (one.matched, many.matched),
        (one.unindexed, many.unindexed),
        (one.unindexed_bytes, many.unindexed_bytes),
        (one.missing, many.missing),
        (one.stray, many.stray),
        (one.tmp_past_lifecycle, many.tmp_past_lifecycle),
    ] {
        assert_eq!(a, b, "{one:?} / {many:?}");
    }

    // The command line with 8 workers reports what it does with 1.
    let cli_one = reconcile_cli(&app, &["--workers", "1"]);
    let cli_many = reconcile_cli(&app, &["--workers", "8"]);
    assert_eq!(cli_many.body["summary"]["list_workers"], 8);
    for action in ["unindexed", "missing", "stray", "tmp_past_lifecycle"] {
        assert_eq!(
            keys(&cli_one.body, action),
            keys(&cli_many.body, action),
            "{action}"
        );
    }
    assert_eq!(cli_one.code, cli_many.code);
}
