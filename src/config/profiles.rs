//! Upload profiles: the TOML `[[profiles]]` tables (or the built-in ones), each one's
//! content types, size and final prefix, its `temporary_ttl`, its `validation_hook`, and the
//! environment lists that replace its `tracks_links` and `require_checksum`.

use crate::domain::content::ContentType;
use crate::domain::image::{ImageBounds, DEFAULT_MAX_PIXELS};
use crate::domain::keys::FinalPrefix;
use crate::domain::lifecycle::{missing_required, required_rules, Rule};
use crate::domain::prefixes::TEMP_PREFIX;
use crate::domain::profile::{builtin_profiles, Profile};
use crate::domain::temporary::TtlDays;
use crate::domain::validation_hook::{
    HookSecret, OnError, ValidationHook, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS,
};

use super::file::{FileProfile, FileSettings, FileValidationHook, FileVariant};
use super::source::{ConfigError, Source};
use super::Settings;
use crate::domain::variants::{Fit, OutputFormat, Variant};

/// The profiles of the file (or the built-in ones when it has none), then the environment's
/// `UPCOMMIT_TRACKS_LINKS` and `UPCOMMIT_REQUIRE_CHECKSUM`.
pub(super) fn load(src: &Source<'_>, f: &mut FileSettings) -> Result<Vec<Profile>, ConfigError> {
    let profiles = match f.profiles.take() {
        Some(list) => list
            .into_iter()
            .map(parse_profile)
            .collect::<Result<Vec<_>, _>>()?,
        None => builtin_profiles(),
    };
    if profiles.is_empty() {
        return Err(ConfigError(
            "profiles: at least one profile is required".into(),
        ));
    }
    // Which profiles' files hygiene may act on, and which require a checksum: each
    // environment list, when set, replaces the profiles' own setting.
    let mut profiles = profiles;
    if let Some(names) = profile_list(src, "UPCOMMIT_TRACKS_LINKS", &profiles)? {
        for p in &mut profiles {
            p.tracks_links = names.contains(&p.name);
        }
    }
    if let Some(names) = profile_list(src, "UPCOMMIT_REQUIRE_CHECKSUM", &profiles)? {
        for p in &mut profiles {
            p.require_checksum = names.contains(&p.name);
        }
    }
    Ok(profiles)
}

/// A comma-separated list of profile names from the environment (`None` when unset); every
/// name must be a configured profile.
fn profile_list(
    src: &Source<'_>,
    var: &str,
    profiles: &[Profile],
) -> Result<Option<Vec<String>>, ConfigError> {
    if (src.env)(var).is_none() {
        return Ok(None);
    }
    let names = src.list(var, None);
    if let Some(bad) = names
        .iter()
        .find(|n| !profiles.iter().any(|p| &p.name == *n))
    {
        return Err(ConfigError(format!("{var}: no profile is named {bad:?}")));
    }
    Ok(Some(names))
}

