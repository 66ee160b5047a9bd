//! `upcommit doctor` and `upcommit bucket apply-lifecycle`: the operator's view of the live
//! bucket. Both read the bucket through the S3 API with the service's own settings.

use crate::config::Settings;
use crate::domain::capabilities::{Finding, Standing, Verdict};
use crate::domain::lifecycle::required_rules;
use crate::services::apply_lifecycle;
use crate::state::bucket_watch;
use crate::storage::{ObjectStore as _, S3Store};

/// Exit codes: 0 every check passed and the store has what the promises need (or the gap is
/// accepted), 1 a check failed or a gap is not accepted, 2 cannot start.
pub async fn doctor(settings: &Settings, json: bool) -> i32 {
    let store = match S3Store::connect(&settings.s3).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("upcommit doctor: {e}");
            return 2;
        }
    };
    // One probe: every line is shown, refused ones included.
    let verdict = crate::startup::store_verdict(settings, &store).await;
    let report = bucket_watch::check(&store, &settings.bucket_expectations_for(&verdict)).await;
    let ok = report.ok() && verdict.may_start();
    if json {
        let body = serde_json::json!({ "ok": ok, "report": report, "store": verdict });
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
        print!("{}", render_verdict(&verdict));
    }
    i32::from(!ok)
}

/// One line per capability: its standing, what it guards and, when missing, what the server
/// does without it.
fn render_verdict(verdict: &Verdict) -> String {
    let mut out =
        String::from("store capabilities (probed under a fresh tmp/ prefix, then removed):\n");
    for l in &verdict.lines {
        let mark = match l.standing {
            Standing::Present => "ok  ",
            Standing::NotNeeded => "n/a ",
            Standing::Accepted => "GAP ",
            Standing::Refused => "FAIL",
        };
        out.push_str(&format!(
            "  {mark}  {:<28} guards: {}\n",
            l.capability.name(),
            l.promise
        ));
        if l.finding != Finding::Present {
            out.push_str(&format!("        {:<28} {}\n", "", l.finding));
        }
        match l.standing {
            Standing::Accepted => out.push_str(&format!("        {:<28} accepted, so: {}\n", "", l.without.unwrap_or(""))),
            Standing::Refused => out.push_str(&format!(
                "        {:<28} serve refuses to start; to accept: add {} to UPCOMMIT_ACCEPT_STORE_GAPS ({})\n",
                "",
                l.capability.name(),
                l.without.unwrap_or("")
            )),
            Standing::Present | Standing::NotNeeded => {}
        }
    }
    let refused = verdict.refused();
    let accepted = verdict.accepted();
    if refused.is_empty() && accepted.is_empty() {
        out.push_str("the store has every capability upcommit's promises need\n");
    } else {
        if !accepted.is_empty() {
            out.push_str(&format!(
                "{} gap(s) accepted: {}\n",
                accepted.len(),
                accepted
                    .iter()
                    .map(|c| c.name())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if !refused.is_empty() {
            out.push_str(&format!(
                "{} gap(s) not accepted, serve refuses to start: UPCOMMIT_ACCEPT_STORE_GAPS={}\n",
                refused.len(),
                refused
                    .iter()
                    .chain(accepted.iter())
                    .map(|c| c.name())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
    }
    out
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
    // A bucket never versioned holds no noncurrent version or delete marker: the rules are
    // written without those elements, which stores without versioning (Garage) refuse.
    let unversioned = matches!(
        store.bucket_view().await.versioning,
        Ok(crate::domain::bucket_check::Versioning::Never)
    );
    let ours = if unversioned {
        println!("the bucket was never versioned: writing the rules without noncurrent-version and delete-marker elements");
        crate::domain::lifecycle::for_unversioned(required_rules())
    } else {
        required_rules().to_vec()
    };
    match apply_lifecycle::apply(&store, &ours, &finals, write, unversioned).await {
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
