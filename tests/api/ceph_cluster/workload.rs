//! The clients of the Ceph cluster test: files presigned, uploaded (whole or in parts) and
//! committed through upcommit, every call retried as docs/api.md says, every answer and retry
//! counted in a [`Tally`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cluster::Ceph;
use super::{secs, FILES};
use crate::helpers::{media, Presigned, TestApp};

pub(super) const MIB: usize = 1024 * 1024;
/// Over UPCOMMIT_MAX_SINGLE_COPY_BYTES: the commit copies it in three parts.
pub(super) const LARGE: usize = 12 * MIB;

/// Every answer upcommit gave and every retry the clients made, by phase (0: healthy, 1: an OSD
/// down, 2: an OSD and a gateway down).
#[derive(Default)]
pub(super) struct Tally {
    pub(super) phase: AtomicUsize,
    pub(super) answers: Mutex<Vec<Answer>>,
    /// Presigned PUTs (whole files and parts) sent again: no answer, or a 5xx from the store.
    pub(super) store_retries: [AtomicU64; 3],
    /// Requests to upcommit that got no answer in time (retried: docs/api.md).
    pub(super) unanswered: [AtomicU64; 3],
    pub(super) started: AtomicUsize,
    pub(super) done: AtomicUsize,
    /// Files are taken only below this number: the test holds the run back so that a kill
    /// always meets files in flight.
    pub(super) limit: AtomicUsize,
    /// What each file in flight is doing now (presign, upload, parts, complete, commit, copy).
    pub(super) stage: Mutex<std::collections::BTreeMap<usize, &'static str>>,
    pub(super) handles: Mutex<Vec<Value>>,
    /// The longest a call took to settle: time, 503s retried, which call.
    pub(super) longest_wait: Mutex<(Duration, u32, &'static str)>,
}

#[derive(Debug, Clone)]
pub(super) struct Answer {
    pub(super) what: &'static str,
    pub(super) phase: usize,
    pub(super) status: u16,
    pub(super) code: String,
    pub(super) retry_after: bool,
}

impl Answer {
    /// A success, or an error docs/api.md documents (retryable, or a copy of a file hygiene
    /// took meanwhile).
    pub(super) fn documented(&self) -> bool {
        (200..300).contains(&self.status)
            || (self.status == 503
                && self.retry_after
                && [
                    "service_unavailable",
                    "request_timeout",
                    "commit_in_progress",
                    "file_busy",
                ]
                .contains(&self.code.as_str()))
            || (self.what == "copy" && self.status == 409 && self.code == "file_not_available")
    }
}

impl Tally {
    pub(super) fn phase(&self) -> usize {
        self.phase.load(Ordering::SeqCst)
    }

    pub(super) fn stage(&self, n: usize, what: &'static str) {
        self.stage.lock().expect("stages").insert(n, what);
    }

    /// The files in flight and their stages, as the kill meets them.
    pub(super) fn in_flight(&self) -> String {
        format!("{:?}", self.stage.lock().expect("stages"))
    }

