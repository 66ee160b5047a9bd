//! The bucket: its name, endpoint and region, the browser origins and store gaps it is judged
//! with, the periodic bucket check, and what that check expects of it.

use crate::domain::bucket_check::Expectations;
use crate::domain::lifecycle::{required_rules, Rule};
use crate::domain::prefixes::{CACHE_PREFIX, TEMP_PREFIX};
use crate::domain::temporary::{is_temporary_key, TtlDays};

use super::file::FileSettings;
use super::source::{ConfigError, Source};
use super::Settings;

#[derive(Debug, Clone)]
pub struct S3Settings {
    /// The upload bucket (`UPCOMMIT_BUCKET`, default `upcommit-local`).
    pub bucket: String,
    /// A custom endpoint such as LocalStack's; setting it selects path-style addressing
    /// (`UPCOMMIT_S3_ENDPOINT`).
    pub endpoint: Option<String>,
    /// Region (`AWS_REGION`, then `AWS_DEFAULT_REGION`, default `us-east-1`).
    pub region: String,
    /// Browser origins that upload straight to the bucket; the bucket checks verify its CORS
    /// lets each of them (`UPCOMMIT_CORS_ORIGINS`, comma-separated, default none).
    pub cors_origins: Vec<String>,
    /// Store capabilities the operator accepts running without, by name
    /// (`UPCOMMIT_ACCEPT_STORE_GAPS`, comma-separated, default none): `serve` refuses to start
    /// while the store lacks a capability a promise needs that is not named here.
    pub accept_gaps: std::collections::BTreeSet<crate::domain::capabilities::Capability>,
}

impl S3Settings {
    /// The bucket's name, the endpoint override (which must address it path-style), the
    /// region, the store gaps accepted, the browser origins.
    pub(super) fn load(src: &Source<'_>, f: &mut FileSettings) -> Result<Self, ConfigError> {
        let bucket = src.string("UPCOMMIT_BUCKET", f.bucket.take(), "upcommit-local");
        if !valid_bucket_name(&bucket) {
            return Err(ConfigError(format!(
                "UPCOMMIT_BUCKET: {bucket:?} is not a valid bucket name"
            )));
        }
        let endpoint = (src.env)("UPCOMMIT_S3_ENDPOINT")
            .filter(|v| !v.is_empty())
            .or(f.s3_endpoint.take());
        if let Some(e) = &endpoint {
            if crate::signing::S3Location::path_style(e, &bucket).is_none() {
                return Err(ConfigError(format!(
                    "UPCOMMIT_S3_ENDPOINT: expected http(s)://host[:port], got {e:?}"
                )));
            }
        }
        let region = (src.env)("AWS_REGION")
            .or_else(|| (src.env)("AWS_DEFAULT_REGION"))
            .filter(|v| !v.is_empty())
            .or(f.region.take())
            .unwrap_or_else(|| "us-east-1".into());

        let cors_origins = src.list("UPCOMMIT_CORS_ORIGINS", f.cors_origins.take());
        let accept_gaps = crate::domain::capabilities::parse_accepted(
            &src.list("UPCOMMIT_ACCEPT_STORE_GAPS", f.accept_store_gaps.take())
                .join(","),
        )
        .map_err(|e| ConfigError(format!("UPCOMMIT_ACCEPT_STORE_GAPS: {e}")))?;
        if let Some(bad) = cors_origins
            .iter()
            .find(|o| !(o.starts_with("https://") || o.starts_with("http://") || *o == "*"))
        {
            return Err(ConfigError(format!(
                "UPCOMMIT_CORS_ORIGINS: expected origins like https://app.example.com, got {bad:?}"
            )));
        }
        Ok(S3Settings {
            bucket,
            endpoint,
            region,
            cors_origins,
            accept_gaps,
        })
    }
}

fn valid_bucket_name(b: &str) -> bool {
    (3..=63).contains(&b.len())
        && b.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'.')
        && !b.starts_with(['-', '.'])
        && !b.ends_with(['-', '.'])
}

#[derive(Debug, Clone)]
pub struct BucketCheckSettings {
    /// Seconds between checks of the live bucket's configuration; 0 turns the watch off
    /// (`UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS`, default 300).
    pub interval_secs: u64,
    /// Whether a failed bucket check makes `/readyz` answer 503
    /// (`UPCOMMIT_BUCKET_CHECK_FAILS_READINESS`, default false: report only).
    pub fails_readiness: bool,
}

