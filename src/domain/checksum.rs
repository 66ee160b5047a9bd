//! End-to-end checksums: what a client may declare, how S3 names each algorithm, and how a
//! declared value is checked. Pure: the S3 calls that bind and read them live in `storage`.

use std::fmt;

use base64::Engine;
use serde::{Deserialize, Serialize};

/// The algorithms a client may declare. SHA-256 is for single-request uploads; multipart
/// uploads take a full-object CRC (S3 has no full-object SHA-256 for multipart).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ChecksumAlgorithm {
    #[serde(rename = "SHA256")]
    Sha256,
    #[serde(rename = "CRC32C")]
    Crc32c,
    #[serde(rename = "CRC64NVME")]
    Crc64Nvme,
}

impl ChecksumAlgorithm {
    pub const ALL: [ChecksumAlgorithm; 3] = [Self::Sha256, Self::Crc32c, Self::Crc64Nvme];

    /// The name in the API, in `x-amz-sdk-checksum-algorithm` and in S3's `ChecksumAlgorithm`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sha256 => "SHA256",
            Self::Crc32c => "CRC32C",
            Self::Crc64Nvme => "CRC64NVME",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The header (and POST form field) that carries the value: `x-amz-checksum-sha256`, ….
    pub fn header(self) -> &'static str {
        match self {
            Self::Sha256 => "x-amz-checksum-sha256",
            Self::Crc32c => "x-amz-checksum-crc32c",
            Self::Crc64Nvme => "x-amz-checksum-crc64nvme",
        }
    }

    /// Bytes of the digest.
    pub fn digest_len(self) -> usize {
        match self {
            Self::Sha256 => 32,
            Self::Crc32c => 4,
            Self::Crc64Nvme => 8,
        }
    }

    /// Whether S3 can keep it as a full-object checksum of a multipart upload.
    pub fn full_object_multipart(self) -> bool {
        matches!(self, Self::Crc32c | Self::Crc64Nvme)
    }
}

impl fmt::Display for ChecksumAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A checksum as S3 and the API carry it: the algorithm and the base64 of the big-endian digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Checksum {
    pub algorithm: ChecksumAlgorithm,
    pub value: String,
}

/// Why a declared checksum is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChecksumError {
    UnknownAlgorithm,
    /// Not standard padded base64, or not the algorithm's digest length.
    BadValue,
}

impl Checksum {
    /// A declared checksum, checked for shape: a known algorithm and a value that decodes (strict,
    /// padded base64) to exactly the digest's length. Re-encoding must give the same text, so
    /// one digest has one spelling and comparisons with S3's answer are plain string equality.
    pub fn parse(algorithm: &str, value: &str) -> Result<Self, ChecksumError> {
        let algorithm =
            ChecksumAlgorithm::parse(algorithm).ok_or(ChecksumError::UnknownAlgorithm)?;
        let engine = base64::engine::general_purpose::STANDARD;
        let bytes = engine.decode(value).map_err(|_| ChecksumError::BadValue)?;
        if bytes.len() != algorithm.digest_len() || engine.encode(&bytes) != value {
            return Err(ChecksumError::BadValue);
        }
        Ok(Self {
            algorithm,
            value: value.to_owned(),
        })
    }

    /// A value read back from the catalog or S3, trusted as it is.
    pub fn from_trusted(algorithm: ChecksumAlgorithm, value: String) -> Self {
        Self { algorithm, value }
    }

    /// The checksum S3 reported, out of the ones it may carry: the `wanted` algorithm when
    /// given (nothing when S3 did not report that one), else the first reported of SHA-256,
    /// CRC64NVME, CRC32C.
    pub fn pick(
        wanted: Option<ChecksumAlgorithm>,
        reported: [(ChecksumAlgorithm, Option<&str>); 3],
    ) -> Option<Self> {
        reported
            .into_iter()
            .filter(|(a, _)| wanted.map_or(true, |w| w == *a))
            .find_map(|(a, v)| v.map(|v| Self::from_trusted(a, v.to_owned())))
    }

    /// The checksum of `bytes` (tests, the CLI).
    pub fn of(algorithm: ChecksumAlgorithm, bytes: &[u8]) -> Self {
        let mut h = Hasher::new(algorithm);
        h.update(bytes);
        h.finish()
    }
}

/// An incremental checksum over a stream of bytes.
pub enum Hasher {
    Sha256(sha2::Sha256),
    Crc(ChecksumAlgorithm, crc_fast::Digest),
}

