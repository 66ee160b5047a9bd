//! Judging a live bucket's configuration: what the storage layer read (a [`BucketView`]) against
//! what the service needs (an [`Expectations`]), one named [`Check`] at a time. Pure: `doctor`,
//! the server's drift watch and the tests all call [`evaluate`] on data read elsewhere.

use serde::Serialize;

use std::collections::BTreeSet;

use super::capabilities::Capability;
use super::lifecycle::{self, Problem, Rule};

/// Where the fix for a bucket-configuration finding lives.
const FIX_OWNER: &str = "the document's one owner: terraform apply in infra/envs/<env>, or `upcommit bucket apply-lifecycle --yes` where terraform does not manage the bucket";

/// The bucket's versioning state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Versioning {
    Enabled,
    Suspended,
    /// Versioning was never turned on.
    Never,
}

/// One CORS rule as S3 holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorsRule {
    pub allowed_origins: Vec<String>,
    pub allowed_methods: Vec<String>,
    pub allowed_headers: Vec<String>,
    pub expose_headers: Vec<String>,
}

/// What the storage layer read from the live bucket; each part may have failed on its own
/// (an error message then stands in its place).
#[derive(Debug, Clone)]
pub struct BucketView {
    pub reachable: Result<(), String>,
    pub versioning: Result<Versioning, ReadError>,
    /// Empty when the bucket has no lifecycle configuration at all.
    pub lifecycle: Result<Vec<Rule>, ReadError>,
    /// Empty when the bucket has no CORS configuration.
    pub cors: Result<Vec<CorsRule>, ReadError>,
    /// Default-encryption algorithms (`AES256`, `aws:kms`, …); empty when none is set.
    pub encryption: Result<Vec<String>, ReadError>,
}

/// Why a bucket configuration could not be read: each calls for a different fix (issue 36:
/// a store that answered with something else was told to grant a permission).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// The store does not implement that configuration (Garage's 501; RGW 16.2's 200 with the
    /// bucket listing for a body): what it answered.
    NotImplemented(String),
    /// Refused for a missing permission (403).
    Denied(String),
    /// Any other failure (an outage, a timeout): what happened.
    Failed(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::NotImplemented(what) => {
                write!(f, "the store does not implement it ({what})")
            }
            ReadError::Denied(what) => write!(f, "access denied ({what})"),
            ReadError::Failed(what) => f.write_str(what),
        }
    }
}

impl ReadError {
    /// The fix for a configuration (`what`) that could not be read: the permission to grant
    /// only where the store refused for one (review of issue 36: a store answering with
    /// something else, or not at all, was told to grant it).
    fn fix(&self, what: &str, permission: &str) -> String {
        match self {
            ReadError::Denied(_) => format!("grant {permission}"),
            ReadError::NotImplemented(_) => format!(
                "no permission fixes this: the store does not implement the {what}, which upcommit needs (docs/stores.md)"
            ),
            ReadError::Failed(_) => {
                "run doctor again once the store answers (UPCOMMIT_S3_ENDPOINT, the store's health)"
                    .to_owned()
            }
        }
    }
}

/// What the service needs from its bucket.
#[derive(Debug, Clone)]
pub struct Expectations {
    pub required_rules: Vec<Rule>,
    /// Prefixes holding final assets, which no rule may expire.
    pub final_prefixes: Vec<String>,
    /// Temporary tiers in use (`temp/<N>d/`, N): no rule may expire them sooner than N days.
    pub temporary_tiers: Vec<(String, u32)>,
    /// Browser origins that upload straight to the bucket.
    pub cors_origins: Vec<String>,
    /// Store capabilities the server runs without (missing, and accepted by name): the checks
    /// judge the bucket by what the store is, not by what it cannot be.
    pub accepted_gaps: BTreeSet<Capability>,
}

/// The checks, by stable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    BucketReachable,
    Versioning,
    LifecycleRequiredRules,
    LifecycleFinalPrefixes,
    LifecycleVersionedExpiry,
    Cors,
    Encryption,
}

