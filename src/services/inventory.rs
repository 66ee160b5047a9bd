//! The bucket side of a reconcile from an S3 Inventory: `manifest.json` names gzip CSV files
//! (schema in `fileSchema`, keys form-encoded: `domain::encoded_keys`); each file is streamed to a temporary file and
//! read line by line, so memory stays flat however large the inventory is. Keys must arrive in
//! byte order across files; the join refuses otherwise.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use chrono::{DateTime, Utc};
use flate2::read::GzDecoder;
use serde::Deserialize;

use super::bucket_source::BucketSource;
use crate::domain::encoded_keys::decode_form;
use crate::domain::reconcile::BucketKey;
use crate::storage::StoreError;

const PAGE: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    destination_bucket: String,
    file_format: String,
    file_schema: String,
    files: Vec<ManifestFile>,
    /// As written: absent is `None`, `null` is `Some(Null)` (refused by
    /// [`InventorySource::taken_at`], never read as "not said").
    #[serde(default, deserialize_with = "present")]
    creation_timestamp: Option<serde_json::Value>,
}

/// A field that is there, whatever its value (`null` included).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

/// A manifest's `creationTimestamp` as a time; `Err` with what it holds when it is none.
fn creation_time(value: &serde_json::Value) -> Result<DateTime<Utc>, String> {
    let millis = match value {
        serde_json::Value::String(s) => s.trim().parse::<i64>().ok(),
        serde_json::Value::Number(n) => n.as_i64(),
        _ => None,
    };
    millis
        .and_then(DateTime::from_timestamp_millis)
        .ok_or_else(|| format!("creationTimestamp {value} is not milliseconds since the epoch"))
}

#[derive(Debug, Deserialize)]
struct ManifestFile {
    key: String,
}

/// `s3://bucket/key` → (bucket, key).
pub fn parse_s3_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("s3://")?;
    let (bucket, key) = rest.split_once('/')?;
    (!bucket.is_empty() && !key.is_empty()).then(|| (bucket.to_owned(), key.to_owned()))
}

/// One CSV line of quoted fields (`""` inside quotes is a quote).
pub fn csv_fields(line: &str) -> Vec<String> {
    csv_record(line).0
}

/// One CSV line's fields, and whether every quote it opens is closed on it (`false`: the field
/// runs on past the line's end, as a quoted line break would).
pub fn csv_record(line: &str) -> (Vec<String>, bool) {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    fields.push(cur);
    (fields, !quoted)
}

struct Columns {
    key: usize,
    size: Option<usize>,
    modified: Option<usize>,
    /// An inventory of every version has these: only a current version that is not a delete
    /// marker is an object the bucket holds (review 26: a deleted asset's delete marker, or an
    /// older version, counted as present).
    is_latest: Option<usize>,
    is_delete_marker: Option<usize>,
}

pub struct InventorySource {
    client: Client,
    data_bucket: String,
    files: Vec<String>,
    columns: Columns,
    next_file: usize,
    reader: Option<(PathBuf, Box<dyn BufRead + Send>)>,
    /// The manifest's `creationTimestamp` as written (`null` kept apart from absent), read only
    /// by reconcile ([`Self::taken_at`]).
    creation_timestamp: Option<serde_json::Value>,
}

impl InventorySource {
    /// When S3 began taking the inventory (the manifest's `creationTimestamp`), `None` when the
    /// manifest does not say; `Err` when it says something that is not epoch milliseconds
    /// (`null` included).
    pub fn taken_at(&self) -> Result<Option<DateTime<Utc>>, String> {
        self.creation_timestamp
            .as_ref()
            .map(creation_time)
            .transpose()
    }

