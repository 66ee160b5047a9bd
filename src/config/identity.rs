//! Identity: the HS256 secret, and the identity providers whose tokens are checked against a
//! JWKS (the single one of `UPCOMMIT_JWKS_URL`, or the `[[issuers]]` tables).

use super::file::{FileIssuer, FileSettings};
use super::source::{ConfigError, SecretString, Source};

#[derive(Debug, Clone)]
pub struct AuthSettings {
    /// HS256 key for bearer tokens (`UPCOMMIT_JWT_SECRET`, at least 16 bytes; required unless an
    /// identity provider is configured, empty = HS256 tokens refused).
    pub jwt_secret: SecretString,
    /// The identity providers whose asymmetric tokens are accepted: the one of
    /// `UPCOMMIT_JWKS_URL`, or the `[[issuers]]` tables of the settings file (never both).
    /// Empty: none. Their `iss` are distinct and their user ids cannot coincide
    /// ([`ProviderSettings::user_prefix`]).
    pub issuers: Vec<ProviderSettings>,
}

/// One identity provider (Auth0, Cognito, Keycloak, …): its keys come from a JWKS.
#[derive(Debug, Clone)]
pub struct ProviderSettings {
    /// Where the provider publishes its keys (`UPCOMMIT_JWKS_URL`).
    pub jwks_url: String,
    /// The exact `iss` its tokens carry (`UPCOMMIT_JWT_ISSUER`, required with a JWKS URL).
    pub issuer: String,
    /// The `aud` tokens must name (`UPCOMMIT_JWT_AUDIENCE`, required with a JWKS URL).
    pub audience: String,
    /// The claim holding the user id (`UPCOMMIT_JWT_USER_CLAIM`, default `sub`).
    pub user_claim: String,
    /// Put before every user id of this issuer (`user_prefix` of an `[[issuers]]` table,
    /// default empty), so two issuers' users never share an id. With several issuers at most
    /// one has none, no prefix starts another, and the unprefixed issuer's user ids that start
    /// with another's prefix are refused.
    pub user_prefix: String,
    /// The claim and value that make a caller admin (`UPCOMMIT_JWT_ADMIN_CLAIM`,
    /// `UPCOMMIT_JWT_ADMIN_VALUE`); unset = no provider token is admin.
    pub admin: Option<(String, String)>,
    /// Clock leeway on `exp` and `nbf` in seconds (`UPCOMMIT_JWT_LEEWAY_SECS`, default 30, ≤ 300).
    pub leeway_secs: u64,
    /// Seconds between scheduled key refreshes (`UPCOMMIT_JWKS_REFRESH_SECS`, default 300).
    pub refresh_secs: u64,
    /// Seconds fetched keys are trusted without a successful refresh; past it, a failed fetch
    /// answers 503 (`UPCOMMIT_JWKS_MAX_AGE_SECS`, default 3600, ≥ the refresh interval).
    pub max_age_secs: u64,
    /// At most one fetch per this many seconds, whatever asks (unknown `kid`s, stale keys)
    /// (`UPCOMMIT_JWKS_MIN_REFETCH_SECS`, default 30).
    pub min_refetch_secs: u64,
}

impl AuthSettings {
    /// The identity providers, then the HS256 secret, which they make optional. Without
    /// `require_secret` (the operator tools) it may be absent, never short.
    pub(super) fn load(
        src: &Source<'_>,
        f: &mut FileSettings,
        require_secret: bool,
    ) -> Result<Self, ConfigError> {
        let issuers = issuers(src, f)?;
        let jwt_secret = src.string("UPCOMMIT_JWT_SECRET", f.jwt_secret.take(), "");
        let secret_required = require_secret && issuers.is_empty();
        if jwt_secret.len() < 16 && (secret_required || !jwt_secret.is_empty()) {
            return Err(ConfigError(
                "UPCOMMIT_JWT_SECRET: required (unless UPCOMMIT_JWKS_URL or [[issuers]] is set), at least 16 bytes"
                    .into(),
            ));
        }
        Ok(AuthSettings {
            jwt_secret: SecretString::new(jwt_secret),
            issuers,
        })
    }
}

