use super::*;

fn all_present() -> Findings {
    Findings(
        Capability::ALL
            .into_iter()
            .map(|c| (c, Finding::Present))
            .collect(),
    )
}

fn missing(caps: &[Capability]) -> Findings {
    let mut f = all_present();
    for (c, found) in &mut f.0 {
        if caps.contains(c) {
            *found = Finding::Missing("wrote anyway (200)".into());
        }
    }
    f
}

fn needs_all() -> Needs {
    Needs { archival: true }
}

#[test]
fn names_are_stable_snake_case_and_parse_back() {
    let names: Vec<&str> = Capability::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(
        names,
        [
            "conditional_put",
            "conditional_put_if_match",
            "conditional_copy",
            "conditional_complete",
            "copy_source_if_match",
            "copy_if_match_legacy",
            "part_copy_source_if_match",
            "copy_in_parts",
            "checksum_sha256",
            "checksum_crc32c",
            "checksum_crc64nvme",
            "multipart_checksum",
            "post_size_range",
            "post_signature",
            "versioning",
            "storage_class",
            "object_tags",
            "encryption_config",
        ]
    );
    for c in Capability::ALL {
        assert_eq!(Capability::parse(c.name()), Some(c));
        let json = serde_json::to_value(c).expect("serializes");
        assert_eq!(json, serde_json::json!(c.name()));
    }
}

#[test]
fn a_store_with_everything_starts_with_no_gap() {
    let v = judge(&all_present(), needs_all(), &BTreeSet::new());
    assert!(v.may_start());
    assert!(v.refusal().is_none());
    assert!(v.accepted().is_empty());
    assert!(v.lines.iter().all(|l| l.without.is_none()));
    assert_eq!(v.lines.len(), Capability::ALL.len());
}

#[test]
fn a_missing_capability_refuses_until_accepted_by_name() {
    let f = missing(&[Capability::ConditionalPut, Capability::ConditionalCopy]);
    let v = judge(&f, needs_all(), &BTreeSet::new());
    assert_eq!(
        v.refused(),
        [Capability::ConditionalPut, Capability::ConditionalCopy]
    );
    let msg = v.refusal().expect("refuses");
    assert!(
        msg.contains("conditional_put (missing: wrote anyway (200))"),
        "{msg}"
    );
    assert!(msg.contains(Capability::ConditionalPut.promise()), "{msg}");
    assert!(
        msg.contains("UPCOMMIT_ACCEPT_STORE_GAPS=conditional_put,conditional_copy"),
        "{msg}"
    );

    // Accepting one of two still refuses for the other.
    let one = BTreeSet::from([Capability::ConditionalPut]);
    let v = judge(&f, needs_all(), &one);
    assert_eq!(v.refused(), [Capability::ConditionalCopy]);
    assert_eq!(v.accepted(), [Capability::ConditionalPut]);

    let both = BTreeSet::from([Capability::ConditionalPut, Capability::ConditionalCopy]);
    let v = judge(&f, needs_all(), &both);
    assert!(v.may_start());
    let line = v
        .lines
        .iter()
        .find(|l| l.capability == Capability::ConditionalCopy)
        .expect("line");
    assert_eq!(line.standing, Standing::Accepted);
    assert_eq!(line.without, Some(Capability::ConditionalCopy.without()));
}

#[test]
fn a_capability_the_probe_could_not_tell_is_refused_like_a_missing_one() {
    let mut f = all_present();
    f.0.retain(|(c, _)| *c != Capability::Versioning);
    f.0.push((
        Capability::ChecksumSha256,
        Finding::Unknown("AccessDenied".into()),
    ));
    f.0.retain(|(c, found)| !(*c == Capability::ChecksumSha256 && *found == Finding::Present));
    let v = judge(&f, needs_all(), &BTreeSet::new());
    assert_eq!(
        v.refused(),
        [Capability::ChecksumSha256, Capability::Versioning]
    );
    let msg = v.refusal().expect("refuses");
    assert!(msg.contains("could not be probed: AccessDenied"), "{msg}");
    assert!(msg.contains("could not be probed: not probed"), "{msg}");
}

#[test]
fn what_a_deployment_does_not_use_is_not_needed() {
    let f = missing(&[
        Capability::ConditionalPutIfMatch,
        Capability::StorageClass,
        Capability::ObjectTags,
    ]);
    let v = judge(&f, Needs { archival: false }, &BTreeSet::new());
    assert!(v.may_start());
    let standing = |c| {
        v.lines
            .iter()
            .find(|l| l.capability == c)
            .expect("a line per capability")
            .standing
    };
    assert_eq!(standing(Capability::StorageClass), Standing::NotNeeded);
    assert_eq!(
        standing(Capability::ConditionalPutIfMatch),
        Standing::NotNeeded
    );
    // Archival on: classes and tags are needed; If-Match on PUT never is.
    let v = judge(&f, needs_all(), &BTreeSet::new());
    assert_eq!(
        v.refused(),
        [Capability::StorageClass, Capability::ObjectTags]
    );
}

