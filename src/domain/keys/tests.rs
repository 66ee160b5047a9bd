//! The key rules on listed cases: every refusal and every key that must pass.

use super::*;

fn tmp(name: &str) -> TmpKey {
    let date = NaiveDate::from_ymd_opt(2026, 11, 29).expect("valid date");
    TmpKey::new(
        date,
        UploadId::generate(),
        SafeName::sanitize(Some(name)).expect("sane"),
    )
}

#[test]
fn tmp_key_is_partitioned_by_day_and_parses_back() {
    let key = tmp("photo.png");
    assert!(key.as_str().starts_with("tmp/2026/11/29/"));
    assert!(key.as_str().ends_with("/photo.png"));
    let parsed = TmpKey::parse(key.as_str()).expect("parses");
    assert_eq!(parsed.upload_id(), key.upload_id());
    assert_eq!(parsed, key);
}

#[test]
fn tmp_key_parse_refuses_anything_not_issued_by_us() {
    let key = tmp("a.png");
    let s = key.as_str();
    let id = key.upload_id().as_str();
    for bad in [
        s.replacen("tmp/", "TMP/", 1),
        s.replacen("tmp/", "Tmp/", 1),
        format!("/{s}"),
        format!("{s}/x"),
        s.replace(id, &id.to_uppercase()),
        s.replace("/2026/", "/26/"),
        s.replace("/11/29/", "/13/29/"),
        s.replace("a.png", "..%2fa.png"),
        s.replace("a.png", ".hidden"),
        format!("media/images/{id}/a.png"),
        "tmp/2026/11/29/zzzz/a.png".to_owned(),
        String::new(),
    ] {
        assert!(TmpKey::parse(&bad).is_none(), "{bad:?} accepted");
    }
}

#[test]
fn filenames_never_steer_the_key() {
    for raw in [
        "../../etc/passwd",
        "..%2f..%2fsecret",
        "%2e%2e/%2e%2e/x",
        "%252e%252e%252fx",
        "..\\..\\windows\\win.ini",
        "a/b/c.png",
        "....//....//x",
        "name with spaces & ümlauts.png",
        "x\u{200B}.png",
        "'; DROP TABLE uploads; --.png",
        "\" OR 1=1 --",
        ".",
        "..",
        "",
    ] {
        let name = SafeName::sanitize(Some(raw)).expect("sanitizable");
        let key = tmp(name.as_str());
        assert_eq!(key.as_str().matches('/').count(), 5, "{raw:?} -> {key}");
        assert!(
            SafeName::parse(name.as_str()).is_some(),
            "{raw:?} -> {name:?}"
        );
        assert!(!name.as_str().contains(['%', '\\', '/', '\u{200B}']));
        assert!(!name.as_str().starts_with('.'));
    }
    assert_eq!(
        SafeName::sanitize(Some("../../etc/passwd")).map(|n| n.0),
        Ok("passwd".into())
    );
    assert_eq!(
        SafeName::sanitize(Some("x\u{200B}.png")).map(|n| n.0),
        Ok("x.png".into())
    );
    assert_eq!(SafeName::sanitize(None).map(|n| n.0), Ok("file".into()));
}

#[test]
fn a_slug_always_keeps_the_extension() {
    for (raw, want) in [
        ("写真.jpg", "file.jpg"),
        ("फोटो.jpg", "file.jpg"),
        ("صورة.png", "file.png"),
        ("תמונה.PNG", "file.PNG"),
        ("😀🎉.gif", "file.gif"),
        (".jpg", "file.jpg"),
        ("..jpg", "file.jpg"),
        ("写真 2024.jpg", "2024.jpg"),
        ("café crème.png", "cafe_creme.png"),
        ("ｆｕｌｌ.png", "full.png"),
        ("holiday.tar.gz", "holiday.tar.gz"),
        ("a..b.mp3", "a..b.mp3"),
        ("photo\u{202E}gnp.exe", "photognp.exe"),
        ("no-extension", "no-extension"),
        ("trailing.", "trailing"),
        ("x.写真", "x"),
        ("写真", "file"),
        ("../../写真.jpg", "file.jpg"),
        ("%2e%2e%2f.jpg", "2e_2e_2f.jpg"),
    ] {
        assert_eq!(
            SafeName::sanitize(Some(raw)).map(|n| n.0),
            Ok(want.to_owned()),
            "{raw:?}"
        );
    }
}

#[test]
fn filenames_with_control_characters_or_too_long_are_refused() {
    for raw in [
        "a\0b.png",
        "a\r\nContent-Type: text/html",
        "tab\there",
        "del\u{7f}",
    ] {
        assert_eq!(
            SafeName::sanitize(Some(raw)),
            Err(FilenameError::ControlCharacter),
            "{raw:?}"
        );
    }
    assert_eq!(
        SafeName::sanitize(Some(&"a".repeat(256))),
        Err(FilenameError::TooLong)
    );
    assert_eq!(
        SafeName::sanitize(Some(&"a".repeat(4096))),
        Err(FilenameError::TooLong)
    );
    let long = format!("{}.png", "b".repeat(250));
    let kept = SafeName::sanitize(Some(&long)).expect("255 bytes is allowed");
    assert_eq!(kept.as_str().len(), MAX_SAFE_NAME_BYTES);
    assert!(kept.as_str().ends_with(".png"));
}

