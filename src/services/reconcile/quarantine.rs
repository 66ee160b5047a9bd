//! `--quarantine`: moving a finding under `quarantine/` — copied, the copy verified, then the
//! version copied removed — never over an earlier quarantine copy of other bytes, and never an
//! object an upload record names.

use std::sync::Arc;

/// How long the comparison waits for the store's next answer (a head or a chunk).
const STALL: std::time::Duration = std::time::Duration::from_secs(30);

fn stalled() -> StoreError {
    StoreError::Unavailable(format!(
        "comparing with the earlier copy: the store sent nothing for {} s",
        STALL.as_secs()
    ))
}

use super::ReconcileSummary;
use crate::catalog::Catalog;
use crate::domain::jobs::JobItem;
use crate::domain::prefixes::QUARANTINE_PREFIX;
use crate::domain::reconcile::BucketKey;
use crate::storage::{ObjectStore, StoreError};

/// Moves a finding under `quarantine/` unless an upload record names it (a legacy upload
/// waiting for its in-place commit, a commit in flight to its final key).
pub(super) async fn quarantine(
    catalog: &Arc<dyn Catalog>,
    store: &Arc<dyn ObjectStore>,
    summary: &mut ReconcileSummary,
    b: &BucketKey,
    mut item: JobItem,
) -> JobItem {
    match catalog.upload_names_key(&b.key).await {
        Ok(false) => {}
        Ok(true) => {
            summary.named_by_upload += 1;
            item.reason = "not quarantined: an upload record names this object".into();
            return item;
        }
        Err(e) => {
            item.reason = format!("not quarantined: cannot check the uploads: {e}");
            return item;
        }
    }
    match move_aside(store.as_ref(), b).await {
        Ok(()) => {
            item.action = "quarantined".into();
            item.reason = format!("moved to {QUARANTINE_PREFIX}{}", b.key);
        }
        Err(e) => item.reason = format!("not quarantined: {e}"),
    }
    item
}

/// Whether two objects (key, version) hold the same bytes, read side by side through
/// short-lived GET URLs: only for an earlier quarantine copy whose ETag cannot tell.
/// Both must deliver `size` bytes, the size their HEADs reported: a body cut short, empty, or
/// an error page served with 200 is no evidence (review 27: two reads cut at the same point
/// counted as the same bytes, and the source was deleted).
/// Each body must also come from the object its HEAD described: its answer names the same ETag
/// (and version), asked with `Cache-Control: no-cache` (review 27: a cache serving signed URLs
/// answered with an older object's body).
async fn same_bytes(
    store: &dyn ObjectStore,
    a: (&str, &crate::storage::ObjectHead),
    b: (&str, &crate::storage::ObjectHead),
    size: i64,
) -> Result<bool, StoreError> {
    // A URL's path loses its `.` and `..` segments on the way (RFC 3986 normalization): such a
    // key would be read from another key. Not compared, so never counted as the same.
    if [a.0, b.0]
        .iter()
        .any(|k| k.split('/').any(|seg| seg == "." || seg == ".."))
    {
        return Err(StoreError::Other(
            "a key with `.` or `..` segments cannot be read back by URL to compare; compare the \
             two objects by hand"
                .into(),
        ));
    }
    let http = store.http();
    let unavailable = |e: reqwest::Error| StoreError::Unavailable(e.to_string());
    let mut open = Vec::new();
    for (key, head) in [a, b] {
        let version = head.version_id.as_deref().filter(|v| *v != "null");
        let url = store.presign_get_version(key, version, 900).await?;
        // The answer's head within STALL; the body is read chunk by chunk, each within STALL
        // too (an object of any size is compared, but a store that stops answering ends it).
        let resp = http
            .get(url)
            .header("cache-control", "no-cache")
            .timeout(STALL)
            .send();
        let resp = tokio::time::timeout(STALL, resp)
            .await
            .map_err(|_| stalled())?
            .map_err(unavailable)?;
        let resp = resp.error_for_status().map_err(unavailable)?;
        let named = |h: &str| resp.headers().get(h).and_then(|v| v.to_str().ok());
        if !crate::storage::known_etag(&head.etag) || named("etag") != Some(head.etag.as_str()) {
            return Err(StoreError::Unavailable(format!(
                "comparing with the earlier copy: the GET of {key} answered ETag {:?}, its HEAD {:?}",
                named("etag"),
                head.etag
            )));
        }
        if version.is_some() && named("x-amz-version-id") != version {
            return Err(StoreError::Unavailable(format!(
                "comparing with the earlier copy: the GET of {key} answered another version"
            )));
        }
        open.push(resp);
    }
    let (mut rb, mut ra) = (open.pop().expect("two"), open.pop().expect("two"));
    // Refills an empty buffer from its body (skipping empty chunks); stays empty at its end.
    async fn fill(resp: &mut reqwest::Response, buf: &mut Vec<u8>) -> Result<(), StoreError> {
        while buf.is_empty() {
            let chunk = tokio::time::timeout(STALL, resp.chunk())
                .await
                .map_err(|_| stalled())?
                .map_err(|e| StoreError::Unavailable(e.to_string()))?;
            match chunk {
                Some(chunk) => buf.extend_from_slice(&chunk),
                None => break,
            }
        }
        Ok(())
    }
    let (mut left, mut right) = (Vec::new(), Vec::new());
    let mut compared: i64 = 0;
    loop {
        fill(&mut ra, &mut left).await?;
        fill(&mut rb, &mut right).await?;
        let n = left.len().min(right.len());
        if n == 0 {
            // One of them ended: the same only if both did, after every byte.
            if left.is_empty() && right.is_empty() && compared == size {
                return Ok(true);
            }
            if compared != size {
                return Err(StoreError::Unavailable(format!(
                    "comparing with the earlier copy: read {compared} of {size} bytes"
                )));
            }
            return Ok(false);
        }
        if left[..n] != right[..n] {
            return Ok(false);
        }
        compared += i64::try_from(n).unwrap_or(i64::MAX);
        if compared > size {
            return Err(StoreError::Unavailable(format!(
                "comparing with the earlier copy: more than the {size} bytes its HEAD reported"
            )));
        }
        left.drain(..n);
        right.drain(..n);
    }
}

