//! `upcommit upload FILE --profile P`: presign → upload straight to S3 (one PUT, the POST form,
//! or a multipart upload for large files, whichever the server chose) → commit, with a
//! progress bar on stderr. Prints the file handle (`--json`) or a one-line summary.
//!
//! Checksums by default (`--no-checksum` turns them off): one pass over the file before presign
//! computes its SHA-256 and CRC64NVME; presign declares the SHA-256, and when the service chose
//! a multipart upload (whose whole-object checksum S3 keeps only as a CRC, so the SHA-256 is
//! refused with `checksum_algorithm_unsupported` before anything is charged) presign again with
//! the CRC64NVME. Each part URL is then asked for with its part's CRC64NVME. S3 refuses bytes
//! that do not match; the service records the checksum in the handle.
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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::api_client::{
    ApiClient, ApiError, CompletedPart, MultipartPlan, PartListing, PartUrl, Presigned,
};
use super::resume::{self, UploadState};
use crate::domain::checksum::{Checksum, ChecksumAlgorithm, Hasher};
use crate::domain::multipart::MAX_PART_SIZE;

pub const EXIT_USAGE: i32 = 2;
pub const EXIT_REFUSED: i32 = 3;
pub const EXIT_AUTH: i32 = 4;
pub const EXIT_UPLOAD: i32 = 5;
pub const EXIT_UNAVAILABLE: i32 = 6;

/// Part uploads in flight at once.
const PART_CONCURRENCY: usize = 4;
/// Part URLs asked for per request.
const PART_URL_BATCH: usize = 100;
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

