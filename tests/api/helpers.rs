//! `spawn_app()`: the production build path on a random port, with a fresh bucket (versioned,
//! carrying the lifecycle rules of `infra/lifecycle-rules.json`) and a fresh database per test.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_s3::types::{
    BucketVersioningStatus, CorsConfiguration, CorsRule, ServerSideEncryption,
    ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
    VersioningConfiguration,
};
use serde_json::{json, Value};
use sqlx::{Pool, Postgres, Sqlite};
use upcommit::catalog::{Catalog, PostgresCatalog, SqliteCatalog};
use upcommit::config::Settings;
use upcommit::domain::ids::UploadId;
use upcommit::domain::lifecycle::{required_rules, Rule};
use upcommit::domain::records::{Upload, UploadState};
use upcommit::metrics::Metrics;
use upcommit::storage::lifecycle_configuration;
use upcommit::storage::{CopyLimits, ObjectStore, S3Store};
use upcommit::Application;

pub const SECRET: &str = "integration-test-secret-0123456789";

/// The database the suite runs against.
#[derive(Clone)]
pub enum TestDb {
    Sqlite(Pool<Sqlite>),
    Postgres(Pool<Postgres>),
}

impl TestDb {
    /// `SELECT COUNT(*)` over the real tables.
    pub async fn count(&self, sql: &str) -> i64 {
        match self {
            TestDb::Sqlite(p) => sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(p)
                .await
                .expect("count query"),
            TestDb::Postgres(p) => sqlx::query_scalar::<_, i64>(sql)
                .fetch_one(p)
                .await
                .expect("count query"),
        }
    }

