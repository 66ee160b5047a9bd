//! The file's checksums, read off the async threads: the whole file's before presign, and each
//! part's before its URL is asked for.

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};

use super::failure::Failure;
use super::{progress_bar, CHUNK};
use crate::domain::checksum::{Checksum, ChecksumAlgorithm, Hasher};
use crate::domain::multipart::MAX_PART_SIZE;

/// The checksums of the whole file, in one pass: SHA-256 (declared for a single-request upload)
/// then CRC64NVME (for a multipart one). Files too large for one request get only the CRC.
pub(super) async fn whole_file_checksums(file: &Path, size: u64) -> Result<Vec<Checksum>, Failure> {
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
pub(super) async fn hash_ranges(
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