/// The longest `user_prefix`: user ids stay at most 128 bytes, prefix included.
const MAX_USER_PREFIX_BYTES: usize = 32;

/// The JWKS timings and leeway, shared by every issuer (each keeps its own cache with them).
struct ProviderTimings {
    leeway_secs: u64,
    refresh_secs: u64,
    max_age_secs: u64,
    min_refetch_secs: u64,
}

fn provider_timings(
    src: &Source<'_>,
    f: &mut FileSettings,
) -> Result<ProviderTimings, ConfigError> {
    let leeway_secs = src.number("UPCOMMIT_JWT_LEEWAY_SECS", f.jwt_leeway_secs, 30, 0..=300)?;
    let refresh_secs = src.number(
        "UPCOMMIT_JWKS_REFRESH_SECS",
        f.jwks_refresh_secs,
        300,
        1..=7 * 86_400,
    )?;
    let max_age_secs = src.number(
        "UPCOMMIT_JWKS_MAX_AGE_SECS",
        f.jwks_max_age_secs,
        3600,
        1..=30 * 86_400,
    )?;
    if max_age_secs < refresh_secs {
        return Err(ConfigError(
            "UPCOMMIT_JWKS_MAX_AGE_SECS: at least UPCOMMIT_JWKS_REFRESH_SECS".into(),
        ));
    }
    Ok(ProviderTimings {
        leeway_secs,
        refresh_secs,
        max_age_secs,
        min_refetch_secs: src.number(
            "UPCOMMIT_JWKS_MIN_REFETCH_SECS",
            f.jwks_min_refetch_secs,
            30,
            1..=86_400,
        )?,
    })
}

/// The identity providers: the single one of `UPCOMMIT_JWKS_URL` (and its issuer, audience,
/// claims), or the `[[issuers]]` tables of the settings file. Both at once is an error rather
/// than a merge: the environment overrides the file everywhere else, and a list has no
/// obvious override, so an operator must say which one is meant.
fn issuers(src: &Source<'_>, f: &mut FileSettings) -> Result<Vec<ProviderSettings>, ConfigError> {
    let timings = provider_timings(src, f)?;
    let single = provider(src, f, &timings)?;
    let Some(tables) = f.issuers.take() else {
        return Ok(single.into_iter().collect());
    };
    if single.is_some() {
        return Err(ConfigError(
            "issuers: the settings file's [[issuers]] and UPCOMMIT_JWKS_URL (jwks_url) are both set; configure every provider as an [[issuers]] table, or only the one of UPCOMMIT_JWKS_URL".into(),
        ));
    }
    if tables.is_empty() {
        return Err(ConfigError(
            "issuers: an empty list; leave [[issuers]] out for none".into(),
        ));
    }
    let list = tables
        .into_iter()
        .map(|t| file_issuer(t, &timings))
        .collect::<Result<Vec<_>, _>>()?;
    distinct_issuers(&list)?;
    Ok(list)
}

