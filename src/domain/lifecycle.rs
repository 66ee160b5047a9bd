//! The bucket's lifecycle rules as data, and the pure rules about them.
//!
//! `infra/lifecycle-rules.json` is the single source of the rules this service needs: terraform
//! reads it, the service embeds it (below), so what infra writes and what `doctor` expects can
//! never disagree. The same [`Rule`] shape describes a live bucket's rules after the storage
//! layer has read them, so one set of functions judges both a terraform tree and a live bucket.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The rules file, compiled in.
pub const RULES_JSON: &str = include_str!("../../infra/lifecycle-rules.json");

/// One lifecycle rule, reduced to what the checks need. Field names are those of the rules
/// file; `enabled`, `narrowed` and `expiration_date` only appear when reading a live bucket.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub id: String,
    /// Key prefix the rule applies to; empty is the whole bucket.
    #[serde(default)]
    pub prefix: String,
    #[serde(default = "enabled_default", skip_serializing_if = "is_true")]
    pub enabled: bool,
    /// The filter also has tag or object-size conditions, so the rule reaches only some
    /// objects under its prefix.
    #[serde(default, skip_serializing_if = "is_false")]
    pub narrowed: bool,
    /// Current versions expire this many days after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_days: Option<u32>,
    /// Current versions expire on a fixed date (ISO 8601).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_date: Option<String>,
    /// Delete markers with no versions left behind them are removed. S3 does not accept this in
    /// the same Expiration element as days, so it is a rule of its own.
    #[serde(default, skip_serializing_if = "is_false")]
    pub expired_object_delete_marker: bool,
    /// Noncurrent versions are removed this many days after they became noncurrent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noncurrent_expiration_days: Option<u32>,
    /// Unfinished multipart uploads are aborted this many days after they started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort_incomplete_multipart_days: Option<u32>,
}

fn enabled_default() -> bool {
    true
}
fn is_true(b: &bool) -> bool {
    *b
}
fn is_false(b: &bool) -> bool {
    !*b
}

/// The rules file's shape.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub rules: Vec<Rule>,
}

impl RuleFile {
    /// Parses and validates a rules file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: RuleFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for rule in &file.rules {
            rule.validate()?;
        }
        let mut ids: Vec<&str> = file.rules.iter().map(|r| r.id.as_str()).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("rule id {:?} appears twice", w[0]));
        }
        Ok(file)
    }
}

/// The rules the service needs, from the embedded rules file.
pub fn required_rules() -> &'static [Rule] {
    static RULES: OnceLock<Vec<Rule>> = OnceLock::new();
    RULES.get_or_init(|| {
        // The file is compiled in and a unit test parses it, so this cannot fail at run time.
        RuleFile::parse(RULES_JSON)
            .expect("infra/lifecycle-rules.json is valid (checked by a unit test)")
            .rules
    })
}

/// The rules as an unversioned bucket needs them: no noncurrent version and no delete marker
/// can exist there, so those elements go, and a rule left with nothing to do goes too. Stores
/// without versioning (Garage) accept only what is left: expiration by days and the abort of
/// incomplete multipart uploads.
pub fn for_unversioned(rules: &[Rule]) -> Vec<Rule> {
    rules
        .iter()
        .map(|r| Rule {
            noncurrent_expiration_days: None,
            expired_object_delete_marker: false,
            ..r.clone()
        })
        .filter(|r| !r.actions().is_empty())
        .collect()
}

/// What a rule does to the objects it reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    ExpireCurrent,
    ExpireNoncurrent,
    RemoveExpiredDeleteMarkers,
    AbortIncompleteMultipart,
}

impl Action {
    pub fn describe(self) -> &'static str {
        match self {
            Action::ExpireCurrent => "expiration of current versions",
            Action::ExpireNoncurrent => "noncurrent-version expiration",
            Action::RemoveExpiredDeleteMarkers => "expired delete-marker cleanup",
            Action::AbortIncompleteMultipart => "abort of incomplete multipart uploads",
        }
    }
}

impl Rule {
    /// A rule with only an id and a prefix, to build on in tests and tools.
    pub fn new(id: &str, prefix: &str) -> Self {
        Self {
            id: id.to_owned(),
            prefix: prefix.to_owned(),
            enabled: true,
            narrowed: false,
            expiration_days: None,
            expiration_date: None,
            expired_object_delete_marker: false,
            noncurrent_expiration_days: None,
            abort_incomplete_multipart_days: None,
        }
    }

