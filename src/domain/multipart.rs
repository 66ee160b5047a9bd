//! Multipart uploads as pure rules: how an object is cut into parts, which part numbers a client
//! may ask for, and whether the part list of a completion matches what S3 holds. S3's limits:
//! parts 1..=10,000, every part 5 MiB..=5 GiB except the last, objects up to 5 TiB.

use chrono::{DateTime, Utc};

use super::ids::UploadId;

pub const MIB: u64 = 1024 * 1024;
pub const MIN_PART_SIZE: u64 = 5 * MIB;
pub const MAX_PART_SIZE: u64 = 5 * 1024 * MIB;
pub const MAX_PARTS: u32 = 10_000;
pub const MAX_OBJECT_SIZE: u64 = 5 * 1024 * 1024 * MIB;
/// Most part URLs one request may ask for.
pub const MAX_PARTS_PER_REQUEST: usize = 1_000;

/// How an object of `total` bytes is cut: every part `part_size` long but the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartPlan {
    pub total: u64,
    pub part_size: u64,
    pub part_count: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanError {
    Empty,
    TooLarge,
}

impl PartPlan {
    /// The plan for `total` bytes: `preferred` part size, raised as needed to stay within
    /// 10,000 parts, kept within S3's part limits and rounded up to whole MiB.
    pub fn new(total: u64, preferred: u64) -> Result<Self, PlanError> {
        if total == 0 {
            return Err(PlanError::Empty);
        }
        if total > MAX_OBJECT_SIZE {
            return Err(PlanError::TooLarge);
        }
        let needed = total.div_ceil(u64::from(MAX_PARTS));
        let size = preferred
            .max(needed)
            .clamp(MIN_PART_SIZE, MAX_PART_SIZE)
            .div_ceil(MIB)
            * MIB;
        let size = size.min(MAX_PART_SIZE);
        let count = u32::try_from(total.div_ceil(size)).map_err(|_| PlanError::TooLarge)?;
        if count > MAX_PARTS {
            return Err(PlanError::TooLarge);
        }
        Ok(Self {
            total,
            part_size: size,
            part_count: count,
        })
    }

    /// The exact length of part `n`, or `None` when `n` is not a part of this plan.
    pub fn size_of(&self, n: u32) -> Option<u64> {
        if n == 0 || n > self.part_count {
            return None;
        }
        if n < self.part_count {
            Some(self.part_size)
        } else {
            Some(self.total - u64::from(self.part_count - 1) * self.part_size)
        }
    }

    /// The byte range `[first, last]` of part `n`.
    pub fn range_of(&self, n: u32) -> Option<(u64, u64)> {
        let len = self.size_of(n)?;
        let first = u64::from(n - 1) * self.part_size;
        Some((first, first + len - 1))
    }

    /// Checks the part numbers of a URL request: 1..=10,000 and within this plan, no
    /// duplicates, at least one and at most [`MAX_PARTS_PER_REQUEST`].
    pub fn accept_part_numbers(&self, numbers: &[i64]) -> Result<Vec<u32>, PartNumberError> {
        if numbers.is_empty() || numbers.len() > MAX_PARTS_PER_REQUEST {
            return Err(PartNumberError::Count);
        }
        let mut out = Vec::with_capacity(numbers.len());
        for &n in numbers {
            let n = u32::try_from(n)
                .ok()
                .filter(|n| (1..=MAX_PARTS).contains(n) && *n <= self.part_count)
                .ok_or(PartNumberError::OutOfRange(n))?;
            if out.contains(&n) {
                return Err(PartNumberError::Duplicate(n));
            }
            out.push(n);
        }
        Ok(out)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartNumberError {
    Count,
    OutOfRange(i64),
    Duplicate(u32),
}

/// Where a multipart session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    Open,
    Completed,
    Aborted,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Completed => "completed",
            Self::Aborted => "aborted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "open" => Self::Open,
            "completed" => Self::Completed,
            "aborted" => Self::Aborted,
            _ => return None,
        })
    }
}

/// The multipart side of an upload: S3's upload id, the plan, and the session's own expiry,
/// which comes before the bucket's abort-incomplete rule could remove the parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipartSession {
    pub upload_id: UploadId,
    pub s3_upload_id: String,
    pub plan: PartPlan,
    pub state: SessionState,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// One part S3 holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartRecord {
    pub part_number: u32,
    /// With its quotes, as S3 returns it.
    pub etag: String,
    pub size: u64,
    pub checksum: Option<String>,
}