fn file_issuer(t: FileIssuer, timings: &ProviderTimings) -> Result<ProviderSettings, ConfigError> {
    let name = t.issuer.clone();
    let bad = |what: &str| ConfigError(format!("issuers: issuer {name:?}: {what}"));
    if t.issuer.is_empty() {
        return Err(bad(
            "issuer: required (the exact iss of the provider's tokens)",
        ));
    }
    if !(t.jwks_url.starts_with("https://") || t.jwks_url.starts_with("http://")) {
        return Err(bad(&format!(
            "jwks_url: expected an http(s) URL, got {:?}",
            t.jwks_url
        )));
    }
    // Parsed as the fetch will be (review 26): a URL no request can reach stops the start
    // instead of answering 503 to every token of the provider.
    crate::domain::webhooks::check_reachable(&t.jwks_url)
        .map_err(|e| bad(&format!("jwks_url: {e}")))?;
    if t.audience.is_empty() {
        return Err(bad(
            "audience: required (the aud this service's tokens carry)",
        ));
    }
    let admin = match (
        t.admin_claim.filter(|c| !c.is_empty()),
        t.admin_value.filter(|v| !v.is_empty()),
    ) {
        (None, None) => None,
        (Some(claim), Some(value)) => Some((claim, value)),
        _ => return Err(bad("admin_claim and admin_value: set both or neither")),
    };
    let user_prefix = t.user_prefix.unwrap_or_default();
    if user_prefix.len() > MAX_USER_PREFIX_BYTES || user_prefix.chars().any(char::is_control) {
        return Err(bad(&format!(
            "user_prefix: at most {MAX_USER_PREFIX_BYTES} bytes, no control characters"
        )));
    }
    Ok(ProviderSettings {
        jwks_url: t.jwks_url,
        issuer: t.issuer,
        audience: t.audience,
        user_claim: t
            .user_claim
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| "sub".into()),
        user_prefix,
        admin,
        leeway_secs: timings.leeway_secs,
        refresh_secs: timings.refresh_secs,
        max_age_secs: timings.max_age_secs,
        min_refetch_secs: timings.min_refetch_secs,
    })
}

/// Several issuers: distinct `iss`, and user ids that cannot coincide. Issuer A's user `u`
/// is `prefix(A) + u`; when no prefix starts another, no two issuers can make the same id.
/// One issuer may keep no prefix (the provider a deployment had before it added others, so
/// its users keep their ids); its user ids that start with another issuer's prefix are refused
/// when tokens are checked (`token_user_id_reserved`).
fn distinct_issuers(list: &[ProviderSettings]) -> Result<(), ConfigError> {
    for (i, a) in list.iter().enumerate() {
        for b in &list[i + 1..] {
            if a.issuer == b.issuer {
                return Err(ConfigError(format!(
                    "issuers: issuer {:?} is listed twice",
                    a.issuer
                )));
            }
            let (pa, pb) = (a.user_prefix.as_str(), b.user_prefix.as_str());
            let clash = if pa.is_empty() && pb.is_empty() {
                true
            } else if pa.is_empty() || pb.is_empty() {
                false
            } else {
                pa.starts_with(pb) || pb.starts_with(pa)
            };
            if clash {
                return Err(ConfigError(format!(
                    "issuers: issuers {:?} and {:?} could give the same user id (user_prefix {pa:?} and {pb:?}); give each a user_prefix that does not start another's (e.g. \"idp-a:\" and \"idp-b:\"); at most one issuer may have none",
                    a.issuer, b.issuer
                )));
            }
        }
    }
    Ok(())
}