/// A failure with the exit code it maps to and the sentence a person reads.
#[derive(Debug)]
struct Failure {
    exit: i32,
    message: String,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Self {
        Self {
            exit: EXIT_USAGE,
            message: message.into(),
        }
    }
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
        if code == "checksum_algorithm_unsupported" {
            // The service chose a multipart upload: its whole-object checksum is a CRC.
            declared = Some(crc);
            answer = retry(retries, || api.presign(body(declared))).await;
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

/// Keeps the multipart upload's id and the file's fingerprint beside the file. A state that
/// cannot be written costs only the resume: the upload goes on.
fn save_state(args: &UploadArgs, p: &Presigned, declared: Option<&Checksum>, state_path: &Path) {
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
async fn resume_upload(
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

/// The sentence and exit code for a refusal, by its stable error code.
fn explain(e: ApiError, args: &UploadArgs) -> Failure {
    let (status, code, message, retry_after) = match e {
        ApiError::Unreachable(detail) => {
            return Failure {
                exit: EXIT_UNAVAILABLE,
                message: format!("cannot reach the service at {}: {detail}", args.server),
            }
        }
        ApiError::Refused {
            status,
            code,
            message,
            retry_after,
        } => (status, code, message, retry_after),
    };
    let profile = &args.profile;
    let text = match code.as_str() {
        "unauthorized" => "the token was refused (expired, malformed or not signed by this service): get a new one".to_owned(),
        "admin_required" | "final_key_forbidden" => "only an admin may choose the final key".to_owned(),
        "profile_unknown" => format!("the service has no upload profile named {profile:?}"),
        "content_type_not_allowed" | "content_type_invalid" | "content_type_required" => format!(
            "the {profile} profile does not accept this file's type{}",
            args.content_type.as_deref().map_or_else(String::new, |c| format!(" ({c})"))
        ),
        "size_invalid" => "the file is empty".to_owned(),
        "size_too_large" | "object_too_large" => format!("the file is larger than the {profile} profile allows"),
        "filename_too_long" | "filename_invalid" => "the file name is too long or has control characters: rename it".to_owned(),
        "quota_exceeded" => format!(
            "your daily upload quota is used up{}",
            retry_after.map_or_else(String::new, |s| format!("; it renews in {}", human_secs(s)))
        ),
        "rate_limited" => "too many uploads at once; try again in a moment".to_owned(),
        "upload_expired" | "multipart_session_expired" => "the upload took too long and expired: run the command again".to_owned(),
        "content_mismatch" | "content_type_mismatch" | "size_mismatch" => {
            "the service checked the uploaded bytes and they do not match what was declared".to_owned()
        }
        "final_key_conflict" => "another file already holds that final key".to_owned(),
        "checksum_mismatch" => {
            "the bytes in storage do not have the checksum computed from the file: did it change during the upload? Run the command again".to_owned()
        }
        "checksum_required" => format!("the {profile} profile requires a checksum: run without --no-checksum"),
        "final_key_invalid" | "final_key_reserved" => "that final key is not allowed".to_owned(),
        _ if message.is_empty() => format!("the service refused the request ({})", status.as_u16()),
        _ => message.clone(),
    };
    let exit = if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
        EXIT_AUTH
    } else if status.is_server_error() {
        EXIT_UNAVAILABLE
    } else {
        EXIT_REFUSED
    };
    Failure {
        exit,
        message: format!("{text} [{code}]"),
    }
}

fn human_secs(s: u64) -> String {
    match s {
        0..=119 => format!("{s} s"),
        120..=7199 => format!("{} min", s / 60),
        _ => format!("{} h", s / 3600),
    }
}

/// A request body streaming `len` bytes of `file` from `offset`, advancing `bar` as it goes.
async fn file_body(
    file: &Path,
    offset: u64,
    len: u64,
    bar: &ProgressBar,
) -> std::io::Result<reqwest::Body> {
    let mut f = tokio::fs::File::open(file).await?;
    f.seek(std::io::SeekFrom::Start(offset)).await?;
    let reader = f.take(len);
    let bar = bar.clone();
    let stream = futures_util::stream::unfold(reader, move |mut reader| {
        let bar = bar.clone();
        async move {
            let mut buf = vec![0u8; CHUNK];
            match reader.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    bar.inc(n as u64);
                    Some((Ok::<_, std::io::Error>(buf), reader))
                }
                Err(e) => Some((Err(e), reader)),
            }
        }
    });
    Ok(reqwest::Body::wrap_stream(stream))
}

fn upload_failed(what: &str, detail: impl std::fmt::Display) -> Failure {
    Failure {
        exit: EXIT_UPLOAD,
        message: format!("the upload to storage failed ({what}): {detail}"),
    }
}

/// PUTs `len` bytes from `offset` to a presigned URL, retrying network errors and 5xx from
/// the start of the range; returns S3's ETag.
async fn put_range(
    http: &reqwest::Client,
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
    file: &Path,
    offset: u64,
    len: u64,
    bar: &ProgressBar,
) -> Result<String, Failure> {
    let start = bar.position();
    let mut last = String::new();
    for attempt in 0..3u32 {
        if attempt > 0 {
            bar.set_position(start);
            tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
        }
        let body = file_body(file, offset, len, bar)
            .await
            .map_err(|e| Failure::usage(format!("cannot read {}: {e}", file.display())))?;
        let mut req = http.put(url).body(body);
        for (k, v) in headers {
            // Signed as the exact length; sent once, below.
            if !k.eq_ignore_ascii_case("content-length") {
                req = req.header(k, v);
            }
        }
        req = req.header(reqwest::header::CONTENT_LENGTH, len);
        match req.send().await {
            Ok(resp) if resp.status().is_success() => {
                return Ok(resp
                    .headers()
                    .get(reqwest::header::ETAG)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned());
            }
            Ok(resp) if resp.status().is_server_error() => last = resp.status().to_string(),
            Ok(resp) => {
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                return Err(upload_failed(&status.to_string(), s3_error_code(&text)));
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(upload_failed("after 3 attempts", last))
}

/// S3's `<Code>` from an XML error body, for the message.
fn s3_error_code(xml: &str) -> String {
    xml.split_once("<Code>")
        .and_then(|(_, rest)| rest.split_once("</Code>"))
        .map_or_else(|| "no error code".to_owned(), |(code, _)| code.to_owned())
}

async fn put_whole(
    http: &reqwest::Client,
    p: &Presigned,
    file: &Path,
    size: u64,
    content_type: &str,
    bar: &ProgressBar,
) -> Result<(), Failure> {
    let url = p
        .url
        .as_deref()
        .ok_or_else(|| upload_failed("PUT", "the service sent no URL"))?;
    let mut headers = p.headers.clone().unwrap_or_default();
    // The service names it `Content-Type`: a second, lower-case entry would send the header
    // twice, which a store signs as "a,a" (Garage and S3 refuse that signature; LocalStack
    // did not).
    if !headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("content-type"))
    {
        headers.insert("content-type".into(), content_type.to_owned());
    }
    put_range(http, url, &headers, file, 0, size, bar)
        .await
        .map(|_| ())
}

async fn post_form(
    http: &reqwest::Client,
    p: &Presigned,
    file: &Path,
    size: u64,
    filename: &str,
    bar: &ProgressBar,
) -> Result<(), Failure> {
    let url = p
        .url
        .as_deref()
        .ok_or_else(|| upload_failed("POST", "the service sent no URL"))?;
    let mut form = reqwest::multipart::Form::new();
    for (k, v) in p.fields.clone().unwrap_or_default() {
        form = form.text(k, v);
    }
    let body = file_body(file, 0, size, bar)
        .await
        .map_err(|e| Failure::usage(format!("cannot read {}: {e}", file.display())))?;
    form = form.part(
        "file",
        reqwest::multipart::Part::stream_with_length(body, size).file_name(filename.to_owned()),
    );
    let resp = http
        .post(url)
        .multipart(form)
        .send()
        .await
        .map_err(|e| upload_failed("POST", e))?;
    if resp.status().is_success() {
        Ok(())
    } else {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        Err(upload_failed(&status.to_string(), s3_error_code(&text)))
    }
}

/// The checksums of the whole file, in one pass: SHA-256 (declared for a single-request upload)
/// then CRC64NVME (for a multipart one). Files too large for one request get only the CRC.
async fn whole_file_checksums(file: &Path, size: u64) -> Result<Vec<Checksum>, Failure> {
    let algorithms: &[ChecksumAlgorithm] = if size > MAX_PART_SIZE {
        &[ChecksumAlgorithm::Crc64Nvme]
    } else {
        &[ChecksumAlgorithm::Sha256, ChecksumAlgorithm::Crc64Nvme]
    };
    let bar = progress_bar(size);
    if let Ok(style) = ProgressStyle::with_template("checksum [{bar:32}] {bytes}/{total_bytes}") {
        bar.set_style(style.progress_chars("=> "));
    }
    let ranges = [(0, size)];
    let result = hash_ranges(file, &ranges, algorithms, &bar).await;
    bar.finish_and_clear();
    Ok(result?.pop().unwrap_or_default())
}

/// The checksums of each `(offset, len)` range of `file` (read once, in order), in each of
/// `algorithms`. Blocking reads and hashing, off the async threads.
async fn hash_ranges(
    file: &Path,
    ranges: &[(u64, u64)],
    algorithms: &[ChecksumAlgorithm],
    bar: &ProgressBar,
) -> Result<Vec<Vec<Checksum>>, Failure> {
    use std::io::{Read, Seek};
    let (path, ranges, algorithms, bar) = (
        file.to_owned(),
        ranges.to_vec(),
        algorithms.to_vec(),
        bar.clone(),
    );
    let hashed = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<Vec<Checksum>>> {
        let mut f = std::fs::File::open(&path)?;
        let mut buf = vec![0u8; CHUNK];
        let mut out = Vec::with_capacity(ranges.len());
        for (offset, len) in ranges {
            f.seek(std::io::SeekFrom::Start(offset))?;
            let mut hashers: Vec<Hasher> = algorithms.iter().map(|a| Hasher::new(*a)).collect();
            let mut left = len;
            while left > 0 {
                let want = usize::try_from(left.min(CHUNK as u64)).unwrap_or(CHUNK);
                let n = f.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the file got shorter while it was read",
                    ));
                }
                for h in &mut hashers {
                    h.update(&buf[..n]);
                }
                bar.inc(n as u64);
                left -= n as u64;
            }
            out.push(hashers.into_iter().map(Hasher::finish).collect());
        }
        Ok(out)
    })
    .await
    .map_err(|e| Failure::usage(format!("checksum: {e}")))?;
    hashed.map_err(|e| Failure::usage(format!("cannot read {}: {e}", file.display())))
}

