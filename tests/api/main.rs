//! Integration tests: the real server over HTTP, real presigned uploads to LocalStack's S3 with
//! signature validation on, and real SQLite or PostgreSQL underneath
//! (`UPCOMMIT_TEST_DATABASE=sqlite|postgres`). Run them with `scripts/test.sh`, which starts
//! everything they need.

mod archive_class;
mod bucket;
mod catalog_faults;
mod checksums;
mod cli_upload;
mod clocks;
mod commit;
mod concurrency;
mod copies;
mod crash;
mod demo;
mod durations;
mod edge;
mod events;
mod faults;
mod filenames;
mod helpers;
mod history;
mod http_contract;
mod hygiene;
mod identity;
mod legacy;
mod legacy_import;
mod model;
mod multipart;
mod observability;
mod outages;
mod presign;
mod ranged_listing;
mod readiness;
mod reconcile;
mod replicas;
mod retention;
mod s3_proxy;
mod security_cases;
mod single_use;
mod statuses;
mod sweep;
mod temporary;
mod upload_step;
