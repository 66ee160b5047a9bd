//! `upcommit upload FILE --profile P`: presign → upload straight to S3 (one PUT, the POST form,
//! or a multipart upload for large files, whichever the server chose) → commit, with a
//! progress bar on stderr. Prints the file handle (`--json`) or a one-line summary.
//!
//! Checksums by default (`--no-checksum` turns them off): one pass over the file before presign
//! computes its SHA-256 and CRC64NVME; presign declares the SHA-256, and when the service chose
//! a multipart upload (whose whole-object checksum S3 keeps only as a CRC, so the SHA-256 is
//! refused with `checksum_algorithm_unsupported` before anything is charged) presign again with
//! the CRC64NVME. Each part URL is then asked for with its part's CRC64NVME. S3 refuses bytes
//! that do not match; the service records the checksum in the handle. Where the service's store
//! verifies neither (`checksum_algorithm_unavailable`: RGW, docs/stores.md) the upload goes
//! without one, with a warning, unless the profile requires one.
//!
//! Resuming: while a multipart upload is open, its id and a fingerprint of the file are kept
//! beside it ([`super::resume`], `<file>.upcommit-state.json`). If the run dies (killed, crashed,
//! the machine restarted), running the same command again lists the parts the service holds,
//! checks that the file is the one they came from (size, modification time, first and last MiB,
//! and the whole-file checksum declared at presign), sends only the missing parts, then
//! completes and commits. A changed file is refused with nothing committed. An upload that
//! cannot be resumed any more (aborted, expired) is started afresh.
//!
//! Exit codes: 0 committed; 2 usage or local problem (no token, unreadable file, unknown
//! content type); 3 refused by the service (type, size, quota, …); 4 token refused or not
//! allowed; 5 the upload to S3 failed; 6 the service is unreachable or failing.
//!
//! This file holds the command: presign, the progress bar, retries and the commit. Sending the
//! bytes is in `transfer`, the file's checksums in `checksums`, resuming in `resuming`, and how a
//! failure reads (exit code and sentence) in `failure`.

mod checksums;
mod failure;
mod resuming;
mod transfer;

use std::path::{Path, PathBuf};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use super::api_client::{ApiClient, ApiError};
use super::resume::{self, UploadState};
use crate::domain::checksum::Checksum;
use checksums::whole_file_checksums;
use failure::{explain, Failure};
use resuming::{resume_upload, save_state};
use transfer::{post_form, put_whole, Multipart};

pub const EXIT_USAGE: i32 = 2;
pub const EXIT_REFUSED: i32 = 3;
pub const EXIT_AUTH: i32 = 4;
pub const EXIT_UPLOAD: i32 = 5;
pub const EXIT_UNAVAILABLE: i32 = 6;

const CHUNK: usize = 256 * 1024;

#[derive(Debug, Clone, clap::Args)]
pub struct UploadArgs {
    /// The file to upload.
    pub file: PathBuf,
    /// The upload profile (`image`, `recording`, …).
    #[arg(long)]
    pub profile: String,
    /// The service's base URL.
    #[arg(long, env = "UPCOMMIT_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// Bearer token (or UPCOMMIT_TOKEN).
    #[arg(long, env = "UPCOMMIT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Content type; guessed from the file name when absent.
    #[arg(long)]
    pub content_type: Option<String>,
    /// Final key (admins only).
    #[arg(long)]
    pub final_key: Option<String>,
    /// Print the file handle as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Retries of a call the service did not answer or failed (backing off 1, 2, 4, 8 s).
    #[arg(long, default_value_t = 4)]
    pub retries: u32,
    /// Send no checksum (by default: SHA-256 of a file sent in one request, CRC64NVME of the
    /// whole file and of each part of a multipart upload).
    #[arg(long)]
    pub no_checksum: bool,
}

