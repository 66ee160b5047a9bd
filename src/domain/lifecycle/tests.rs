//! The lifecycle rules on listed documents: required rules, pairing, the merge plan.

use super::*;

fn expire(id: &str, prefix: &str, days: u32) -> Rule {
    Rule {
        expiration_days: Some(days),
        ..Rule::new(id, prefix)
    }
}

fn noncurrent(id: &str, prefix: &str, days: u32) -> Rule {
    Rule {
        noncurrent_expiration_days: Some(days),
        ..Rule::new(id, prefix)
    }
}

fn finals() -> Vec<String> {
    vec!["media/images/".into(), "media/recordings/".into()]
}

#[test]
fn the_embedded_rules_file_parses_and_holds_every_required_action() {
    let rules = required_rules();
    let tmp_actions: Vec<Action> = rules
        .iter()
        .filter(|r| r.prefix == "tmp/")
        .flat_map(|r| r.actions().into_iter().map(|(a, _)| a))
        .collect();
    assert!(tmp_actions.contains(&Action::ExpireCurrent));
    assert!(tmp_actions.contains(&Action::ExpireNoncurrent));
    assert!(tmp_actions.contains(&Action::RemoveExpiredDeleteMarkers));
    assert!(rules
        .iter()
        .any(|r| r.prefix.is_empty() && r.abort_incomplete_multipart_days == Some(1)));
    let tmp = rules
        .iter()
        .find(|r| r.expiration_days.is_some())
        .expect("an expiring rule");
    assert_eq!(
        (tmp.prefix.as_str(), tmp.expiration_days),
        ("tmp/", Some(7))
    );
    assert_eq!(tmp.noncurrent_expiration_days, Some(1));
}

#[test]
fn the_embedded_rules_pass_their_own_checks() {
    let rules = required_rules();
    assert!(missing_required(rules, rules).is_empty());
    assert!(expiring_over_final(rules, &finals()).is_empty());
    assert!(unpaired_expiry(rules).is_empty());
}

#[test]
fn a_rules_file_is_validated_as_s3_would() {
    let both = r#"{"rules":[{"id":"x","prefix":"tmp/","expiration_days":7,"expired_object_delete_marker":true}]}"#;
    assert!(RuleFile::parse(both)
        .expect_err("rejected")
        .contains("rule of its own"));
    let none = r#"{"rules":[{"id":"x","prefix":"tmp/"}]}"#;
    assert!(RuleFile::parse(none)
        .expect_err("rejected")
        .contains("no action"));
    let zero = r#"{"rules":[{"id":"x","prefix":"tmp/","expiration_days":0}]}"#;
    assert!(RuleFile::parse(zero).is_err());
    let twice = r#"{"rules":[{"id":"x","expiration_days":1},{"id":"x","expiration_days":2}]}"#;
    assert!(RuleFile::parse(twice)
        .expect_err("rejected")
        .contains("twice"));
    let unknown = r#"{"rules":[{"id":"x","expiration_dayz":1}]}"#;
    assert!(RuleFile::parse(unknown).is_err());
}

#[test]
fn a_missing_rule_is_named_with_its_action() {
    let required = vec![Rule {
        noncurrent_expiration_days: Some(1),
        ..expire("tmp-expire", "tmp/", 7)
    }];
    let live = vec![expire("tmp-expire", "tmp/", 7)];
    assert_eq!(
        missing_required(&live, &required),
        vec![Problem::Missing {
            rule: "tmp-expire".into(),
            action: Action::ExpireNoncurrent,
            prefix: "tmp/".into(),
            days: Some(1),
            weaker: None,
        }]
    );
    assert_eq!(missing_required(&[], &required).len(), 2);
}

#[test]
fn actions_may_be_split_across_live_rules_and_extra_rules_are_fine() {
    let required = vec![Rule {
        noncurrent_expiration_days: Some(1),
        ..expire("tmp-expire", "tmp/", 7)
    }];
    let live = vec![
        expire("a", "tmp/", 7),
        noncurrent("b", "tmp/", 1),
        expire("cache", "cache/", 30),
    ];
    assert!(missing_required(&live, &required).is_empty());
}

