//! The conditions hygiene's statements share, as SQL text: profiles and statuses as literal
//! lists (validated names only, never quoted input), "the latest completed link scan vouches for
//! this handle", "nothing uses this available handle", and what a copy sharing the key means
//! (vouched for, live, or moved). Each statement that depends on one judges it itself.

/// `profile IN (…)` over profile names, which the configuration validated (1–32 of
/// `[a-z0-9_-]`); `FALSE` for none. Anything else is refused rather than quoted.
pub(super) fn profiles_in(column: &str, profiles: &[String]) -> String {
    let safe = |p: &String| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    };
    let list: Vec<String> = profiles
        .iter()
        .filter(|p| safe(p))
        .map(|p| format!("'{p}'"))
        .collect();
    if list.is_empty() {
        "1 = 0".to_owned()
    } else {
        format!("{column} IN ({})", list.join(", "))
    }
}

pub(super) fn statuses_sql(statuses: &[crate::domain::records::HandleStatus]) -> String {
    statuses
        .iter()
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The id of the latest completed link scan, the one hygiene judges by (alias `l2`): the
/// prune's guard (`retention_queries::RETIRED_SCANS`) names it with the same words.
pub(super) const LATEST_COMPLETED_SCAN: &str = "SELECT l2.id FROM link_scans l2 \
     WHERE l2.state = 'completed' ORDER BY l2.completed_at DESC, l2.id DESC LIMIT 1";

/// The latest completed link scan vouches for handle `alias`: it saw it, or it began before the
/// handle was created (so it could not judge it). The latest scan is looked up in the statement
/// that uses this, never read beforehand: a scan completed since the job's read counts.
pub(super) fn scan_vouches(alias: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM link_scans ls WHERE ls.id = ({LATEST_COMPLETED_SCAN}) \
         AND ({alias}.created_at >= ls.started_at OR EXISTS (SELECT 1 FROM link_scan_seen s \
         WHERE s.scan_id = ls.id AND s.file_id = {alias}.id)))"
    )
}

/// The conditions of "nothing uses this available handle" on alias `h`: `$2` is the cutoff.
/// Shared by the candidate read and the update. A temporary file (`expires_at` set) is never
/// unused in this sense: its lifecycle rule, not hygiene, ends it.
pub(super) fn unused_conditions(profiles: &[String]) -> String {
    format!(
        "h.status = 'available' AND h.expires_at IS NULL AND h.claim IS NULL AND h.link_count = 0 \
         AND h.created_at < $2 AND (h.restored_at IS NULL OR h.restored_at < $2) \
         AND NOT EXISTS (SELECT 1 FROM file_links l WHERE l.file_id = h.id) AND {} AND NOT {}",
        profiles_in("h.profile", profiles),
        scan_vouches("h")
    )
}

/// Another handle of `h`'s key (a copy), not deleted, is vouched for by the latest completed
/// link scan: the app uses the shared object, so it is neither archived nor deleted. Judged
/// with [`scan_vouches`] in every statement a step of hygiene depends on (claim, the renewal
/// right before S3, an archival's settle), so a scan that completes during a step stops it.
pub(super) fn sibling_vouched() -> String {
    format!(
        "EXISTS (SELECT 1 FROM file_handles o WHERE o.key = h.key AND o.id <> h.id \
         AND o.status <> 'deleted' AND {})",
        scan_vouches("o")
    )
}

/// The unlinked handle `h` can come back to `available` without touching S3: no archival of
/// a copy moved the shared object (the catalog records the class for every copy of the key),
/// and no handle of the key holds a claim (an archival of a copy may be changing it, or have
/// died after changing it). Others come back through a restore, which checks the object.
pub(super) const UNMOVED: &str = "(h.storage_class IS NULL OR h.storage_class = 'STANDARD') \
     AND NOT EXISTS (SELECT 1 FROM file_handles o WHERE o.key = h.key AND o.claim IS NOT NULL)";

/// Another handle of `h`'s key (a copy) is available or being restored: the shared object is
/// live, so it is neither archived nor deleted.
pub(super) const SIBLING_LIVE: &str =
    "EXISTS (SELECT 1 FROM file_handles o WHERE o.key = h.key AND o.id <> h.id \
     AND (o.status = 'available' OR o.claim = 'restore'))";