    /// Reads and checks the manifest.
    pub async fn open(client: Client, manifest_url: &str) -> Result<Self, StoreError> {
        let (bucket, key) = parse_s3_url(manifest_url).ok_or_else(|| {
            StoreError::Other(format!(
                "--inventory: expected s3://bucket/key, got {manifest_url:?}"
            ))
        })?;
        let body = client
            .get_object()
            .bucket(&bucket)
            .key(&key)
            .send()
            .await
            .map_err(|e| StoreError::Other(format!("manifest {manifest_url}: {e}")))?
            .body
            .collect()
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?
            .into_bytes();
        let manifest: Manifest = serde_json::from_slice(&body)
            .map_err(|e| StoreError::Other(format!("manifest {manifest_url}: {e}")))?;
        if manifest.file_format != "CSV" {
            return Err(StoreError::Other(format!(
                "manifest {manifest_url}: fileFormat {} is not supported (CSV only)",
                manifest.file_format
            )));
        }
        let schema: Vec<String> = manifest
            .file_schema
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect();
        let col = |name: &str| schema.iter().position(|s| s == name);
        let columns = Columns {
            key: col("Key").ok_or_else(|| {
                StoreError::Other(format!("manifest {manifest_url}: fileSchema has no Key"))
            })?,
            size: col("Size"),
            modified: col("LastModifiedDate"),
            is_latest: col("IsLatest"),
            is_delete_marker: col("IsDeleteMarker"),
        };
        let data_bucket = manifest
            .destination_bucket
            .strip_prefix("arn:aws:s3:::")
            .unwrap_or(&manifest.destination_bucket)
            .to_owned();
        Ok(Self {
            client,
            data_bucket,
            files: manifest.files.into_iter().map(|f| f.key).collect(),
            columns,
            next_file: 0,
            reader: None,
            creation_timestamp: manifest.creation_timestamp,
        })
    }

    /// Streams the next data file to disk and opens a gzip line reader on it.
    async fn open_next(&mut self) -> Result<bool, StoreError> {
        let Some(key) = self.files.get(self.next_file).cloned() else {
            return Ok(false);
        };
        self.next_file += 1;
        let mut out = self
            .client
            .get_object()
            .bucket(&self.data_bucket)
            .key(&key)
            .send()
            .await
            .map_err(|e| StoreError::Other(format!("inventory file {key}: {e}")))?;
        let path = std::env::temp_dir().join(format!(
            "upcommit-inventory-{}.csv.gz",
            uuid::Uuid::new_v4().simple()
        ));
        let mut file = File::create(&path).map_err(|e| StoreError::Other(e.to_string()))?;
        while let Some(chunk) = out
            .body
            .try_next()
            .await
            .map_err(|e| StoreError::Unavailable(e.to_string()))?
        {
            file.write_all(&chunk)
                .map_err(|e| StoreError::Other(e.to_string()))?;
        }
        let file = File::open(&path).map_err(|e| StoreError::Other(e.to_string()))?;
        self.reader = Some((path, Box::new(BufReader::new(GzDecoder::new(file)))));
        Ok(true)
    }

    fn parse(&self, line: &str) -> Result<Option<BucketKey>, StoreError> {
        parse_line(&self.columns, line)
    }
}

/// The object a line names, or `None` for a line of an all-versions inventory that is not a
/// current object (an older version, or a delete marker).
fn parse_line(columns: &Columns, line: &str) -> Result<Option<BucketKey>, StoreError> {
    let f = csv_fields(line);
    let flag = |col: Option<usize>| {
        col.and_then(|i| f.get(i))
            .map(|v| v.eq_ignore_ascii_case("true"))
    };
    if flag(columns.is_latest) == Some(false) || flag(columns.is_delete_marker) == Some(true) {
        return Ok(None);
    }
    let raw = f
        .get(columns.key)
        .ok_or_else(|| StoreError::Other(format!("inventory line without a key: {line:?}")))?;
    // Form-encoded, as S3 writes it (`domain::encoded_keys`): a `+` is a space.
    let key = decode_form(raw).ok_or_else(|| {
        StoreError::Other(format!("inventory key {raw:?} is not UTF-8 once decoded"))
    })?;
    let size = columns
        .size
        .and_then(|i| f.get(i))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let last_modified = columns
        .modified
        .and_then(|i| f.get(i))
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc));
    Ok(Some(BucketKey {
        key,
        size,
        last_modified,
    }))
}