/// A multipart upload to run: every part (a few at a time, part URLs asked for in batches,
/// each batch with its parts' checksums when the upload declared one), then the completion.
struct Multipart<'a> {
    api: &'a ApiClient,
    http: &'a reqwest::Client,
    p: &'a Presigned,
    file: &'a Path,
    size: u64,
    /// The algorithm of the declared full-object checksum: each part URL binds its part's.
    part_algorithm: Option<ChecksumAlgorithm>,
    bar: &'a ProgressBar,
    retries: u32,
    /// Parts the service already holds (a resumed upload): not sent again.
    stored: Vec<CompletedPart>,
}

/// Debug builds only, for the resume test (`tests/api/cli_upload.rs`): with
/// `UPCOMMIT_CLI_PAUSE_AFTER_PARTS=N`, parts are sent one at a time and the run stops for good
/// once N of them are stored, until it is killed. Release builds ignore it.
fn pause_after_parts() -> Option<usize> {
    if cfg!(debug_assertions) {
        std::env::var("UPCOMMIT_CLI_PAUSE_AFTER_PARTS")
            .ok()
            .and_then(|v| v.parse().ok())
    } else {
        None
    }
}

impl Multipart<'_> {
    async fn run(&self) -> Result<(), Failure> {
        let p = self.p;
        let plan = p
            .multipart
            .as_ref()
            .ok_or_else(|| upload_failed("multipart", "the service sent no part plan"))?;
        let numbers: Vec<u32> = (1..=plan.part_count)
            .filter(|n| !self.stored.iter().any(|s| s.part_number == *n))
            .collect();
        let mut done: Vec<CompletedPart> = self.stored.clone();
        let pause = pause_after_parts();
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let limit = Arc::new(tokio::sync::Semaphore::new(if pause.is_some() {
            1
        } else {
            PART_CONCURRENCY
        }));
        for batch in numbers.chunks(PART_URL_BATCH) {
            let checksums = match self.part_algorithm {
                Some(a) => Some(self.part_checksums(plan.part_size, batch, a).await?),
                None => None,
            };
            let urls: Vec<PartUrl> = retry(self.retries, || {
                self.api
                    .part_urls(&p.upload_id, batch, checksums.as_deref())
            })
            .await
            .map_err(|e| upload_failed("part URLs", describe(&e)))?;
            let mut tasks = tokio::task::JoinSet::new();
            for part in urls {
                let permit = limit
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|e| upload_failed("multipart", e))?;
                let (http, file, bar) = (self.http.clone(), self.file.to_owned(), self.bar.clone());
                let offset = u64::from(part.part_number - 1) * plan.part_size;
                let sent = sent.clone();
                tasks.spawn(async move {
                    let _permit = permit;
                    let etag = put_range(
                        &http,
                        &part.url,
                        &part.headers,
                        &file,
                        offset,
                        part.size,
                        &bar,
                    )
                    .await?;
                    let count = sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    if pause == Some(count) {
                        eprintln!("upcommit upload: paused after {count} parts (UPCOMMIT_CLI_PAUSE_AFTER_PARTS)");
                        // Holds the only permit: no other part starts.
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, Failure>(CompletedPart {
                        part_number: part.part_number,
                        etag,
                    })
                });
            }
            while let Some(joined) = tasks.join_next().await {
                done.push(joined.map_err(|e| upload_failed("part", e))??);
            }
        }
        done.sort_by_key(|p| p.part_number);
        retry(self.retries, || self.api.complete(&p.upload_id, &done))
            .await
            .map_err(|e| upload_failed("completion", describe(&e)))
    }

    /// The base64 checksum of each part of `batch` (consecutive part numbers: one read).
    async fn part_checksums(
        &self,
        part_size: u64,
        batch: &[u32],
        algorithm: ChecksumAlgorithm,
    ) -> Result<Vec<String>, Failure> {
        let ranges: Vec<(u64, u64)> = batch
            .iter()
            .map(|n| {
                let offset = u64::from(n - 1) * part_size;
                (offset, part_size.min(self.size.saturating_sub(offset)))
            })
            .collect();
        let hidden = ProgressBar::hidden();
        let hashed = hash_ranges(self.file, &ranges, &[algorithm], &hidden).await?;
        Ok(hashed
            .into_iter()
            .filter_map(|mut c| c.pop().map(|c| c.value))
            .collect())
    }
}