#[test]
fn paired_final_key_uses_profile_prefix_and_same_id_and_name() {
    let key = tmp("song.mp3");
    let prefix = FinalPrefix::parse("media/recordings/").expect("valid prefix");
    let paired = FinalKey::paired(&prefix, &key);
    assert_eq!(
        paired.as_str(),
        format!("media/recordings/{}/song.mp3", key.upload_id())
    );
    assert!(!resolves_under_tmp(paired.as_str()));
}

#[test]
fn every_spelling_of_tmp_is_reserved() {
    for raw in [
        "tmp/x",
        "TMP/x",
        "Tmp/x",
        " tmp/x",
        "./tmp/x",
        "/tmp/x",
        "tmp//x",
        "tmp\\x",
        "tmp%2Fx",
        "tmp%2fx",
        "%74mp/x",
        "%2574mp/x",
        "media/../tmp/x",
        "ｔｍｐ/x",
        "tmp\u{200b}/x",
        "tmp./x",
        "tmp /x",
        "tmp",
        "TMP",
        "\ttmp/x",
        "тмр/x",
        "a/b/../../tmp/x",
        "tmp\u{2215}x",
    ] {
        assert_eq!(
            FinalKey::parse_custom(raw, &ReservedKeys::base()),
            Err(FinalKeyError::Reserved),
            "{raw:?}"
        );
    }
}

#[test]
fn custom_final_keys_follow_the_grammar() {
    assert!(FinalKey::parse_custom("avatars/alice/current.png", &ReservedKeys::base()).is_ok());
    assert!(FinalKey::parse_custom("tmpl/x", &ReservedKeys::base()).is_ok());
    assert!(FinalKey::parse_custom("media/tmp/x", &ReservedKeys::base()).is_ok());
    let cases: [(&str, FinalKeyError); 10] = [
        ("", FinalKeyError::Empty),
        ("a/", FinalKeyError::InvalidSegment),
        ("a//b", FinalKeyError::InvalidSegment),
        ("a/./b", FinalKeyError::InvalidSegment),
        ("a/../b", FinalKeyError::InvalidSegment),
        ("..", FinalKeyError::InvalidSegment),
        ("a b", FinalKeyError::InvalidCharacter),
        ("a%20b", FinalKeyError::InvalidCharacter),
        ("caf\u{e9}", FinalKeyError::InvalidCharacter),
        ("a\nb", FinalKeyError::InvalidCharacter),
    ];
    for (raw, want) in cases {
        assert_eq!(
            FinalKey::parse_custom(raw, &ReservedKeys::base()),
            Err(want),
            "{raw:?}"
        );
    }
    assert_eq!(
        FinalKey::parse_custom(&"k".repeat(1025), &ReservedKeys::base()),
        Err(FinalKeyError::TooLong)
    );
    assert!(FinalKey::parse_custom(&"k".repeat(1024), &ReservedKeys::base()).is_ok());
    assert_eq!(
        FinalKey::parse_custom("/abs", &ReservedKeys::base()),
        Err(FinalKeyError::InvalidSegment)
    );
}

#[test]
fn a_temporary_pair_sits_under_its_ttl_prefix_and_an_ordinary_one_never_does() {
    let key = tmp("report.csv");
    let prefix = FinalPrefix::parse("exports/").expect("valid prefix");
    let ttl = TtlDays::parse("7d").expect("7d");
    let temporary = FinalKey::paired_in(&prefix, Some(ttl), &key);
    assert_eq!(
        temporary.as_str(),
        format!("temp/7d/exports/{}/report.csv", key.upload_id())
    );
    let ordinary = FinalKey::paired_in(&prefix, None, &key);
    assert_eq!(ordinary, FinalKey::paired(&prefix, &key));
    assert!(!super::super::temporary::is_temporary_key(
        ordinary.as_str()
    ));
    // Nobody else may name a key there: the whole temp/ prefix is reserved.
    for raw in [
        temporary.as_str(),
        "temp/7d/exports/x.csv",
        "TEMP/7d/a",
        "temp",
    ] {
        assert_eq!(
            FinalKey::parse_custom(raw, &ReservedKeys::base()),
            Err(FinalKeyError::Reserved),
            "{raw:?}"
        );
    }
    assert_eq!(FinalPrefix::parse("temp/"), Err(FinalKeyError::Reserved));
    assert_eq!(
        FinalPrefix::parse("temp/7d/exports/"),
        Err(FinalKeyError::Reserved)
    );
    assert!(FinalPrefix::parse("temporary/").is_ok());
}

#[test]
fn final_prefixes_are_checked() {
    assert!(FinalPrefix::parse("media/images/").is_ok());
    assert_eq!(
        FinalPrefix::parse("media/images"),
        Err(FinalKeyError::InvalidSegment)
    );
    assert_eq!(FinalPrefix::parse("tmp/"), Err(FinalKeyError::Reserved));
    assert_eq!(
        FinalPrefix::parse("TMP/images/"),
        Err(FinalKeyError::Reserved)
    );
    assert_eq!(FinalPrefix::parse("/"), Err(FinalKeyError::Empty));
}

#[test]
fn legacy_keys_must_sit_under_a_configured_prefix() {
    let prefixes = [FinalPrefix::parse("uploads/").expect("valid")];
    assert!(is_legacy_key("uploads/alice/1.png", &prefixes));
    assert!(!is_legacy_key("uploads/alice/1.png", &[]));
    assert!(!is_legacy_key("media/images/1.png", &prefixes));
    assert!(!is_legacy_key("uploads/../tmp/x", &prefixes));
    assert!(!is_legacy_key("uploads/a b", &prefixes));
}
