//! The settings property test: every numeric setting the loader reads is tried at its bounds,
//! between them and past them. Past them it must be refused with the variable's name; at and
//! between them it must load (or be refused by a rule that ties it to another setting, still
//! naming it). The registry is what the loader itself records, so a setting added without
//! bounds cannot be written (`Source::number` takes a range) and one added with them is tried.

use std::collections::HashMap;

use super::source::{env, MAX_DURATION_SECS};
use super::{NumericSetting, Settings};

/// The secret, and an identity provider, so that its timings are read too.
fn base() -> HashMap<String, String> {
    env(&[
        ("UPCOMMIT_JWT_SECRET", "0123456789abcdef"),
        ("UPCOMMIT_JWKS_URL", "https://idp.example/jwks.json"),
        ("UPCOMMIT_JWT_ISSUER", "https://idp.example/"),
        ("UPCOMMIT_JWT_AUDIENCE", "upcommit"),
    ])
}

fn registry() -> Vec<NumericSetting> {
    let vars = base();
    Settings::numeric_settings(&|k| vars.get(k).cloned())
}

fn load_with(name: &str, value: &str) -> Result<Settings, String> {
    let mut vars = base();
    vars.insert(name.to_owned(), value.to_owned());
    Settings::from_map(&vars).map_err(|e| e.to_string())
}

/// A small seeded generator (xorshift64*), so a failing value replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u128) -> u128 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        u128::from(self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)) % n.max(1)
    }
}

#[test]
fn the_registry_holds_every_numeric_setting_once_with_sane_bounds() {
    let all = registry();
    assert!(all.len() >= 40, "{} numeric settings recorded", all.len());
    let mut names: Vec<&str> = all.iter().map(|s| s.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "a setting is read twice");
    let docs = include_str!("../../docs/configuration.md");
    for s in &all {
        assert!(s.lo <= s.hi, "{s:?}");
        assert!(s.lo >= 0, "{s:?}");
        // No setting is unbounded: the largest accepted is well inside every clock and counter.
        assert!(
            s.hi <= i128::from(u64::MAX) / 2,
            "{s:?} is effectively unbounded"
        );
        assert!(
            docs.contains(s.name),
            "docs/configuration.md does not list {}",
            s.name
        );
    }
}

#[test]
fn every_numeric_setting_loads_at_and_between_its_bounds_and_is_refused_past_them_by_name() {
    let mut rng = Rng(0x5eed_0035);
    for s in registry() {
        let mut inside = vec![s.lo, s.hi, s.lo + (s.hi - s.lo) / 2];
        for _ in 0..8 {
            let span = u128::try_from(s.hi - s.lo).expect("hi ≥ lo") + 1;
            inside.push(s.lo + i128::try_from(rng.below(span)).expect("fits"));
        }
        let mut loaded = 0;
        for v in inside {
            match load_with(s.name, &v.to_string()) {
                Ok(_) => loaded += 1,
                // Refused by a rule tying it to another setting: still named.
                Err(e) => assert!(e.contains(s.name), "{} = {v}: {e}", s.name),
            }
        }
        assert!(loaded > 0, "{}: no value inside its bounds loads", s.name);
        let mut outside = vec![
            (s.hi + 1).to_string(),
            "18446744073709551615".to_owned(),
            "9000000000000".to_owned(),
            "99999999999999999999999".to_owned(),
            "-1".to_owned(),
            "soon".to_owned(),
        ];
        if s.lo > 0 {
            outside.push((s.lo - 1).to_string());
        }
        for v in outside {
            if v.parse::<i128>().is_ok_and(|n| n >= s.lo && n <= s.hi) {
                continue;
            }
            match load_with(s.name, &v) {
                Ok(_) => panic!(
                    "{} = {v} is past its bounds {}..={} but loads",
                    s.name, s.lo, s.hi
                ),
                Err(e) => assert!(
                    e.contains(s.name),
                    "{} = {v}: the refusal does not name it: {e}",
                    s.name
                ),
            }
        }
        if s.never {
            assert!(load_with(s.name, "never").is_ok(), "{}: never", s.name);
        }
    }
}