impl BucketCheckSettings {
    /// How often the live bucket is checked, and whether a failed check fails readiness.
    pub(super) fn load(src: &Source<'_>, f: &FileSettings) -> Result<Self, ConfigError> {
        Ok(BucketCheckSettings {
            interval_secs: src.secs(
                "UPCOMMIT_BUCKET_CHECK_INTERVAL_SECS",
                f.bucket_check_interval_secs,
                300,
                0,
            )?,
            fails_readiness: src.flag(
                "UPCOMMIT_BUCKET_CHECK_FAILS_READINESS",
                f.bucket_check_fails_readiness,
                false,
            )?,
        })
    }
}

impl Settings {
    /// What the bucket checks expect of the live bucket: the embedded lifecycle rules, no
    /// expiry over any profile's final prefix or a legacy prefix, CORS for the browser origins.
    pub fn bucket_expectations(&self) -> Expectations {
        let mut final_prefixes: Vec<String> = self
            .uploads
            .profiles
            .iter()
            .map(|p| p.final_prefix.as_str().to_owned())
            .chain(
                self.uploads
                    .legacy_prefixes
                    .iter()
                    .map(|p| p.as_str().to_owned()),
            )
            .collect();
        final_prefixes.sort();
        final_prefixes.dedup();
        let mut temporary_tiers: Vec<(String, u32)> = self
            .uploads
            .profiles
            .iter()
            .filter_map(|p| p.temporary_ttl)
            .map(|ttl| (ttl.prefix(), ttl.days()))
            .collect();
        temporary_tiers.sort();
        temporary_tiers.dedup();
        Expectations {
            required_rules: self.lifecycle_rules_needed(),
            final_prefixes,
            temporary_tiers,
            cors_origins: self.s3.cors_origins.clone(),
            accepted_gaps: std::collections::BTreeSet::new(),
        }
    }

    /// [`Settings::bucket_expectations`] for a store judged `verdict`: the gaps the server
    /// runs without are judged by what the store is.
    pub fn bucket_expectations_for(
        &self,
        verdict: &crate::domain::capabilities::Verdict,
    ) -> Expectations {
        Expectations {
            accepted_gaps: verdict.accepted().into_iter().collect(),
            ..self.bucket_expectations()
        }
    }

    /// The lifecycle rules this deployment needs of its bucket: every rule of the rules file
    /// outside `temp/`, and, for each TTL a temporary profile uses, that tier's rule and the
    /// `temp/` delete-marker cleanup. With no temporary profile, no `temp/` rule is needed; with
    /// no profile that has variants, no `cache/` rule (the renditions' rules) is needed.
    pub fn lifecycle_rules_needed(&self) -> Vec<Rule> {
        let mut ttls: Vec<TtlDays> = self
            .uploads
            .profiles
            .iter()
            .filter_map(|p| p.temporary_ttl)
            .collect();
        ttls.sort();
        ttls.dedup();
        let renders = self.uploads.profiles.iter().any(|p| !p.variants.is_empty());
        let mut rules: Vec<Rule> = required_rules()
            .iter()
            .filter(|r| !is_temporary_key(&r.prefix))
            .filter(|r| renders || !r.prefix.starts_with(CACHE_PREFIX))
            .cloned()
            .collect();
        if !ttls.is_empty() {
            rules.extend(
                required_rules()
                    .iter()
                    .filter(|r| r.prefix == TEMP_PREFIX)
                    .cloned(),
            );
        }
        rules.extend(ttls.into_iter().map(TtlDays::lifecycle_rule));
        rules
    }