pub async fn run(args: UploadArgs) -> i32 {
    match upload(&args).await {
        Ok(handle) => {
            if args.json {
                println!("{handle}");
            } else {
                let checksum = match (
                    handle["checksum"]["algorithm"].as_str(),
                    handle["checksum"]["value"].as_str(),
                ) {
                    (Some(a), Some(v)) => format!(", {a} {v}"),
                    _ => String::new(),
                };
                eprintln!(
                    "committed {} → {} ({} bytes, {}{checksum}), file {}",
                    args.file.display(),
                    handle["key"].as_str().unwrap_or("?"),
                    handle["size"],
                    handle["content_type"].as_str().unwrap_or("?"),
                    handle["id"].as_str().unwrap_or("?"),
                );
            }
            0
        }
        Err(f) => {
            eprintln!("upcommit upload: {}", f.message);
            f.exit
        }
    }
}

async fn upload(args: &UploadArgs) -> Result<serde_json::Value, Failure> {
    let token = args
        .token
        .clone()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| Failure::usage("no token: pass --token or set UPCOMMIT_TOKEN"))?;
    let meta = tokio::fs::metadata(&args.file)
        .await
        .map_err(|e| Failure::usage(format!("cannot read {}: {e}", args.file.display())))?;
    if !meta.is_file() {
        return Err(Failure::usage(format!(
            "{} is not a file",
            args.file.display()
        )));
    }
    let size = meta.len();
    let content_type = match &args.content_type {
        Some(ct) => ct.clone(),
        None => guess_content_type(&args.file).ok_or_else(|| {
            Failure::usage(format!(
                "cannot tell the content type of {} from its name: pass --content-type",
                args.file.display()
            ))
        })?,
    };
    let filename = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "upload".into());
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| Failure::usage(format!("HTTP client: {e}")))?;
    let api = ApiClient::new(http.clone(), &args.server, token);

    let state_path = resume::state_path(&args.file);
    let saved = UploadState::load(&state_path)
        .map_err(|e| Failure::usage(format!("{e}: delete it to start a new upload")))?;
    if let Some(state) = saved {
        if !state.is_for(&args.server, &args.profile) {
            return Err(Failure::usage(format!(
                "{} holds an unfinished upload of this file to {} (profile {}): run that upload again to finish it, or delete the state file to start a new one",
                state_path.display(),
                state.server,
                state.profile
            )));
        }
        if let Some(handle) = resume_upload(args, &api, &http, &state, &state_path).await? {
            return Ok(handle);
        }
        let _ = std::fs::remove_file(&state_path);
    }

    let retries = args.retries;
    let checksums = if args.no_checksum {
        Vec::new()
    } else {
        whole_file_checksums(&args.file, size).await?
    };
    let body = |checksum: Option<&Checksum>| {
        let mut body = json!({
            "profile": args.profile,
            "content_type": content_type,
            "size": size,
            "filename": filename,
        });
        if let Some(c) = checksum {
            body["checksum"] = json!(c);
        }
        body
    };
    let mut declared = checksums.first();
    let mut answer = retry(retries, || api.presign(body(declared))).await;
    if let (Err(ApiError::Refused { code, .. }), Some(crc)) = (&answer, checksums.get(1)) {
        if code == "checksum_algorithm_unsupported" || code == "checksum_algorithm_unavailable" {
            // The service chose a multipart upload (its whole-object checksum is a CRC), or its
            // store cannot verify the SHA-256: the CRC64NVME next.
            declared = Some(crc);
            answer = retry(retries, || api.presign(body(declared))).await;
        }
    }
    if declared.is_some() && refused_as(&answer, "checksum_algorithm_unavailable") {
        // The service's store verifies no checksum this upload could declare (docs/stores.md):
        // without one, said out loud; a profile that requires one still refuses, with this
        // refusal's reason rather than `--no-checksum`'s.
        let without = retry(retries, || api.presign(body(None))).await;
        if !refused_as(&without, "checksum_required") {
            if without.is_ok() {
                eprintln!(
                    "upcommit upload: warning: the service's object store cannot verify a \
                     checksum on this upload; uploading without one (the service still checks \
                     the size and type)"
                );
            }
            declared = None;
            answer = without;
        }
    }
    let presigned = answer.map_err(|e| explain(e, args))?;
    if let Some(d) = declared {
        let bound = presigned.checksum.as_ref();
        if bound.map(|b| (b.algorithm.as_str(), b.value.as_str()))
            != Some((d.algorithm.as_str(), d.value.as_str()))
        {
            eprintln!(
                "upcommit upload: warning: the service did not bind the {} checksum to this upload",
                d.algorithm
            );
        }
    }
    let part_algorithm = declared
        .map(|c| c.algorithm)
        .filter(|a| a.full_object_multipart());

    if presigned.method == "MULTIPART" {
        save_state(args, &presigned, declared, &state_path);
    }
    let bar = progress_bar(size);
    let sent = match presigned.method.as_str() {
        "PUT" => put_whole(&http, &presigned, &args.file, size, &content_type, &bar).await,
        "POST" => post_form(&http, &presigned, &args.file, size, &filename, &bar).await,
        "MULTIPART" => {
            let job = Multipart {
                api: &api,
                http: &http,
                p: &presigned,
                file: &args.file,
                size,
                part_algorithm,
                bar: &bar,
                retries,
                stored: Vec::new(),
            };
            job.run().await
        }
        other => Err(Failure {
            exit: EXIT_UNAVAILABLE,
            message: format!("the service answered an unknown upload method {other:?}"),
        }),
    };
    if let Err(f) = sent {
        bar.abandon();
        if presigned.method == "MULTIPART" {
            // Free the parts now rather than at the bucket's abort rule.
            let _ = api.abort(&presigned.upload_id).await;
            let _ = std::fs::remove_file(&state_path);
        }
        return Err(f);
    }
    bar.finish_and_clear();
    commit(args, &api, &presigned.key, &state_path).await
}