    /// Each action with its days (`None` for the delete-marker cleanup, which has none).
    pub fn actions(&self) -> Vec<(Action, Option<u32>)> {
        let mut out = Vec::new();
        if self.expiration_days.is_some() || self.expiration_date.is_some() {
            out.push((Action::ExpireCurrent, self.expiration_days));
        }
        if let Some(d) = self.noncurrent_expiration_days {
            out.push((Action::ExpireNoncurrent, Some(d)));
        }
        if self.expired_object_delete_marker {
            out.push((Action::RemoveExpiredDeleteMarkers, None));
        }
        if let Some(d) = self.abort_incomplete_multipart_days {
            out.push((Action::AbortIncompleteMultipart, Some(d)));
        }
        out
    }

    fn days_of(&self, action: Action) -> Option<Option<u32>> {
        self.actions()
            .into_iter()
            .find(|(a, _)| *a == action)
            .map(|(_, d)| d)
    }

    /// Expires current versions: the action that deletes live data.
    pub fn expires_current(&self) -> bool {
        self.enabled && (self.expiration_days.is_some() || self.expiration_date.is_some())
    }

    /// Applies to every object under `prefix` (enabled, no narrowing filter, broad enough).
    pub fn covers(&self, prefix: &str) -> bool {
        self.enabled && !self.narrowed && prefix.starts_with(&self.prefix)
    }

    /// Shares at least one possible key with `prefix`.
    pub fn overlaps(&self, prefix: &str) -> bool {
        prefix.starts_with(&self.prefix) || self.prefix.starts_with(prefix)
    }

    /// The rule as S3 would accept it.
    pub fn validate(&self) -> Result<(), String> {
        let at = |what: &str| format!("rule {:?}: {what}", self.id);
        if self.id.is_empty() || self.id.len() > 255 {
            return Err(at("id must be 1-255 characters"));
        }
        if self.actions().is_empty() {
            return Err(at("has no action"));
        }
        if self.expired_object_delete_marker
            && (self.expiration_days.is_some() || self.expiration_date.is_some())
        {
            return Err(at(
                "expired_object_delete_marker cannot share an Expiration element with days or a date; make it a rule of its own",
            ));
        }
        let zero = [
            self.expiration_days,
            self.noncurrent_expiration_days,
            self.abort_incomplete_multipart_days,
        ]
        .contains(&Some(0));
        if zero {
            return Err(at("days must be at least 1"));
        }
        Ok(())
    }
}

/// Something wrong with a set of lifecycle rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A required action is not done (or done later than required) for a required prefix.
    Missing {
        rule: String,
        action: Action,
        prefix: String,
        days: Option<u32>,
        /// The closest live rule doing that action over the prefix, and its days, when weaker.
        weaker: Option<(String, Option<u32>)>,
    },
    /// A rule expiring current versions reaches keys under a final-asset prefix.
    ExpiresFinal {
        rule: String,
        prefix: String,
        final_prefix: String,
        /// The rule, as the bucket holds it, has a tag or size filter. A store that drops such
        /// filters on write (Garage, RGW: docs/stores.md) hands back a rule over the whole
        /// prefix, and the message says so.
        narrowed: bool,
    },
    /// A rule expires current versions under a temporary tier's prefix sooner than its TTL:
    /// it would delete temporary files their handles still serve.
    ExpiresTemporaryEarly {
        rule: String,
        prefix: String,
        tier_prefix: String,
        ttl_days: u32,
    },
    /// In a versioned bucket, expiring a current version only adds a delete marker: without a
    /// noncurrent-version expiration over the same keys the bytes stay forever.
    UnpairedExpiry { rule: String, prefix: String },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Missing {
                rule,
                action,
                prefix,
                days,
                weaker,
            } => {
                write!(f, "rule {rule}: no enabled rule does {} under {prefix:?}", action.describe())?;
                if let Some(d) = days {
                    write!(f, " within {d} day(s)")?;
                }
                if let Some((id, Some(d))) = weaker {
                    write!(f, " (rule {id} does it after {d} day(s))")?;
                }
                Ok(())
            }
            Problem::ExpiresFinal {
                rule,
                prefix,
                final_prefix,
                narrowed: true,
            } => write!(
                f,
                "rule {rule} expires current versions of the objects its tag or size filter selects under {prefix:?}, which reaches final assets under {final_prefix:?}"
            ),
            Problem::ExpiresFinal {
                rule,
                prefix,
                final_prefix,
                narrowed: false,
            } => write!(
                f,
                "rule {rule} expires current versions of every object under {prefix:?} (the rule as the bucket holds it has no tag or size filter), which reaches final assets under {final_prefix:?}"
            ),
            Problem::ExpiresTemporaryEarly {
                rule,
                prefix,
                tier_prefix,
                ttl_days,
            } => write!(
                f,
                "rule {rule} expires current versions under {prefix:?} sooner than the {ttl_days} day(s) temporary files under {tier_prefix:?} are served"
            ),
            Problem::UnpairedExpiry { rule, prefix } => write!(
                f,
                "rule {rule} expires current versions under {prefix:?} but no rule expires their noncurrent versions: the bucket is versioned, so expiry only adds delete markers and the bytes stay"
            ),
        }
    }
}