    /// The reserved key space known from the settings alone: the compiled lifecycle rules'
    /// expiring prefixes and the paired layout under every profile's final prefix.
    pub fn reserved_keys(&self) -> crate::domain::reserved::ReservedKeys {
        crate::domain::reserved::ReservedKeys::new(
            [],
            self.uploads.profiles.iter().map(|p| &p.final_prefix),
        )
        .with_rules(required_rules())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::source::env;

    #[test]
    fn the_bucket_needs_a_temp_rule_only_for_the_ttls_in_use() {
        let secret = ("UPCOMMIT_JWT_SECRET", "0123456789abcdef");
        let plain = Settings::from_map(&env(&[secret])).expect("loads");
        let needed = plain.lifecycle_rules_needed();
        assert!(needed.iter().all(|r| !r.prefix.starts_with(TEMP_PREFIX)));
        assert!(needed.iter().any(|r| r.prefix == "tmp/"));
        assert_eq!(plain.bucket_expectations().required_rules, needed);

        let file = r#"
            [[profiles]]
            name = "preview"
            content_types = ["image/png"]
            max_size = 1000
            final_prefix = "previews/"
            temporary_ttl = "1d"
            [[profiles]]
            name = "export"
            content_types = ["text/csv"]
            max_size = 1000
            final_prefix = "exports/"
            temporary_ttl = "168h"
        "#;
        let vars = env(&[secret]);
        let s = Settings::from_sources(Some(file), &|k| vars.get(k).cloned()).expect("loads");
        let temp: Vec<String> = s
            .lifecycle_rules_needed()
            .into_iter()
            .filter(|r| r.prefix.starts_with(TEMP_PREFIX))
            .map(|r| r.prefix)
            .collect();
        assert_eq!(temp, vec!["temp/", "temp/1d/", "temp/7d/"]);
        assert!(crate::domain::lifecycle::missing_required(
            required_rules(),
            &s.lifecycle_rules_needed()
        )
        .is_empty());
    }

    #[test]
    fn the_bucket_needs_the_renditions_rules_only_while_a_profile_has_variants() {
        let secret = ("UPCOMMIT_JWT_SECRET", "0123456789abcdef");
        let plain = Settings::from_map(&env(&[secret])).expect("loads");
        assert!(plain
            .lifecycle_rules_needed()
            .iter()
            .all(|r| !r.prefix.starts_with(CACHE_PREFIX)));
        let file = r#"
            [[profiles]]
            name = "photos"
            content_types = ["image/jpeg"]
            max_size = 1000
            final_prefix = "photos/"
            [[profiles.variants]]
            name = "thumb"
            width = 200
            height = 200
        "#;
        let vars = env(&[secret]);
        let s = Settings::from_sources(Some(file), &|k| vars.get(k).cloned()).expect("loads");
        let needed = s.lifecycle_rules_needed();
        let cache: Vec<&str> = needed
            .iter()
            .filter(|r| r.prefix.starts_with(CACHE_PREFIX))
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(
            cache,
            vec!["resize-cache-expire", "resize-cache-expired-delete-markers"]
        );
        // A bucket holding every rule but the renditions' is judged short of exactly those.
        let live: Vec<Rule> = required_rules()
            .iter()
            .filter(|r| !r.prefix.starts_with(CACHE_PREFIX))
            .cloned()
            .collect();
        let missing = crate::domain::lifecycle::missing_required(&live, &needed);
        assert!(!missing.is_empty());
        assert!(
            missing.iter().all(|p| p.to_string().contains("\"cache/\"")),
            "{missing:?}"
        );
    }

    #[test]
    fn bucket_expectations_cover_every_final_and_legacy_prefix() {
        let s = Settings::from_map(&env(&[
            ("UPCOMMIT_JWT_SECRET", "0123456789abcdef"),
            ("UPCOMMIT_LEGACY_PREFIXES", "uploads/, media/images/"),
            (
                "UPCOMMIT_CORS_ORIGINS",
                "https://a.example.com,https://b.example.com",
            ),
            ("UPCOMMIT_BUCKET_CHECK_FAILS_READINESS", "true"),
        ]))
        .expect("loads");
        let want = s.bucket_expectations();
        assert_eq!(
            want.final_prefixes,
            vec!["media/images/", "media/recordings/", "uploads/"]
        );
        assert_eq!(want.cors_origins.len(), 2);
        // Every rule of the rules file but the temporary profiles' tiers and the renditions'
        // (no temporary profile and no variant is configured).
        let file_rules: Vec<Rule> = required_rules()
            .iter()
            .filter(|r| !r.prefix.starts_with(TEMP_PREFIX) && !r.prefix.starts_with(CACHE_PREFIX))
            .cloned()
            .collect();
        assert_eq!(want.required_rules, file_rules);
        assert!(s.bucket_check.fails_readiness);
        assert_eq!(s.bucket_check.interval_secs, 300);
    }
}