impl Check {
    pub const ALL: [Check; 7] = [
        Check::BucketReachable,
        Check::Versioning,
        Check::LifecycleRequiredRules,
        Check::LifecycleFinalPrefixes,
        Check::LifecycleVersionedExpiry,
        Check::Cors,
        Check::Encryption,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Check::BucketReachable => "bucket_reachable",
            Check::Versioning => "versioning",
            Check::LifecycleRequiredRules => "lifecycle_required_rules",
            Check::LifecycleFinalPrefixes => "lifecycle_final_prefixes",
            Check::LifecycleVersionedExpiry => "lifecycle_versioned_expiry",
            Check::Cors => "cors",
            Check::Encryption => "encryption",
        }
    }
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckResult {
    pub check: Check,
    pub ok: bool,
    pub detail: String,
    /// How to fix it, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl CheckResult {
    fn pass(check: Check, detail: impl Into<String>) -> Self {
        Self {
            check,
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fail(check: Check, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            check,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Runs every check, in [`Check::ALL`] order.
pub fn evaluate(view: &BucketView, want: &Expectations) -> Vec<CheckResult> {
    // No noncurrent version or delete marker can exist on a bucket never versioned: the rules
    // are judged without those elements there (and the versioning check says why it is so).
    let unversioned = matches!(view.versioning, Ok(Versioning::Never));
    let required = if unversioned {
        lifecycle::for_unversioned(&want.required_rules)
    } else {
        want.required_rules.clone()
    };
    vec![
        reachable(view),
        versioning(view, want.accepted_gaps.contains(&Capability::Versioning)),
        lifecycle_check(view, Check::LifecycleRequiredRules, |rules| {
            lifecycle::missing_required(rules, &required)
        }),
        lifecycle_check(view, Check::LifecycleFinalPrefixes, |rules| {
            let mut problems = lifecycle::expiring_over_final(rules, &want.final_prefixes);
            problems.extend(lifecycle::expiring_before_ttl(rules, &want.temporary_tiers));
            problems
        }),
        if unversioned {
            CheckResult::pass(
                Check::LifecycleVersionedExpiry,
                "the bucket was never versioned: there are no noncurrent versions to expire",
            )
        } else {
            lifecycle_check(
                view,
                Check::LifecycleVersionedExpiry,
                lifecycle::unpaired_expiry,
            )
        },
        cors(view, &want.cors_origins),
        encryption(
            view,
            want.accepted_gaps.contains(&Capability::EncryptionConfig),
        ),
    ]
}

fn reachable(view: &BucketView) -> CheckResult {
    match &view.reachable {
        Ok(()) => CheckResult::pass(Check::BucketReachable, "the bucket answers"),
        Err(e) => CheckResult::fail(
            Check::BucketReachable,
            format!("the bucket does not answer: {e}"),
            "check UPCOMMIT_BUCKET, UPCOMMIT_S3_ENDPOINT, the region and the credentials; the service needs s3:ListBucket and the Get*Configuration permissions on the bucket",
        ),
    }
}

fn versioning(view: &BucketView, gap_accepted: bool) -> CheckResult {
    if gap_accepted && matches!(view.versioning, Ok(Versioning::Never) | Err(_)) {
        return CheckResult::pass(
            Check::Versioning,
            "the store keeps no versions; the gap `versioning` is accepted: unversioned semantics (docs/stores.md)",
        );
    }
    let fix = "enable versioning on the bucket (module upload-bucket in infra/, or aws s3api put-bucket-versioning --versioning-configuration Status=Enabled)";
    match &view.versioning {
        Ok(Versioning::Enabled) => CheckResult::pass(Check::Versioning, "versioning is enabled"),
        Ok(Versioning::Suspended) => {
            CheckResult::fail(Check::Versioning, "versioning is suspended", fix)
        }
        Ok(Versioning::Never) => {
            CheckResult::fail(Check::Versioning, "versioning was never enabled", fix)
        }
        Err(e) => CheckResult::fail(
            Check::Versioning,
            format!("cannot read versioning: {e}"),
            e.fix("versioning configuration", "s3:GetBucketVersioning"),
        ),
    }
}

fn lifecycle_check(
    view: &BucketView,
    check: Check,
    find: impl Fn(&[Rule]) -> Vec<Problem>,
) -> CheckResult {
    let rules = match &view.lifecycle {
        Ok(rules) => rules,
        Err(e) => {
            return CheckResult::fail(
                check,
                format!("cannot read the lifecycle configuration: {e}"),
                e.fix("lifecycle configuration", "s3:GetLifecycleConfiguration"),
            )
        }
    };
    let problems = find(rules);
    if problems.is_empty() {
        let detail = match check {
            Check::LifecycleRequiredRules => "every required rule is present",
            Check::LifecycleFinalPrefixes => "no rule expires final assets",
            _ => "every expiring rule also expires noncurrent versions",
        };
        return CheckResult::pass(check, format!("{detail} ({} rules live)", rules.len()));
    }
    let detail = problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let fix = match check {
        Check::LifecycleRequiredRules => format!(
            "restore the rules of infra/lifecycle-rules.json through {FIX_OWNER}; if they were there before, a second writer replaced the document: find it (docs/operations.md, one owner per document)"
        ),
        Check::LifecycleFinalPrefixes => "remove the rule or narrow its prefix so it never reaches final assets, through the document's one owner".to_owned(),
        _ => "add a noncurrent-version expiration covering the same prefix (noncurrent_expiration_days in the rules data), through the document's one owner".to_owned(),
    };
    CheckResult::fail(check, detail, fix)
}

fn cors(view: &BucketView, origins: &[String]) -> CheckResult {
    let rules = match &view.cors {
        Ok(rules) => rules,
        Err(e) => {
            return CheckResult::fail(
                Check::Cors,
                format!("cannot read the CORS configuration: {e}"),
                e.fix("CORS configuration", "s3:GetBucketCORS"),
            )
        }
    };
    if origins.is_empty() {
        return CheckResult::pass(
            Check::Cors,
            "no browser origins configured (UPCOMMIT_CORS_ORIGINS); nothing to check",
        );
    }
    let lacking: Vec<String> = origins
        .iter()
        .filter(|o| !rules.iter().any(|r| cors_rule_serves(r, o)))
        .cloned()
        .collect();
    if lacking.is_empty() {
        CheckResult::pass(
            Check::Cors,
            format!("browser uploads allowed from {}", origins.join(", ")),
        )
    } else {
        CheckResult::fail(
            Check::Cors,
            format!(
                "no CORS rule lets {} upload: each needs methods PUT and POST, headers {} (or *), and ETag exposed",
                lacking.join(", "),
                UPLOAD_HEADERS.join(", ")
            ),
            "add the origins to cors_allowed_origins of module upload-bucket in infra/envs/<env> (whose rule allows these headers)",
        )
    }
}

/// The request headers a browser sends to S3 with a presigned PUT or part URL: Content-Type and
/// If-None-Match, and the checksum headers (value and algorithm) when the upload declared one.
const UPLOAD_HEADERS: [&str; 6] = [
    "content-type",
    "if-none-match",
    "x-amz-checksum-sha256",
    "x-amz-checksum-crc32c",
    "x-amz-checksum-crc64nvme",
    "x-amz-sdk-checksum-algorithm",
];

/// A rule serves an origin when a browser there can send our presigned PUT (with its signed
/// headers, checksums included) and POST, and read the ETag of the answer.
fn cors_rule_serves(rule: &CorsRule, origin: &str) -> bool {
    let has = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x.eq_ignore_ascii_case(v));
    let origin_ok = rule
        .allowed_origins
        .iter()
        .any(|o| o == "*" || o.trim_end_matches('/') == origin.trim_end_matches('/'));
    origin_ok
        && ["PUT", "POST"].iter().all(|m| {
            rule.allowed_methods
                .iter()
                .any(|x| x.eq_ignore_ascii_case(m))
        })
        && UPLOAD_HEADERS.iter().all(|h| has(&rule.allowed_headers, h))
        && rule
            .expose_headers
            .iter()
            .any(|h| h.eq_ignore_ascii_case("etag"))
}

fn encryption(view: &BucketView, gap_accepted: bool) -> CheckResult {
    match &view.encryption {
        Err(ReadError::NotImplemented(what)) if gap_accepted => CheckResult::pass(
            Check::Encryption,
            format!("the store does not implement the bucket encryption configuration ({what}); the gap `encryption_config` is accepted: encryption at rest is not checked"),
        ),
        Err(ReadError::NotImplemented(what)) => CheckResult::fail(
            Check::Encryption,
            format!("the store does not implement the bucket encryption configuration ({what})"),
            "no permission fixes this: check encryption at rest by the store's own means, then accept the gap encryption_config (UPCOMMIT_ACCEPT_STORE_GAPS, docs/stores.md)",
        ),
        Ok(algs) if algs.is_empty() => CheckResult::fail(
            Check::Encryption,
            "no default encryption is set",
            "set server-side encryption (SSE-S3 AES256 by default, aws:kms optional) in module upload-bucket",
        ),
        Ok(algs) => CheckResult::pass(
            Check::Encryption,
            format!("default encryption: {}", algs.join(", ")),
        ),
        Err(ReadError::Denied(what)) => CheckResult::fail(
            Check::Encryption,
            format!("cannot read the encryption configuration: access denied ({what})"),
            "grant s3:GetEncryptionConfiguration",
        ),
        Err(ReadError::Failed(what)) => CheckResult::fail(
            Check::Encryption,
            format!("cannot read the encryption configuration: {what}"),
            "run doctor again once the store answers",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::required_rules;

    fn good_cors() -> CorsRule {
        CorsRule {
            allowed_origins: vec!["https://app.example.com".into()],
            allowed_methods: vec!["PUT".into(), "POST".into(), "GET".into()],
            allowed_headers: vec!["*".into()],
            expose_headers: vec!["ETag".into()],
        }
    }

    fn healthy() -> BucketView {
        BucketView {
            reachable: Ok(()),
            versioning: Ok(Versioning::Enabled),
            lifecycle: Ok(required_rules().to_vec()),
            cors: Ok(vec![good_cors()]),
            encryption: Ok(vec!["AES256".into()]),
        }
    }

    fn want() -> Expectations {
        Expectations {
            required_rules: required_rules().to_vec(),
            final_prefixes: vec!["media/images/".into()],
            temporary_tiers: Vec::new(),
            cors_origins: vec!["https://app.example.com".into()],
            accepted_gaps: BTreeSet::new(),
        }
    }

    fn failed(view: &BucketView, want: &Expectations) -> Vec<Check> {
        evaluate(view, want)
            .into_iter()
            .filter(|r| !r.ok)
            .map(|r| r.check)
            .collect()
    }

    #[test]
    fn a_healthy_bucket_passes_every_check_in_order() {
        let results = evaluate(&healthy(), &want());
        assert_eq!(
            results.iter().map(|r| r.check).collect::<Vec<_>>(),
            Check::ALL.to_vec()
        );
        assert!(
            results.iter().all(|r| r.ok && r.fix.is_none()),
            "{results:?}"
        );
    }

    #[test]
    fn each_fault_fails_its_own_check() {
        let mut v = healthy();
        v.versioning = Ok(Versioning::Suspended);
        assert_eq!(failed(&v, &want()), vec![Check::Versioning]);

        let mut v = healthy();
        v.lifecycle = Ok(Vec::new());
        assert_eq!(failed(&v, &want()), vec![Check::LifecycleRequiredRules]);

        let mut v = healthy();
        v.encryption = Ok(Vec::new());
        assert_eq!(failed(&v, &want()), vec![Check::Encryption]);

        let mut v = healthy();
        let mut rules = required_rules().to_vec();
        let mut media = Rule::new("expire-media", "media/");
        media.expiration_days = Some(90);
        media.noncurrent_expiration_days = Some(1);
        rules.push(media);
        v.lifecycle = Ok(rules);
        assert_eq!(failed(&v, &want()), vec![Check::LifecycleFinalPrefixes]);

        let mut v = healthy();
        let mut rules = required_rules().to_vec();
        let mut thumbs = Rule::new("thumbs", "thumbs/");
        thumbs.expiration_days = Some(30);
        rules.push(thumbs);
        v.lifecycle = Ok(rules);
        assert_eq!(failed(&v, &want()), vec![Check::LifecycleVersionedExpiry]);
    }

    #[test]
    fn an_unreachable_bucket_fails_every_check_it_could_not_read() {
        let err = || Err::<(), String>("timeout".into());
        let v = BucketView {
            reachable: err(),
            versioning: Err(ReadError::Failed("timeout".into())),
            lifecycle: Err(ReadError::Failed("timeout".into())),
            cors: Err(ReadError::Failed("timeout".into())),
            encryption: Err(ReadError::Failed("timeout".into())),
        };
        let results = evaluate(&v, &want());
        assert!(results.iter().all(|r| !r.ok && r.fix.is_some()));
        assert!(results[0].detail.contains("timeout"));
    }

    /// Review of issue 36: a configuration read the store answered with something else, or
    /// not at all, was told to grant a permission. Only a denial is.
    #[test]
    fn every_configuration_read_but_a_denied_one_gets_a_fix_other_than_a_grant() {
        for (error, grants) in [
            (ReadError::Denied("403 AccessDenied".into()), true),
            (
                ReadError::NotImplemented("answered 200 with a <ListBucketResult> document".into()),
                false,
            ),
            (
                ReadError::Failed("object store unavailable: timeout".into()),
                false,
            ),
        ] {
            let v = BucketView {
                versioning: Err(error.clone()),
                lifecycle: Err(error.clone()),
                cors: Err(error.clone()),
                encryption: Err(error.clone()),
                ..healthy()
            };
            let mut want = want();
            want.cors_origins = vec!["https://app.example".into()];
            for r in evaluate(&v, &want).iter().filter(|r| !r.ok) {
                let fix = r.fix.as_deref().expect("a fix");
                assert_eq!(fix.starts_with("grant "), grants, "{error:?}: {fix}");
            }
        }
    }

    #[test]
    fn the_lifecycle_detail_names_the_missing_rule() {
        let mut v = healthy();
        v.lifecycle = Ok(required_rules()
            .iter()
            .filter(|r| r.id != "upcommit-tmp-expire")
            .cloned()
            .collect());
        let r = &evaluate(&v, &want())[2];
        assert!(!r.ok);
        assert!(r.detail.contains("upcommit-tmp-expire"), "{}", r.detail);
        assert!(r.fix.as_deref().unwrap_or("").contains("one owner"));
    }

    #[test]
    fn cors_needs_the_origin_both_methods_the_signed_headers_and_etag() {
        let check = |rule: CorsRule| {
            let mut v = healthy();
            v.cors = Ok(vec![rule]);
            failed(&v, &want())
        };
        assert!(check(good_cors()).is_empty());
        assert!(check(CorsRule {
            allowed_origins: vec!["*".into()],
            allowed_headers: UPLOAD_HEADERS.iter().map(|h| h.to_uppercase()).collect(),
            ..good_cors()
        })
        .is_empty());
        assert_eq!(
            check(CorsRule {
                allowed_headers: vec!["Content-Type".into(), "If-None-Match".into()],
                ..good_cors()
            }),
            vec![Check::Cors],
            "browsers could not send the checksum headers"
        );
        assert_eq!(
            check(CorsRule {
                allowed_origins: vec!["https://other.example.com".into()],
                ..good_cors()
            }),
            vec![Check::Cors]
        );
        assert_eq!(
            check(CorsRule {
                allowed_methods: vec!["PUT".into()],
                ..good_cors()
            }),
            vec![Check::Cors]
        );
        assert_eq!(
            check(CorsRule {
                allowed_headers: vec!["content-type".into()],
                ..good_cors()
            }),
            vec![Check::Cors]
        );
        assert_eq!(
            check(CorsRule {
                expose_headers: Vec::new(),
                ..good_cors()
            }),
            vec![Check::Cors]
        );
        let mut v = healthy();
        v.cors = Ok(Vec::new());
        let mut none = want();
        none.cors_origins.clear();
        assert!(failed(&v, &none).is_empty());
        assert_eq!(failed(&v, &want()), vec![Check::Cors]);
    }

    /// Issue 36: RGW answered GetBucketEncryption with a bucket listing, Garage with 501, and
    /// doctor told both to grant s3:GetEncryptionConfiguration. Only a refusal for permission
    /// gets that fix; a store that does not implement the configuration is told so.
    #[test]
    fn only_a_denied_read_is_told_to_grant_a_permission() {
        let judged = |e: ReadError, accepted: bool| {
            let mut v = healthy();
            v.encryption = Err(e);
            let mut w = want();
            if accepted {
                w.accepted_gaps.insert(Capability::EncryptionConfig);
            }
            evaluate(&v, &w)
                .into_iter()
                .find(|r| r.check == Check::Encryption)
                .expect("an encryption line")
        };
        let listing = || {
            ReadError::NotImplemented(
                "answered 200 with a <ListBucketResult> document, not the document asked for"
                    .into(),
            )
        };
        let r = judged(listing(), false);
        assert!(!r.ok);
        assert!(r.detail.contains("does not implement"), "{}", r.detail);
        assert!(r.detail.contains("<ListBucketResult>"), "{}", r.detail);
        let fix = r.fix.expect("a fix");
        assert!(!fix.contains("grant"), "{fix}");
        assert!(fix.contains("encryption_config"), "{fix}");
        assert!(judged(listing(), true).ok);

        let r = judged(ReadError::Denied("403 AccessDenied: denied".into()), false);
        assert_eq!(
            r.fix.as_deref(),
            Some("grant s3:GetEncryptionConfiguration")
        );
        // An accepted gap covers a store without the configuration, not a denied read.
        assert!(!judged(ReadError::Denied("403 AccessDenied".into()), true).ok);

        let r = judged(ReadError::Failed("timeout".into()), false);
        assert!(!r.fix.expect("a fix").contains("grant"));
    }

    #[test]
    fn check_names_are_stable_snake_case() {
        for c in Check::ALL {
            let json = serde_json::to_value(c).expect("serializes");
            assert_eq!(json.as_str(), Some(c.name()));
        }
    }

    #[test]
    fn an_unversioned_store_with_the_gap_accepted_is_judged_by_what_it_is() {
        // Garage: never versioned, the lifecycle holds only expiration and abort elements, no
        // encryption configuration API.
        let view = BucketView {
            versioning: Ok(Versioning::Never),
            lifecycle: Ok(lifecycle::for_unversioned(required_rules())),
            encryption: Err(ReadError::NotImplemented("501 NotImplemented".into())),
            ..healthy()
        };
        let mut want = want();
        // Without the gaps accepted: versioning and encryption fail, the rules do not.
        assert_eq!(
            failed(&view, &want),
            vec![Check::Versioning, Check::Encryption]
        );
        want.accepted_gaps = BTreeSet::from([Capability::Versioning, Capability::EncryptionConfig]);
        assert_eq!(failed(&view, &want), Vec::<Check>::new());
        let results = evaluate(&view, &want);
        assert!(
            results[1].detail.contains("unversioned semantics"),
            "{}",
            results[1].detail
        );
        // A versioned bucket still needs the noncurrent elements, gap or not.
        let versioned = BucketView {
            versioning: Ok(Versioning::Enabled),
            ..view.clone()
        };
        let failing = failed(&versioned, &want);
        assert!(
            failing.contains(&Check::LifecycleRequiredRules),
            "{failing:?}"
        );
        assert!(
            failing.contains(&Check::LifecycleVersionedExpiry),
            "{failing:?}"
        );
        // Suspended: old versions may exist, so the gap does not excuse it.
        let suspended = BucketView {
            versioning: Ok(Versioning::Suspended),
            ..view
        };
        assert!(failed(&suspended, &want).contains(&Check::Versioning));
    }
}
