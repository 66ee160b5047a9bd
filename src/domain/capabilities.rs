//! What the object store does, as far as upcommit's promises rest on it, and the verdict on a
//! store that lacks some of it.
//!
//! Every promise upcommit makes is kept by something the store does: a single-use upload URL by
//! `If-None-Match: *` on PutObject, validate-then-copy by `x-amz-copy-source-if-match`, and so
//! on. Stores differ exactly there (Garage ignores conditional writes; LocalStack does not verify
//! POST signatures), so the server finds out by real calls (`storage::s3::probe`) and judges the
//! findings here: a capability a promise needs that the store lacks (or that could not be probed)
//! makes `serve` refuse to start, until the operator accepts the gap by name
//! (`UPCOMMIT_ACCEPT_STORE_GAPS`). The server then runs with that promise weakened as
//! [`Capability::without`] says — or kept another way, where a fallback exists — and says so in
//! `doctor`, `GET /v1/admin/bucket`, `/metrics` and its startup log. Never a silent gap.
//!
//! Pure: the probe's findings and the settings come in as data.

use std::collections::BTreeSet;

use serde::Serialize;

use super::checksum::ChecksumAlgorithm;

/// One thing the store may or may not do, by stable snake_case name (the name an operator
/// writes in `UPCOMMIT_ACCEPT_STORE_GAPS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    ConditionalPut,
    ConditionalPutIfMatch,
    ConditionalCopy,
    ConditionalComplete,
    CopySourceIfMatch,
    CopyIfMatchLegacy,
    PartCopySourceIfMatch,
    CopyInParts,
    ChecksumSha256,
    ChecksumCrc32c,
    ChecksumCrc64nvme,
    MultipartChecksum,
    PostSizeRange,
    PostSignature,
    Versioning,
    StorageClass,
    ObjectTags,
    EncryptionConfig,
}