impl Drop for InventorySource {
    fn drop(&mut self) {
        if let Some((path, _)) = self.reader.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[async_trait]
impl BucketSource for InventorySource {
    async fn next_page(&mut self) -> Result<Option<Vec<BucketKey>>, StoreError> {
        let mut page = Vec::with_capacity(PAGE);
        while page.len() < PAGE {
            if self.reader.is_none() && !self.open_next().await? {
                break;
            }
            let mut line = String::new();
            let read = match &mut self.reader {
                Some((_, r)) => r
                    .read_line(&mut line)
                    .map_err(|e| StoreError::Other(format!("inventory: {e}")))?,
                None => 0,
            };
            if read == 0 {
                if let Some((path, _)) = self.reader.take() {
                    let _ = std::fs::remove_file(path);
                }
                continue;
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if !line.is_empty() {
                if let Some(object) = self.parse(line)? {
                    page.push(object);
                }
            }
        }
        Ok((!page.is_empty()).then_some(page))
    }

    fn name(&self) -> &'static str {
        "inventory"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifests_creation_timestamp_is_milliseconds_since_the_epoch() {
        let at = |v: serde_json::Value| creation_time(&v);
        let expected = DateTime::parse_from_rfc3339("2018-01-03T02:00:00Z")
            .expect("time")
            .with_timezone(&Utc);
        assert_eq!(at(serde_json::json!("1514944800000")), Ok(expected));
        assert_eq!(at(serde_json::json!(1514944800000_i64)), Ok(expected));
        for bad in [
            serde_json::json!("2018-01-03T02:00:00Z"),
            serde_json::json!(""),
            serde_json::json!(null),
            serde_json::json!(1.5),
        ] {
            assert!(at(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn csv_fields_unquote_and_keep_commas_inside_quotes() {
        assert_eq!(
            csv_fields(r#""b","media/images/a%2Cb.png","12","2026-11-01T00:00:00.000Z""#),
            vec![
                "b",
                "media/images/a%2Cb.png",
                "12",
                "2026-11-01T00:00:00.000Z"
            ]
        );
        assert_eq!(
            csv_fields(r#""a,b","say ""hi""""#),
            vec!["a,b", r#"say "hi""#]
        );
    }

    #[test]
    fn a_quote_left_open_at_the_end_of_the_line_is_reported() {
        assert_eq!(
            csv_record(r#"uploads/x/k5.png,"dave"#),
            (
                vec!["uploads/x/k5.png".to_owned(), "dave".to_owned()],
                false
            )
        );
        assert!(!csv_record(r#"something else",more"#).1);
        assert!(csv_record(r#""a,b","say ""hi""""#).1);
        assert!(csv_record("k,v").1);
    }

    #[test]
    fn s3_urls_split_into_bucket_and_key() {
        assert_eq!(
            parse_s3_url("s3://inv/upcommit/manifest.json"),
            Some(("inv".into(), "upcommit/manifest.json".into()))
        );
        assert_eq!(parse_s3_url("https://x/y"), None);
        assert_eq!(parse_s3_url("s3://bucket"), None);
    }

    #[test]
    fn an_all_versions_inventory_lists_only_current_objects() {
        // Bucket, Key, VersionId, IsLatest, IsDeleteMarker, Size, LastModifiedDate
        let columns = Columns {
            key: 1,
            size: Some(5),
            modified: Some(6),
            is_latest: Some(3),
            is_delete_marker: Some(4),
        };
        let line = |latest: &str, marker: &str, size: &str| {
            format!(
                r#""b","media/images/a.png","v1","{latest}","{marker}","{size}","2026-11-01T00:00:00.000Z""#
            )
        };
        let current = parse_line(&columns, &line("true", "false", "69")).expect("parses");
        assert_eq!(
            current.map(|k| (k.key, k.size)),
            Some(("media/images/a.png".to_owned(), 69))
        );
        // A deleted asset's delete marker, and an older version: not objects the bucket holds.
        assert!(parse_line(&columns, &line("true", "true", ""))
            .expect("parses")
            .is_none());
        assert!(parse_line(&columns, &line("false", "false", "69"))
            .expect("parses")
            .is_none());
        // A current-versions inventory has neither column: every line is an object.
        let plain = Columns {
            key: 1,
            size: Some(2),
            modified: Some(3),
            is_latest: None,
            is_delete_marker: None,
        };
        assert!(parse_line(
            &plain,
            r#""b","media/images/a.png","69","2026-11-01T00:00:00.000Z""#
        )
        .expect("parses")
        .is_some());
    }
}
