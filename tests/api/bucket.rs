//! The live bucket's configuration: `upcommit doctor` (the real binary) on a correct bucket and
//! on each fault, the server's drift watch in `/readyz` (its verdict), `GET /v1/admin/bucket`
//! (its report) and `/metrics`, and
//! `upcommit bucket apply-lifecycle` keeping a foreign rule intact. LocalStack stores lifecycle
//! documents without running them, which is all these checks read.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use aws_sdk_s3::types::{
    BucketVersioningStatus, ExpirationStatus, LifecycleExpiration, LifecycleRule,
    LifecycleRuleAndOperator, LifecycleRuleFilter, NoncurrentVersionExpiration, Tag,
};
use serde_json::Value;
use upcommit::domain::lifecycle::{required_rules, Rule};

use crate::helpers::{
    put_lifecycle, restore_bucket, set_versioning, spawn_app, spawn_app_with, Spawn, TestApp,
};

pub struct CliRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the `upcommit` binary with the test server's environment, less the JWT secret: the
/// operator commands must not need it.
pub fn upcommit(app: &TestApp, args: &[&str]) -> CliRun {
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(args)
        .envs(app.env.iter().filter(|(k, _)| *k != "UPCOMMIT_JWT_SECRET"))
        .env_remove("UPCOMMIT_JWT_SECRET")
        .env("RUST_LOG", "warn")
        .output()
        .expect("run upcommit");
    CliRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `doctor --json`: the exit code and the names of the failed checks.
fn doctor_failures(app: &TestApp) -> (i32, BTreeSet<String>) {
    let run = upcommit(app, &["doctor", "--json"]);
    let body: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor --json printed JSON ({e}): {}{}",
            run.stdout, run.stderr
        )
    });
    let failed: BTreeSet<String> = body["report"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["ok"] == false)
        .map(|r| r["check"].as_str().expect("check name").to_owned())
        .collect();
    assert_eq!(body["ok"] == true, failed.is_empty(), "{body}");
    (run.code, failed)
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn without(id: &str) -> Vec<Rule> {
    required_rules()
        .iter()
        .filter(|r| r.id != id)
        .cloned()
        .collect()
}

fn expiring(id: &str, prefix: &str, days: u32) -> Rule {
    let mut r = Rule::new(id, prefix);
    r.expiration_days = Some(days);
    r.noncurrent_expiration_days = Some(1);
    r
}

/// The faults of the bucket's configuration the checks must name, one at a time.
#[derive(Debug, Clone, Copy)]
enum Fault {
    TmpRuleDeleted,
    NoncurrentExpiryMissing,
    VersioningSuspended,
    ExpiryOverMedia,
    /// A second writer (an image-resize module with its own lifecycle resource) replaced the
    /// whole document with its own rule.
    SecondOwnerOverwrote,
    CorsAndEncryptionRemoved,
}

impl Fault {
    const ALL: [Fault; 6] = [
        Fault::TmpRuleDeleted,
        Fault::NoncurrentExpiryMissing,
        Fault::VersioningSuspended,
        Fault::ExpiryOverMedia,
        Fault::SecondOwnerOverwrote,
        Fault::CorsAndEncryptionRemoved,
    ];

    /// The faults the store under test can hold. Where the bucket is unversioned (Garage, RGW's
    /// unversioned run) there is no versioning to suspend and no noncurrent expiry to need;
    /// where the store implements no encryption document (Garage, RGW 16.2) there is none to
    /// remove: the others are set up everywhere.
    fn possible() -> Vec<Fault> {
        use crate::helpers::gap_accepted;
        Fault::ALL
            .into_iter()
            .filter(|f| match f {
                Fault::VersioningSuspended | Fault::NoncurrentExpiryMissing => {
                    !gap_accepted("versioning")
                }
                Fault::CorsAndEncryptionRemoved => !gap_accepted("encryption_config"),
                _ => true,
            })
            .collect()
    }

    fn failing(self) -> BTreeSet<String> {
        names(match self {
            Fault::TmpRuleDeleted | Fault::SecondOwnerOverwrote => &["lifecycle_required_rules"],
            Fault::NoncurrentExpiryMissing => {
                &["lifecycle_required_rules", "lifecycle_versioned_expiry"]
            }
            Fault::VersioningSuspended => &["versioning"],
            Fault::ExpiryOverMedia => &["lifecycle_final_prefixes"],
            Fault::CorsAndEncryptionRemoved => &["cors", "encryption"],
        })
    }