    /// A statement that changes rows (arranging a state the API cannot reach quickly).
    pub async fn execute(&self, sql: &str) {
        match self {
            TestDb::Sqlite(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
            TestDb::Postgres(p) => sqlx::query(sql).execute(p).await.map(|_| ()),
        }
        .expect("statement");
    }

    /// One text column of every row.
    pub async fn strings(&self, sql: &str) -> Vec<String> {
        match self {
            TestDb::Sqlite(p) => sqlx::query_scalar(sql).fetch_all(p).await.expect("query"),
            TestDb::Postgres(p) => sqlx::query_scalar(sql).fetch_all(p).await.expect("query"),
        }
    }

    /// (key, size) of every file handle.
    pub async fn key_sizes(&self) -> Vec<(String, i64)> {
        let sql = "SELECT key, size FROM file_handles";
        match self {
            TestDb::Sqlite(p) => sqlx::query_as(sql).fetch_all(p).await.expect("query"),
            TestDb::Postgres(p) => sqlx::query_as(sql).fetch_all(p).await.expect("query"),
        }
    }

    /// Moves a file handle's `expires_at` (a temporary file's end), as time passing would.
    pub async fn set_handle_expiry(&self, file_id: &str, at: chrono::DateTime<chrono::Utc>) {
        let sql = "UPDATE file_handles SET expires_at = $1 WHERE id = $2";
        let n = match self {
            TestDb::Sqlite(p) => sqlx::query(sql)
                .bind(at)
                .bind(file_id)
                .execute(p)
                .await
                .map(|r| r.rows_affected()),
            TestDb::Postgres(p) => sqlx::query(sql)
                .bind(at)
                .bind(file_id)
                .execute(p)
                .await
                .map(|r| r.rows_affected()),
        }
        .expect("update expires_at");
        assert_eq!(n, 1, "one handle {file_id}");
    }

    pub async fn upload_state(&self, upload_id: &str) -> String {
        let sql = "SELECT state FROM uploads WHERE id = $1";
        match self {
            TestDb::Sqlite(p) => sqlx::query_scalar(sql)
                .bind(upload_id)
                .fetch_one(p)
                .await
                .expect("state"),
            TestDb::Postgres(p) => sqlx::query_scalar(sql)
                .bind(upload_id)
                .fetch_one(p)
                .await
                .expect("state"),
        }
    }
}

pub struct TestApp {
    pub address: String,
    pub http: reqwest::Client,
    pub s3: aws_sdk_s3::Client,
    pub bucket: String,
    pub catalog: Arc<dyn Catalog>,
    pub db: TestDb,
    /// The server's environment, for running the `upcommit` binary against the same bucket.
    pub env: HashMap<String, String>,
    /// The server's metrics: which (method, route, status) it answered.
    pub metrics: Arc<Metrics>,
    /// The metrics of replicas started with [`TestApp::replica`].
    replicas: std::sync::Mutex<Vec<Arc<Metrics>>>,
    _dir: tempfile::TempDir,
}

/// With `UPCOMMIT_STATUS_COVERAGE_DIR` set (scripts/test.sh sets it), each test server leaves
/// the (method, route, status) triples it answered there, one file per server, so the test
/// command can check that every status code the spec documents is reached by some test.
pub fn record_status_coverage(metrics: &Metrics) {
    let Ok(dir) = std::env::var("UPCOMMIT_STATUS_COVERAGE_DIR") else {
        return;
    };
    let lines: String = metrics
        .request_statuses()
        .into_iter()
        .map(|(m, r, s)| format!("{m} {r} {s}\n"))
        .collect();
    if !lines.is_empty() {
        let path = std::path::Path::new(&dir).join(format!("{}.txt", unique("app-")));
        let _ = std::fs::write(path, lines);
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        record_status_coverage(&self.metrics);
        if let Ok(replicas) = self.replicas.lock() {
            for m in replicas.iter() {
                record_status_coverage(m);
            }
        }
    }
}

/// A job's parts built from the test server's environment as `upcommit` builds them, the
/// catalog wrapped to count its calls in `metrics`: for running one pass of a job from the
/// test and reading how it used the catalog.
pub struct ObservedJob {
    pub metrics: Arc<Metrics>,
    pub catalog: Arc<dyn Catalog>,
    pub settings: Settings,
    pub store: Arc<dyn ObjectStore>,
}

impl ObservedJob {
    /// How many times the catalog's `operation` ran so far.
    pub fn catalog_calls(&self, operation: &str) -> f64 {
        let mut text = String::new();
        self.metrics.render(&mut text);
        counter_sum(
            &text,
            "upcommit_db_query_duration_seconds_count",
            &format!("operation=\"{operation}\","),
        )
    }
}

/// Wraps the real store (given with a raw client for arranging faults) in another store.
pub type StoreWrapper =
    Box<dyn FnOnce(Arc<dyn ObjectStore>, aws_sdk_s3::Client) -> Arc<dyn ObjectStore>>;

/// Options for one test's server.
#[derive(Default)]
pub struct Spawn {
    pub env: Vec<(&'static str, String)>,
    /// Wraps the real store, e.g. in a fault injector.
    pub wrap_store: Option<StoreWrapper>,
    /// Wraps the real catalog the server uses (the test keeps the real one for its checks).
    pub wrap_catalog: Option<CatalogWrapper>,
    /// A configuration file (TOML, e.g. `[[profiles]]`), written beside the database and named
    /// by `UPCOMMIT_CONFIG` in the server's environment (so the binary reads it too).
    pub config: Option<String>,
}

/// Wraps the real catalog in another one.
pub type CatalogWrapper = Box<dyn FnOnce(Arc<dyn Catalog>) -> Arc<dyn Catalog>>;

pub fn s3_endpoint() -> String {
    std::env::var("UPCOMMIT_TEST_S3_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:4566".into())
}

/// The object store the suite runs against (`UPCOMMIT_TEST_STORE`): `localstack` (the
/// default), `garage` or `rgw` (Ceph's RADOS Gateway; its bucket versioned unless the gap
/// `versioning` is accepted).
pub fn store_kind() -> String {
    std::env::var("UPCOMMIT_TEST_STORE").unwrap_or_else(|_| "localstack".into())
}

/// The store gaps test servers accept, as an operator of that store would
/// (`UPCOMMIT_TEST_ACCEPT_STORE_GAPS`; by default LocalStack's one: it does not verify POST
/// signatures). `tests/api/store_capabilities.rs` checks the probe finds exactly these.
pub fn accepted_store_gaps() -> String {
    std::env::var("UPCOMMIT_TEST_ACCEPT_STORE_GAPS").unwrap_or_else(|_| "post_signature".into())
}

/// Whether the test servers run with the store gap `name` accepted: the store under test
/// lacks that capability, and a test asserts the documented degraded behaviour instead.
pub fn gap_accepted(name: &str) -> bool {
    accepted_store_gaps().split(',').any(|g| g.trim() == name)
}

/// Asserts the store refused a request: with exactly AWS's status on LocalStack (which answers
/// as S3 does), with some 4xx on another store (Garage answers 400 where S3 answers 403 for a
/// missing signed header or an expired URL, and cuts the connection of an oversize POST:
/// [`CUT`]). Whether anything was stored is each test's own check.
pub fn assert_refused(status: impl Into<u16>, aws: u16, what: &str) {
    let status = status.into();
    if store_kind() == "localstack" {
        assert_eq!(status, aws, "{what}");
    } else {
        assert!(
            (400..500).contains(&status),
            "{what}: {status}, not a refusal"
        );
    }
}

/// What [`TestApp::upload`] returns when the store closed the connection before the body was
/// sent (Garage, for a POST body over the policy's range): a refusal with no status line.
pub const CUT: u16 = 499;

pub fn on_postgres() -> bool {
    std::env::var("UPCOMMIT_TEST_DATABASE").is_ok_and(|v| v == "postgres")
}

fn unique(prefix: &str) -> String {
    format!(
        "{prefix}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..16]
    )
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(Spawn::default()).await
}

pub async fn spawn_app_with(options: Spawn) -> TestApp {
    let dir = tempfile::tempdir().expect("tempdir");
    let bucket = unique("upcommit-test-");
    let database_url = if on_postgres() {
        let admin =
            std::env::var("UPCOMMIT_TEST_PG_URL").expect("UPCOMMIT_TEST_PG_URL for postgres tests");
        let name = unique("t_");
        let pool = sqlx::PgPool::connect(&admin)
            .await
            .expect("connect to PostgreSQL admin database");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&pool)
            .await
            .expect("create test database");
        pool.close().await;
        let (base, _) = admin.rsplit_once('/').expect("database URL has a path");
        format!("{base}/{name}")
    } else {
        format!("sqlite://{}/upcommit.db", dir.path().display())
    };