#[test]
fn durations_stop_at_a_hundred_years_and_never_has_a_spelling() {
    const { assert!(MAX_DURATION_SECS > 100 * 365 * 86_400 && MAX_DURATION_SECS < 101 * 365 * 86_400) };
    let s = load_with("UPCOMMIT_DELETE_AFTER_SECS", "never").expect("never");
    assert_eq!(s.jobs.delete_after_secs, None);
    let s = load_with("UPCOMMIT_ARCHIVE_AFTER_SECS", "NEVER").expect("never, any case");
    assert_eq!(s.jobs.archive_after_secs, None);
    let err =
        load_with("UPCOMMIT_DELETE_AFTER_SECS", "18446744073709551615").expect_err("u64::MAX");
    assert!(
        err.contains("UPCOMMIT_DELETE_AFTER_SECS") && err.contains("never"),
        "{err}"
    );
    // The values, each refused at load with its name.
    for (name, value) in [
        ("UPCOMMIT_SWEEP_INTERVAL_SECS", "9000000000000"),
        ("UPCOMMIT_SWEEP_GRACE_SECS", "9000000000000"),
        ("UPCOMMIT_JOB_LEASE_SECS", "9000000000000"),
        ("UPCOMMIT_DELETE_AFTER_SECS", "9000000000000"),
        ("UPCOMMIT_UPLOAD_RETENTION", "300000y"),
    ] {
        let err = load_with(name, value).expect_err(name);
        assert!(err.contains(name), "{err}");
    }
}

#[test]
fn a_value_past_its_bound_in_the_file_is_refused_like_one_in_the_environment() {
    let vars = base();
    for (key, name) in [
        (
            "sweep_grace_secs = 9000000000000",
            "UPCOMMIT_SWEEP_GRACE_SECS",
        ),
        ("job_lease_secs = 9000000000000", "UPCOMMIT_JOB_LEASE_SECS"),
        (
            "delete_after_secs = 9000000000000",
            "UPCOMMIT_DELETE_AFTER_SECS",
        ),
    ] {
        let err = Settings::from_sources(Some(key), &|k| vars.get(k).cloned())
            .expect_err(key)
            .0;
        assert!(err.contains(name), "{key}: {err}");
    }
    let s = Settings::from_sources(Some("delete_after_secs = \"never\""), &|k| {
        vars.get(k).cloned()
    })
    .expect("never in the file");
    assert_eq!(s.jobs.delete_after_secs, None);
}

/// The row docs/configuration.md's table of bounds gives `s`.
fn doc_row(s: &NumericSetting) -> String {
    let never = if s.never { " or `never`" } else { "" };
    let years = if s.hi == i128::from(MAX_DURATION_SECS) {
        " (100 years)"
    } else {
        ""
    };
    format!("| `{}` | {} | {}{years}{never} |", s.name, s.lo, s.hi)
}

#[test]
fn the_configuration_doc_gives_every_numeric_settings_bounds_as_the_loader_checks_them() {
    let docs = include_str!("../../docs/configuration.md");
    let missing: Vec<String> = registry()
        .iter()
        .map(doc_row)
        .filter(|row| !docs.contains(row.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md's bounds table lacks (or has other numbers for):\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_presign_rate_is_unlimited_or_at_least_one_per_thousand_seconds() {
    for ok in ["0", "0.001", "0.5", "10", "1000000"] {
        assert!(
            load_with("UPCOMMIT_PRESIGN_RATE_PER_SEC", ok).is_ok(),
            "{ok}"
        );
    }
    // The outside review's values: accepted before, they answered Retry-After 2^64 - 1.
    for bad in ["1e-300", "0.0000001", "0.0009", "NaN", "inf", "-0.5"] {
        let err = load_with("UPCOMMIT_PRESIGN_RATE_PER_SEC", bad).expect_err(bad);
        assert!(
            err.contains("UPCOMMIT_PRESIGN_RATE_PER_SEC"),
            "{bad}: {err}"
        );
    }
}