/// The single identity provider of the environment (or the file's top-level keys): all of
/// them unset, or a JWKS URL with its issuer and audience.
fn provider(
    src: &Source<'_>,
    f: &mut FileSettings,
    timings: &ProviderTimings,
) -> Result<Option<ProviderSettings>, ConfigError> {
    let jwks_url = src.string("UPCOMMIT_JWKS_URL", f.jwks_url.take(), "");
    let issuer = src.string("UPCOMMIT_JWT_ISSUER", f.jwt_issuer.take(), "");
    let audience = src.string("UPCOMMIT_JWT_AUDIENCE", f.jwt_audience.take(), "");
    let admin_claim = src.string("UPCOMMIT_JWT_ADMIN_CLAIM", f.jwt_admin_claim.take(), "");
    let admin_value = src.string("UPCOMMIT_JWT_ADMIN_VALUE", f.jwt_admin_value.take(), "");
    let user_claim = src.string("UPCOMMIT_JWT_USER_CLAIM", f.jwt_user_claim.take(), "");
    if jwks_url.is_empty() {
        if !(issuer.is_empty() && audience.is_empty() && admin_claim.is_empty()) {
            return Err(ConfigError(
                "UPCOMMIT_JWKS_URL: required when UPCOMMIT_JWT_ISSUER, UPCOMMIT_JWT_AUDIENCE or UPCOMMIT_JWT_ADMIN_CLAIM is set".into(),
            ));
        }
        if f.issuers.is_some() && !(admin_value.is_empty() && user_claim.is_empty()) {
            return Err(ConfigError(
                "issuers: UPCOMMIT_JWT_USER_CLAIM and UPCOMMIT_JWT_ADMIN_VALUE are the single provider's; with [[issuers]], set user_claim and admin_value in each table".into(),
            ));
        }
        return Ok(None);
    }
    if !(jwks_url.starts_with("https://") || jwks_url.starts_with("http://")) {
        return Err(ConfigError(format!(
            "UPCOMMIT_JWKS_URL: expected an http(s) URL, got {jwks_url:?}"
        )));
    }
    crate::domain::webhooks::check_reachable(&jwks_url)
        .map_err(|e| ConfigError(format!("UPCOMMIT_JWKS_URL: {e}")))?;
    if issuer.is_empty() {
        return Err(ConfigError(
            "UPCOMMIT_JWT_ISSUER: required with UPCOMMIT_JWKS_URL (the exact iss of the provider's tokens)".into(),
        ));
    }
    if audience.is_empty() {
        return Err(ConfigError(
            "UPCOMMIT_JWT_AUDIENCE: required with UPCOMMIT_JWKS_URL (the aud this service's tokens carry)".into(),
        ));
    }
    let admin = match (admin_claim.is_empty(), admin_value.is_empty()) {
        (true, true) => None,
        (false, false) => Some((admin_claim, admin_value)),
        _ => {
            return Err(ConfigError(
                "UPCOMMIT_JWT_ADMIN_CLAIM and UPCOMMIT_JWT_ADMIN_VALUE: set both or neither".into(),
            ))
        }
    };
    Ok(Some(ProviderSettings {
        jwks_url,
        issuer,
        audience,
        user_claim: if user_claim.is_empty() {
            "sub".into()
        } else {
            user_claim
        },
        user_prefix: String::new(),
        admin,
        leeway_secs: timings.leeway_secs,
        refresh_secs: timings.refresh_secs,
        max_age_secs: timings.max_age_secs,
        min_refetch_secs: timings.min_refetch_secs,
    }))
}

#[cfg(test)]
mod tests {
    use crate::config::source::env;
    use crate::config::Settings;

    #[test]
    fn operator_tools_load_without_a_secret_but_never_with_a_short_one() {
        assert!(Settings::parse(None, &|_| None, false).is_ok());
        assert!(Settings::parse(None, &|_| None, true).is_err());
        let short = |k: &str| (k == "UPCOMMIT_JWT_SECRET").then(|| "short".to_owned());
        assert!(Settings::parse(None, &short, false).is_err());
    }

