//! Integration tests: the real server over HTTP, real presigned uploads to LocalStack's S3 with
//! signature validation on, and real SQLite or PostgreSQL underneath
//! (`UPCOMMIT_TEST_DATABASE=sqlite|postgres`). Run them with `scripts/test.sh`, which starts
//! everything they need.
//!
//! A test that blocks its thread (runs the binary with `std::process::Command`, waits on a
//! child) runs on a multi-thread runtime: the server it spawned shares the test's runtime, and
//! on a current-thread runtime a blocked test would freeze the server mid-transaction — on
//! SQLite with the database's write lock held, so the child process waits for it in vain.

/// A test server's store wrapper that reuses an earlier server's whole probe under `key`
/// (faults::Faults::probe_cache_key): what `helpers::spawn_app_with` puts around the store of
/// every server started without a wrapper of its own.
pub fn probe_once(key: &str) -> Option<helpers::StoreWrapper> {
    let faults = std::sync::Arc::new(faults::Faults::default());
    *faults.probe_cache_key.lock().expect("lock") = Some(key.to_owned());
    Some(faults::faulty_store(faults))
}

mod admin_api;
mod alert_rules;
mod archive_class;
mod bucket;
mod catalog_faults;
mod ceph_cluster;
mod checksums;
mod cli_upload;
mod clocks;
mod commit;
mod concurrency;
mod copies;
mod copy_guard;
mod crash;
mod demo;
mod durations;
mod edge;
mod events;
mod events_feed;
mod faults;
mod filenames;
mod garage_cluster;
mod heif_parts;
mod helpers;
mod history;
mod http_contract;
mod hygiene;
mod hygiene_copies;
mod identity;
mod images;
mod job_faults;
mod job_panics;
mod legacy;
mod legacy_import;
mod link_scan_retention;
mod model;
mod model_scans;
mod multipart;
mod observability;
mod outages;
mod presign;
mod ranged_listing;
mod readiness;
mod reconcile;
mod render_corpus;
mod render_jail;
mod rendition_batch;
mod rendition_webp;
mod renditions;
mod replicas;
mod retention;
mod s3_proxy;
mod security_cases;
mod settings_bounds;
mod single_use;
mod sqs_sink;
mod statuses;
mod store_capabilities;
mod sweep;
mod table_retention;
mod temporary;
mod tracing;
mod upload_step;
mod validation_hook;