impl Capability {
    pub const ALL: [Capability; 18] = [
        Capability::ConditionalPut,
        Capability::ConditionalPutIfMatch,
        Capability::ConditionalCopy,
        Capability::ConditionalComplete,
        Capability::CopySourceIfMatch,
        Capability::CopyIfMatchLegacy,
        Capability::PartCopySourceIfMatch,
        Capability::CopyInParts,
        Capability::ChecksumSha256,
        Capability::ChecksumCrc32c,
        Capability::ChecksumCrc64nvme,
        Capability::MultipartChecksum,
        Capability::PostSizeRange,
        Capability::PostSignature,
        Capability::Versioning,
        Capability::StorageClass,
        Capability::ObjectTags,
        Capability::EncryptionConfig,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Capability::ConditionalPut => "conditional_put",
            Capability::ConditionalPutIfMatch => "conditional_put_if_match",
            Capability::ConditionalCopy => "conditional_copy",
            Capability::ConditionalComplete => "conditional_complete",
            Capability::CopySourceIfMatch => "copy_source_if_match",
            Capability::CopyIfMatchLegacy => "copy_if_match_legacy",
            Capability::PartCopySourceIfMatch => "part_copy_source_if_match",
            Capability::CopyInParts => "copy_in_parts",
            Capability::ChecksumSha256 => "checksum_sha256",
            Capability::ChecksumCrc32c => "checksum_crc32c",
            Capability::ChecksumCrc64nvme => "checksum_crc64nvme",
            Capability::MultipartChecksum => "multipart_checksum",
            Capability::PostSizeRange => "post_size_range",
            Capability::PostSignature => "post_signature",
            Capability::Versioning => "versioning",
            Capability::StorageClass => "storage_class",
            Capability::ObjectTags => "object_tags",
            Capability::EncryptionConfig => "encryption_config",
        }
    }

    /// The capability that keeps a declared checksum of `alg`.
    pub fn checksum(alg: super::checksum::ChecksumAlgorithm) -> Self {
        use super::checksum::ChecksumAlgorithm as A;
        match alg {
            A::Sha256 => Capability::ChecksumSha256,
            A::Crc32c => Capability::ChecksumCrc32c,
            A::Crc64Nvme => Capability::ChecksumCrc64nvme,
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// What the store does when it has this capability, as the probe tests it.
    pub fn what(self) -> &'static str {
        match self {
            Capability::ConditionalPut => "PutObject with If-None-Match: * refuses (412) when the key exists",
            Capability::ConditionalPutIfMatch => "PutObject with If-Match refuses (412) another ETag",
            Capability::ConditionalCopy => "CopyObject with If-None-Match: * refuses (412) when the destination exists",
            Capability::ConditionalComplete => "CompleteMultipartUpload with If-None-Match: * refuses (412) when the key exists",
            Capability::CopySourceIfMatch => "CopyObject with x-amz-copy-source-if-match refuses (412) another source ETag (or, where the store keeps the condition only under its older name, x-amz-copy-if-match, which upcommit then sends too: copy_if_match_legacy)",
            Capability::CopyIfMatchLegacy => "CopyObject with x-amz-copy-if-match (Ceph RGW's older name of x-amz-copy-source-if-match) refuses (412) another source ETag",
            Capability::PartCopySourceIfMatch => "UploadPartCopy with x-amz-copy-source-if-match refuses (412) another source ETag",
            Capability::CopyInParts => "UploadPartCopy copies the byte ranges asked for and CompleteMultipartUpload joins them: the object has exactly the source's bytes",
            Capability::ChecksumSha256 => "PutObject with a wrong x-amz-checksum-sha256 is refused, a right one is returned on HEAD",
            Capability::ChecksumCrc32c => "PutObject with a wrong x-amz-checksum-crc32c is refused, a right one is returned on HEAD",
            Capability::ChecksumCrc64nvme => "PutObject with a wrong x-amz-checksum-crc64nvme is refused, a right one is returned on HEAD",
            Capability::MultipartChecksum => "a multipart upload created with a full-object checksum refuses a completion declaring another one, and keeps the right one, returned on HEAD: for each algorithm a multipart upload may declare (CRC64NVME and CRC32C)",
            Capability::PostSizeRange => "a POST form's body outside the policy's content-length-range is refused",
            Capability::PostSignature => "a POST form whose policy was altered after signing is refused",
            Capability::Versioning => "the bucket keeps versions (versioning Enabled, HEAD returns a version id)",
            Capability::StorageClass => "PutObject with the archive storage class is stored in it and HEAD reports it",
            Capability::ObjectTags => "object tags written with PutObject, and by a CopyObject that replaces them (as archival writes them), are read back by GetObjectTagging",
            Capability::EncryptionConfig => "GetBucketEncryption is implemented",
        }
    }

    /// The promise that rests on it.
    pub fn promise(self) -> &'static str {
        match self {
            Capability::ConditionalPut => "an upload URL stores bytes once (single-use)",
            Capability::ConditionalPutIfMatch => "none: upcommit sends no If-Match on PutObject (probed for docs/stores.md)",
            Capability::ConditionalCopy => "a commit never overwrites an object at its final key (admin keys included)",
            Capability::ConditionalComplete => "a commit copied in parts never overwrites an object at its final key",
            Capability::CopySourceIfMatch => "a commit copies exactly the bytes it validated and the validation hook scanned",
            Capability::CopyIfMatchLegacy => "none by itself: where the store ignores x-amz-copy-source-if-match and keeps this name, a commit's CopyObject sends it too, which keeps copy_source_if_match",
            Capability::PartCopySourceIfMatch => "a commit copied in parts (files over UPCOMMIT_MAX_SINGLE_COPY_BYTES) copies exactly the bytes it validated and the validation hook scanned",
            Capability::CopyInParts => "files over UPCOMMIT_MAX_SINGLE_COPY_BYTES (5 GiB by default: CopyObject's limit) can be committed",
            Capability::ChecksumSha256 => "an upload declaring a SHA256 checksum is stored only with those bytes",
            Capability::ChecksumCrc32c => "an upload declaring a CRC32C checksum is stored only with those bytes",
            Capability::ChecksumCrc64nvme => "an upload declaring a CRC64NVME checksum is stored only with those bytes",
            Capability::MultipartChecksum => "a multipart upload declaring the whole file's checksum commits only with those bytes",
            Capability::PostSizeRange => "a browser POST form stores at most the size declared and charged",
            Capability::PostSignature => "a POST form writes only the key, type and size upcommit signed it for",
            Capability::Versioning => "a commit copies one exact version; deletions remove every version; an overwritten object stays recoverable until the lifecycle expires it",
            Capability::StorageClass => "hygiene archival moves an unlinked file's object to the archive storage class",
            Capability::ObjectTags => "an archived object carries the tag upcommit-status=archived",
            Capability::EncryptionConfig => "doctor verifies that the bucket encrypts new objects by default",
        }
    }

    /// What upcommit does without it, once the gap is accepted: the fallback that keeps the
    /// promise another way (and the window it leaves), or how the promise is weakened.
    pub fn without(self) -> &'static str {
        match self {
            Capability::ConditionalPut => "weakened: an upload URL may store bytes again until it expires, each time exactly the declared size and type (signed); on an unversioned bucket new bytes replace the old, on a versioned one they add versions the tmp cleanup removes; a commit promotes only bytes it validated",
            Capability::ConditionalPutIfMatch => "nothing changes",
            Capability::ConditionalCopy => "fallback: final keys are reserved in the catalog before any copy (no two commits write one key) and the commit reads the final key right before it copies; only an object written there by something other than upcommit between that read and the copy can be overwritten",
            Capability::ConditionalComplete => "fallback: as conditional_copy, for copies in parts (the final key is read right before the copy starts)",
            Capability::CopySourceIfMatch => "weakened on an unversioned bucket: bytes written to the tmp key between validation and copy may be promoted unvalidated; on a versioned bucket the copy names the validated version id, which keeps the promise",
            Capability::CopyIfMatchLegacy => "nothing changes: x-amz-copy-if-match is not sent",
            Capability::PartCopySourceIfMatch => "weakened on an unversioned bucket only: the copy reads the tmp key's ETag before its first part and after its last and stops (409 object_changed) if it changed, so only bytes written over the tmp key during the copy and replaced again by bytes with the validated ETag before it ends may be promoted unvalidated (a single CopyObject is not affected); on a versioned bucket every part copy names the validated version id, which keeps the promise",
            Capability::CopyInParts => "fallback: presign refuses files over UPCOMMIT_MAX_SINGLE_COPY_BYTES (400 copy_in_parts_unavailable); a commit never starts a copy in parts the store cannot do",
            Capability::ChecksumSha256 => "fallback: presign refuses SHA256 checksums (400 checksum_algorithm_unavailable); clients declare another algorithm or none",
            Capability::ChecksumCrc32c => "fallback: presign refuses CRC32C checksums (400 checksum_algorithm_unavailable); clients declare another algorithm or none",
            Capability::ChecksumCrc64nvme => "fallback: presign refuses CRC64NVME checksums (400 checksum_algorithm_unavailable); clients declare another algorithm or none",
            Capability::MultipartChecksum => "fallback: presign refuses a checksum on multipart uploads (400 checksum_algorithm_unavailable); large files upload without one, or in one request with one",
            Capability::PostSizeRange => "fallback: presign refuses POST forms (400 post_upload_unavailable); clients use PUT URLs, whose signed Content-Length binds the size",
            Capability::PostSignature => "weakened, and outside upcommit's reach: anyone who reaches the store's endpoint can write any key with a form of their own, live assets included; put the store behind a proxy that admits only upcommit's forms, or keep it off public networks",
            Capability::Versioning => "unversioned semantics: copies are guarded by the ETag alone (an MD5-colliding twin written to the tmp key while the validation hook scans passes that guard and is copied), the validation hook reads the key's current bytes, a deletion removes the object for good, and no noncurrent-version lifecycle rule is needed",
            Capability::StorageClass => "archival leaves the object in its storage class: the file is archived in the catalog only (downloads work, the storage cost does not change)",
            Capability::ObjectTags => "archival writes no tags (no tagging header is sent; a restore clears none): the object still moves to the archive class where storage_class is present, and nothing outside upcommit's catalog tells an archived object",
            Capability::EncryptionConfig => "the encryption check reports that the store does not implement the configuration; whether bytes are encrypted at rest is not checked",
        }
    }
}