    #[test]
    fn an_identity_provider_needs_its_issuer_and_audience_and_makes_the_secret_optional() {
        let provider = [
            (
                "UPCOMMIT_JWKS_URL",
                "https://idp.example/.well-known/jwks.json",
            ),
            ("UPCOMMIT_JWT_ISSUER", "https://idp.example/"),
            ("UPCOMMIT_JWT_AUDIENCE", "upcommit"),
        ];
        let s = Settings::from_map(&env(&provider)).expect("no secret needed with a provider");
        assert_eq!(s.auth.jwt_secret.expose(), "");
        assert_eq!(s.auth.issuers.len(), 1);
        let p = s.auth.issuers[0].clone();
        assert_eq!(p.user_claim, "sub");
        assert_eq!(
            p.user_prefix, "",
            "the single provider's user ids are the claim's value"
        );
        assert_eq!(p.admin, None);
        assert_eq!(
            (
                p.leeway_secs,
                p.refresh_secs,
                p.max_age_secs,
                p.min_refetch_secs
            ),
            (30, 300, 3600, 30)
        );
        assert!(
            Settings::from_map(&env(&[])).is_err(),
            "neither secret nor provider"
        );
        let without = |skip: &str| {
            let pairs: Vec<_> = provider
                .iter()
                .copied()
                .filter(|(k, _)| *k != skip)
                .collect();
            Settings::from_map(&env(&pairs)).map(|_| ())
        };
        assert!(without("UPCOMMIT_JWT_ISSUER").is_err());
        assert!(without("UPCOMMIT_JWT_AUDIENCE").is_err());
        assert!(
            without("UPCOMMIT_JWKS_URL").is_err(),
            "an issuer without a JWKS URL is a mistake, not a no-op"
        );
        let with = |extra: &[(&str, &str)]| {
            let mut pairs = provider.to_vec();
            pairs.extend_from_slice(extra);
            Settings::from_map(&env(&pairs))
        };
        assert!(
            with(&[("UPCOMMIT_JWT_ADMIN_CLAIM", "roles")]).is_err(),
            "claim without value"
        );
        let admin = with(&[
            ("UPCOMMIT_JWT_ADMIN_CLAIM", "roles"),
            ("UPCOMMIT_JWT_ADMIN_VALUE", "upcommit-admin"),
        ])
        .expect("admin rule");
        assert_eq!(
            admin.auth.issuers.first().and_then(|p| p.admin.clone()),
            Some(("roles".to_owned(), "upcommit-admin".to_owned()))
        );
        assert!(with(&[("UPCOMMIT_JWKS_URL", "file:///etc/jwks.json")]).is_err());
        // Review 26b: URLs no fetch can reach stop the start (they passed a prefix check).
        for unreachable in [
            "http://127.0.0.1:99999/jwks",
            "http://[::1/jwks",
            "http://:0/jwks",
        ] {
            let err = with(&[("UPCOMMIT_JWKS_URL", unreachable)]).expect_err(unreachable);
            assert!(err.to_string().contains("UPCOMMIT_JWKS_URL"), "{err}");
        }
        assert!(with(&[("UPCOMMIT_JWT_LEEWAY_SECS", "3600")]).is_err());
        assert!(
            with(&[("UPCOMMIT_JWKS_MAX_AGE_SECS", "10")]).is_err(),
            "below the refresh"
        );
        assert!(with(&[("UPCOMMIT_JWT_SECRET", "short")]).is_err());
        assert!(
            with(&[
                ("UPCOMMIT_DEMO", "true"),
                ("UPCOMMIT_DEMO_MINT_TOKENS", "true")
            ])
            .is_err(),
            "minting HS256 tokens needs the secret"
        );
    }

    const TWO_ISSUERS: &str = r#"
        [[issuers]]
        issuer = "https://a.example/"
        jwks_url = "https://a.example/jwks.json"
        audience = "api-a"
        admin_claim = "roles"
        admin_value = "upcommit-admin"

        [[issuers]]
        issuer = "https://b.example/"
        jwks_url = "https://b.example/jwks.json"
        audience = "api-b"
        user_claim = "email"
        user_prefix = "b:"
    "#;

    #[test]
    fn several_issuers_come_from_the_file_with_their_own_rules() {
        let none = |_: &str| None;
        let s = Settings::from_sources(Some(TWO_ISSUERS), &none).expect("two issuers");
        let list = &s.auth.issuers;
        assert_eq!(list.len(), 2);
        assert_eq!(
            (list[0].issuer.as_str(), list[0].user_claim.as_str()),
            ("https://a.example/", "sub")
        );
        assert_eq!(list[0].user_prefix, "");
        assert_eq!(
            list[0].admin,
            Some(("roles".to_owned(), "upcommit-admin".to_owned()))
        );
        assert_eq!(
            (
                list[1].audience.as_str(),
                list[1].user_claim.as_str(),
                list[1].user_prefix.as_str()
            ),
            ("api-b", "email", "b:")
        );
        assert_eq!(list[1].admin, None, "admin is per issuer");
        // The shared timings apply to each.
        let env_refresh = |k: &str| (k == "UPCOMMIT_JWKS_REFRESH_SECS").then(|| "60".to_owned());
        let s = Settings::from_sources(Some(TWO_ISSUERS), &env_refresh).expect("loads");
        assert!(s.auth.issuers.iter().all(|p| p.refresh_secs == 60));
        assert!(s.auth.jwt_secret.expose().is_empty(), "no secret needed");
    }