#[test]
fn accepting_what_the_store_has_changes_nothing() {
    let v = judge(
        &all_present(),
        needs_all(),
        &BTreeSet::from([Capability::Versioning]),
    );
    assert!(v.accepted().is_empty());
    assert!(v.lines.iter().all(|l| l.standing == Standing::Present));
}

/// Issue 35: `multipart_checksum` was probed with CRC64NVME only and trusted for every
/// algorithm a multipart upload may declare. Its finding is judged over each of them: one the
/// probe did not report is not known, one missing makes it missing, naming the algorithm.
#[test]
fn multipart_checksum_is_present_only_when_every_offered_algorithm_is() {
    use crate::domain::checksum::ChecksumAlgorithm::{Crc32c, Crc64Nvme};
    let found = multipart_checksum_finding(vec![(Crc64Nvme, Finding::Present)]);
    assert!(
        matches!(&found, Finding::Unknown(why) if why.contains("CRC32C")),
        "{found:?}"
    );
    let found = multipart_checksum_finding(vec![
        (Crc64Nvme, Finding::Present),
        (
            Crc32c,
            Finding::Missing("a wrong whole checksum was kept".into()),
        ),
    ]);
    assert_eq!(
        found,
        Finding::Missing("CRC32C: a wrong whole checksum was kept".into())
    );
    let found = multipart_checksum_finding(vec![
        (Crc32c, Finding::Present),
        (Crc64Nvme, Finding::Unknown("503".into())),
    ]);
    assert_eq!(found, Finding::Unknown("CRC64NVME: 503".into()));
    let found = multipart_checksum_finding(vec![
        (Crc32c, Finding::Present),
        (Crc64Nvme, Finding::Present),
    ]);
    assert_eq!(found, Finding::Present);
}

/// A declared checksum is offered only where the store keeps that algorithm, and on a
/// multipart upload only where it also keeps whole-object checksums of multipart uploads.
#[test]
fn a_declared_checksum_needs_its_algorithm_and_on_multipart_the_whole_object_check() {
    use crate::domain::checksum::ChecksumAlgorithm as A;
    let v = judge(
        &missing(&[Capability::MultipartChecksum]),
        needs_all(),
        &BTreeSet::from([Capability::MultipartChecksum]),
    );
    for alg in A::ALL {
        assert_eq!(v.checksum_gap(alg, false), None, "{alg}");
    }
    for alg in [A::Crc32c, A::Crc64Nvme] {
        assert_eq!(
            v.checksum_gap(alg, true),
            Some(Capability::MultipartChecksum),
            "{alg}"
        );
    }
    let v = judge(
        &missing(&[Capability::ChecksumCrc32c]),
        needs_all(),
        &BTreeSet::from([Capability::ChecksumCrc32c]),
    );
    assert_eq!(
        v.checksum_gap(A::Crc32c, true),
        Some(Capability::ChecksumCrc32c)
    );
    assert_eq!(v.checksum_gap(A::Crc64Nvme, true), None);
}

/// Issue 36: RGW 16.2 ignores x-amz-copy-source-if-match on CopyObject but keeps the
/// condition under x-amz-copy-if-match. The guard counts as kept where either name is
/// (a commit then sends both); the older name on its own is relied on by nothing.
#[test]
fn the_copy_guard_holds_where_the_store_keeps_either_name() {
    let ignored = || Finding::Missing("copied anyway".to_owned());
    let unknown = || Finding::Unknown("503".to_owned());
    assert_eq!(
        copy_source_guard_finding(ignored(), &Finding::Present),
        Finding::Present
    );
    assert_eq!(
        copy_source_guard_finding(Finding::Present, &ignored()),
        Finding::Present
    );
    assert_eq!(copy_source_guard_finding(ignored(), &ignored()), ignored());
    assert_eq!(copy_source_guard_finding(unknown(), &ignored()), unknown());
    assert_eq!(copy_source_guard_finding(ignored(), &unknown()), ignored());
    let v = judge(
        &missing(&[Capability::CopyIfMatchLegacy]),
        needs_all(),
        &BTreeSet::new(),
    );
    assert!(v.may_start(), "the older name is needed by nothing");
}

/// Issue 36: the startup log printed `finding=Missing("…")`. Every line an operator reads
/// says what the store did, in words.
#[test]
fn a_finding_reads_as_words_not_as_a_type() {
    assert_eq!(Finding::Present.to_string(), "present");
    assert_eq!(
        Finding::Missing("copied anyway".into()).to_string(),
        "missing: copied anyway"
    );
    assert_eq!(
        Finding::Unknown("timed out".into()).to_string(),
        "could not be told: timed out"
    );
}

#[test]
fn the_accepted_list_is_names_only() {
    assert_eq!(
        parse_accepted(" conditional_put , versioning,,").expect("parses"),
        BTreeSet::from([Capability::ConditionalPut, Capability::Versioning])
    );
    assert_eq!(parse_accepted("").expect("empty"), BTreeSet::new());
    let err = parse_accepted("conditional_put,versionning").expect_err("typo");
    assert!(err.contains("\"versionning\""), "{err}");
    assert!(err.contains("versioning"), "{err}");
    assert!(
        parse_accepted("Conditional_Put").is_err(),
        "exact names only"
    );
    assert!(parse_accepted("all").is_err(), "no wildcard");
}