/// What the probe found for one capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "found", content = "detail", rename_all = "snake_case")]
pub enum Finding {
    Present,
    /// The store answered, and not as the capability needs (what it did).
    Missing(String),
    /// The probe could not tell (the call failed: why).
    Unknown(String),
}

/// As an operator reads it (doctor, the startup log): what the store did, never a type's name.
impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Present => f.write_str("present"),
            Finding::Missing(what) => write!(f, "missing: {what}"),
            Finding::Unknown(why) => write!(f, "could not be told: {why}"),
        }
    }
}

/// The `copy_source_if_match` finding from CopyObject's guard under AWS's name and under Ceph
/// RGW's older one, `x-amz-copy-if-match` (`copy_if_match_legacy`): a commit sends the older
/// name only where the store was found to keep it, so the guard holds where either name is
/// kept; otherwise the AWS name's finding says what the store did (issue 36: RGW 16.2 ignores
/// the AWS name on CopyObject and refuses on its own).
pub fn copy_source_guard_finding(aws_name: Finding, legacy_name: &Finding) -> Finding {
    match (aws_name, legacy_name) {
        (Finding::Present, _) | (_, Finding::Present) => Finding::Present,
        (other, _) => other,
    }
}

/// The probe's findings, one per capability it tested.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Findings(pub Vec<(Capability, Finding)>);

