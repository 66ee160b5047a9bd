//! Sending the bytes to storage as the service presigned them: one PUT, the POST form, or a
//! multipart upload (parts a few at a time, part URLs asked for in batches, then the
//! completion), each request body streamed from the file and advancing the progress bar.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use indicatif::ProgressBar;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

use super::checksums::hash_ranges;
use super::failure::{describe, upload_failed, Failure};
use super::{retry, CHUNK};
use crate::cli::api_client::{ApiClient, CompletedPart, PartUrl, Presigned};
use crate::domain::checksum::ChecksumAlgorithm;

/// Part uploads in flight at once.
const PART_CONCURRENCY: usize = 4;
/// Part URLs asked for per request.
const PART_URL_BATCH: usize = 100;

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

pub(super) async fn put_whole(
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

pub(super) async fn post_form(
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

/// A multipart upload to run: every part (a few at a time, part URLs asked for in batches,
/// each batch with its parts' checksums when the upload declared one), then the completion.
pub(super) struct Multipart<'a> {
    pub(super) api: &'a ApiClient,
    pub(super) http: &'a reqwest::Client,
    pub(super) p: &'a Presigned,
    pub(super) file: &'a Path,
    pub(super) size: u64,
    /// The algorithm of the declared full-object checksum: each part URL binds its part's.
    pub(super) part_algorithm: Option<ChecksumAlgorithm>,
    pub(super) bar: &'a ProgressBar,
    pub(super) retries: u32,
    /// Parts the service already holds (a resumed upload): not sent again.
    pub(super) stored: Vec<CompletedPart>,
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
    pub(super) async fn run(&self) -> Result<(), Failure> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_error_codes_are_read_from_xml() {
        assert_eq!(
            s3_error_code("<Error><Code>SignatureDoesNotMatch</Code></Error>"),
            "SignatureDoesNotMatch"
        );
        assert_eq!(s3_error_code("garbage"), "no error code");
    }
}