impl Hasher {
    pub fn new(algorithm: ChecksumAlgorithm) -> Self {
        use sha2::Digest;
        match algorithm {
            ChecksumAlgorithm::Sha256 => Self::Sha256(sha2::Sha256::new()),
            ChecksumAlgorithm::Crc32c => Self::Crc(
                algorithm,
                crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi),
            ),
            ChecksumAlgorithm::Crc64Nvme => Self::Crc(
                algorithm,
                crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc64Nvme),
            ),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest;
        match self {
            Self::Sha256(h) => h.update(bytes),
            Self::Crc(_, d) => d.update(bytes),
        }
    }

    pub fn finish(self) -> Checksum {
        use sha2::Digest;
        let engine = base64::engine::general_purpose::STANDARD;
        let (algorithm, value) = match self {
            Self::Sha256(h) => (ChecksumAlgorithm::Sha256, engine.encode(h.finalize())),
            Self::Crc(a @ ChecksumAlgorithm::Crc32c, d) => {
                let v = u32::try_from(d.finalize()).unwrap_or(u32::MAX);
                (a, engine.encode(v.to_be_bytes()))
            }
            Self::Crc(a, d) => (a, engine.encode(d.finalize().to_be_bytes())),
        };
        Checksum { algorithm, value }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_vectors() {
        // "123456789", the CRC catalogue's check input.
        let check = b"123456789";
        let hex = |c: &Checksum| {
            hex::encode(
                base64::engine::general_purpose::STANDARD
                    .decode(&c.value)
                    .expect("base64"),
            )
        };
        assert_eq!(
            hex(&Checksum::of(ChecksumAlgorithm::Crc32c, check)),
            "e3069283"
        );
        assert_eq!(
            hex(&Checksum::of(ChecksumAlgorithm::Crc64Nvme, check)),
            "ae8b14860a799888"
        );
        assert_eq!(
            Checksum::of(ChecksumAlgorithm::Sha256, b"").value,
            "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
        );
    }

    #[test]
    fn declared_values_must_have_the_digest_length_and_one_spelling() {
        let sha = Checksum::of(ChecksumAlgorithm::Sha256, b"x").value;
        assert!(Checksum::parse("SHA256", &sha).is_ok());
        assert_eq!(
            Checksum::parse("sha256", &sha),
            Err(ChecksumError::UnknownAlgorithm)
        );
        assert_eq!(
            Checksum::parse("MD5", &sha),
            Err(ChecksumError::UnknownAlgorithm)
        );
        assert_eq!(
            Checksum::parse("CRC32C", &sha),
            Err(ChecksumError::BadValue)
        );
        assert_eq!(
            Checksum::parse("SHA256", sha.trim_end_matches('=')),
            Err(ChecksumError::BadValue)
        );
        assert_eq!(Checksum::parse("SHA256", ""), Err(ChecksumError::BadValue));
        assert_eq!(
            Checksum::parse("CRC32C", "AAAA"),
            Err(ChecksumError::BadValue),
            "3 bytes is not a CRC32C"
        );
        assert_eq!(
            Checksum::parse("CRC32C", "AAAAAAA="),
            Err(ChecksumError::BadValue),
            "5 bytes is not a CRC32C"
        );
        assert!(Checksum::parse("CRC32C", "AAAAAA==").is_ok());
        assert!(Checksum::parse("CRC32C", "AAAAAQ==").is_ok());
        // Non-canonical trailing bits: "AAAAAR==" decodes leniently elsewhere, never here.
        assert!(Checksum::parse("CRC32C", "AAAAAR==").is_err());
        assert!(Checksum::parse("CRC64NVME", "AAAAAAAAAAA=").is_ok());
        assert!(Checksum::parse("CRC64NVME", " AAAAAAAAAAA=").is_err());
    }

    #[test]
    fn the_reported_checksum_is_the_wanted_one_or_the_strongest() {
        use ChecksumAlgorithm::*;
        let all = [
            (Sha256, Some("s")),
            (Crc64Nvme, Some("c64")),
            (Crc32c, None),
        ];
        assert_eq!(Checksum::pick(None, all).map(|c| c.value), Some("s".into()));
        assert_eq!(
            Checksum::pick(Some(Crc64Nvme), all).map(|c| c.value),
            Some("c64".into())
        );
        assert_eq!(Checksum::pick(Some(Crc32c), all), None);
        let none = [(Sha256, None), (Crc64Nvme, None), (Crc32c, None)];
        assert_eq!(Checksum::pick(None, none), None);
    }

    #[test]
    fn only_crcs_are_full_object_multipart_checksums() {
        assert!(!ChecksumAlgorithm::Sha256.full_object_multipart());
        assert!(ChecksumAlgorithm::Crc32c.full_object_multipart());
        assert!(ChecksumAlgorithm::Crc64Nvme.full_object_multipart());
    }

    proptest! {
        #[test]
        fn incremental_equals_one_shot(data in prop::collection::vec(any::<u8>(), 0..2048), cut in 0usize..2048) {
            for a in ChecksumAlgorithm::ALL {
                let cut = cut.min(data.len());
                let mut h = Hasher::new(a);
                h.update(&data[..cut]);
                h.update(&data[cut..]);
                let whole = Checksum::of(a, &data);
                prop_assert_eq!(&h.finish(), &whole);
                prop_assert!(Checksum::parse(a.as_str(), &whole.value).is_ok());
            }
        }

        #[test]
        fn parse_never_panics(alg in "[A-Z0-9]{0,10}", value in ".{0,60}") {
            let _ = Checksum::parse(&alg, &value);
        }
    }
}