    async fn apply(self, app: &TestApp) {
        let (s3, bucket) = (&app.s3, app.bucket.as_str());
        match self {
            Fault::TmpRuleDeleted => {
                put_lifecycle(s3, bucket, &without("upcommit-tmp-expire")).await
            }
            Fault::NoncurrentExpiryMissing => {
                let mut rules = required_rules().to_vec();
                for r in &mut rules {
                    r.noncurrent_expiration_days = None;
                }
                put_lifecycle(s3, bucket, &rules).await;
            }
            Fault::VersioningSuspended => {
                set_versioning(s3, bucket, BucketVersioningStatus::Suspended).await;
            }
            Fault::ExpiryOverMedia => {
                let mut rules = required_rules().to_vec();
                rules.push(expiring("expire-old-media", "media/", 365));
                put_lifecycle(s3, bucket, &rules).await;
            }
            Fault::SecondOwnerOverwrote => {
                put_lifecycle(s3, bucket, required_rules()).await;
                put_lifecycle(s3, bucket, &[expiring("resize-cache-expire", "cache/", 30)]).await;
            }
            Fault::CorsAndEncryptionRemoved => {
                s3.delete_bucket_cors()
                    .bucket(bucket)
                    .send()
                    .await
                    .expect("delete CORS");
                s3.delete_bucket_encryption()
                    .bucket(bucket)
                    .send()
                    .await
                    .expect("delete encryption");
            }
        }
    }

