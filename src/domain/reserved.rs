//! The key space an admin's custom final key may not take.
//!
//! Two kinds of key are reserved:
//! * **Expiring prefixes.** Every prefix that an enabled lifecycle rule expiring current versions
//!   covers: `tmp/`, `quarantine/` (where `reconcile --quarantine` moves objects), `cache/`
//!   (renditions, whose rule is required only while a profile has variants), every such
//!   prefix in `infra/lifecycle-rules.json`, and, when the server has read the live bucket's
//!   lifecycle document, every such prefix there. A rule narrowed by tags or object size still
//!   reserves its whole prefix: which objects it reaches depends on data the key does not show.
//!   A file committed there would be deleted by the bucket, not by anyone's decision.
//! * **The paired layout.** `<final prefix of any profile><32 hex characters>` and anything
//!   below it: the key a user's own commit of that upload id produces. An admin key there would
//!   make the owner's commit answer `final_key_conflict` for ever.
//!
//! Both are judged on the same normalized skeleton of the key: percent-decoded (repeatedly),
//! invisible characters, whitespace and control characters dropped, look-alikes folded to the
//! ASCII they imitate, lowercased, `.`/`..`/empty segments resolved and trailing dots trimmed.
//! So every spelling some layer might read as a reserved key is refused, not only the literal.
//! The prefixes are normalized the same way (their last, partial segment excepted from `.`/`..`
//! resolution), which keeps the rule sound: a grammar-valid key that literally starts with a
//! reserved prefix always normalizes to a skeleton that starts with the normalized prefix
//! (a property test below checks it).
//!
//! Everything here is pure: the live document's prefixes come in as data.

use percent_encoding::percent_decode_str;

use super::lifecycle::Rule;
use super::prefixes::{CACHE_PREFIX, QUARANTINE_PREFIX, TEMP_PREFIX, TMP_PREFIX};

/// Why a key is reserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reservation {
    /// Under a prefix a lifecycle rule expires.
    Expiring,
    /// In the paired layout of some profile: `<final prefix><upload id>/…`.
    Paired,
}

/// The reserved key space, built from the prefixes that expire and the profiles' final prefixes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReservedKeys {
    /// Normalized expiring prefixes; always holds `tmp/`, `quarantine/`, `temp/` (the
    /// temporary profiles' tiers, whether or not a profile uses them) and `cache/` (the
    /// renditions, whether or not a profile has variants).
    expiring: Vec<String>,
    /// Normalized final prefixes (each ends with `/`).
    paired: Vec<String>,
}

/// Length of an upload id in its key segment (32 lowercase hex characters).
const UPLOAD_ID_LEN: usize = 32;