/// Copy under `quarantine/` (in parts above the single-copy limit), verify the copy, then
/// remove the version copied. An object already at the quarantine key (an earlier quarantine of
/// the same key) is never overwritten: on an unversioned store it would be gone, on a versioned
/// one left to the one-day noncurrent expiry instead of the quarantine's 30 days (review 27).
/// Only a copy of these very bytes (an earlier run that stopped before its delete) is taken as
/// done, whatever its ETag.
async fn move_aside(store: &dyn ObjectStore, b: &BucketKey) -> Result<(), StoreError> {
    let dst = format!("{QUARANTINE_PREFIX}{}", b.key);
    // (The copy reads its source itself; the source is read here only to compare it with an
    // earlier copy, which is the copy then.)
    let (original, copy) = match store.head(&dst).await? {
        None => {
            let original = store.copy_object(&b.key, &dst).await?;
            let copy = store.head(&dst).await?.ok_or(StoreError::NotFound)?;
            (original, copy)
        }
        Some(earlier) => {
            let source = store.head(&b.key).await?.ok_or(StoreError::NotFound)?;
            // The same ETag says the same bytes; a copy in parts, or a single copy of an
            // object uploaded in parts, has an ETag of its own (review 27): then the two are
            // read side by side.
            let same = earlier.size == source.size
                && ((crate::storage::known_etag(&earlier.etag) && earlier.etag == source.etag)
                    || same_bytes(store, (&b.key, &source), (&dst, &earlier), source.size).await?);
            if !same {
                return Err(StoreError::Other(format!(
                    "{dst} already holds another object (an earlier quarantine of this key): \
                     nothing moved; move that one away first"
                )));
            }
            (source, earlier)
        }
    };
    if copy.size != original.size {
        return Err(StoreError::Other(format!(
            "the quarantine copy has {} bytes, the original {}",
            copy.size, original.size
        )));
    }
    crate::pause::point("quarantine_copied").await;
    // A suspended bucket's objects carry the version id "null", which names no version a
    // delete could keep apart from a newer write: unversioned, like no id at all.
    if original.version_id.as_deref().map_or(true, |v| v == "null") {
        // Unversioned (Garage): the delete would remove whatever is at the key by then. The
        // key is read again and its object deleted only if it is still the one copied
        // (review 27: a newer object written meanwhile was deleted, never copied anywhere).
        // What remains is the moment between this read and the delete.
        match store.head(&b.key).await? {
            None => return Ok(()),
            Some(now)
                if crate::storage::known_etag(&now.etag)
                    && now.etag == original.etag
                    && now.size == original.size => {}
            Some(_) => {
                return Err(StoreError::Other(
                    "the object was replaced while it was copied: the newer one is kept in \
                     place, the quarantine holds the one copied"
                        .into(),
                ))
            }
        }
    }
    store
        .delete_version(&b.key, original.version_id.as_deref())
        .await
}