fn describe(e: &ApiError) -> String {
    match e {
        ApiError::Unreachable(d) => d.clone(),
        ApiError::Refused { code, message, .. } => format!("{code}: {message}"),
    }
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

    #[test]
    fn s3_error_codes_are_read_from_xml() {
        assert_eq!(
            s3_error_code("<Error><Code>SignatureDoesNotMatch</Code></Error>"),
            "SignatureDoesNotMatch"
        );
        assert_eq!(s3_error_code("garbage"), "no error code");
    }

    #[test]
    fn refusals_map_to_exit_codes_and_readable_sentences() {
        let args = UploadArgs {
            file: "x.png".into(),
            profile: "image".into(),
            server: "http://s".into(),
            token: None,
            content_type: None,
            final_key: None,
            json: false,
            retries: 0,
            no_checksum: false,
        };
        let refused = |status: u16, code: &str, retry_after| ApiError::Refused {
            status: StatusCode::from_u16(status).expect("status"),
            code: code.into(),
            message: "m".into(),
            retry_after,
        };
        let f = explain(refused(429, "quota_exceeded", Some(7200)), &args);
        assert_eq!(f.exit, EXIT_REFUSED);
        assert!(
            f.message.contains("quota") && f.message.contains("2 h"),
            "{}",
            f.message
        );
        assert_eq!(
            explain(refused(401, "unauthorized", None), &args).exit,
            EXIT_AUTH
        );
        assert_eq!(
            explain(refused(503, "service_unavailable", None), &args).exit,
            EXIT_UNAVAILABLE
        );
        assert_eq!(
            explain(ApiError::Unreachable("refused".into()), &args).exit,
            EXIT_UNAVAILABLE
        );
        let f = explain(refused(400, "size_too_large", None), &args);
        assert!(
            f.message.contains("larger than the image profile"),
            "{}",
            f.message
        );
        assert!(f.message.ends_with("[size_too_large]"));
        assert!(refused(409, "commit_in_progress", None).transient());
        assert!(!refused(429, "quota_exceeded", None).transient());
    }
}
