//! The bucket's fixed prefixes, which every layer needs (keys, the reserved key space, the
//! jobs, the probe) and which therefore depend on nothing. Each has a lifecycle rule of its own
//! in `infra/lifecycle-rules.json`; `domain::lifecycle` checks that the rules cover them.

/// Everything under this prefix is temporary and expired by the bucket's lifecycle rule.
pub const TMP_PREFIX: &str = "tmp/";

/// Every temporary file's final key starts with this; the whole prefix is reserved (no admin
/// key and no profile's final prefix may be under it).
pub const TEMP_PREFIX: &str = "temp/";

/// Where quarantined objects go; it has an expiring lifecycle rule of its own.
pub const QUARANTINE_PREFIX: &str = "quarantine/";

/// Where renditions go (`cache/<file id>/<variant>-<fingerprint>.<ext>`, issue 37): the image
/// resize rule expires them and a request renders them again. Reserved like `temp/`: no admin
/// key and no profile's final prefix may be under it, whether or not a profile has variants.
pub const CACHE_PREFIX: &str = "cache/";
