//! Resuming: the state `upcommit upload` keeps beside the file while a multipart upload is open
//! (written at presign), and a rerun that finishes that upload — the file checked against its
//! fingerprint and declared checksum, only the missing parts sent — before committing.

use std::path::Path;

use indicatif::ProgressBar;
use reqwest::StatusCode;

use super::checksums::hash_ranges;
use super::failure::{explain, Failure};
use super::transfer::Multipart;
use super::{commit, progress_bar, retry, UploadArgs};
use crate::cli::api_client::{
    ApiClient, ApiError, CompletedPart, MultipartPlan, PartListing, Presigned,
};
use crate::cli::resume::{self, UploadState};
use crate::domain::checksum::{Checksum, ChecksumAlgorithm};

/// Keeps the multipart upload's id and the file's fingerprint beside the file. A state that
/// cannot be written costs only the resume: the upload goes on.
pub(super) fn save_state(
    args: &UploadArgs,
    p: &Presigned,
    declared: Option<&Checksum>,
    state_path: &Path,
) {
    let Some(plan) = &p.multipart else { return };
    // Without the whole-file checksum a rerun could not prove the parts already stored are the
    // file's current contents (a change in the middle that keeps its size and modification
    // time): no state, so a rerun uploads the file afresh rather than a mix.
    let Some(declared) = declared else {
        eprintln!(
            "upcommit upload: --no-checksum: this upload cannot be resumed if the run dies (a rerun starts afresh)"
        );
        return;
    };
    let saved = resume::fingerprint(&args.file).and_then(|fingerprint| {
        UploadState {
            version: resume::VERSION,
            server: resume::normalize_server(&args.server),
            profile: args.profile.clone(),
            upload_id: p.upload_id.clone(),
            key: p.key.clone(),
            part_size: plan.part_size,
            part_count: plan.part_count,
            fingerprint,
            checksum: Some((
                declared.algorithm.as_str().to_owned(),
                declared.value.clone(),
            )),
        }
        .save(state_path)
    });
    if let Err(e) = saved {
        eprintln!(
            "upcommit upload: warning: cannot write {} ({e}): this upload cannot be resumed if the run dies",
            state_path.display()
        );
    }
}

/// Finishes the upload `state` names: `Ok(None)` when the service no longer has it open (the
/// caller starts a new one), `Err` when the file changed since it started (nothing committed).
pub(super) async fn resume_upload(
    args: &UploadArgs,
    api: &ApiClient,
    http: &reqwest::Client,
    state: &UploadState,
    state_path: &Path,
) -> Result<Option<serde_json::Value>, Failure> {
    let id = &state.upload_id;
    let changed = |why: &str| {
        Failure::usage(format!(
            "{} changed since upload {id} was started ({why}): the parts already stored are of the old contents, so nothing was committed. Delete {} to upload the file as it is now",
            args.file.display(),
            state_path.display()
        ))
    };
    let now = resume::fingerprint(&args.file)
        .map_err(|e| Failure::usage(format!("cannot read {}: {e}", args.file.display())))?;
    if let Some(why) = resume::changed(&state.fingerprint, &now) {
        return Err(changed(why));
    }
    let declared = match &state.checksum {
        Some((algorithm, value)) => {
            let algorithm = ChecksumAlgorithm::parse(algorithm).ok_or_else(|| {
                Failure::usage(format!(
                    "{}: unknown checksum algorithm {algorithm:?}",
                    state_path.display()
                ))
            })?;
            let bar = ProgressBar::hidden();
            let now = hash_ranges(&args.file, &[(0, now.size)], &[algorithm], &bar)
                .await?
                .pop()
                .and_then(|mut c| c.pop());
            if now.as_ref().map(|c| &c.value) != Some(value) {
                return Err(changed(&format!("its whole-file {algorithm} differs")));
            }
            Some(algorithm)
        }
        None => None,
    };
    let listing = match retry(args.retries, || api.list_parts(id)).await {
        Ok(l) => l,
        Err(ApiError::Refused { status, code, .. })
            if status == StatusCode::NOT_FOUND || status == StatusCode::GONE =>
        {
            eprintln!(
                "upcommit upload: upload {id} cannot be resumed ({code}); starting a new upload"
            );
            return Ok(None);
        }
        Err(e) => return Err(explain(e, args)),
    };
    if listing.state != "completed" {
        if (listing.part_size, listing.part_count) != (state.part_size, state.part_count) {
            return Err(Failure::usage(format!(
                "upload {id} has {} parts of {} bytes on the service, not the {} of {} that {} records: delete it to start a new upload",
                listing.part_count,
                listing.part_size,
                state.part_count,
                state.part_size,
                state_path.display()
            )));
        }
        let stored = stored_parts(&listing, now.size);
        eprintln!(
            "upcommit upload: resuming upload {id}: {} of {} parts already stored, sending {}",
            stored.len(),
            state.part_count,
            state.part_count as usize - stored.len()
        );
        let p = Presigned {
            upload_id: id.clone(),
            key: state.key.clone(),
            method: "MULTIPART".into(),
            url: None,
            headers: None,
            fields: None,
            multipart: Some(MultipartPlan {
                part_size: state.part_size,
                part_count: state.part_count,
            }),
            checksum: None,
        };
        let bar = progress_bar(now.size);
        bar.set_position(
            stored
                .iter()
                .map(|_| state.part_size)
                .sum::<u64>()
                .min(now.size),
        );
        let job = Multipart {
            api,
            http,
            p: &p,
            file: &args.file,
            size: now.size,
            part_algorithm: declared.filter(|a| a.full_object_multipart()),
            bar: &bar,
            retries: args.retries,
            stored,
        };
        if let Err(f) = job.run().await {
            // Kept open with its state: the next run resumes again.
            bar.abandon();
            return Err(f);
        }
        bar.finish_and_clear();
    }
    commit(args, api, &state.key, state_path).await.map(Some)
}

/// The parts the service holds whole (the size their place in the file gives them): the ones
/// a resumed upload keeps. Any other part is sent again.
fn stored_parts(listing: &PartListing, size: u64) -> Vec<CompletedPart> {
    listing
        .parts
        .iter()
        .filter(|p| {
            (1..=listing.part_count).contains(&p.part_number) && {
                let offset = u64::from(p.part_number - 1) * listing.part_size;
                p.size == listing.part_size.min(size.saturating_sub(offset))
            }
        })
        .map(|p| CompletedPart {
            part_number: p.part_number,
            etag: p.etag.clone(),
        })
        .collect()
}