impl ReservedKeys {
    /// `tmp/`, `quarantine/`, `temp/`, `cache/`, the given expiring prefixes, and the paired layout under each of
    /// `final_prefixes` (profiles' final prefixes, `keys::FinalPrefix`, which is checked against
    /// this space: so it comes in as text and this module does not import `keys`).
    pub fn new<'a, P: AsRef<str>>(
        expiring: impl IntoIterator<Item = &'a str>,
        final_prefixes: impl IntoIterator<Item = P>,
    ) -> Self {
        let mut expiring: Vec<String> = [TMP_PREFIX, QUARANTINE_PREFIX, TEMP_PREFIX, CACHE_PREFIX]
            .into_iter()
            .chain(expiring)
            .map(normalize_prefix)
            .collect();
        expiring.sort();
        expiring.dedup();
        let mut paired: Vec<String> = final_prefixes
            .into_iter()
            .map(|p| normalize_prefix(p.as_ref()))
            .collect();
        paired.sort();
        paired.dedup();
        Self { expiring, paired }
    }

    /// Only `tmp/`, `quarantine/`, `temp/` and `cache/`: what is reserved before any rule or
    /// profile is known.
    pub fn base() -> Self {
        Self::new([], [] as [&str; 0])
    }

    /// Adds the prefixes that `rules` expire (a rules file or a live lifecycle document).
    pub fn with_rules(mut self, rules: &[Rule]) -> Self {
        self.expiring
            .extend(expiring_prefixes(rules).map(normalize_prefix));
        self.expiring.sort();
        self.expiring.dedup();
        self
    }

    /// `Some` when `raw`, read any way a layer might read it, falls in the reserved space.
    pub fn reservation(&self, raw: &str) -> Option<Reservation> {
        let mut skeleton = skeleton(raw).join("/");
        // A key equal to a prefix without its slash (`tmp`) is reserved with it.
        skeleton.push('/');
        if self
            .expiring
            .iter()
            .any(|p| skeleton.starts_with(p.as_str()))
        {
            return Some(Reservation::Expiring);
        }
        let paired = self.paired.iter().any(|p| {
            skeleton
                .strip_prefix(p.as_str())
                .and_then(|rest| rest.split('/').next())
                .is_some_and(is_upload_id_shaped)
        });
        paired.then_some(Reservation::Paired)
    }

    /// True when every key under `prefix` is in an expiring prefix (a profile whose final
    /// prefix is such would lose every file it commits).
    pub fn expires_prefix(&self, prefix: &str) -> bool {
        self.reservation(prefix) == Some(Reservation::Expiring)
    }
}

/// The prefixes of the rules that delete live data: enabled, expiring current versions.
pub fn expiring_prefixes(rules: &[Rule]) -> impl Iterator<Item = &str> {
    rules
        .iter()
        .filter(|r| r.expires_current())
        .map(|r| r.prefix.as_str())
}

/// A segment an upload id could be read as: 32 hex digits after case folding.
fn is_upload_id_shaped(seg: &str) -> bool {
    seg.len() == UPLOAD_ID_LEN && seg.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Characters that render as nothing (soft hyphen, zero-width and bidi controls, word joiners,
/// BOM); a layer that strips them would see a different key.
pub(super) fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// Maps characters that read as ASCII to the ASCII they imitate: full-width forms, slash
/// look-alikes and the Cyrillic letters that spell `tmp`.
fn fold_lookalike(c: char) -> char {
    match c {
        '\u{FF01}'..='\u{FF5E}' => char::from_u32(c as u32 - 0xFEE0).unwrap_or(c),
        '\u{2215}' | '\u{2044}' | '\u{29F8}' => '/',
        '\u{0442}' | '\u{0422}' => 't',
        '\u{043C}' | '\u{041C}' => 'm',
        '\u{0440}' | '\u{0420}' => 'p',
        '\\' => '/',
        _ => c,
    }
}

/// Percent-decoded until stable (at most four rounds), invisible characters, whitespace and
/// controls dropped, look-alikes folded, lowercased.
fn fold(raw: &str) -> String {
    let mut decoded = raw.to_owned();
    for _ in 0..4 {
        let next = percent_decode_str(&decoded)
            .decode_utf8_lossy()
            .into_owned();
        if next == decoded {
            break;
        }
        decoded = next;
    }
    decoded
        .chars()
        .filter(|c| !is_invisible(*c) && !c.is_whitespace() && !c.is_control())
        .map(fold_lookalike)
        .collect::<String>()
        .to_lowercase()
}

/// `tmp.` and `tmp...` name the same thing to several file-system-backed stores.
fn trim_segment(seg: &str) -> &str {
    seg.trim_end_matches('.')
}

/// The folded key's segments with `.`, `..` and empty ones resolved, trailing dots trimmed.
fn skeleton(raw: &str) -> Vec<String> {
    let mut resolved: Vec<String> = Vec::new();
    for seg in fold(raw).split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                resolved.pop();
            }
            s => match trim_segment(s) {
                "" => {}
                trimmed => resolved.push(trimmed.to_owned()),
            },
        }
    }
    resolved
}