#[test]
fn weaker_rules_do_not_satisfy() {
    let required = vec![expire("tmp-expire", "tmp/", 7)];
    let later = vec![expire("tmp-expire", "tmp/", 30)];
    assert_eq!(
        missing_required(&later, &required),
        vec![Problem::Missing {
            rule: "tmp-expire".into(),
            action: Action::ExpireCurrent,
            prefix: "tmp/".into(),
            days: Some(7),
            weaker: Some(("tmp-expire".into(), Some(30))),
        }]
    );
    let disabled = vec![Rule {
        enabled: false,
        ..expire("tmp-expire", "tmp/", 7)
    }];
    assert_eq!(missing_required(&disabled, &required).len(), 1);
    let narrower = vec![expire("tmp-expire", "tmp/2026/", 7)];
    assert_eq!(missing_required(&narrower, &required).len(), 1);
    let tagged = vec![Rule {
        narrowed: true,
        ..expire("tmp-expire", "tmp/", 7)
    }];
    assert_eq!(missing_required(&tagged, &required).len(), 1);
    let dated = vec![Rule {
        expiration_date: Some("2030-01-01T00:00:00Z".into()),
        ..Rule::new("tmp-expire", "tmp/")
    }];
    assert_eq!(missing_required(&dated, &required).len(), 1);
    let sooner = vec![expire("tmp-expire", "tmp/", 3)];
    assert!(missing_required(&sooner, &required).is_empty());
}

#[test]
fn expiring_rules_over_final_prefixes_are_caught_in_both_directions() {
    let whole_bucket = vec![expire("all", "", 30)];
    assert_eq!(expiring_over_final(&whole_bucket, &finals()).len(), 2);
    let broader = vec![expire("media", "media/", 30)];
    assert_eq!(expiring_over_final(&broader, &finals()).len(), 2);
    let inside = vec![expire("old", "media/images/2020/", 30)];
    assert_eq!(
        expiring_over_final(&inside, &finals()),
        vec![Problem::ExpiresFinal {
            rule: "old".into(),
            prefix: "media/images/2020/".into(),
            final_prefix: "media/images/".into(),
            narrowed: false,
        }]
    );
    // A filter narrows what a rule expires, never whether it reaches final assets; the
    // message tells the two apart (a store that dropped the filter shows the second).
    let filtered = vec![Rule {
        narrowed: true,
        ..expire("big", "media/", 30)
    }];
    let found = expiring_over_final(&filtered, &finals());
    assert_eq!(found.len(), 2);
    assert!(found[0]
        .to_string()
        .contains("its tag or size filter selects"));
    assert!(expiring_over_final(&broader, &finals())[0]
        .to_string()
        .contains("every object under \"media/\""));
    let elsewhere = vec![expire("tmp", "tmp/", 7), expire("cache", "cache/", 30)];
    assert!(expiring_over_final(&elsewhere, &finals()).is_empty());
    let noncurrent_only = vec![noncurrent("old-versions", "media/", 30)];
    assert!(expiring_over_final(&noncurrent_only, &finals()).is_empty());
    let disabled = vec![Rule {
        enabled: false,
        ..expire("all", "", 30)
    }];
    assert!(expiring_over_final(&disabled, &finals()).is_empty());
}

#[test]
fn expiry_in_a_versioned_bucket_needs_a_noncurrent_partner() {
    let alone = vec![expire("cache", "cache/", 30)];
    assert_eq!(
        unpaired_expiry(&alone),
        vec![Problem::UnpairedExpiry {
            rule: "cache".into(),
            prefix: "cache/".into()
        }]
    );
    let same_rule = vec![Rule {
        noncurrent_expiration_days: Some(1),
        ..expire("cache", "cache/", 30)
    }];
    assert!(unpaired_expiry(&same_rule).is_empty());
    let broader_partner = vec![expire("cache", "cache/", 30), noncurrent("nc", "", 1)];
    assert!(unpaired_expiry(&broader_partner).is_empty());
    let narrower_partner = vec![
        expire("cache", "cache/", 30),
        noncurrent("nc", "cache/a/", 1),
    ];
    assert_eq!(unpaired_expiry(&narrower_partner).len(), 1);
    let disabled_partner = vec![
        expire("cache", "cache/", 30),
        Rule {
            enabled: false,
            ..noncurrent("nc", "cache/", 1)
        },
    ];
    assert_eq!(unpaired_expiry(&disabled_partner).len(), 1);
}