impl Findings {
    pub fn get(&self, cap: Capability) -> Option<&Finding> {
        self.0.iter().find(|(c, _)| *c == cap).map(|(_, f)| f)
    }

    /// Whether the store was found to have `cap` (a capability not probed counts as absent).
    pub fn has(&self, cap: Capability) -> bool {
        matches!(self.get(cap), Some(Finding::Present))
    }
}

/// What this deployment uses, so which capabilities it needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// Hygiene may archive files (some profile is tracked): storage classes and tags matter.
    pub archival: bool,
}

impl Needs {
    pub fn needs(self, cap: Capability) -> bool {
        match cap {
            Capability::ConditionalPutIfMatch | Capability::CopyIfMatchLegacy => false,
            Capability::StorageClass | Capability::ObjectTags => self.archival,
            _ => true,
        }
    }
}

/// Where one capability leaves the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// The store does it.
    Present,
    /// Missing (or not probed) and nothing this deployment uses rests on it.
    NotNeeded,
    /// Missing (or not probed), accepted by name: the server runs as [`Capability::without`].
    Accepted,
    /// Missing (or not probed) and not accepted: `serve` refuses to start.
    Refused,
}

/// One line of the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    pub capability: Capability,
    pub standing: Standing,
    pub finding: Finding,
    pub what: &'static str,
    pub promise: &'static str,
    /// What the server does without it (present only when it is missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub without: Option<&'static str>,
}

/// The verdict on a store: one line per capability, in [`Capability::ALL`] order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub lines: Vec<Line>,
}

impl Verdict {
    /// The verdict of a store nothing probed (an operator tool that relies on no capability):
    /// every capability unknown, none relied on.
    pub fn unprobed() -> Self {
        judge(&Findings::default(), Needs::default(), &BTreeSet::new())
    }

    /// Whether the store was found to do `cap`: where not, the server runs as
    /// [`Capability::without`] says.
    pub fn has(&self, cap: Capability) -> bool {
        self.lines
            .iter()
            .any(|l| l.capability == cap && l.standing == Standing::Present)
    }

    /// The first capability a declared checksum of `alg` rests on that the store was not
    /// found to have: the algorithm's own, and on a multipart upload `multipart_checksum` (found
    /// present only where every algorithm a multipart upload may declare is kept and checked:
    /// [`multipart_checksum_finding`]). Presign refuses the checksum with it.
    pub fn checksum_gap(&self, alg: ChecksumAlgorithm, multipart: bool) -> Option<Capability> {
        let own = Capability::checksum(alg);
        if !self.has(own) {
            return Some(own);
        }
        (multipart && !self.has(Capability::MultipartChecksum))
            .then_some(Capability::MultipartChecksum)
    }

    /// The gaps that keep `serve` from starting.
    pub fn refused(&self) -> Vec<Capability> {
        self.with(Standing::Refused)
    }

    /// The gaps the server runs with.
    pub fn accepted(&self) -> Vec<Capability> {
        self.with(Standing::Accepted)
    }

    fn with(&self, standing: Standing) -> Vec<Capability> {
        self.lines
            .iter()
            .filter(|l| l.standing == standing)
            .map(|l| l.capability)
            .collect()
    }