fn parse_profile(p: FileProfile) -> Result<Profile, ConfigError> {
    let at = |what: &str| format!("profiles.{}: {what}", p.name);
    if p.name.is_empty()
        || p.name.len() > 32
        || !p
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    {
        return Err(ConfigError(at("name must be 1-32 of [a-z0-9_-]")));
    }
    let content_types = p
        .content_types
        .iter()
        .map(|t| {
            ContentType::parse(t)
                .map_err(|_| ConfigError(at(&format!("content type {t:?} is malformed"))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if content_types.is_empty() || p.max_size == 0 {
        return Err(ConfigError(at(
            "needs content_types and a max_size above 0",
        )));
    }
    let final_prefix = FinalPrefix::parse(&p.final_prefix).map_err(|e| {
        ConfigError(at(&format!(
            "final_prefix {:?}: {e:?} (must end with / and not be under tmp/ or another prefix a lifecycle rule expires)",
            p.final_prefix
        )))
    })?;
    let temporary_ttl = p
        .temporary_ttl
        .as_deref()
        .map(|raw| temporary_ttl(raw, required_rules()).map_err(|e| ConfigError(at(&e))))
        .transpose()?;
    let validation_hook = p
        .validation_hook
        .map(|h| validation_hook(h).map_err(|e| ConfigError(at(&format!("validation_hook: {e}")))))
        .transpose()?;
    let image_bounds = ImageBounds {
        max_pixels: p.max_pixels.unwrap_or(DEFAULT_MAX_PIXELS),
        min_width: p.min_width,
        max_width: p.max_width,
        min_height: p.min_height,
        max_height: p.max_height,
    };
    image_bounds.validate().map_err(|e| ConfigError(at(&e)))?;
    let variants = p
        .variants
        .into_iter()
        .map(variant)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ConfigError(at(&e)))?;
    if let Some(dup) = variants
        .iter()
        .enumerate()
        .find(|(i, v)| variants[..*i].iter().any(|w| w.name == v.name))
    {
        return Err(ConfigError(at(&format!(
            "variant name {:?} is used twice",
            dup.1.name
        ))));
    }
    if !variants.is_empty() {
        if let Some(t) = content_types
            .iter()
            .find(|t| crate::domain::image::Format::of_content_type(t.as_str()).is_none())
        {
            return Err(ConfigError(at(&format!(
                "variants render images; content type {:?} is not an image format the renderer reads",
                t.as_str()
            ))));
        }
    }
    Ok(Profile {
        name: p.name,
        content_types,
        max_size: p.max_size,
        final_prefix,
        tracks_links: p.tracks_links,
        require_checksum: p.require_checksum,
        temporary_ttl,
        validation_hook,
        image_bounds,
        variants,
    })
}

/// One `[[profiles.variants]]` table: `fit` defaults to `cover`, `format` to `jpeg`, `quality`
/// to 80.
fn variant(v: FileVariant) -> Result<Variant, String> {
    let fit = match v.fit.as_deref() {
        None => Fit::Cover,
        Some(raw) => Fit::parse(raw).ok_or_else(|| {
            format!(
                "variant {}: fit must be cover, contain or inside, got {raw:?}",
                v.name
            )
        })?,
    };
    let format = match v.format.as_deref() {
        None => OutputFormat::Jpeg,
        Some(raw) => OutputFormat::parse(raw).ok_or_else(|| {
            format!(
                "variant {}: format must be jpeg, webp or avif, got {raw:?}",
                v.name
            )
        })?,
    };
    let variant = Variant {
        name: v.name,
        width: v.width,
        height: v.height,
        fit,
        format,
        quality: v.quality.unwrap_or(80),
        eager: v.eager,
    };
    variant.validate()?;
    Ok(variant)
}

/// A profile's `validation_hook`: an http(s) URL, a timeout of 1..=60000 ms (default 2000),
/// `on_error` `reject` (default) or `allow`, and an optional `whsec_` secret.
fn validation_hook(h: FileValidationHook) -> Result<ValidationHook, String> {
    let url = h.url.trim().to_owned();
    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
    if !scheme_ok
        || url
            .bytes()
            .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return Err(format!("url: expected an http(s) URL, got {:?}", h.url));
    }
    // Parsed as the request will be, so that a URL no request can reach (a port past 65535,
    // an unclosed `[`) stops the start instead of failing every commit (open or closed).
    crate::domain::webhooks::check_reachable(&url).map_err(|e| format!("url: {e}"))?;
    let timeout_ms = h.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
        return Err(format!(
            "timeout_ms: must be 1..={MAX_TIMEOUT_MS}, got {timeout_ms}"
        ));
    }
    let on_error = match h.on_error.as_deref() {
        None => OnError::Reject,
        Some(raw) => OnError::parse(raw).ok_or_else(|| {
            format!(
                "on_error: expected \"reject\" (fail closed) or \"allow\" (fail open), got {raw:?}"
            )
        })?,
    };
    let secret = h
        .secret
        .as_deref()
        .map(|raw| {
            HookSecret::parse(raw).map_err(|_| {
                "secret: expected whsec_ followed by the base64 of 24 to 64 random bytes".to_owned()
            })
        })
        .transpose()?;
    Ok(ValidationHook {
        url,
        timeout: std::time::Duration::from_millis(timeout_ms),
        on_error,
        secret,
    })
}

/// A profile's `temporary_ttl`: whole days, and a tier the rules file (so terraform, the one
/// owner of the bucket's lifecycle) expires. A TTL without its rule would leave files for ever
/// while the API calls them expired, so it fails at start instead.
fn temporary_ttl(raw: &str, rules: &[Rule]) -> Result<TtlDays, String> {
    let ttl = TtlDays::parse(raw).map_err(|e| format!("temporary_ttl {raw:?} {e}"))?;
    if !missing_required(rules, &[ttl.lifecycle_rule()]).is_empty() {
        let tiers: Vec<String> = rules
            .iter()
            .filter_map(|r| {
                let days = r.prefix.strip_prefix(TEMP_PREFIX)?.strip_suffix("d/")?;
                Some(format!("{days}d"))
            })
            .collect();
        return Err(format!(
            "temporary_ttl {ttl}: infra/lifecycle-rules.json has no rule expiring {} within {} day(s) (with noncurrent versions after 1); use a tier it has ({}) or add the rule there first",
            ttl.prefix(),
            ttl.days(),
            tiers.join(", ")
        ));
    }
    Ok(ttl)
}

impl Settings {
    /// The profiles whose files hygiene may unlink, archive and delete: those that track links.
    pub fn hygiene_profiles(&self) -> Vec<String> {
        self.uploads
            .profiles
            .iter()
            // A temporary profile's files are the lifecycle rule's, whatever it tracks.
            .filter(|p| p.tracks_links && p.temporary_ttl.is_none())
            .map(|p| p.name.clone())
            .collect()
    }

    pub fn profile(&self, name: &str) -> Option<&Profile> {
        self.uploads.profiles.iter().find(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::source::env;

    #[test]
    fn a_temporary_profile_needs_whole_days_and_a_tier_of_the_rules_file() {
        let file = |ttl: &str| {
            format!(
                r#"
                jwt_secret = "file-secret-0123456789"
                [[profiles]]
                name = "export"
                content_types = ["text/csv"]
                max_size = 1000
                final_prefix = "exports/"
                tracks_links = true
                temporary_ttl = "{ttl}"
                "#
            )
        };
        let s = Settings::from_sources(Some(&file("7d")), &|_| None).expect("7d loads");
        let p = s.profile("export").expect("export");
        assert_eq!(p.temporary_ttl.map(TtlDays::days), Some(7));
        assert!(
            s.hygiene_profiles().is_empty(),
            "a temporary profile is never hygiene's, even when it tracks links"
        );
        for (ttl, says) in [
            ("36h", "whole number of days"),
            ("0d", "whole number of days"),
            ("later", "not a duration"),
            ("14d", "temp/14d/"),
        ] {
            let err = Settings::from_sources(Some(&file(ttl)), &|_| None)
                .expect_err(ttl)
                .0;
            assert!(
                err.starts_with("profiles.export: temporary_ttl") && err.contains(says),
                "{ttl}: {err}"
            );
        }
        let err = Settings::from_sources(Some(&file("14d")), &|_| None)
            .expect_err("14d")
            .0;
        assert!(err.contains("1d, 7d, 30d"), "names the tiers: {err}");
    }

    #[test]
    fn image_bounds_default_to_100_megapixels_and_must_admit_something() {
        let file = |bounds: &str| {
            format!(
                r#"
                jwt_secret = "file-secret-0123456789"
                [[profiles]]
                name = "photo"
                content_types = ["image/jpeg"]
                max_size = 1000
                final_prefix = "photos/"
                {bounds}
                "#
            )
        };
        let s = Settings::from_sources(Some(&file("")), &|_| None).expect("no bounds");
        let b = s.profile("photo").expect("photo").image_bounds;
        assert_eq!(b, crate::domain::image::ImageBounds::default());
        assert_eq!(b.max_pixels, 100_000_000);
        let s = Settings::from_sources(
            Some(&file(
                "max_pixels = 24000000\nmin_width = 320\nmax_height = 8000",
            )),
            &|_| None,
        )
        .expect("bounds");
        let b = s.profile("photo").expect("photo").image_bounds;
        assert_eq!(
            (b.max_pixels, b.min_width, b.max_width, b.max_height),
            (24_000_000, Some(320), None, Some(8000))
        );
        for (bad, says) in [
            ("max_pixels = 0", "max_pixels must be above 0"),
            ("min_width = 0", "above 0"),
            (
                "min_height = 500\nmax_height = 499",
                "min_height 500 is above max_height 499",
            ),
            ("max_pixels = -1", "max_pixels"),
        ] {
            let err = Settings::from_sources(Some(&file(bad)), &|_| None)
                .expect_err(bad)
                .0;
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn variants_take_defaults_and_refuse_what_cannot_render() {
        let file = |types: &str, variants: &str| {
            format!(
                r#"
                jwt_secret = "file-secret-0123456789"
                [[profiles]]
                name = "photo"
                content_types = [{types}]
                max_size = 1000
                final_prefix = "photos/"
                {variants}
                "#
            )
        };
        let two = "[[profiles.variants]]\nname = \"thumb\"\nwidth = 400\nheight = 400\n\
                   [[profiles.variants]]\nname = \"card\"\nwidth = 1200\nheight = 630\nfit = \"inside\"\nformat = \"webp\"\nquality = 70\neager = true";
        let s =
            Settings::from_sources(Some(&file("\"image/jpeg\", \"image/png\"", two)), &|_| None)
                .expect("two variants");
        let v = &s.profile("photo").expect("photo").variants;
        assert_eq!(v.len(), 2);
        assert_eq!(
            (v[0].fit, v[0].format, v[0].quality, v[0].eager),
            (Fit::Cover, OutputFormat::Jpeg, 80, false),
            "the defaults"
        );
        assert_eq!(
            (
                v[1].width,
                v[1].height,
                v[1].fit,
                v[1].format,
                v[1].quality,
                v[1].eager
            ),
            (1200, 630, Fit::Inside, OutputFormat::Webp, 70, true)
        );
        let one = |extra: &str| {
            format!("[[profiles.variants]]\nname = \"thumb\"\nwidth = 400\nheight = 400\n{extra}")
        };
        for (types, variants, says) in [
            (
                "\"image/jpeg\"",
                one("fit = \"fill\""),
                "fit must be cover, contain or inside",
            ),
            (
                "\"image/jpeg\"",
                one("format = \"gif\""),
                "format must be jpeg, webp or avif",
            ),
            (
                "\"image/jpeg\"",
                one("quality = 0"),
                "quality must be 1..=100",
            ),
            ("\"image/jpeg\"", one("colour = \"red\""), "unknown field"),
            (
                "\"image/jpeg\"",
                format!("{}\n{}", one(""), one("")),
                "used twice",
            ),
            (
                "\"image/jpeg\", \"audio/mpeg\"",
                one(""),
                "not an image format",
            ),
        ] {
            let err = Settings::from_sources(Some(&file(types, &variants)), &|_| None)
                .expect_err(says)
                .0;
            assert!(err.contains(says), "{says}: {err}");
        }
    }

    #[test]
    fn a_validation_hook_is_an_http_url_with_a_bounded_timeout_and_a_known_policy() {
        let file = |hook: &str| {
            format!(
                r#"
                jwt_secret = "file-secret-0123456789"
                [[profiles]]
                name = "scan"
                content_types = ["image/png"]
                max_size = 1000
                final_prefix = "scanned/"
                validation_hook = {hook}
                "#
            )
        };
        let s = Settings::from_sources(
            Some(&file(r#"{ url = "http://scanner:9000/check" }"#)),
            &|_| None,
        )
        .expect("defaults load");
        let h = s
            .profile("scan")
            .and_then(|p| p.validation_hook.clone())
            .expect("hook");
        assert_eq!(h.url, "http://scanner:9000/check");
        assert_eq!(h.timeout, std::time::Duration::from_millis(2000));
        assert_eq!(h.on_error, OnError::Reject);
        assert!(h.secret.is_none());
        let s = Settings::from_sources(
            Some(&file(
                r#"{ url = "https://mod.example/v", timeout_ms = 500, on_error = "allow", secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }"#,
            )),
            &|_| None,
        )
        .expect("full table loads");
        let h = s
            .profile("scan")
            .and_then(|p| p.validation_hook.clone())
            .expect("hook");
        assert_eq!((h.timeout.as_millis(), h.on_error), (500, OnError::Allow));
        assert!(h.secret.is_some());
        assert!(
            !format!("{s:?}").contains("MfKQ9r8G"),
            "the secret never shows"
        );
        assert!(s
            .profile("image")
            .map_or(true, |p| p.validation_hook.is_none()));

        for (hook, says) in [
            (r#"{ url = "ftp://x/" }"#, "url"),
            (r#"{ url = "scanner:9000" }"#, "url"),
            // Review 26: a URL no request can reach stops the start (it used to pass a prefix
            // check and fail every commit, open or closed).
            (r#"{ url = "http://127.0.0.1:99999/check" }"#, "url"),
            (r#"{ url = "http://[::1/check" }"#, "url"),
            (r#"{ url = "http://%zz/" }"#, "url"),
            (r#"{ url = "http://:0/" }"#, "url"),
            (r#"{ url = "http://x/", timeout_ms = 0 }"#, "timeout_ms"),
            (r#"{ url = "http://x/", timeout_ms = 60001 }"#, "timeout_ms"),
            (
                r#"{ url = "http://x/", timeout_ms = 30000 }"#,
                "UPCOMMIT_REQUEST_TIMEOUT_SECS",
            ),
            (r#"{ url = "http://x/", on_error = "ignore" }"#, "on_error"),
            (r#"{ url = "http://x/", secret = "hunter2" }"#, "secret"),
            (
                r#"{ url = "http://x/", secret = "whsec_c2hvcnQ=" }"#,
                "secret",
            ),
        ] {
            let err = Settings::from_sources(Some(&file(hook)), &|_| None)
                .expect_err(hook)
                .0;
            assert!(
                err.starts_with("profiles.scan: validation_hook") && err.contains(says),
                "{hook}: {err}"
            );
        }
        let err = Settings::from_sources(
            Some(&file(r#"{ url = "http://x/", retries = 3 }"#)),
            &|_| None,
        )
        .expect_err("unknown key")
        .0;
        assert!(err.contains("retries"), "{err}");
    }

    #[test]
    fn rendering_without_the_seccomp_filter_is_accepted_only_by_its_name() {
        let secret = ("UPCOMMIT_JWT_SECRET", "0123456789abcdef");
        let s = Settings::from_map(&env(&[secret])).expect("loads");
        assert!(!s.uploads.render_accept_unfiltered, "refused by default");
        let s = Settings::from_map(&env(&[secret, ("UPCOMMIT_RENDER_ACCEPT_GAPS", "seccomp")]))
            .expect("loads");
        assert!(s.uploads.render_accept_unfiltered);
        let err = Settings::from_map(&env(&[secret, ("UPCOMMIT_RENDER_ACCEPT_GAPS", "all")]))
            .expect_err("not a gap")
            .0;
        assert!(err.contains("UPCOMMIT_RENDER_ACCEPT_GAPS"), "{err}");
    }

    #[test]
    fn hygiene_acts_on_no_profile_unless_one_tracks_links() {
        let secret = ("UPCOMMIT_JWT_SECRET", "0123456789abcdef");
        let s = Settings::from_map(&env(&[secret])).expect("loads");
        assert!(s.hygiene_profiles().is_empty(), "off by default");
        let s =
            Settings::from_map(&env(&[secret, ("UPCOMMIT_TRACKS_LINKS", "image")])).expect("loads");
        assert_eq!(s.hygiene_profiles(), vec!["image"]);
        let err = Settings::from_map(&env(&[secret, ("UPCOMMIT_TRACKS_LINKS", "imgae")]))
            .expect_err("unknown profile")
            .0;
        assert!(err.contains("imgae"), "{err}");
        let file = r#"
            jwt_secret = "file-secret-0123456789"
            [[profiles]]
            name = "doc"
            content_types = ["application/pdf"]
            max_size = 1000
            final_prefix = "docs/"
            tracks_links = true
            [[profiles]]
            name = "raw"
            content_types = ["application/pdf"]
            max_size = 1000
            final_prefix = "raw/"
        "#;
        let s = Settings::from_sources(Some(file), &|_| None).expect("loads");
        assert_eq!(s.hygiene_profiles(), vec!["doc"]);
        let none = |k: &str| (k == "UPCOMMIT_TRACKS_LINKS").then(String::new);
        let s = Settings::from_sources(Some(file), &none).expect("loads");
        assert!(
            s.hygiene_profiles().is_empty(),
            "the environment's list wins"
        );
    }
}