/// One entry of a client's completion list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPart {
    pub part_number: i64,
    pub etag: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionError {
    /// Empty, not in ascending order, a number outside the plan, or parts missing.
    Invalid(String),
    NotUploaded(u32),
    EtagMismatch(u32),
    /// S3 holds a part of another length than the plan's (only possible when written around
    /// the presigned URLs).
    PartSize {
        part: u32,
        expected: u64,
        actual: u64,
    },
    TooLarge {
        total: u64,
        max: u64,
    },
}

/// An ETag without its double quotes (stores and the SDK give it either way).
pub fn bare(etag: &str) -> &str {
    etag.trim().trim_matches('"')
}

/// Checks a completion list against the parts S3 holds: every part of the plan, in ascending
/// order, each with S3's ETag and the plan's length, and the total within `max_size`.
/// Returns the parts to complete with, as S3 holds them.
pub fn check_completion(
    plan: &PartPlan,
    max_size: u64,
    client: &[ClientPart],
    held: &[PartRecord],
) -> Result<Vec<PartRecord>, CompletionError> {
    if client.is_empty() {
        return Err(CompletionError::Invalid("parts is empty".into()));
    }
    if client
        .windows(2)
        .any(|w| w[0].part_number >= w[1].part_number)
    {
        return Err(CompletionError::Invalid(
            "parts must be in ascending part_number order, each once".into(),
        ));
    }
    if let Some(p) = client.iter().find(|p| {
        u32::try_from(p.part_number)
            .ok()
            .and_then(|n| plan.size_of(n))
            .is_none()
    }) {
        return Err(CompletionError::Invalid(format!(
            "part_number {} is not a part of this upload (1..={})",
            p.part_number, plan.part_count
        )));
    }
    if client.len() != plan.part_count as usize {
        return Err(CompletionError::Invalid(format!(
            "this upload has {} parts; the list names {}",
            plan.part_count,
            client.len()
        )));
    }
    let mut out = Vec::with_capacity(client.len());
    let mut total: u64 = 0;
    for p in client {
        let n = u32::try_from(p.part_number).unwrap_or(0);
        let Some(h) = held.iter().find(|h| h.part_number == n) else {
            return Err(CompletionError::NotUploaded(n));
        };
        if bare(&h.etag) != bare(&p.etag) {
            return Err(CompletionError::EtagMismatch(n));
        }
        total = total.saturating_add(h.size);
        out.push(h.clone());
    }
    if total > max_size {
        return Err(CompletionError::TooLarge {
            total,
            max: max_size,
        });
    }
    for h in &out {
        let expected = plan.size_of(h.part_number).unwrap_or(0);
        if h.size != expected {
            return Err(CompletionError::PartSize {
                part: h.part_number,
                expected,
                actual: h.size,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_respect_s3_limits() {
        let p = PartPlan::new(12 * MIB, 5 * MIB).expect("plan");
        assert_eq!((p.part_size, p.part_count), (5 * MIB, 3));
        assert_eq!(p.size_of(3), Some(2 * MIB));
        assert_eq!(p.range_of(2), Some((5 * MIB, 10 * MIB - 1)));
        assert_eq!(p.range_of(3), Some((10 * MIB, 12 * MIB - 1)));
        assert_eq!(p.size_of(0), None);
        assert_eq!(p.size_of(4), None);

        // A preferred size under S3's minimum is raised to it.
        assert_eq!(
            PartPlan::new(MIB, MIB).expect("plan").part_size,
            MIN_PART_SIZE
        );
        // A huge object raises the part size to stay within 10,000 parts.
        let big = PartPlan::new(MAX_OBJECT_SIZE, 8 * MIB).expect("plan");
        assert!(big.part_count <= MAX_PARTS && big.part_size <= MAX_PART_SIZE);
        assert_eq!(big.part_size % MIB, 0);
        assert!(u64::from(big.part_count) * big.part_size >= big.total);
        assert_eq!(PartPlan::new(0, MIB), Err(PlanError::Empty));
        assert_eq!(
            PartPlan::new(MAX_OBJECT_SIZE + 1, MIB),
            Err(PlanError::TooLarge)
        );
    }

    #[test]
    fn every_plan_covers_its_total_exactly() {
        for total in [
            1,
            5 * MIB,
            5 * MIB + 1,
            12 * MIB,
            100 * MIB + 7,
            48_828 * MIB + 3,
        ] {
            let p = PartPlan::new(total, 5 * MIB).expect("plan");
            let sum: u64 = (1..=p.part_count).filter_map(|n| p.size_of(n)).sum();
            assert_eq!(sum, total, "{total}");
            for n in 1..p.part_count {
                assert!(p.size_of(n).unwrap_or(0) >= MIN_PART_SIZE);
            }
        }
    }

    #[test]
    fn part_numbers_are_checked() {
        let p = PartPlan::new(12 * MIB, 5 * MIB).expect("plan");
        assert_eq!(p.accept_part_numbers(&[3, 1]), Ok(vec![3, 1]));
        assert_eq!(
            p.accept_part_numbers(&[0]),
            Err(PartNumberError::OutOfRange(0))
        );
        assert_eq!(
            p.accept_part_numbers(&[4]),
            Err(PartNumberError::OutOfRange(4))
        );
        assert_eq!(
            p.accept_part_numbers(&[10_001]),
            Err(PartNumberError::OutOfRange(10_001))
        );
        assert_eq!(
            p.accept_part_numbers(&[-1]),
            Err(PartNumberError::OutOfRange(-1))
        );
        assert_eq!(
            p.accept_part_numbers(&[2, 2]),
            Err(PartNumberError::Duplicate(2))
        );
        assert_eq!(p.accept_part_numbers(&[]), Err(PartNumberError::Count));
    }

    fn held(n: u32, size: u64) -> PartRecord {
        PartRecord {
            part_number: n,
            etag: format!("\"etag-{n}\""),
            size,
            checksum: None,
        }
    }

    fn client(n: i64) -> ClientPart {
        ClientPart {
            part_number: n,
            etag: format!("etag-{n}"),
        }
    }

    #[test]
    fn a_completion_list_must_match_what_s3_holds() {
        let p = PartPlan::new(12 * MIB, 5 * MIB).expect("plan");
        let s3 = vec![held(1, 5 * MIB), held(2, 5 * MIB), held(3, 2 * MIB)];
        let list = vec![client(1), client(2), client(3)];
        assert_eq!(check_completion(&p, 20 * MIB, &list, &s3), Ok(s3.clone()));

        let mut wrong = list.clone();
        wrong[1].etag = "nope".into();
        assert_eq!(
            check_completion(&p, 20 * MIB, &wrong, &s3),
            Err(CompletionError::EtagMismatch(2))
        );
        assert_eq!(
            check_completion(&p, 20 * MIB, &list, &s3[..2]),
            Err(CompletionError::NotUploaded(3))
        );
        for bad in [
            vec![],
            vec![client(2), client(1), client(3)],
            vec![client(1), client(1), client(3)],
            vec![client(1), client(2)],
            vec![client(1), client(2), client(4)],
            vec![client(0), client(1), client(2)],
        ] {
            assert!(
                matches!(
                    check_completion(&p, 20 * MIB, &bad, &s3),
                    Err(CompletionError::Invalid(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn parts_written_around_the_urls_are_caught() {
        let p = PartPlan::new(12 * MIB, 5 * MIB).expect("plan");
        let list = vec![client(1), client(2), client(3)];
        let oversized = vec![held(1, 5 * MIB), held(2, 5 * MIB), held(3, 11 * MIB)];
        assert_eq!(
            check_completion(&p, 20 * MIB, &list, &oversized),
            Err(CompletionError::TooLarge {
                total: 21 * MIB,
                max: 20 * MIB
            })
        );
        assert_eq!(
            check_completion(&p, 30 * MIB, &list, &oversized),
            Err(CompletionError::PartSize {
                part: 3,
                expected: 2 * MIB,
                actual: 11 * MIB
            })
        );
    }

    #[test]
    fn session_states_round_trip() {
        for s in [
            SessionState::Open,
            SessionState::Completed,
            SessionState::Aborted,
        ] {
            assert_eq!(SessionState::parse(s.as_str()), Some(s));
        }
        assert_eq!(SessionState::parse("OPEN"), None);
    }
}