    pub(super) fn store_retry(&self) {
        self.store_retries[self.phase()].fetch_add(1, Ordering::Relaxed);
    }
}

/// How long a client keeps retrying one call. docs/api.md says to retry for as long as the
/// commit window lasts; RGW holds a multipart completion's lock for `rgw_mp_lock_max_time`
/// (10 minutes) when the gateway that took it dies, and the completion answers 503 until then.
pub(super) const RETRY_FOR: Duration = Duration::from_secs(15 * 60);

/// Sends `req` until its answer is not 503 with `Retry-After`, waiting what `Retry-After` says;
/// a request with no answer within two minutes is sent again too (docs/api.md). The longest
/// such wait is kept in the tally.
pub(super) async fn settled(
    tally: &Tally,
    what: &'static str,
    req: impl Fn() -> reqwest::RequestBuilder,
) -> (u16, Value) {
    let began = Instant::now();
    let mut retried = 0;
    while began.elapsed() < RETRY_FOR {
        let resp = match req().timeout(Duration::from_secs(120)).send().await {
            Ok(r) => r,
            Err(e) if e.is_timeout() => {
                tally.unanswered[tally.phase()].fetch_add(1, Ordering::Relaxed);
                continue;
            }
            Err(e) => panic!("{what}: upcommit did not answer: {e}"),
        };
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        let answer = Answer {
            what,
            phase: tally.phase(),
            status,
            code: body["error"]["code"].as_str().unwrap_or("").to_owned(),
            retry_after: retry_after.is_some(),
        };
        tally.answers.lock().expect("answers").push(answer);
        match retry_after {
            Some(secs) if status == 503 => {
                retried += 1;
                tokio::time::sleep(Duration::from_secs(secs)).await;
            }
            _ => {
                let waited = (began.elapsed(), retried, what);
                let mut longest = tally.longest_wait.lock().expect("longest wait");
                if waited > *longest {
                    *longest = waited;
                }
                return (status, body);
            }
        }
    }
    panic!(
        "{what}: still retryable after {} and {retried} retries",
        secs(RETRY_FOR)
    );
}

/// PUTs `body` to a presigned URL until the store takes it, as a client does: again on no
/// answer and on a 5xx; 412 (a second PUT of an object that arrived) means it is there.
/// Returns the ETag.
pub(super) async fn put_until_stored(
    app: &TestApp,
    tally: &Tally,
    url: &str,
    headers: &[(String, String)],
    body: Vec<u8>,
) -> String {
    for _ in 0..120 {
        let mut req = app
            .http
            .put(url)
            .timeout(Duration::from_secs(60))
            .body(body.clone());
        for (k, v) in headers {
            req = req.header(k, v);
        }
        match req.send().await {
            Ok(r) if r.status().is_success() || r.status() == 412 => {
                let etag = r.headers().get("etag").and_then(|v| v.to_str().ok());
                return etag.unwrap_or_default().to_owned();
            }
            Ok(r) if r.status().is_server_error() => tally.store_retry(),
            Ok(r) => panic!("the store refused a presigned PUT: {}", r.status()),
            Err(_) => tally.store_retry(),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("a presigned PUT never went through");
}

/// The headers a presigned PUT is sent with (Content-Type once, as upcommit signed it).
pub(super) fn put_headers(p: &Presigned, content_type: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = p
        .headers
        .iter()
        .flatten()
        .filter(|(k, _)| {
            !k.eq_ignore_ascii_case("content-length") && !k.eq_ignore_ascii_case("content-type")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.push(("content-type".into(), content_type.into()));
    out
}

/// `POST {path}` with `body` as the user, for [`settled`] to send as often as it takes.
pub(super) fn post<'a>(
    app: &'a TestApp,
    token: &'a str,
    path: String,
    body: Value,
) -> impl Fn() -> reqwest::RequestBuilder + 'a {
    let url = format!("{}{path}", app.address);
    move || app.http.post(&url).bearer_auth(token).json(&body)
}

/// File `n` of the run: every tenth from the fourth a 12 MiB PUT, every tenth from the eighth
/// a 12 MiB multipart upload, the rest small; presigned, uploaded, committed, and every fourth
/// copied. Returns the handle.
pub(super) async fn one_file(app: &TestApp, tally: &Tally, token: &str, n: usize) -> Value {
    let multipart = n % 10 == 7;
    let size = if n % 10 == 3 || multipart {
        LARGE
    } else {
        1000 + n
    };
    let bytes = media("image/png", size);
    let mut body = json!({"profile": "image", "content_type": "image/png", "size": size,
        "filename": format!("f{n}.png")});
    if multipart {
        body["multipart"] = json!(true);
    } else {
        body["method"] = json!("PUT");
    }
    tally.stage(n, "presign");
    let (status, presigned) = settled(
        tally,
        "presign",
        post(app, token, "/v1/uploads".into(), body),
    )
    .await;
    assert_eq!(status, 201, "{presigned}");
    let key = presigned["key"].as_str().expect("key").to_owned();
    tally.stage(n, if multipart { "parts" } else { "upload" });
    if multipart {
        upload_in_parts(app, tally, token, &presigned, &bytes).await;
    } else {
        let p: Presigned = serde_json::from_value(presigned).expect("presign");
        put_until_stored(app, tally, &p.url, &put_headers(&p, "image/png"), bytes).await;
    }
    tally.stage(n, "commit");
    let commit = post(app, token, "/v1/files".into(), json!({ "key": key }));
    let (status, handle) = settled(tally, "commit", commit).await;
    assert!(status == 201 || status == 200, "{status} {handle}");
    assert_eq!(handle["size"], size, "{handle}");
    if n % 4 == 0 {
        tally.stage(n, "copy");
        let id = handle["id"].as_str().expect("id");
        let copy = post(app, token, format!("/v1/files/{id}/copies"), json!({}));
        let (status, copy) = settled(tally, "copy", copy).await;
        assert!(status == 201 || status == 409, "{status} {copy}");
    }
    handle
}

/// Asks for every part's URL, PUTs the 5 MiB parts and completes the multipart upload.
pub(super) async fn upload_in_parts(
    app: &TestApp,
    tally: &Tally,
    token: &str,
    presigned: &Value,
    bytes: &[u8],
) {
    let parts = put_parts(app, tally, token, presigned, bytes).await;
    complete(app, tally, token, presigned, parts, "complete").await;
}

/// Asks for every part's URL and PUTs the parts; returns the completion's list.
pub(super) async fn put_parts(
    app: &TestApp,
    tally: &Tally,
    token: &str,
    presigned: &Value,
    bytes: &[u8],
) -> Vec<Value> {
    let id = presigned["upload_id"].as_str().expect("upload_id");
    let count = presigned["multipart"]["part_count"]
        .as_u64()
        .expect("part_count") as usize;
    let part_size = presigned["multipart"]["part_size"]
        .as_u64()
        .expect("part_size") as usize;
    let numbers: Vec<usize> = (1..=count).collect();
    let parts = post(
        app,
        token,
        format!("/v1/uploads/{id}/parts"),
        json!({ "part_numbers": numbers }),
    );
    let (status, urls) = settled(tally, "parts", parts).await;
    assert_eq!(status, 200, "{urls}");
    let mut done = Vec::new();
    for part in urls["parts"].as_array().expect("parts") {
        let n = part["part_number"].as_u64().expect("part_number") as usize;
        let chunk = bytes[(n - 1) * part_size..(n * part_size).min(bytes.len())].to_vec();
        let url = part["url"].as_str().expect("url");
        let etag = put_until_stored(app, tally, url, &[], chunk).await;
        done.push(json!({"part_number": n, "etag": etag}));
    }
    done
}

/// Completes the multipart upload (retrying as [`settled`] does), recorded as `what`.
pub(super) async fn complete(
    app: &TestApp,
    tally: &Tally,
    token: &str,
    presigned: &Value,
    done: Vec<Value>,
    what: &'static str,
) {
    let id = presigned["upload_id"].as_str().expect("upload_id");
    let complete = post(
        app,
        token,
        format!("/v1/uploads/{id}/complete"),
        json!({ "parts": done }),
    );
    let (status, completed) = settled(tally, what, complete).await;
    assert_eq!(status, 200, "{completed}");
}

/// A gateway killed in the middle of CompleteMultipartUpload leaves RGW's completion lock
/// held for `rgw_mp_lock_max_time` (10 minutes by default), and another gateway refuses the
/// completion until then (500 InternalError "This multipart completion is already in
/// progress"). The lock is taken here as the dead gateway left it, for `secs` instead of ten
/// minutes; the completion is retried through upcommit until it goes through, then committed.
/// Returns how long that took.
pub(super) async fn completion_behind_a_dead_gateways_lock(
    app: &TestApp,
    tally: &Tally,
    ceph: &Ceph,
    secs: u32,
) -> Duration {
    let token = app.token("alice");
    let body = json!({"profile": "image", "content_type": "image/png", "size": LARGE,
        "filename": "locked.png", "multipart": true});
    let presign = post(app, &token, "/v1/uploads".into(), body);
    let (status, presigned) = settled(tally, "presign", presign).await;
    assert_eq!(status, 201, "{presigned}");
    let key = presigned["key"].as_str().expect("key").to_owned();
    let parts = put_parts(app, tally, &token, &presigned, &media("image/png", LARGE)).await;
    let open = app.open_multipart_uploads().await;
    let s3_upload = open
        .iter()
        .find(|u| u.key() == Some(key.as_str()))
        .and_then(|u| u.upload_id())
        .expect("the S3 multipart upload");
    ceph.hold_completion_lock(s3_upload, secs);
    let locked = Instant::now();
    complete(
        app,
        tally,
        &token,
        &presigned,
        parts,
        "complete (lock held)",
    )
    .await;
    let waited = locked.elapsed();
    let commit = post(app, &token, "/v1/files".into(), json!({ "key": key }));
    let (status, handle) = settled(tally, "commit", commit).await;
    assert_eq!(status, 201, "{handle}");
    assert_eq!(handle["size"], LARGE, "{handle}");
    waited
}

/// Takes the next file of the run until there is none left.
pub(super) async fn worker(app: Arc<TestApp>, tally: Arc<Tally>) {
    let token = app.token("alice");
    loop {
        let n = tally.started.fetch_add(1, Ordering::SeqCst);
        if n >= FILES {
            return;
        }
        while n >= tally.limit.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let handle = one_file(&app, &tally, &token, n).await;
        tally.stage.lock().expect("stages").remove(&n);
        tally.handles.lock().expect("handles").push(handle);
        tally.done.fetch_add(1, Ordering::SeqCst);
    }
}

/// Waits until `n` files are committed; a worker that ended before (it panicked) fails the test.
pub(super) async fn files_done(tally: &Tally, workers: &[tokio::task::JoinHandle<()>], n: usize) {
    while tally.done.load(Ordering::SeqCst) < n {
        assert!(
            !workers.iter().any(|w| w.is_finished()),
            "a worker stopped early (see its panic above)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
