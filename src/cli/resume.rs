//! What `upcommit upload` keeps beside the source file while a multipart upload is open, so a
//! run that died (killed, crashed, the machine restarted) can be resumed by running the same
//! command again: `<file>.upcommit-state.json`, written atomically (a temporary file renamed
//! over it) once the service has presigned the upload, removed once the file is committed.
//!
//! It names the upload and fingerprints the file: size, modification time, the SHA-256 of its
//! first and last MiB, and the whole-file checksum the presign declared (when one was). A
//! resume goes on only when all of them still hold; anything else means the file is not the
//! one whose parts are already stored, and the run is refused with nothing committed.

use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Bytes read from each end of the file for the quick fingerprint.
const EDGE_BYTES: u64 = 1024 * 1024;
pub const VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadState {
    pub version: u32,
    /// The service's base URL the upload belongs to.
    pub server: String,
    pub profile: String,
    pub upload_id: String,
    pub key: String,
    pub part_size: u64,
    pub part_count: u32,
    /// The file as it was when the upload started.
    pub fingerprint: Fingerprint,
    /// The whole-file checksum bound at presign (`CRC64NVME`, base64), when one was declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub size: u64,
    /// Modification time, nanoseconds since the Unix epoch (0 when the platform has none).
    pub mtime_ns: u64,
    /// SHA-256 (hex) of the first and the last MiB of the file (the whole file when smaller).
    pub edges_sha256: String,
}

/// Where the state of `file`'s upload is kept.
pub fn state_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".upcommit-state.json");
    PathBuf::from(name)
}

/// The file's fingerprint as it is now.
pub fn fingerprint(file: &Path) -> std::io::Result<Fingerprint> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(file)?;
    let meta = f.metadata()?;
    let size = meta.len();
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
        .unwrap_or(0);
    let mut hasher = Sha256::new();
    let mut buf = Vec::new();
    f.by_ref().take(EDGE_BYTES).read_to_end(&mut buf)?;
    hasher.update(&buf);
    if size > EDGE_BYTES {
        let tail_start = size.saturating_sub(EDGE_BYTES).max(EDGE_BYTES);
        buf.clear();
        f.seek(SeekFrom::Start(tail_start))?;
        f.take(EDGE_BYTES).read_to_end(&mut buf)?;
        hasher.update(&buf);
    }
    Ok(Fingerprint {
        size,
        mtime_ns,
        edges_sha256: hex::encode(hasher.finalize()),
    })
}

/// Why `now` is not the file an upload started with (`None`: it is, as far as can be told).
pub fn changed(then: &Fingerprint, now: &Fingerprint) -> Option<&'static str> {
    if then.size != now.size {
        Some("its size changed")
    } else if then.mtime_ns != now.mtime_ns {
        Some("its modification time changed")
    } else if then.edges_sha256 != now.edges_sha256 {
        Some("its first or last bytes changed")
    } else {
        None
    }
}

impl UploadState {
    /// Whether this state is for an upload of `profile` to `server` (another target: the
    /// state is not this run's).
    pub fn is_for(&self, server: &str, profile: &str) -> bool {
        self.server == normalize_server(server) && self.profile == profile
    }

    /// Reads the state at `path`: `Ok(None)` when there is none, `Err` when it cannot be read
    /// or is not a state this version wrote.
    pub fn load(path: &Path) -> Result<Option<Self>, String> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let state: Self = serde_json::from_slice(&text)
            .map_err(|e| format!("{} is not an upload state: {e}", path.display()))?;
        if state.version != VERSION {
            return Err(format!(
                "{} was written by another version (state version {})",
                path.display(),
                state.version
            ));
        }
        Ok(Some(state))
    }

    /// Writes the state at `path` atomically: to a temporary file beside it, flushed, then
    /// renamed over it (a reader sees the old state or the new one, never half of one).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let body = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&body)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)
    }
}

pub fn normalize_server(server: &str) -> String {
    server.trim_end_matches('/').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).expect("write");
        p
    }

    #[test]
    fn the_state_sits_beside_the_file_and_survives_a_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = write(dir.path(), "talk.mp3", b"abc");
        let path = state_path(&file);
        assert_eq!(
            path.file_name().and_then(|n| n.to_str()),
            Some("talk.mp3.upcommit-state.json")
        );
        assert_eq!(UploadState::load(&path), Ok(None));
        let state = UploadState {
            version: VERSION,
            server: normalize_server("http://s:8080/"),
            profile: "recording".into(),
            upload_id: "u1".into(),
            key: "tmp/k".into(),
            part_size: 5,
            part_count: 1,
            fingerprint: fingerprint(&file).expect("fingerprint"),
            checksum: Some(("CRC64NVME".into(), "AAAAAAAAAAA=".into())),
        };
        state.save(&path).expect("save");
        assert_eq!(UploadState::load(&path), Ok(Some(state.clone())));
        assert!(state.is_for("http://s:8080", "recording"));
        assert!(!state.is_for("http://other:8080", "recording"));
        assert!(!state.is_for("http://s:8080", "image"));
        assert!(
            !dir.path().join("talk.mp3.upcommit-state.json.tmp").exists(),
            "no temporary file is left"
        );
        std::fs::write(&path, b"{half").expect("write");
        assert!(UploadState::load(&path).is_err());
    }

    #[test]
    fn a_changed_file_is_told_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let big = (0..3 * EDGE_BYTES)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>();
        let file = write(dir.path(), "big.bin", &big);
        let then = fingerprint(&file).expect("fingerprint");
        assert_eq!(changed(&then, &fingerprint(&file).expect("again")), None);
        let mtime = std::fs::metadata(&file)
            .and_then(|m| m.modified())
            .expect("mtime");
        let rewrite = |bytes: &[u8]| {
            std::fs::write(&file, bytes).expect("rewrite");
            let f = std::fs::File::options()
                .write(true)
                .open(&file)
                .expect("open");
            f.set_modified(mtime).expect("keep the mtime");
            fingerprint(&file).expect("fingerprint")
        };
        let mut last_byte = big.clone();
        *last_byte.last_mut().expect("byte") ^= 1;
        assert_eq!(
            changed(&then, &rewrite(&last_byte)),
            Some("its first or last bytes changed")
        );
        let mut first_byte = big.clone();
        first_byte[0] ^= 1;
        assert_eq!(
            changed(&then, &rewrite(&first_byte)),
            Some("its first or last bytes changed")
        );
        assert_eq!(
            changed(&then, &rewrite(&big[..big.len() - 1])),
            Some("its size changed")
        );
        // The middle is the whole-file checksum's to catch (see `upload`).
        let mut middle = big.clone();
        middle[(EDGE_BYTES + 10) as usize] ^= 1;
        assert_eq!(changed(&then, &rewrite(&middle)), None);
        std::fs::write(&file, &big).expect("rewrite");
        let f = std::fs::File::options()
            .write(true)
            .open(&file)
            .expect("open");
        f.set_modified(mtime + std::time::Duration::from_secs(5))
            .expect("touch");
        assert_eq!(
            changed(&then, &fingerprint(&file).expect("fingerprint")),
            Some("its modification time changed")
        );
    }
}