#[test]
fn the_merge_keeps_foreign_rules_and_replaces_ours_by_id() {
    let ours = vec![
        expire("upcommit-tmp", "tmp/", 7),
        noncurrent("upcommit-nc", "tmp/", 1),
    ];
    let live = vec![
        expire("resize-cache", "cache/", 30),
        expire("upcommit-tmp", "tmp/", 30),
    ];
    let plan = merge_plan(&live, &ours);
    assert_eq!(plan.foreign, vec!["resize-cache".to_owned()]);
    assert_eq!(
        plan.changes,
        vec![
            Change::Update {
                from: expire("upcommit-tmp", "tmp/", 30),
                to: expire("upcommit-tmp", "tmp/", 7)
            },
            Change::Add(noncurrent("upcommit-nc", "tmp/", 1)),
        ]
    );
    assert!(plan.writes());
    let settled = merge_plan(&[live[0].clone(), ours[0].clone(), ours[1].clone()], &ours);
    assert!(!settled.writes());
    assert_eq!(settled.foreign, vec!["resize-cache".to_owned()]);
}

#[test]
fn a_disabled_copy_of_our_rule_is_updated() {
    let ours = vec![expire("upcommit-tmp", "tmp/", 7)];
    let live = vec![Rule {
        enabled: false,
        ..expire("upcommit-tmp", "tmp/", 7)
    }];
    assert!(merge_plan(&live, &ours).writes());
}

#[test]
fn a_rule_expiring_a_temporary_tier_sooner_than_its_ttl_is_a_problem() {
    let tiers = vec![("temp/7d/".to_owned(), 7)];
    let rule = |prefix: &str, days: u32| Rule {
        expiration_days: Some(days),
        ..Rule::new("r", prefix)
    };
    assert!(expiring_before_ttl(&[rule("temp/7d/", 7)], &tiers).is_empty());
    assert!(expiring_before_ttl(&[rule("temp/7d/", 8)], &tiers).is_empty());
    assert!(expiring_before_ttl(&[rule("temp/1d/", 1)], &tiers).is_empty());
    assert_eq!(expiring_before_ttl(&[rule("temp/7d/", 3)], &tiers).len(), 1);
    assert_eq!(expiring_before_ttl(&[rule("temp/", 1)], &tiers).len(), 1);
    assert_eq!(expiring_before_ttl(&[rule("", 6)], &tiers).len(), 1);
    assert_eq!(
        expiring_before_ttl(&[rule("temp/7d/exports/", 2)], &tiers).len(),
        1
    );
    let disabled = Rule {
        enabled: false,
        ..rule("temp/7d/", 1)
    };
    assert!(expiring_before_ttl(&[disabled], &tiers).is_empty());
}

#[test]
fn an_unversioned_bucket_needs_no_noncurrent_or_delete_marker_element() {
    let rules = for_unversioned(required_rules());
    assert!(rules
        .iter()
        .all(|r| r.noncurrent_expiration_days.is_none() && !r.expired_object_delete_marker));
    let ids: Vec<&str> = rules.iter().map(|r| r.id.as_str()).collect();
    assert!(ids.contains(&"upcommit-tmp-expire"), "{ids:?}");
    assert!(
        ids.contains(&"upcommit-abort-incomplete-multipart"),
        "{ids:?}"
    );
    // Rules that only removed delete markers have nothing left to do.
    assert!(
        !ids.contains(&"upcommit-tmp-expired-delete-markers"),
        "{ids:?}"
    );
    let tmp = rules
        .iter()
        .find(|r| r.id == "upcommit-tmp-expire")
        .expect("the tmp rule");
    assert_eq!(tmp.expiration_days, Some(7));
    assert_eq!(tmp.prefix, "tmp/");
}
