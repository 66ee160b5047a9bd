//! `upcommit bucket apply-lifecycle`: a read-modify-write of the bucket's whole lifecycle
//! document for installs that do not use terraform. Our rules (by id) are added or replaced,
//! every other rule is written back exactly as S3 returned it, and the result is read back and
//! verified, because S3 offers no conditional write for this document.

use crate::domain::lifecycle::{
    expiring_over_final, merge_plan, missing_required, unpaired_expiry, Change, MergePlan, Problem,
    Rule,
};
use crate::storage::{rule_view, sdk_rule, S3Store, StoreError};

/// What a run found and did.
#[derive(Debug)]
pub struct Outcome {
    pub plan: MergePlan,
    pub written: bool,
    /// Problems of the resulting document that are not ours to fix (foreign rules).
    pub warnings: Vec<Problem>,
}

/// Plans the merge and, when `write` is set and something changes, writes and verifies it.
pub async fn apply(
    store: &S3Store,
    ours: &[Rule],
    final_prefixes: &[String],
    write: bool,
    unversioned: bool,
) -> Result<Outcome, StoreError> {
    let raw = store.lifecycle_rules().await?;
    let live: Vec<Rule> = raw.iter().map(rule_view).collect();
    let plan = merge_plan(&live, ours);

    let mut document = Vec::with_capacity(raw.len() + ours.len());
    let mut result = Vec::with_capacity(raw.len() + ours.len());
    for (raw_rule, view) in raw.iter().zip(&live) {
        match ours.iter().find(|o| o.id == view.id) {
            Some(o) => {
                document.push(sdk_rule(o)?);
                result.push(o.clone());
            }
            None => {
                document.push(raw_rule.clone());
                result.push(view.clone());
            }
        }
    }
    for change in &plan.changes {
        if let Change::Add(rule) = change {
            document.push(sdk_rule(rule)?);
            result.push(rule.clone());
        }
    }
    let mut warnings = expiring_over_final(&result, final_prefixes);
    if !unversioned {
        warnings.extend(unpaired_expiry(&result));
    }

    let written = write && plan.writes();
    if written {
        store.put_lifecycle_rules(document).await?;
        verify(store, ours, &plan.foreign).await?;
    }
    Ok(Outcome {
        plan,
        written,
        warnings,
    })
}

/// Reads the document back: every rule of ours and every foreign rule must be there.
async fn verify(store: &S3Store, ours: &[Rule], foreign: &[String]) -> Result<(), StoreError> {
    let after: Vec<Rule> = store
        .lifecycle_rules()
        .await?
        .iter()
        .map(rule_view)
        .collect();
    let missing = missing_required(&after, ours);
    let lost: Vec<&String> = foreign
        .iter()
        .filter(|id| !after.iter().any(|r| &r.id == *id))
        .collect();
    if missing.is_empty() && lost.is_empty() {
        return Ok(());
    }
    Err(StoreError::Other(format!(
        "the document read back after writing differs (another writer?): missing {} of our actions, lost foreign rules {lost:?}",
        missing.len()
    )))
}

/// The plan as a person reads it: `+` added, `~` replaced (old and new), `=` unchanged, and the
/// foreign rules that are kept.
pub fn render(plan: &MergePlan) -> String {
    let json = |r: &Rule| serde_json::to_string(r).unwrap_or_else(|_| r.id.clone());
    let mut out = String::new();
    for change in &plan.changes {
        match change {
            Change::Add(r) => out.push_str(&format!("  + {}  {}\n", r.id, json(r))),
            Change::Update { from, to } => {
                out.push_str(&format!(
                    "  ~ {}\n      - {}\n      + {}\n",
                    to.id,
                    json(from),
                    json(to)
                ));
            }
            Change::Unchanged(r) => out.push_str(&format!("  = {}\n", r.id)),
        }
    }
    for id in &plan.foreign {
        out.push_str(&format!("  keep {id} (not ours: written back unchanged)\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::merge_plan;

    #[test]
    fn the_rendered_plan_shows_each_kind_of_change() {
        let mut old = Rule::new("upcommit-tmp-expire", "tmp/");
        old.expiration_days = Some(30);
        let mut new = old.clone();
        new.expiration_days = Some(7);
        let mut added = Rule::new("upcommit-abort", "");
        added.abort_incomplete_multipart_days = Some(1);
        let mut foreign = Rule::new("resize-cache", "cache/");
        foreign.expiration_days = Some(30);
        let plan = merge_plan(&[old, foreign], &[new, added]);
        let text = render(&plan);
        assert!(text.contains("  ~ upcommit-tmp-expire\n"), "{text}");
        assert!(text.contains(r#""expiration_days":30"#), "{text}");
        assert!(text.contains(r#""expiration_days":7"#), "{text}");
        assert!(text.contains("  + upcommit-abort"), "{text}");
        assert!(text.contains("  keep resize-cache"), "{text}");
    }
}