/// A prefix in the skeleton's form: its whole segments resolved like a key's, its last
/// (partial) segment only folded and trimmed, so `quarantine/` stays `quarantine/` and a
/// partial prefix like `logs` still matches `logs2/…`.
fn normalize_prefix(prefix: &str) -> String {
    let folded = fold(prefix);
    let (whole, partial) = match folded.rfind('/') {
        Some(i) => (&folded[..i], &folded[i + 1..]),
        None => ("", folded.as_str()),
    };
    let mut out = skeleton(whole).join("/");
    if !out.is_empty() {
        out.push('/');
    }
    out.push_str(trim_segment(partial));
    out
}

/// True when `raw` resolves under `tmp/` (every spelling; see the module docs).
pub fn resolves_under_tmp(raw: &str) -> bool {
    let mut skeleton = skeleton(raw).join("/");
    skeleton.push('/');
    skeleton.starts_with(TMP_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::keys::FinalPrefix;
    use crate::domain::lifecycle::required_rules;

    const ID: &str = "0192f3a4b5c6d7e8f90a1b2c3d4e5f60";

    fn images() -> FinalPrefix {
        FinalPrefix::parse("media/images/").expect("valid")
    }

    fn compiled() -> ReservedKeys {
        let prefixes = [
            images(),
            FinalPrefix::parse("media/recordings/").expect("valid"),
        ];
        ReservedKeys::new([], prefixes.iter()).with_rules(required_rules())
    }

    #[test]
    fn every_expiring_prefix_of_the_rules_file_is_reserved() {
        let reserved = compiled();
        let expiring: Vec<&str> = expiring_prefixes(required_rules()).collect();
        assert!(expiring.contains(&"tmp/"), "{expiring:?}");
        assert!(expiring.contains(&"quarantine/"), "{expiring:?}");
        for p in expiring {
            assert_eq!(
                reserved.reservation(&format!("{p}kept.jpg")),
                Some(Reservation::Expiring),
                "{p:?}"
            );
        }
    }

    #[test]
    fn the_reconcile_quarantine_prefix_is_expired_by_a_compiled_rule_and_always_reserved() {
        assert!(required_rules()
            .iter()
            .any(|r| r.expires_current() && r.covers(QUARANTINE_PREFIX)));
        assert_eq!(
            ReservedKeys::base().reservation("quarantine/kept.jpg"),
            Some(Reservation::Expiring)
        );
    }

    #[test]
    fn the_renditions_prefix_is_reserved_in_every_spelling_before_any_rule_is_read() {
        assert!(required_rules()
            .iter()
            .any(|r| r.expires_current() && r.covers(CACHE_PREFIX)));
        for raw in [
            "cache/x.jpg",
            "CACHE/0192f3a4b5c6d7e8f90a1b2c3d4e5f60/thumb-0.jpg",
            "./cache/x.jpg",
            "%63ache/x.jpg",
            "cache",
        ] {
            assert_eq!(
                ReservedKeys::base().reservation(raw),
                Some(Reservation::Expiring),
                "{raw:?}"
            );
        }
        assert_eq!(ReservedKeys::base().reservation("caches/x.jpg"), None);
        assert!(ReservedKeys::base().expires_prefix("cache/thumbs/"));
    }

    #[test]
    fn every_spelling_of_quarantine_is_reserved() {
        let reserved = compiled();
        for raw in [
            "quarantine/kept.jpg",
            "QUARANTINE/kept.jpg",
            "Quarantine/kept.jpg",
            "./quarantine/kept.jpg",
            "/quarantine/kept.jpg",
            "quarantine//kept.jpg",
            "quarantine\\kept.jpg",
            "quarantine%2Fkept.jpg",
            "%71uarantine/kept.jpg",
            "%2571uarantine/kept.jpg",
            "media/../quarantine/kept.jpg",
            "ｑｕａｒａｎｔｉｎｅ/kept.jpg",
            "quar\u{200b}antine/kept.jpg",
            "quarantine./kept.jpg",
            "quarantine /kept.jpg",
            " quarantine/kept.jpg",
            "quarantine",
            "quarantine\u{2215}kept.jpg",
            "a/b/../../quarantine/x",
            "quarantine/media/images/x.png",
        ] {
            assert_eq!(
                reserved.reservation(raw),
                Some(Reservation::Expiring),
                "{raw:?}"
            );
        }
        for fine in ["quarantined/x", "media/quarantine/x", "quarantin/x"] {
            assert_eq!(reserved.reservation(fine), None, "{fine:?}");
        }
    }

    #[test]
    fn live_rules_reserve_their_expiring_prefixes_only() {
        let mut cache = Rule::new("cache", "cache/");
        cache.expiration_days = Some(3);
        let mut logs = Rule::new("logs", "logs");
        logs.expiration_date = Some("2027-01-01T00:00:00Z".into());
        let mut narrowed = Rule::new("big", "exports/");
        narrowed.expiration_days = Some(10);
        narrowed.narrowed = true;
        let mut off = Rule::new("off", "old/");
        off.expiration_days = Some(1);
        off.enabled = false;
        let mut noncurrent = Rule::new("nc", "docs/");
        noncurrent.noncurrent_expiration_days = Some(1);
        let mut abort = Rule::new("abort", "");
        abort.abort_incomplete_multipart_days = Some(1);
        let reserved =
            ReservedKeys::base().with_rules(&[cache, logs, narrowed, off, noncurrent, abort]);
        for raw in ["cache/x", "CACHE/x", "logs/x", "logs2/x", "exports/x.csv"] {
            assert_eq!(
                reserved.reservation(raw),
                Some(Reservation::Expiring),
                "{raw:?}"
            );
        }
        for fine in ["old/x", "docs/x", "avatars/a.png", "cach/x", "log/x"] {
            assert_eq!(reserved.reservation(fine), None, "{fine:?}");
        }
    }

    #[test]
    fn a_rule_over_the_whole_bucket_reserves_every_key() {
        let mut all = Rule::new("all", "");
        all.expiration_days = Some(365);
        let reserved = ReservedKeys::base().with_rules(&[all]);
        assert_eq!(
            reserved.reservation("avatars/a.png"),
            Some(Reservation::Expiring)
        );
    }

    #[test]
    fn every_spelling_of_a_paired_key_is_reserved() {
        let reserved = compiled();
        let upper = ID.to_uppercase();
        let wide: String = ID
            .chars()
            .map(|c| char::from_u32(c as u32 + 0xFEE0).unwrap_or(c))
            .collect();
        for raw in [
            format!("media/images/{ID}/bob.png"),
            format!("media/images/{ID}/other/name.png"),
            format!("media/images/{ID}"),
            format!("media/recordings/{ID}/song.mp3"),
            format!("MEDIA/Images/{upper}/bob.png"),
            format!("media/images/{wide}/bob.png"),
            format!("media//images/./{ID}/bob.png"),
            format!("media/x/../images/{ID}/bob.png"),
            format!("media%2Fimages%2F{ID}%2Fbob.png"),
            format!("media/images/{ID}./bob.png"),
            format!("media\\images\\{ID}\\bob.png"),
        ] {
            assert_eq!(
                reserved.reservation(&raw),
                Some(Reservation::Paired),
                "{raw:?}"
            );
        }
        for fine in [
            "media/images/avatar.png".to_owned(),
            format!("media/images/{ID}x/bob.png"),
            format!("media/images/{}/bob.png", &ID[..31]),
            format!("media/images/sub/{ID}/bob.png"),
            format!("media/images2/{ID}/bob.png"),
            format!("avatars/{ID}/bob.png"),
            format!("media/images/{}g/bob.png", &ID[..31]),
        ] {
            assert_eq!(reserved.reservation(&fine), None, "{fine:?}");
        }
    }

    #[test]
    fn tmp_is_reserved_exactly_as_before() {
        for raw in ["tmp/x", "TMP", "tmp", "%74mp/x", "тмр/x", "a/../tmp/x"] {
            assert!(resolves_under_tmp(raw), "{raw:?}");
            assert_eq!(
                ReservedKeys::base().reservation(raw),
                Some(Reservation::Expiring)
            );
        }
        for fine in ["tmpl/x", "media/tmp/x", "t/mp"] {
            assert!(!resolves_under_tmp(fine), "{fine:?}");
        }
    }

    #[test]
    fn prefixes_normalize_like_keys() {
        assert_eq!(normalize_prefix("tmp/"), "tmp/");
        assert_eq!(normalize_prefix("Quarantine/"), "quarantine/");
        assert_eq!(normalize_prefix("logs"), "logs");
        assert_eq!(normalize_prefix("a/./b/"), "a/b/");
        assert_eq!(normalize_prefix("a./b."), "a/b");
        assert_eq!(normalize_prefix(""), "");
    }
}

/// The soundness of the rule over generated input.
#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;
    use crate::domain::keys::{FinalKey, FinalPrefix};

    /// Grammar-valid keys (what S3 would store for an accepted admin key).
    fn grammar_key() -> impl Strategy<Value = String> {
        prop::collection::vec("[a-zA-Z0-9_=+@,!.-]{1,10}", 1..6)
            .prop_map(|segs| segs.join("/"))
            .prop_filter("no . or .. segments", |k| {
                k.split('/').all(|s| s != "." && s != "..")
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// Any rule prefix that literally covers a grammar-valid key reserves that key, whatever
        /// the prefix looks like: cut anywhere, any case, any dots.
        #[test]
        fn a_key_under_an_expiring_prefix_is_always_refused(
            key in grammar_key(),
            cut in 0usize..60,
        ) {
            let cut = cut.min(key.len());
            let prefix = &key[..cut];
            let mut rule = Rule::new("r", prefix);
            rule.expiration_days = Some(1);
            let reserved = ReservedKeys::base().with_rules(&[rule]);
            prop_assert_eq!(reserved.reservation(&key), Some(Reservation::Expiring), "{:?} under {:?}", key, prefix);
            prop_assert!(FinalKey::parse_custom(&key, &reserved).is_err());
        }

        /// The paired key of any upload id under any profile prefix is refused as a custom key.
        #[test]
        fn the_paired_key_of_any_upload_is_refused(
            prefix in "[a-z]{1,8}/([a-z0-9]{1,8}/)?",
            id in "[0-9a-f]{32}",
            name in "[a-zA-Z0-9_-]{1,20}(\\.[a-z0-9]{1,5})?",
        ) {
            // A generated `tmp/` is no profile's prefix.
            let Ok(prefix) = FinalPrefix::parse(&prefix) else {
                return Ok(());
            };
            let reserved = ReservedKeys::new([], [&prefix]);
            let key = format!("{}{id}/{name}", prefix.as_str());
            prop_assert!(reserved.reservation(&key).is_some(), "{:?}", key);
        }

        /// Keys that neither sit under an expiring prefix nor look paired stay available.
        #[test]
        fn an_unrelated_key_is_not_reserved(
            key in ("[a-zA-Z0-9][a-zA-Z0-9_=+@,!-]{0,9}", grammar_key()).prop_map(|(a, b)| format!("{a}/{b}")),
        ) {
            let reserved = ReservedKeys::new([], [&FinalPrefix::parse("media/images/").expect("valid")]);
            let lower = key.to_ascii_lowercase();
            let first = lower.split('/').next().unwrap_or("");
            prop_assume!(first != "tmp" && first != "quarantine" && first != "media");
            prop_assert_eq!(reserved.reservation(&key), None, "{:?}", key);
        }
    }
}
