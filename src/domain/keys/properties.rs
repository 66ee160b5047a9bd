//! Properties of the key rules over generated input: for any string, not just the listed ones.

use chrono::NaiveDate;
use proptest::prelude::*;

use super::*;

/// Strings that look like paths, with the characters attacks use: dots, slashes, percent
/// escapes, case, spaces, Unicode look-alikes and control characters.
fn pathish() -> impl Strategy<Value = String> {
    let atoms = prop_oneof![
        Just("tmp".to_owned()),
        Just("TMP".to_owned()),
        Just("Tmp".to_owned()),
        Just("/".to_owned()),
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just("%2f".to_owned()),
        Just("%2e".to_owned()),
        Just("%252f".to_owned()),
        Just("\\".to_owned()),
        Just("\u{FF54}\u{FF4D}\u{FF50}".to_owned()),
        Just("\u{0442}mp".to_owned()),
        Just("\u{200B}".to_owned()),
        Just("\0".to_owned()),
        Just(" ".to_owned()),
        "[a-z0-9_=+@,!-]{1,8}",
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(atoms, 0..12).prop_map(|v| v.concat())
}

fn any_key() -> impl Strategy<Value = String> {
    prop_oneof![pathish(), any::<String>()]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn an_accepted_admin_key_is_plain_short_and_never_under_tmp(raw in any_key()) {
        if let Ok(key) = FinalKey::parse_custom(&raw, &ReservedKeys::base()) {
            let k = key.as_str();
            prop_assert!(k.is_ascii());
            prop_assert!(!k.contains('%'));
            prop_assert!(!k.chars().any(|c| c.is_control()));
            prop_assert!(k.len() <= MAX_KEY_BYTES);
            prop_assert!(k.split('/').all(|s| !s.is_empty() && s != "." && s != ".."), "{k:?}");
            prop_assert!(!k.to_ascii_lowercase().starts_with("tmp/"));
            prop_assert!(!resolves_under_tmp(k));
        }
    }

    #[test]
    fn a_generated_tmp_key_parses_back_to_its_upload(
        days in 0i64..40_000,
        name in prop::option::of(any_key()),
    ) {
        let date = NaiveDate::from_ymd_opt(2000, 1, 1).expect("date") + chrono::Duration::days(days);
        let Ok(name) = SafeName::sanitize(name.as_deref()) else {
            return Ok(());
        };
        let id = UploadId::generate();
        let key = TmpKey::new(date, id.clone(), name);
        let parsed = TmpKey::parse(key.as_str());
        prop_assert!(parsed.is_some(), "{:?}", key.as_str());
        let parsed = parsed.expect("checked");
        prop_assert_eq!(parsed.upload_id(), &id);
        prop_assert_eq!(parsed.date(), date);
    }

    #[test]
    fn the_paired_final_key_of_any_tmp_key_is_never_under_tmp(
        name in prop::option::of(any_key()),
        prefix in "[a-z]{1,8}/([a-z]{1,8}/)?",
    ) {
        let Ok(prefix) = FinalPrefix::parse(&prefix) else {
            return Ok(());
        };
        let Ok(name) = SafeName::sanitize(name.as_deref()) else {
            return Ok(());
        };
        let tmp = TmpKey::new(NaiveDate::from_ymd_opt(2026, 11, 30).expect("date"), UploadId::generate(), name);
        let fin = FinalKey::paired(&prefix, &tmp);
        prop_assert!(!resolves_under_tmp(fin.as_str()));
        prop_assert!(!fin.as_str().to_ascii_lowercase().starts_with("tmp/"));
        prop_assert!(FinalKey::parse_custom(fin.as_str(), &ReservedKeys::base()).is_ok(), "{:?}", fin.as_str());
    }
}
