//! The static ownership check over `infra/`: every whole S3 document of a bucket has one owner,
//! no versioned bucket expires objects without expiring their noncurrent versions, no rule
//! expires final assets, and every environment's one lifecycle document holds the rules the
//! service embeds. Fixtures prove each failure is caught. No network, no terraform providers.

mod checker;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use checker::{check, Kind};
use upcommit::domain::lifecycle::{missing_required, required_rules};
use upcommit::domain::profile::builtin_profiles;

fn final_prefixes() -> Vec<String> {
    builtin_profiles()
        .iter()
        .map(|p| p.final_prefix.as_str().to_owned())
        .collect()
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn kinds_of(fixture: &str) -> BTreeSet<Kind> {
    let trees = check(
        &repo(&format!("tests/infra/fixtures/{fixture}")),
        &final_prefixes(),
    );
    let tree = trees.get("dev").expect("fixture has envs/dev");
    for f in &tree.findings {
        eprintln!("{fixture}: {:?}: {}", f.kind, f.message);
    }
    tree.findings.iter().map(|f| f.kind).collect()
}

#[test]
fn the_real_infra_has_one_owner_per_document_and_safe_rules() {
    let trees = check(&repo("infra"), &final_prefixes());
    assert_eq!(
        trees.keys().cloned().collect::<Vec<_>>(),
        vec!["prod".to_owned(), "staging".to_owned()]
    );
    for (env, tree) in &trees {
        for f in &tree.findings {
            eprintln!("{env}: {:?}: {}", f.kind, f.message);
        }
        assert!(tree.findings.is_empty(), "{env} has findings");
        let lifecycles: Vec<_> = tree
            .owners
            .iter()
            .filter(|o| o.document == "aws_s3_bucket_lifecycle_configuration")
            .collect();
        assert_eq!(lifecycles.len(), 1, "{env}: exactly one lifecycle document");
        let lc = lifecycles[0];
        assert_eq!(
            lc.address,
            "module.lifecycle.aws_s3_bucket_lifecycle_configuration.this"
        );
        assert!(
            missing_required(&lc.rules, required_rules()).is_empty(),
            "{env}: the lifecycle holds every rule the service requires"
        );
        for rule in required_rules() {
            assert!(
                lc.rules.contains(rule),
                "{env}: {} as in the rules file",
                rule.id
            );
        }
        assert!(
            lc.rules
                .iter()
                .any(|r| r.id == "resize-cache-expire" && r.prefix == "cache/"),
            "{env}: the resize module's rule arrives as data"
        );
        let mut ids: Vec<&str> = lc.rules.iter().map(|r| r.id.as_str()).collect();
        ids.sort_unstable();
        let before = ids.len();
        ids.dedup();
        assert_eq!(
            ids.len(),
            before,
            "{env}: each rule reaches the document once"
        );
        let documents: BTreeSet<&str> = tree
            .owners
            .iter()
            .filter(|o| o.bucket == lc.bucket)
            .map(|o| o.document.as_str())
            .collect();
        for doc in [
            "aws_s3_bucket_versioning",
            "aws_s3_bucket_server_side_encryption_configuration",
            "aws_s3_bucket_public_access_block",
            "aws_s3_bucket_cors_configuration",
            "aws_s3_bucket_policy",
        ] {
            assert!(documents.contains(doc), "{env}: {doc} on the upload bucket");
        }
    }
}

#[test]
fn a_module_declaring_a_second_lifecycle_for_the_bucket_is_caught() {
    assert_eq!(
        kinds_of("two_lifecycle_owners"),
        BTreeSet::from([Kind::TwoOwners])
    );
}

#[test]
fn an_inline_document_beside_its_own_resource_is_caught() {
    assert_eq!(
        kinds_of("inline_and_separate_cors"),
        BTreeSet::from([Kind::TwoOwners])
    );
}

#[test]
fn a_bucket_named_literally_and_by_reference_is_one_bucket() {
    assert_eq!(
        kinds_of("policy_by_name_and_reference"),
        BTreeSet::from([Kind::TwoOwners])
    );
}

#[test]
fn an_expiry_without_noncurrent_expiry_in_a_versioned_bucket_is_caught() {
    assert_eq!(
        kinds_of("unpaired_expiry"),
        BTreeSet::from([Kind::UnpairedExpiry])
    );
}

#[test]
fn an_expiring_rule_over_a_final_prefix_is_caught_in_rules_data() {
    assert_eq!(
        kinds_of("expiry_over_final"),
        BTreeSet::from([Kind::ExpiresFinal])
    );
}

#[test]
fn what_cannot_be_evaluated_fails_the_check() {
    assert_eq!(
        kinds_of("unresolvable_bucket"),
        BTreeSet::from([Kind::Unresolved])
    );
}

#[test]
fn a_clean_tree_has_no_findings() {
    assert_eq!(kinds_of("clean"), BTreeSet::new());
}

#[test]
fn the_former_lifecycle_owner_forgets_its_resource_without_destroying_it() {
    let text =
        std::fs::read_to_string(repo("infra/modules/image-resize/main.tf")).expect("module source");
    let body: hcl::Body = hcl::parse(&text).expect("parses");
    let removed: Vec<&hcl::Block> = body
        .blocks()
        .filter(|b| b.identifier() == "removed")
        .collect();
    assert_eq!(removed.len(), 1);
    let from = removed[0]
        .body()
        .attributes()
        .find(|a| a.key() == "from")
        .expect("from");
    assert_eq!(
        from.expr().to_string(),
        "aws_s3_bucket_lifecycle_configuration.cache"
    );
    let lifecycle = removed[0]
        .body()
        .blocks()
        .find(|b| b.identifier() == "lifecycle")
        .expect("lifecycle block");
    let destroy = lifecycle
        .body()
        .attributes()
        .find(|a| a.key() == "destroy")
        .expect("destroy");
    assert_eq!(destroy.expr(), &hcl::Expression::Bool(false));
    assert!(
        !body.blocks().any(|b| b.identifier() == "resource"
            && b.labels().first().map(|l| l.as_str())
                == Some("aws_s3_bucket_lifecycle_configuration")),
        "the module no longer declares a lifecycle resource"
    );
}

/// The image-resize module's policy grants what the service's renditions do (issue 37), and
/// nothing wider: writes and deletes only under `cache/`, listing only with a `cache/` prefix,
/// reads of sources only under the prefixes it is given.
#[test]
fn the_renditions_policy_grants_only_what_rendering_does() {
    let text =
        std::fs::read_to_string(repo("infra/modules/image-resize/main.tf")).expect("module source");
    let body: hcl::Body = hcl::parse(&text).expect("parses");
    let policy = body
        .blocks()
        .find(|b| {
            b.identifier() == "data"
                && b.labels().first().map(|l| l.as_str()) == Some("aws_iam_policy_document")
        })
        .expect("a policy document");
    let statements: Vec<&hcl::Block> = policy
        .body()
        .blocks()
        .filter(|b| b.identifier() == "statement")
        .collect();
    let strings = |b: &hcl::Block, key: &str| -> Vec<String> {
        match b
            .body()
            .attributes()
            .find(|a| a.key() == key)
            .map(|a| a.expr())
        {
            Some(hcl::Expression::Array(items)) => items
                .iter()
                .map(|e| e.to_string().trim_matches('"').to_owned())
                .collect(),
            Some(other) => vec![other.to_string()],
            None => Vec::new(),
        }
    };
    let mut granted = BTreeSet::new();
    for st in &statements {
        let actions = strings(st, "actions");
        let resources = strings(st, "resources").join(" ");
        for a in &actions {
            granted.insert(a.clone());
            let writes = !matches!(
                a.as_str(),
                "s3:GetObject" | "s3:ListBucket" | "s3:ListBucketVersions"
            );
            if writes {
                assert!(
                    resources.ends_with("/cache/*\"") || resources.ends_with("/cache/*"),
                    "{a} only under cache/: {resources}"
                );
            }
        }
        assert!(
            !resources.contains("}/*"),
            "no statement reaches the whole bucket's objects: {resources}"
        );
        if actions.iter().any(|a| a.starts_with("s3:ListBucket")) {
            let cond = st
                .body()
                .blocks()
                .find(|b| b.identifier() == "condition")
                .expect("listing is conditioned on the prefix");
            let values = cond
                .body()
                .attributes()
                .find(|a| a.key() == "values")
                .map(|a| a.expr().to_string())
                .unwrap_or_default();
            assert!(values.contains("cache/*"), "{values}");
        }
    }
    let want: BTreeSet<String> = [
        "s3:GetObject",
        "s3:PutObject",
        "s3:DeleteObject",
        "s3:DeleteObjectVersion",
        "s3:ListBucket",
        "s3:ListBucketVersions",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    assert_eq!(granted, want);
}