    /// Puts the bucket back as infra/ configures it.
    async fn repair(self, app: &TestApp) {
        restore_bucket(&app.s3, &app.bucket).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_passes_on_a_correct_bucket_and_names_each_fault() {
    let app = spawn_app().await;
    assert_eq!(doctor_failures(&app), (0, BTreeSet::new()));
    for fault in Fault::possible() {
        fault.apply(&app).await;
        assert_eq!(doctor_failures(&app), (1, fault.failing()), "{fault:?}");
        fault.repair(&app).await;
        assert_eq!(
            doctor_failures(&app),
            (0, BTreeSet::new()),
            "repaired {fault:?}"
        );
    }
}

/// Another owner's rule meant for huge files only (`ObjectSizeGreaterThan` 1 GiB) over a final
/// prefix. S3 and Garage keep the filter; RGW 16.2 drops it on write, with 200 and no warning,
/// so the rule as the bucket holds it expires every object there (docs/stores.md). `doctor`
/// judges the rule as the store holds it: the check fails on every store, and its words say
/// which of the two rules the bucket holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_size_filtered_rule_over_final_assets_is_judged_as_the_store_holds_it() {
    let app = spawn_app().await;
    let ours = if crate::helpers::gap_accepted("versioning") {
        upcommit::domain::lifecycle::for_unversioned(required_rules())
    } else {
        required_rules().to_vec()
    };
    let mut doc: Vec<LifecycleRule> = ours
        .iter()
        .map(|r| upcommit::storage::sdk_rule(r).expect("rule"))
        .collect();
    doc.push(narrowed_rule(
        "expire-huge-exports",
        LifecycleRuleAndOperator::builder()
            .prefix("media/images/")
            .object_size_greater_than(1 << 30),
    ));
    put_raw_lifecycle(&app, doc).await;
    let held = live_rules(&app).await;
    let held = held
        .iter()
        .find(|r| r.id() == Some("expire-huge-exports"))
        .expect("the foreign rule is held");
    let view = upcommit::storage::rule_view(held);
    assert_eq!(view.prefix, "media/images/", "{held:?}");
    // RGW 16.2 drops it; S3 (LocalStack) and Garage 2.5 keep it (Garage drops tag filters).
    let drops_filters = crate::helpers::store_kind() == "rgw";
    assert_eq!(
        view.narrowed, !drops_filters,
        "the size filter as the store holds it: {held:?}"
    );

    let run = upcommit(&app, &["doctor", "--json"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let body: Value = serde_json::from_str(&run.stdout).expect("doctor --json");
    let failed: Vec<&Value> = body["report"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["ok"] == false)
        .collect();
    let finals = failed
        .iter()
        .find(|r| r["check"] == "lifecycle_final_prefixes")
        .unwrap_or_else(|| panic!("lifecycle_final_prefixes fails: {body}"));
    let detail = finals["detail"].as_str().expect("detail");
    assert!(detail.contains("expire-huge-exports"), "{detail}");
    let words = if drops_filters {
        "every object under \"media/images/\""
    } else {
        "its tag or size filter selects"
    };
    assert!(detail.contains(words), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_text_output_names_the_failed_check_and_its_fix() {
    let app = spawn_app().await;
    let ok = upcommit(&app, &["doctor"]);
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.contains("all 7 checks pass"), "{}", ok.stdout);

    set_versioning(&app.s3, &app.bucket, BucketVersioningStatus::Suspended).await;
    let run = upcommit(&app, &["doctor"]);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("FAIL  versioning"), "{}", run.stdout);
    assert!(
        run.stdout.contains("fix: enable versioning"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("1 of 7 checks failed"),
        "{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_owner_overwriting_the_lifecycle_document_is_caught() {
    let app = spawn_app().await;
    let (s3, bucket) = (&app.s3, app.bucket.as_str());
    // Owner one (the environment) writes every rule; owner two (an image-resize module that
    // declares its own lifecycle resource) later writes only its own rule, with a green apply.
    put_lifecycle(s3, bucket, required_rules()).await;
    put_lifecycle(s3, bucket, &[expiring("resize-cache-expire", "cache/", 30)]).await;

    let run = upcommit(&app, &["doctor", "--json"]);
    assert_eq!(run.code, 1);
    let body: Value = serde_json::from_str(&run.stdout).expect("JSON");
    let required = body["report"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["check"] == "lifecycle_required_rules")
        .expect("the required-rules check")
        .clone();
    assert_eq!(required["ok"], false);
    let detail = required["detail"].as_str().expect("detail");
    // The temporary profiles' tiers (`temp/`) are required only while a profile uses them; a
    // bucket never versioned (Garage) needs no delete-marker rule.
    let needed = if crate::helpers::gap_accepted("versioning") {
        upcommit::domain::lifecycle::for_unversioned(required_rules())
    } else {
        required_rules().to_vec()
    };
    // Nor are the renditions' (`cache/`) without a profile that has variants.
    for rule in needed
        .iter()
        .filter(|r| !r.prefix.starts_with("temp/") && !r.prefix.starts_with("cache/"))
    {
        assert!(
            detail.contains(&rule.id),
            "{} not named in {detail}",
            rule.id
        );
    }
    assert!(required["fix"]
        .as_str()
        .expect("fix")
        .contains("second writer"));
}

const ALL_CHECKS: [&str; 7] = [
    "bucket_reachable",
    "versioning",
    "lifecycle_required_rules",
    "lifecycle_final_prefixes",
    "lifecycle_versioned_expiry",
    "cors",
    "encryption",
];

async fn metric(app: &TestApp, check: &str) -> Option<u8> {
    let text = app
        .http
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("metrics body");
    let needle = format!("upcommit_bucket_check_ok{{check=\"{check}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&needle))
        .map(|v| v.trim().parse().expect("0 or 1"))
}

/// Polls until the metric shows `want` (the watch runs every second in these tests).
async fn wait_for_metric(app: &TestApp, check: &str, want: u8) {
    for _ in 0..100 {
        if metric(app, check).await == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("metric {check} never became {want}");
}

async fn readyz(app: &TestApp) -> (u16, Value) {
    let r = app
        .http
        .get(format!("{}/readyz", app.address))
        .send()
        .await
        .expect("readyz");
    (r.status().as_u16(), r.json().await.expect("JSON"))
}

/// The watch's report and verdict as an admin reads them (`GET /v1/admin/bucket`): `/readyz`
/// says only the verdict, to anyone (issue 35).
async fn bucket_view(app: &TestApp) -> Value {
    let r = app
        .get("/v1/admin/bucket", Some(&app.admin_token("root")))
        .await;
    assert_eq!(r.status(), 200);
    r.json().await.expect("JSON")
}

fn failed_in(view: &Value) -> BTreeSet<String> {
    view["report"]["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["ok"] == false)
        .map(|r| r["check"].as_str().expect("name").to_owned())
        .collect()
}

/// Polls the admin view until the watch reports exactly `want` as failing (it runs every second
/// in these tests), then returns `/readyz`'s answer.
async fn wait_for_failing(app: &TestApp, want: &BTreeSet<String>) -> Value {
    let mut last = Value::Null;
    for _ in 0..100 {
        let view = bucket_view(app).await;
        if view["report"].is_object() && &failed_in(&view) == want {
            return readyz(app).await.1;
        }
        last = view;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the watch never reported {want:?} failing; last view: {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_watch_reports_each_fault_in_the_admin_view_readiness_and_metrics() {
    let app = spawn_app_with(Spawn {
        env: vec![("UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS", "1".into())],
        ..Spawn::default()
    })
    .await;
    let body = wait_for_failing(&app, &BTreeSet::new()).await;
    assert_eq!(body["checks"]["bucket_config"], "ok");
    for check in ALL_CHECKS {
        assert_eq!(metric(&app, check).await, Some(1), "{check}");
    }

    for fault in Fault::possible() {
        fault.apply(&app).await;
        let body = wait_for_failing(&app, &fault.failing()).await;
        assert_eq!(body["status"], "ready", "reporting only by default: {body}");
        assert_eq!(body["checks"]["bucket_config"], "failing");
        for check in ALL_CHECKS {
            let want = u8::from(!fault.failing().contains(check));
            assert_eq!(metric(&app, check).await, Some(want), "{fault:?}: {check}");
        }
        fault.repair(&app).await;
        wait_for_failing(&app, &BTreeSet::new()).await;
    }

    // Each fault was announced as an event when it started failing: the checks it names are
    // exactly the faults' failing checks, none invented.
    let alarms: Vec<Value> = crate::history::all_events(&app)
        .await
        .into_iter()
        .filter(|e| e["type"] == "bucket.check_failed")
        .collect();
    assert!(alarms.len() >= Fault::possible().len(), "{alarms:#?}");
    let named: BTreeSet<String> = alarms
        .iter()
        .flat_map(|e| e["data"]["checks"].as_array().expect("checks").clone())
        .map(|c| c["check"].as_str().expect("check name").to_owned())
        .collect();
    let failed: BTreeSet<String> = Fault::possible().iter().flat_map(|f| f.failing()).collect();
    assert_eq!(named, failed);
    assert!(alarms
        .iter()
        .all(|e| e["data"]["bucket"] == app.bucket.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_bucket_check_fails_readiness_when_configured_to() {
    let app = spawn_app_with(Spawn {
        env: vec![
            ("UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS", "1".into()),
            ("UPCOMMIT_BUCKET_CHECK_FAILS_READINESS", "true".into()),
        ],
        ..Spawn::default()
    })
    .await;
    wait_for_metric(&app, "versioning", 1).await;
    assert_eq!(readyz(&app).await.0, 200);

    set_versioning(&app.s3, &app.bucket, BucketVersioningStatus::Suspended).await;
    wait_for_metric(&app, "versioning", 0).await;
    let (status, body) = readyz(&app).await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["code"], "not_ready");
    assert_eq!(body["checks"]["bucket_config"], "failing");
    assert_eq!(body["checks"]["database"], "ok");
    assert_eq!(failed_in(&bucket_view(&app).await), names(&["versioning"]));
}

/// A foreign rule with a tag filter, which upcommit's own rule model does not represent: it must
/// come back byte for byte.
fn foreign_rule() -> LifecycleRule {
    narrowed_rule(
        "thumbnailer-expire",
        LifecycleRuleAndOperator::builder().prefix("thumbs/").tags(
            Tag::builder()
                .key("kind")
                .value("thumbnail")
                .build()
                .expect("tag"),
        ),
    )
}

/// Another owner's rule `id`: expire after 30 days (noncurrent versions after one) what the
/// filter `and` selects.
fn narrowed_rule(
    id: &str,
    and: aws_sdk_s3::types::builders::LifecycleRuleAndOperatorBuilder,
) -> LifecycleRule {
    LifecycleRule::builder()
        .id(id)
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().and(and.build()).build())
        .expiration(LifecycleExpiration::builder().days(30).build())
        .noncurrent_version_expiration(
            NoncurrentVersionExpiration::builder()
                .noncurrent_days(1)
                .build(),
        )
        .build()
        .expect("foreign rule")
}

/// Replaces the bucket's lifecycle document with `rules` as written (another owner's rules,
/// filters included).
async fn put_raw_lifecycle(app: &TestApp, rules: Vec<LifecycleRule>) {
    app.s3
        .put_bucket_lifecycle_configuration()
        .bucket(&app.bucket)
        .lifecycle_configuration(
            aws_sdk_s3::types::BucketLifecycleConfiguration::builder()
                .set_rules(Some(rules))
                .build()
                .expect("document"),
        )
        .send()
        .await
        .expect("put lifecycle");
}

async fn live_rules(app: &TestApp) -> Vec<LifecycleRule> {
    app.s3
        .get_bucket_lifecycle_configuration()
        .bucket(&app.bucket)
        .send()
        .await
        .expect("get lifecycle")
        .rules()
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_lifecycle_plans_then_writes_our_rules_and_keeps_a_foreign_rule_intact() {
    let app = spawn_app().await;
    let mut outdated = required_rules()[0].clone();
    assert_eq!(outdated.id, "upcommit-tmp-expire");
    outdated.expiration_days = Some(30);
    let mut doc = vec![foreign_rule()];
    doc.push(upcommit::storage::sdk_rule(&outdated).expect("rule"));
    put_raw_lifecycle(&app, doc).await;
    let before = live_rules(&app).await;
    // The foreign rule as the store holds it. S3 (LocalStack) keeps it as written; Garage 2.5
    // keeps only its prefix and its expiration days: the tag filter and the noncurrent
    // expiration are dropped on write, without an error, so the rule reaches every object
    // under `thumbs/` (docs/stores.md). Either way apply-lifecycle must keep it as it found it.
    let stored_foreign: Vec<LifecycleRule> = before
        .iter()
        .filter(|r| r.id() == Some("thumbnailer-expire"))
        .cloned()
        .collect();
    if crate::helpers::store_kind() == "rgw" {
        // RGW 16.2 hands the rule back with its prefix and tag side by side in the filter,
        // without the `And` it was written with: the same rule, in a form of its own.
        assert_eq!(stored_foreign.len(), 1);
        let filter = stored_foreign[0].filter().expect("filter");
        assert_eq!(filter.prefix(), Some("thumbs/"), "{stored_foreign:?}");
        assert_eq!(
            filter.tag().map(|t| (t.key(), t.value())),
            Some(("kind", "thumbnail")),
            "{stored_foreign:?}"
        );
        assert!(upcommit::storage::rule_view(&stored_foreign[0]).narrowed);
    } else if crate::helpers::store_kind() == "garage" {
        assert_eq!(stored_foreign.len(), 1);
        let filter = stored_foreign[0].filter().expect("filter");
        assert_eq!(filter.prefix(), Some("thumbs/"), "{stored_foreign:?}");
        assert!(
            filter.and().is_none() && filter.tag().is_none(),
            "{stored_foreign:?}"
        );
        assert!(stored_foreign[0].noncurrent_version_expiration().is_none());
    } else {
        assert_eq!(stored_foreign, vec![foreign_rule()]);
    }
    // On a store without versioning, apply-lifecycle writes the rules such a bucket needs.
    let ours = if crate::helpers::gap_accepted("versioning") {
        upcommit::domain::lifecycle::for_unversioned(required_rules())
    } else {
        required_rules().to_vec()
    };

    let usage = upcommit(&app, &["bucket", "apply-lifecycle"]);
    assert_eq!(
        usage.code, 2,
        "neither --dry-run nor --yes is a usage error"
    );

    let dry = upcommit(&app, &["bucket", "apply-lifecycle", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}{}", dry.stdout, dry.stderr);
    assert!(
        dry.stdout.contains("~ upcommit-tmp-expire"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains(r#""expiration_days":30"#),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("+ upcommit-abort-incomplete-multipart"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("keep thumbnailer-expire"),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("dry run: nothing written"),
        "{}",
        dry.stdout
    );
    assert!(!dry.stdout.contains("warning"), "{}", dry.stdout);
    assert_eq!(live_rules(&app).await, before, "a dry run writes nothing");
    assert_eq!(doctor_failures(&app).0, 1);

    let run = upcommit(&app, &["bucket", "apply-lifecycle", "--yes"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("written and read back"),
        "{}",
        run.stdout
    );
    let after = live_rules(&app).await;
    let kept: Vec<&LifecycleRule> = after
        .iter()
        .filter(|r| r.id() == Some("thumbnailer-expire"))
        .collect();
    assert_eq!(
        kept,
        stored_foreign.iter().collect::<Vec<_>>(),
        "the foreign rule is intact"
    );
    assert_eq!(after.len(), 1 + ours.len());
    assert_eq!(doctor_failures(&app), (0, BTreeSet::new()));

    let again = upcommit(&app, &["bucket", "apply-lifecycle", "--yes"]);
    assert_eq!(again.code, 0);
    assert!(
        again.stdout.contains("nothing to change"),
        "{}",
        again.stdout
    );
}