    let mut vars: HashMap<String, String> = [
        ("UPCOMMIT_LISTEN", "127.0.0.1:0".to_owned()),
        ("UPCOMMIT_JWT_SECRET", SECRET.to_owned()),
        ("DATABASE_URL", database_url.clone()),
        ("UPCOMMIT_BUCKET", bucket.clone()),
        ("UPCOMMIT_S3_ENDPOINT", s3_endpoint()),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("UPCOMMIT_COMMIT_LEASE_SECS", "10".to_owned()),
        ("UPCOMMIT_CORS_ORIGINS", TEST_ORIGIN.to_owned()),
        // Tests presign in bursts; the rate limit has its own test.
        ("UPCOMMIT_PRESIGN_RATE_PER_SEC", "0".to_owned()),
        ("UPCOMMIT_ACCEPT_STORE_GAPS", accepted_store_gaps()),
        // The render workers are the upcommit binary (this process is the test harness).
        (
            "UPCOMMIT_RENDER_WORKER_BIN",
            env!("CARGO_BIN_EXE_upcommit").to_owned(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    for (k, v) in options.env {
        vars.insert(k.to_owned(), v);
    }
    if let Some(text) = &options.config {
        let path = dir.path().join("upcommit.toml");
        std::fs::write(&path, text).expect("write config file");
        vars.insert("UPCOMMIT_CONFIG".into(), path.display().to_string());
    }
    let settings = Settings::from_sources(options.config.as_deref(), &|k| vars.get(k).cloned())
        .expect("test settings");
    let env = vars.clone();

    let metrics = Arc::new(Metrics::new());
    let aws = Application::outbound(&settings)
        .await
        .expect("HTTP client and AWS credentials");
    let real = S3Store::connect_in(&aws, &settings.s3, Some(metrics.clone()))
        .expect("S3 client")
        .with_copy_limits(CopyLimits::from_settings(&settings.uploads));
    let s3 = real.client().clone();
    create_bucket(&s3, &bucket).await;
    let real: Arc<dyn ObjectStore> = Arc::new(real);
    let store = match options.wrap_store {
        Some(wrap) => wrap(real, s3.clone()),
        // The default server reuses an earlier server's probe where the test crate offers it
        // (`crate::probe_once`, the api suite: faults::Faults::probe_cache_key).
        None => match crate::probe_once(&format!(
            "{}|{}",
            settings.s3.endpoint.as_deref().unwrap_or("aws"),
            accepted_store_gaps()
        )) {
            Some(wrap) => wrap(real, s3.clone()),
            None => real,
        },
    };

    let (catalog, db): (Arc<dyn Catalog>, TestDb) = if on_postgres() {
        let c = PostgresCatalog::connect(&database_url, 8)
            .await
            .expect("PostgreSQL catalog");
        let db = TestDb::Postgres(c.pool().clone());
        (Arc::new(c), db)
    } else {
        let c = SqliteCatalog::connect(&database_url, 8)
            .await
            .expect("SQLite catalog");
        let db = TestDb::Sqlite(c.pool().clone());
        (Arc::new(c), db)
    };

    let served: Arc<dyn Catalog> = match options.wrap_catalog {
        Some(wrap) => wrap(catalog.clone()),
        None => catalog.clone(),
    };
    let app = Application::build_with(settings, served, store, metrics.clone(), aws)
        .await
        .expect("application builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    tokio::spawn(app.run_until_stopped());

    TestApp {
        address,
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("http client"),
        s3,
        bucket,
        catalog,
        db,
        env,
        metrics,
        replicas: std::sync::Mutex::default(),
        _dir: dir,
    }
}

async fn put_test_cors(s3: &aws_sdk_s3::Client, bucket: &str) {
    s3.put_bucket_cors()
        .bucket(bucket)
        .cors_configuration(
            CorsConfiguration::builder()
                .cors_rules(test_cors_rule())
                .build()
                .expect("CORS configuration"),
        )
        .send()
        .await
        .expect("put CORS");
}

/// The browser origin the test bucket's CORS serves and the server expects.
pub const TEST_ORIGIN: &str = "http://app.test";

/// A bucket configured as infra/ configures production: versioned, the project's lifecycle
/// rules, CORS for browser uploads, default encryption.
async fn create_bucket(s3: &aws_sdk_s3::Client, bucket: &str) {
    s3.create_bucket()
        .bucket(bucket)
        .send()
        .await
        .expect("create bucket");
    restore_bucket(s3, bucket).await;
}

/// Writes every configuration document as infra/ configures it (again).
pub async fn restore_bucket(s3: &aws_sdk_s3::Client, bucket: &str) {
    if gap_accepted("versioning") {
        // A store run unversioned (Garage, which implements no versioning; RGW's unversioned
        // run): the bucket gets what `bucket apply-lifecycle` writes on a store never
        // versioned, and CORS. Neither implements the encryption configuration.
        put_lifecycle(
            s3,
            bucket,
            &upcommit::domain::lifecycle::for_unversioned(required_rules()),
        )
        .await;
        put_test_cors(s3, bucket).await;
        return;
    }
    set_versioning(s3, bucket, BucketVersioningStatus::Enabled).await;
    put_lifecycle(s3, bucket, required_rules()).await;
    put_test_cors(s3, bucket).await;
    if gap_accepted("encryption_config") {
        // RGW 16.2 refuses PutBucketEncryption (400): nothing to write.
        return;
    }
    s3.put_bucket_encryption()
        .bucket(bucket)
        .server_side_encryption_configuration(
            ServerSideEncryptionConfiguration::builder()
                .rules(
                    ServerSideEncryptionRule::builder()
                        .apply_server_side_encryption_by_default(
                            ServerSideEncryptionByDefault::builder()
                                .sse_algorithm(ServerSideEncryption::Aes256)
                                .build()
                                .expect("SSE default"),
                        )
                        .build(),
                )
                .build()
                .expect("SSE configuration"),
        )
        .send()
        .await
        .expect("put encryption");
}

pub fn test_cors_rule() -> CorsRule {
    CorsRule::builder()
        .allowed_origins(TEST_ORIGIN)
        .allowed_methods("PUT")
        .allowed_methods("POST")
        .allowed_methods("GET")
        .allowed_headers("*")
        .expose_headers("ETag")
        .max_age_seconds(600)
        .build()
        .expect("CORS rule")
}

pub async fn set_versioning(s3: &aws_sdk_s3::Client, bucket: &str, status: BucketVersioningStatus) {
    s3.put_bucket_versioning()
        .bucket(bucket)
        .versioning_configuration(VersioningConfiguration::builder().status(status).build())
        .send()
        .await
        .expect("put versioning");
}

/// Replaces the bucket's whole lifecycle document, as any writer of it does.
pub async fn put_lifecycle(s3: &aws_sdk_s3::Client, bucket: &str, rules: &[Rule]) {
    // An unversioned bucket (Garage; RGW's unversioned run) takes the rules as `bucket
    // apply-lifecycle` writes them there: without noncurrent-version or delete-marker elements.
    let unversioned;
    let rules = if gap_accepted("versioning") {
        unversioned = upcommit::domain::lifecycle::for_unversioned(rules);
        &unversioned[..]
    } else {
        rules
    };
    s3.put_bucket_lifecycle_configuration()
        .bucket(bucket)
        .lifecycle_configuration(lifecycle_configuration(rules).expect("lifecycle document"))
        .send()
        .await
        .expect("put lifecycle");
}

/// A catalog record of a PNG upload of the `image` profile, `owner`'s, by PUT, created now
/// (its URL and commit window ending now too), with no lease, final key or rejection: what a
/// test writes straight into the catalog, changing fields with struct update syntax.
pub fn png_upload(
    id: UploadId,
    owner: &str,
    key: String,
    declared_size: i64,
    state: UploadState,
) -> Upload {
    let now = chrono::Utc::now();
    Upload {
        id,
        owner: owner.into(),
        profile: "image".into(),
        content_type: "image/png".into(),
        declared_size,
        key,
        method: "PUT".into(),
        state,
        final_key: None,
        reject_code: None,
        lease_token: None,
        lease_until: None,
        created_at: now,
        expires_at: now,
        commit_deadline: now,
        original_filename: None,
        checksum: None,
    }
}

/// Settings that send every object over 1,000 bytes down the UploadPartCopy path (5 MiB
/// parts: a small object is copied as one part).
pub fn small_copy_limit() -> Vec<(&'static str, String)> {
    vec![
        // The least it may be: S3's minimum part size.
        (
            "UPCOMMIT_MAX_SINGLE_COPY_BYTES",
            (5 * 1024 * 1024).to_string(),
        ),
        (
            "UPCOMMIT_COPY_PART_SIZE_BYTES",
            (5 * 1024 * 1024).to_string(),
        ),
    ]
}

/// Puts a JPEG at `key` as a writer other than upcommit would, straight to the bucket.
pub async fn put_as_another_writer(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    key: &str,
    bytes: Vec<u8>,
) {
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .content_type("image/jpeg")
        .body(bytes.into())
        .send()
        .await
        .expect("another writer's object");
}

/// Bytes that pass the magic-byte check for a content type, `size` long; an image's header
/// says 1 × 1 (a PNG's signature, IHDR and an IDAT chunk's start: 41 bytes; a JPEG's start of
/// image and baseline frame header: 15), the rest is filler.
pub fn media(content_type: &str, size: usize) -> Vec<u8> {
    let magic: &[u8] = match content_type {
        "image/png" => {
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\0\0\0\0\0\0\0\0IDAT"
        }
        "image/jpeg" => b"\xFF\xD8\xFF\xC0\0\x0B\x08\0\x01\0\x01\x01\x01\x11\0",
        "audio/mpeg" => b"ID3\x04\0\0\0\0\0\0",
        "audio/ogg" => b"OggS\0\x02\0\0",
        other => panic!("no test bytes for {other}"),
    };
    let mut v = magic.to_vec();
    v.resize(size.max(magic.len()), 0x5a);
    v.truncate(size.max(magic.len()));
    v
}

/// The presign response, typed.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct Presigned {
    pub upload_id: String,
    pub key: String,
    pub method: String,
    pub url: String,
    pub headers: Option<HashMap<String, String>>,
    pub fields: Option<HashMap<String, String>>,
    pub max_size: u64,
}

impl TestApp {
    pub fn token(&self, user: &str) -> String {
        upcommit::auth::issue(
            SECRET.as_bytes(),
            user,
            false,
            3600,
            chrono::Utc::now().timestamp(),
        )
    }

    pub fn admin_token(&self, user: &str) -> String {
        upcommit::auth::issue(
            SECRET.as_bytes(),
            user,
            true,
            3600,
            chrono::Utc::now().timestamp(),
        )
    }

    pub async fn post_json(
        &self,
        path: &str,
        token: Option<&str>,
        body: &Value,
    ) -> reqwest::Response {
        self.post_json_at(&self.address, path, token, body).await
    }

    /// [`Self::post_json`] to a given replica (or server process).
    pub async fn post_json_at(
        &self,
        base: &str,
        path: &str,
        token: Option<&str>,
        body: &Value,
    ) -> reqwest::Response {
        let mut req = self.http.post(format!("{base}{path}")).json(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.expect("request sent")
    }

    pub async fn get(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        let mut req = self.http.get(format!("{}{path}", self.address));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.expect("request sent")
    }

    pub async fn delete(&self, path: &str, token: Option<&str>) -> reqwest::Response {
        let mut req = self.http.delete(format!("{}{path}", self.address));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        req.send().await.expect("request sent")
    }

    /// The text of `/metrics`, as a scraper reads it.
    pub async fn metrics_text(&self) -> String {
        self.metrics_text_at(&self.address).await
    }

    /// [`Self::metrics_text`] of a given replica (or server process).
    pub async fn metrics_text_at(&self, base: &str) -> String {
        self.http
            .get(format!("{base}/metrics"))
            .send()
            .await
            .expect("metrics")
            .text()
            .await
            .expect("metrics text")
    }

    pub async fn presign(&self, token: &str, body: Value) -> reqwest::Response {
        self.post_json("/v1/uploads", Some(token), &body).await
    }

    /// Presigns and asserts 201.
    pub async fn presign_ok(
        &self,
        token: &str,
        profile: &str,
        content_type: &str,
        size: usize,
        method: &str,
    ) -> Presigned {
        self.presign_ok_at(&self.address, token, profile, content_type, size, method)
            .await
    }

    /// [`Self::presign_ok`] on a given replica (or server process).
    pub async fn presign_ok_at(
        &self,
        base: &str,
        token: &str,
        profile: &str,
        content_type: &str,
        size: usize,
        method: &str,
    ) -> Presigned {
        let body = json!({"profile": profile, "content_type": content_type, "size": size, "filename": "clip.bin", "method": method});
        let resp = self
            .post_json_at(base, "/v1/uploads", Some(token), &body)
            .await;
        assert_eq!(
            resp.status(),
            201,
            "presign failed: {}",
            resp.text().await.unwrap_or_default()
        );
        resp.json().await.expect("presign response shape")
    }

    /// Presigns and uploads valid bytes of the declared type, asserting both succeed.
    pub async fn uploaded(
        &self,
        token: &str,
        profile: &str,
        content_type: &str,
        size: usize,
        method: &str,
    ) -> Presigned {
        let p = self
            .presign_ok(token, profile, content_type, size, method)
            .await;
        self.upload_media(&p, content_type, size).await;
        p
    }

    /// Uploads `size` valid bytes of `content_type` with `p`, asserting the store took them.
    async fn upload_media(&self, p: &Presigned, content_type: &str, size: usize) {
        let status = self
            .upload(p, media(content_type, size), content_type)
            .await;
        assert!(status.is_success(), "upload refused: {status}");
    }

    /// Presigns a PUT of `body.len()` bytes declared `content_type` and uploads exactly `body`
    /// (bytes the commit's checks may refuse: the store cannot know), asserting both succeed.
    pub async fn uploaded_bytes(
        &self,
        token: &str,
        profile: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Presigned {
        let p = self
            .presign_ok(token, profile, content_type, body.len(), "PUT")
            .await;
        let status = self.upload(&p, body, content_type).await;
        assert!(status.is_success(), "upload refused: {status}");
        p
    }

    /// Uploads straight to S3 the way a client does, with the presigned URL or form.
    pub async fn upload(
        &self,
        p: &Presigned,
        body: Vec<u8>,
        content_type: &str,
    ) -> reqwest::StatusCode {
        if p.method == "PUT" {
            let mut req = self.http.put(&p.url).body(body);
            for (k, v) in p.headers.as_ref().expect("PUT headers") {
                // Content-Type is sent once, as the caller says (a second header line would be
                // signed as "a,b" by a strict store: Garage refuses it, LocalStack does not).
                if !k.eq_ignore_ascii_case("content-length")
                    && !k.eq_ignore_ascii_case("content-type")
                {
                    req = req.header(k, v);
                }
            }
            req = req.header("content-type", content_type);
            req.send().await.expect("PUT sent").status()
        } else {
            let mut form = reqwest::multipart::Form::new();
            for (k, v) in p.fields.clone().expect("POST fields") {
                let v = if k == "Content-Type" {
                    content_type.to_owned()
                } else {
                    v
                };
                form = form.text(k, v);
            }
            let part = reqwest::multipart::Part::bytes(body)
                .file_name("clip.bin")
                .mime_str(content_type)
                .expect("mime");
            form = form.part("file", part);
            match self.http.post(&p.url).multipart(form).send().await {
                Ok(resp) => resp.status(),
                // The store refused by closing the connection mid-body.
                Err(e) if e.is_request() && store_kind() != "localstack" => {
                    reqwest::StatusCode::from_u16(CUT).expect("a status")
                }
                Err(e) => panic!("POST sent: {e}"),
            }
        }
    }

    pub async fn commit(
        &self,
        token: &str,
        key: &str,
        final_key: Option<&str>,
    ) -> reqwest::Response {
        self.commit_at(&self.address, token, key, final_key).await
    }

    /// Presign, upload and commit; returns the upload and the handle JSON (asserting 201).
    pub async fn upload_and_commit(
        &self,
        token: &str,
        profile: &str,
        content_type: &str,
        size: usize,
    ) -> (Presigned, Value) {
        self.upload_and_commit_at(&self.address, token, profile, content_type, size)
            .await
    }

    /// [`Self::upload_and_commit`] on a given replica (or server process).
    pub async fn upload_and_commit_at(
        &self,
        base: &str,
        token: &str,
        profile: &str,
        content_type: &str,
        size: usize,
    ) -> (Presigned, Value) {
        let p = self
            .presign_ok_at(base, token, profile, content_type, size, "PUT")
            .await;
        self.upload_media(&p, content_type, size).await;
        let resp = self.commit_at(base, token, &p.key, None).await;
        assert_eq!(resp.status(), 201);
        (p, resp.json().await.expect("handle JSON"))
    }

    /// A second server process-equivalent on the same database and bucket: another replica
    /// behind the load balancer, with its own pools and clients. Returns its base address.
    pub async fn replica(&self) -> String {
        let mut vars = self.env.clone();
        vars.insert("UPCOMMIT_LISTEN".into(), "127.0.0.1:0".into());
        let settings = Settings::from_map(&vars).expect("replica settings");
        let app = Application::build(settings).await.expect("replica builds");
        let address = format!("http://127.0.0.1:{}", app.port());
        let metrics = app.state().metrics.clone();
        tokio::spawn(async move {
            let _ = app.run_until_stopped().await;
        });
        // The replica's coverage is recorded with its primary's (it lives as long).
        self.replicas.lock().expect("replicas").push(metrics);
        address
    }

    /// POST /v1/files on a given replica.
    pub async fn commit_at(
        &self,
        base: &str,
        token: &str,
        key: &str,
        final_key: Option<&str>,
    ) -> reqwest::Response {
        let mut body = json!({ "key": key });
        if let Some(f) = final_key {
            body["final_key"] = json!(f);
        }
        self.post_json_at(base, "/v1/files", Some(token), &body)
            .await
    }

    /// Lets every upload URL issued so far expire (and the in-flight margin pass), then runs
    /// the sweep as of then: it deletes the tmp objects of settled uploads.
    pub async fn sweep_after_urls_expire(&self) -> upcommit::services::sweep::SweepSummary {
        use upcommit::services::sweep::{sweep_at, SweepOutcome};
        let settings = Settings::from_map(&self.env).expect("settings");
        let store: Arc<dyn ObjectStore> =
            Arc::new(S3Store::connect(&settings.s3).await.expect("store"));
        let longest = settings
            .uploads
            .presign_expiry_secs
            .max(settings.uploads.multipart_session_secs);
        let later = chrono::Utc::now()
            + chrono::Duration::seconds(i64::try_from(longest).expect("secs") + 60)
            + upcommit::services::tmp_cleanup::IN_FLIGHT_MARGIN;
        match sweep_at(&self.catalog, &store, &settings, false, later)
            .await
            .expect("sweep")
        {
            SweepOutcome::Ran { summary, .. } => {
                assert!(summary.error.is_none(), "sweep failed: {summary:?}");
                *summary
            }
            SweepOutcome::Busy => panic!("sweep busy"),
        }
    }

    /// The parts of a job run from the test: [`ObservedJob`].
    pub async fn observed_job(&self) -> ObservedJob {
        let metrics = Arc::new(Metrics::new());
        let catalog: Arc<dyn Catalog> = Arc::new(upcommit::catalog::ObservedCatalog::new(
            self.catalog.clone(),
            metrics.clone(),
        ));
        let settings = Settings::from_map(&self.env).expect("settings");
        let store: Arc<dyn ObjectStore> =
            Arc::new(S3Store::connect(&settings.s3).await.expect("store"));
        ObservedJob {
            metrics,
            catalog,
            settings,
            store,
        }
    }

    /// Every version and delete marker of exactly `key`.
    pub async fn versions(&self, key: &str) -> usize {
        self.version_sizes(key).await.len()
    }

    /// How many versions and delete markers are under `prefix` (on a store without
    /// versioning, Garage: how many objects).
    pub async fn versions_under(&self, prefix: &str) -> usize {
        if store_kind() == "garage" {
            let out = self
                .s3
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .send()
                .await
                .expect("list");
            return out.contents().len();
        }
        let v = self
            .s3
            .list_object_versions()
            .bucket(&self.bucket)
            .prefix(prefix)
            .send()
            .await
            .expect("versions");
        v.versions().len() + v.delete_markers().len()
    }

    /// (size, is a delete marker) of every version of exactly `key`, newest first.
    pub async fn version_sizes(&self, key: &str) -> Vec<(i64, bool)> {
        if store_kind() == "garage" {
            // No versions on Garage (ListObjectVersions is not implemented): the object, if any.
            return match self
                .s3
                .head_object()
                .bucket(&self.bucket)
                .key(key)
                .send()
                .await
            {
                Ok(h) => vec![(h.content_length().unwrap_or(-1), false)],
                Err(_) => Vec::new(),
            };
        }
        let out = self
            .s3
            .list_object_versions()
            .bucket(&self.bucket)
            .prefix(key)
            .send()
            .await
            .expect("versions");
        let mut v: Vec<(i64, bool)> = out
            .versions()
            .iter()
            .filter(|v| v.key() == Some(key))
            .map(|v| (v.size().unwrap_or(-1), false))
            .collect();
        v.extend(
            out.delete_markers()
                .iter()
                .filter(|m| m.key() == Some(key))
                .map(|_| (0, true)),
        );
        v
    }

    /// HEAD of `key`, which must exist.
    pub async fn head(&self, key: &str) -> aws_sdk_s3::operation::head_object::HeadObjectOutput {
        self.s3
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .unwrap_or_else(|e| panic!("HEAD {key}: {e:?}"))
    }

    pub async fn object_exists(&self, key: &str) -> bool {
        match self
            .s3
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(_) => true,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => false,
            Err(e) => panic!("HEAD {key}: {e:?}"),
        }
    }

    /// The multipart uploads open in the bucket (started, neither completed nor aborted).
    pub async fn open_multipart_uploads(&self) -> Vec<aws_sdk_s3::types::MultipartUpload> {
        self.s3
            .list_multipart_uploads()
            .bucket(&self.bucket)
            .send()
            .await
            .expect("ListMultipartUploads")
            .uploads()
            .to_vec()
    }

    /// Every current key in the bucket.
    pub async fn keys(&self) -> Vec<String> {
        let out = self
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .send()
            .await
            .expect("list");
        let mut keys: Vec<String> = out
            .contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_owned))
            .collect();
        keys.sort();
        keys
    }

    /// Every current key outside `tmp/`: what commits, copies and imports left in the bucket.
    pub async fn final_keys(&self) -> Vec<String> {
        self.keys()
            .await
            .into_iter()
            .filter(|k| !k.starts_with("tmp/"))
            .collect()
    }

    /// Follows the file's download redirect as a browser would: asserts
    /// `GET /v1/files/{id}/content` answers 302 and fetches its `Location`; returns the
    /// `Location` and the store's answer.
    pub async fn download(&self, id: &str, token: &str) -> (String, reqwest::Response) {
        let resp = self
            .get(&format!("/v1/files/{id}/content"), Some(token))
            .await;
        assert_eq!(resp.status(), 302);
        let location = resp
            .headers()
            .get("location")
            .expect("Location")
            .to_str()
            .expect("ascii")
            .to_owned();
        let got = self.http.get(&location).send().await.expect("download");
        (location, got)
    }

    pub async fn get_object(&self, key: &str) -> Vec<u8> {
        let out = self
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .expect("get object");
        out.body.collect().await.expect("body").to_vec()
    }

    pub async fn put_object(&self, key: &str, body: Vec<u8>, content_type: &str) {
        self.s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type(content_type)
            .body(body.into())
            .send()
            .await
            .expect("put object");
    }

    /// Deletes `key` as a careless operator would (a plain DELETE: a delete marker on the
    /// versioned bucket), so that a handle's object is lost.
    pub async fn lose_object(&self, key: &str) {
        self.s3
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .expect("lose an object");
    }
}

/// The value of exactly `series` (name and labels as written) in a `/metrics` text.
pub fn series_value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The sum of the counter `metric` over its series whose labels contain `labels` (e.g.
/// `operation="HeadBucket"`; empty: every series), in a `/metrics` text.
pub fn counter_sum(text: &str, metric: &str, labels: &str) -> f64 {
    let prefix = format!("{metric}{{");
    text.lines()
        .filter(|l| l.starts_with(&prefix) && l.contains(labels))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// `{"error": {"code": …}}` of a response, with its status.
pub async fn error_code(resp: reqwest::Response) -> (u16, String) {
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.unwrap_or(Value::Null);
    (
        status,
        v["error"]["code"]
            .as_str()
            .unwrap_or("<no code>")
            .to_owned(),
    )
}

/// A port nothing listens on now (bound, read and let go): for a server to take, or for a
/// request that must find nobody there.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("free port")
        .local_addr()
        .expect("addr")
        .port()
}

/// Serves `router` on a free loopback port for the rest of the test; its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

/// Starts the real `upcommit serve` binary on the test's database and bucket, with extra
/// environment and stderr going to `stderr`; waits until it answers. Returns the child and its
/// base address.
pub async fn server_process(
    app: &TestApp,
    extra: &[(&str, &str)],
    stderr: std::process::Stdio,
) -> (std::process::Child, String) {
    let command = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"));
    server_process_from(app, command, extra, stderr).await
}

/// [`server_process`] from a command the caller has prepared (e.g. with variables of the test
/// runner's own environment removed).
pub async fn server_process_from(
    app: &TestApp,
    mut command: std::process::Command,
    extra: &[(&str, &str)],
    stderr: std::process::Stdio,
) -> (std::process::Child, String) {
    let port = free_port();
    let mut child = command
        .arg("serve")
        .envs(&app.env)
        .env("UPCOMMIT_LISTEN", format!("127.0.0.1:{port}"))
        .envs(extra.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start upcommit serve");
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..100 {
        if app.http.get(format!("{base}/healthz")).send().await.is_ok() {
            return (child, base);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("upcommit serve did not start");
}

/// `upcommit hygiene --json [--at T]` (a real run of the binary) against the app's database and
/// bucket, on a blocking thread; its output, however it ended.
pub async fn hygiene_cli(
    app: &TestApp,
    at: Option<chrono::DateTime<chrono::Utc>>,
) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_upcommit"));
    command.args(["hygiene", "--json"]);
    if let Some(at) = at {
        command.args(["--at", &at.to_rfc3339()]);
    }
    command.envs(&app.env).env("RUST_LOG", "warn");
    tokio::task::spawn_blocking(move || command.output().expect("run upcommit hygiene"))
        .await
        .expect("CLI thread")
}