    #[test]
    fn issuers_that_could_share_a_user_id_or_an_iss_are_refused() {
        let none = |_: &str| None;
        let load = |text: &str| Settings::from_sources(Some(text), &none).map(|_| ());
        let err = |text: &str| load(text).expect_err("refused").0;
        let table = |iss: &str, prefix: Option<&str>| {
            format!(
                "[[issuers]]\nissuer = \"{iss}\"\njwks_url = \"https://x.example/jwks\"\naudience = \"api\"\n{}\n",
                prefix.map(|p| format!("user_prefix = \"{p}\"")).unwrap_or_default()
            )
        };
        let two = |a: Option<&str>, b: Option<&str>| {
            format!("{}{}", table("https://a/", a), table("https://b/", b))
        };
        assert!(err(&two(None, None)).contains("could give the same user id"));
        assert!(err(&two(Some("x:"), Some("x:"))).contains("could give the same user id"));
        assert!(
            err(&two(Some("a"), Some("ab:"))).contains("could give the same user id"),
            "\"a\" + \"b:u\" = \"ab:\" + \"u\""
        );
        assert!(
            load(&two(None, Some("b:"))).is_ok(),
            "one issuer may keep bare ids"
        );
        assert!(load(&two(Some("a:"), Some("b:"))).is_ok());
        let three = format!("{}{}", two(None, Some("b:")), table("https://c/", None));
        assert!(err(&three).contains("could give the same user id"));
        let dup = format!(
            "{}{}",
            table("https://a/", Some("a:")),
            table("https://a/", Some("b:"))
        );
        assert!(err(&dup).contains("listed twice"));
        assert!(err(&table("https://a/", Some("bad\\u0001"))).contains("user_prefix"));
        assert!(err(&table("https://a/", Some(&"p".repeat(33)))).contains("user_prefix"));
        assert!(err("issuers = []").contains("empty list"));
        let unreachable = table("https://a/", None)
            .replace("https://x.example/jwks", "http://127.0.0.1:99999/jwks");
        assert!(
            err(&unreachable).contains("jwks_url: not a URL a request can go to"),
            "{}",
            err(&unreachable)
        );
        assert!(
            err(&table("", None)).contains("issuer: required"),
            "an issuer with no iss"
        );
        assert!(
            err(&table("https://a/", None).replace("https://x.example/jwks", "file:///j"))
                .contains("jwks_url")
        );
        assert!(err(&format!(
            "{}admin_claim = \"roles\"\n",
            table("https://a/", None)
        ))
        .contains("set both or neither"));
        assert!(
            load(&format!("{}surprise = 1\n", table("https://a/", None))).is_err(),
            "unknown keys in a table are refused"
        );
        // Never both the single provider's settings and [[issuers]]: no silent merge.
        let jwks = |k: &str| {
            match k {
                "UPCOMMIT_JWKS_URL" => Some("https://idp.example/jwks.json"),
                "UPCOMMIT_JWT_ISSUER" => Some("https://idp.example/"),
                "UPCOMMIT_JWT_AUDIENCE" => Some("api"),
                _ => None,
            }
            .map(str::to_owned)
        };
        let both = Settings::from_sources(Some(TWO_ISSUERS), &jwks).expect_err("both");
        assert!(both.0.contains("both set"), "{both}");
        let user_claim = |k: &str| (k == "UPCOMMIT_JWT_USER_CLAIM").then(|| "email".to_owned());
        assert!(Settings::from_sources(Some(TWO_ISSUERS), &user_claim).is_err());
    }
}
