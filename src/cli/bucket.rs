//! `upcommit doctor` and `upcommit bucket apply-lifecycle`: the operator's view of the live
//! bucket. Both read the bucket through the S3 API with the service's own settings.

use crate::config::Settings;
use crate::domain::lifecycle::required_rules;
use crate::services::{apply_lifecycle, bucket_watch};
use crate::storage::S3Store;

/// Exit codes: 0 every check passed, 1 a check failed, 2 cannot start.
pub async fn doctor(settings: &Settings, json: bool) -> i32 {
    let store = match S3Store::connect(&settings.s3).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("upcommit doctor: {e}");
            return 2;
        }
    };
    let report = bucket_watch::check(&store, &settings.bucket_expectations()).await;
    if json {
        let body = serde_json::json!({ "ok": report.ok(), "report": report });
        println!("{body:#}");
    } else {
        println!("upcommit doctor: bucket {}", report.bucket);
        for r in &report.results {
            let mark = if r.ok { "ok  " } else { "FAIL" };
            println!("  {mark}  {:<28} {}", r.check.name(), r.detail);
            if let Some(fix) = &r.fix {
                println!("        {:<28} fix: {fix}", "");
            }
        }
        let failed = report.failed().len();
        if failed == 0 {
            println!("all {} checks pass", report.results.len());
        } else {
            println!("{failed} of {} checks failed", report.results.len());
        }
    }
    i32::from(!report.ok())
}

/// Exit codes: 0 planned (dry run) or written and verified, 1 S3 refused or the read-back
/// differs, 2 cannot start.
pub async fn apply_lifecycle(settings: &Settings, write: bool) -> i32 {
    let store = match S3Store::connect(&settings.s3).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("upcommit bucket apply-lifecycle: {e}");
            return 2;
        }
    };
    let finals = settings.bucket_expectations().final_prefixes;
    match apply_lifecycle::apply(&store, required_rules(), &finals, write).await {
        Ok(outcome) => {
            println!(
                "lifecycle document of bucket {}: {} rules of ours, {} foreign rule(s) kept",
                settings.s3.bucket,
                outcome.plan.changes.len(),
                outcome.plan.foreign.len()
            );
            print!("{}", apply_lifecycle::render(&outcome.plan));
            for w in &outcome.warnings {
                println!("warning: {w}");
            }
            if !outcome.plan.writes() {
                println!("nothing to change");
            } else if outcome.written {
                println!(
                    "written and read back: every rule of ours and every foreign rule is there"
                );
            } else {
                println!("dry run: nothing written; run with --yes to write the whole document");
            }
            0
        }
        Err(e) => {
            eprintln!("upcommit bucket apply-lifecycle: {e}");
            1
        }
    }
}