/// Each action of each required rule must be done by some live rule that covers the required
/// prefix entirely, no later than required. Extra rules are fine; missing or weaker ones are not.
pub fn missing_required(live: &[Rule], required: &[Rule]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for req in required {
        for (action, days) in req.actions() {
            let mut weaker = None;
            let satisfied = live.iter().filter(|r| r.covers(&req.prefix)).any(|r| {
                match r.days_of(action) {
                    None => false,
                    Some(have) => {
                        let ok = match (have, days) {
                            (_, None) => true,
                            (Some(h), Some(d)) => h <= d,
                            // A fixed date is not a rolling window: it does not stand in for days.
                            (None, Some(_)) => false,
                        };
                        if !ok {
                            weaker = Some((r.id.clone(), have));
                        }
                        ok
                    }
                }
            });
            if !satisfied {
                problems.push(Problem::Missing {
                    rule: req.id.clone(),
                    action,
                    prefix: req.prefix.clone(),
                    days,
                    weaker,
                });
            }
        }
    }
    problems
}

/// Rules that expire current versions of keys under a final-asset prefix.
pub fn expiring_over_final(rules: &[Rule], final_prefixes: &[String]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for r in rules.iter().filter(|r| r.expires_current()) {
        for fp in final_prefixes {
            if r.overlaps(fp) {
                problems.push(Problem::ExpiresFinal {
                    rule: r.id.clone(),
                    prefix: r.prefix.clone(),
                    final_prefix: fp.clone(),
                    narrowed: r.narrowed,
                });
            }
        }
    }
    problems
}

/// Rules that expire current versions under a temporary tier's prefix (`temp/<N>d/`, N days)
/// sooner than N days, or on a fixed date: they would end files before their `expires_at`.
pub fn expiring_before_ttl(rules: &[Rule], tiers: &[(String, u32)]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for r in rules.iter().filter(|r| r.expires_current()) {
        for (tier_prefix, ttl_days) in tiers {
            let early = match r.expiration_days {
                Some(d) => d < *ttl_days,
                None => r.expiration_date.is_some(),
            };
            if early && r.overlaps(tier_prefix) {
                problems.push(Problem::ExpiresTemporaryEarly {
                    rule: r.id.clone(),
                    prefix: r.prefix.clone(),
                    tier_prefix: tier_prefix.clone(),
                    ttl_days: *ttl_days,
                });
            }
        }
    }
    problems
}

/// For a versioned bucket: every rule expiring current versions needs a noncurrent-version
/// expiration covering the same keys.
pub fn unpaired_expiry(rules: &[Rule]) -> Vec<Problem> {
    rules
        .iter()
        .filter(|r| r.expires_current())
        .filter(|r| {
            !rules.iter().any(|n| {
                n.enabled
                    && n.noncurrent_expiration_days.is_some()
                    && r.prefix.starts_with(&n.prefix)
                    && (!n.narrowed || n.id == r.id)
            })
        })
        .map(|r| Problem::UnpairedExpiry {
            rule: r.id.clone(),
            prefix: r.prefix.clone(),
        })
        .collect()
}

/// What writing our rules into a live document changes, rule by rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Add(Rule),
    Update { from: Rule, to: Rule },
    Unchanged(Rule),
}

/// A read-modify-write of the whole lifecycle document: our rules (by id) added or replaced,
/// every other rule kept as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergePlan {
    pub changes: Vec<Change>,
    /// Ids of the rules that are not ours, kept untouched.
    pub foreign: Vec<String>,
}

impl MergePlan {
    pub fn writes(&self) -> bool {
        self.changes
            .iter()
            .any(|c| !matches!(c, Change::Unchanged(_)))
    }
}

pub fn merge_plan(live: &[Rule], ours: &[Rule]) -> MergePlan {
    let changes = ours
        .iter()
        .map(|want| match live.iter().find(|r| r.id == want.id) {
            None => Change::Add(want.clone()),
            Some(have) if have == want => Change::Unchanged(want.clone()),
            Some(have) => Change::Update {
                from: have.clone(),
                to: want.clone(),
            },
        })
        .collect();
    let foreign = live
        .iter()
        .filter(|r| !ours.iter().any(|o| o.id == r.id))
        .map(|r| r.id.clone())
        .collect();
    MergePlan { changes, foreign }
}

#[cfg(test)]
mod tests;