/// Commits, then forgets the upload's state unless the service could not be reached (the next
/// run then resumes at the commit).
async fn commit(
    args: &UploadArgs,
    api: &ApiClient,
    key: &str,
    state_path: &Path,
) -> Result<serde_json::Value, Failure> {
    let committed = retry(args.retries, || api.commit(key, args.final_key.as_deref())).await;
    if !matches!(&committed, Err(e) if e.transient()) {
        let _ = std::fs::remove_file(state_path);
    }
    committed.map_err(|e| explain(e, args))
}

/// Whether the service refused the call with error code `code`.
fn refused_as<T>(answer: &Result<T, ApiError>, code: &str) -> bool {
    matches!(answer, Err(ApiError::Refused { code: c, .. }) if c == code)
}

/// Repeats a call that is safe to repeat while the failure is transient (the service did not
/// answer, failed, or asked to wait), backing off 1, 2, 4, 8 s (or what Retry-After says).
async fn retry<T, F, Fut>(retries: u32, mut call: F) -> Result<T, ApiError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let mut attempt = 0;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) if e.transient() && attempt < retries => {
                let wait = match &e {
                    ApiError::Refused {
                        retry_after: Some(s),
                        ..
                    } => (*s).min(30),
                    _ => 1 << attempt.min(5),
                };
                tokio::time::sleep(Duration::from_secs(wait)).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

pub fn guess_content_type(path: &Path) -> Option<String> {
    mime_guess::from_path(path)
        .first()
        .map(|m| m.essence_str().to_owned())
}

fn progress_bar(size: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(size), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template(
        "{spinner} [{bar:32}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_are_guessed_from_common_extensions() {
        assert_eq!(
            guess_content_type(Path::new("a/photo.PNG")).as_deref(),
            Some("image/png")
        );
        assert_eq!(
            guess_content_type(Path::new("talk.mp3")).as_deref(),
            Some("audio/mpeg")
        );
        assert_eq!(guess_content_type(Path::new("no-extension")), None);
    }
}