    /// Whether the server may start.
    pub fn may_start(&self) -> bool {
        self.refused().is_empty()
    }

    /// The message `serve` refuses to start with: each gap, the promise it breaks, and the
    /// setting that accepts it.
    pub fn refusal(&self) -> Option<String> {
        let refused: Vec<&Line> = self
            .lines
            .iter()
            .filter(|l| l.standing == Standing::Refused)
            .collect();
        if refused.is_empty() {
            return None;
        }
        let mut text = String::from("the object store lacks what these promises need:\n");
        for l in &refused {
            let found = match &l.finding {
                Finding::Missing(d) => format!("missing: {d}"),
                Finding::Unknown(d) => format!("could not be probed: {d}"),
                Finding::Present => "present".into(),
            };
            text.push_str(&format!(
                "  {} ({found})\n    promise: {}\n    if accepted: {}\n",
                l.capability.name(),
                l.promise,
                l.without.unwrap_or("")
            ));
        }
        let names: Vec<&str> = refused.iter().map(|l| l.capability.name()).collect();
        text.push_str(&format!(
            "to run with these gaps, accept them by name: UPCOMMIT_ACCEPT_STORE_GAPS={} (docs/stores.md)",
            names.join(",")
        ));
        Some(text)
    }
}

/// The `multipart_checksum` finding from the probe's findings per algorithm: present only when
/// each algorithm a multipart upload may declare ([`ChecksumAlgorithm::full_object_multipart`])
/// was found present, since presign offers each of them on the one capability (issue 35: it was
/// probed with CRC64NVME only and trusted for CRC32C too). The first missing one makes it
/// missing, else the first unknown (or not probed) one unknown, named in the detail.
pub fn multipart_checksum_finding(per_algorithm: Vec<(ChecksumAlgorithm, Finding)>) -> Finding {
    let offered = ChecksumAlgorithm::ALL
        .into_iter()
        .filter(|a| a.full_object_multipart());
    let mut unknown = None;
    for alg in offered {
        match per_algorithm
            .iter()
            .find(|(a, _)| *a == alg)
            .map(|(_, f)| f)
        {
            Some(Finding::Present) => {}
            Some(Finding::Missing(why)) => return Finding::Missing(format!("{alg}: {why}")),
            Some(Finding::Unknown(why)) => {
                unknown.get_or_insert_with(|| format!("{alg}: {why}"));
            }
            None => {
                unknown.get_or_insert_with(|| format!("{alg}: not probed"));
            }
        }
    }
    unknown.map_or(Finding::Present, Finding::Unknown)
}

/// Judges the probe's findings for a deployment that needs `needs` and accepted `accepted`.
pub fn judge(findings: &Findings, needs: Needs, accepted: &BTreeSet<Capability>) -> Verdict {
    let lines = Capability::ALL
        .into_iter()
        .map(|cap| {
            let finding = findings
                .get(cap)
                .cloned()
                .unwrap_or_else(|| Finding::Unknown("not probed".into()));
            let standing = match finding {
                Finding::Present => Standing::Present,
                _ if !needs.needs(cap) => Standing::NotNeeded,
                _ if accepted.contains(&cap) => Standing::Accepted,
                _ => Standing::Refused,
            };
            Line {
                capability: cap,
                standing,
                without: (standing != Standing::Present).then(|| cap.without()),
                finding,
                what: cap.what(),
                promise: cap.promise(),
            }
        })
        .collect();
    Verdict { lines }
}

/// `UPCOMMIT_ACCEPT_STORE_GAPS`: capability names, comma-separated. An unknown name is an
/// error that lists the known ones (a typo must not leave a gap refused for a reason the
/// operator cannot see, nor accept nothing silently).
pub fn parse_accepted(text: &str) -> Result<BTreeSet<Capability>, String> {
    let mut out = BTreeSet::new();
    for raw in text.split(',') {
        let name = raw.trim();
        if name.is_empty() {
            continue;
        }
        match Capability::parse(name) {
            Some(c) => {
                out.insert(c);
            }
            None => {
                let known: Vec<&str> = Capability::ALL.iter().map(|c| c.name()).collect();
                return Err(format!(
                    "unknown store capability {name:?}; known: {}",
                    known.join(", ")
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
