//! Splitting the bucket's key space for parallel listing, pure. A range is `(after, through]`
//! in S3's byte order: every key lies in exactly one of a sequence of adjacent ranges, whatever
//! the boundaries are, so the boundaries only decide how well the work spreads, never what is
//! listed.
//!
//! Boundaries are learnt from the keys themselves: a listed page of a range that did not reach
//! the range's end shows the keys' density there (its first and last key), and the rest of the
//! range is cut where pages of the same density would end. Keys cluster — upload ids are UUID v7,
//! time-ordered, so a day's keys share a long prefix — and cutting the alphabet in halves would
//! need dozens of rounds to reach a cluster; extrapolating from the page reaches it at once.

/// Keys `k` with `after < k <= through`; `None` is unbounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    pub after: Option<String>,
    pub through: Option<String>,
}

impl KeyRange {
    /// The whole key space, or what follows a checkpoint.
    pub fn from(after: Option<String>) -> Self {
        Self {
            after,
            through: None,
        }
    }

    /// Whether `key` is not past the range's end (keys are listed after `after` already).
    pub fn reaches(&self, key: &str) -> bool {
        self.through
            .as_deref()
            .map_or(true, |t| key.as_bytes() <= t.as_bytes())
    }
}

/// Characters after the common prefix that a boundary is computed over.
const DIGITS: usize = 8;
/// Printable ASCII, `' '..='~'`: boundaries are made of these (valid keys, valid UTF-8).
const BASE: u64 = 95;

fn digit(b: Option<&u8>) -> u64 {
    match b {
        None => 0,
        Some(&b) if b < b' ' => 0,
        Some(&b) if b > b'~' => BASE - 1,
        Some(&b) => u64::from(b - b' '),
    }
}

fn value(rest: &[u8]) -> u64 {
    (0..DIGITS).fold(0, |v, i| v * BASE + digit(rest.get(i)))
}

fn text(mut v: u64) -> String {
    let mut out = vec![b' '; DIGITS];
    for slot in out.iter_mut().rev() {
        // v % BASE < 95, so the byte is printable ASCII.
        *slot = b' ' + u8::try_from(v % BASE).unwrap_or(0);
        v /= BASE;
    }
    // Trailing spaces are the smallest digit: dropping them keeps the order and the value.
    while out.last() == Some(&b' ') {
        out.pop();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Splits what is left of `range` after a full page whose keys ran from `first` to `last`
/// (`last` is inside the range): `pieces` ranges of about one page each at the page's density,
/// then the rest up to the range's end. Always returns adjacent ranges covering exactly
/// `(last, through]`; a boundary that would not be strictly increasing is left out.
pub fn split_rest(range: &KeyRange, first: &str, last: &str, pieces: usize) -> Vec<KeyRange> {
    let (f, l) = (first.as_bytes(), last.as_bytes());
    let mut cp = f.iter().zip(l).take_while(|(a, b)| a == b).count();
    // Two characters may share their first bytes (`é`, `è`): cut before the character.
    while !last.is_char_boundary(cp) {
        cp -= 1;
    }
    let prefix = &last[..cp];
    let (vf, vl) = (value(&f[cp..]), value(&l[cp..]));
    let step = vl.saturating_sub(vf);
    let mut bounds: Vec<String> = Vec::new();
    if step > 0 {
        for j in 1..=u64::try_from(pieces).unwrap_or(0) {
            let Some(v) = step.checked_mul(j).and_then(|d| vl.checked_add(d)) else {
                break;
            };
            if v >= BASE.pow(u32::try_from(DIGITS).unwrap_or(8)) {
                break;
            }
            let b = format!("{prefix}{}", text(v));
            let above = bounds.last().map_or(last, String::as_str);
            if b.as_bytes() <= above.as_bytes() {
                continue;
            }
            if !range.reaches(&b) || range.through.as_deref() == Some(b.as_str()) {
                break;
            }
            bounds.push(b);
        }
    }
    let mut out = Vec::with_capacity(bounds.len() + 1);
    let mut after = last.to_owned();
    for b in bounds {
        out.push(KeyRange {
            after: Some(after),
            through: Some(b.clone()),
        });
        after = b;
    }
    out.push(KeyRange {
        after: Some(after),
        through: range.through.clone(),
    });
    out
}

#[cfg(test)]
mod tests {

    impl KeyRange {
        /// Whether `key` falls in this range (after `after`, up to `through`).
        fn contains(&self, key: &str) -> bool {
            self.after
                .as_deref()
                .map_or(true, |a| key.as_bytes() > a.as_bytes())
                && self.reaches(key)
        }
    }
    use super::*;

    fn r(after: Option<&str>, through: Option<&str>) -> KeyRange {
        KeyRange {
            after: after.map(str::to_owned),
            through: through.map(str::to_owned),
        }
    }

    /// The pieces are adjacent, increasing, and cover exactly `(last, through]`.
    fn assert_covers(range: &KeyRange, last: &str, pieces: &[KeyRange]) {
        assert_eq!(pieces[0].after.as_deref(), Some(last));
        assert_eq!(
            pieces.last().map(|p| p.through.clone()),
            Some(range.through.clone())
        );
        for w in pieces.windows(2) {
            assert_eq!(w[0].through, w[1].after);
        }
        for p in pieces {
            if let (Some(a), Some(t)) = (&p.after, &p.through) {
                assert!(a.as_bytes() < t.as_bytes(), "{pieces:?}");
            }
        }
    }

    #[test]
    fn a_boundary_key_belongs_to_the_range_it_ends() {
        let low = r(Some("media/a"), Some("media/m"));
        let high = r(Some("media/m"), None);
        for key in ["media/m", "media/l~", "media/b"] {
            assert!(low.contains(key) && !high.contains(key), "{key}");
        }
        for key in ["media/m ", "media/m0", "media/n", "tmp/x"] {
            assert!(!low.contains(key) && high.contains(key), "{key}");
        }
        assert!(!low.contains("media/a"), "after is exclusive");
    }

    #[test]
    fn clustered_uuid_v7_keys_are_cut_at_their_own_density() {
        let range = r(None, None);
        let first = "media/images/019ad3f20000aaaa/x.png";
        let last = "media/images/019ad3f20400bbbb/x.png";
        let pieces = split_rest(&range, first, last, 8);
        assert_eq!(pieces.len(), 9, "{pieces:?}");
        assert_covers(&range, last, &pieces);
        // Every cut stays inside the cluster: same day, same prefix.
        for p in &pieces[..8] {
            let t = p.through.as_deref().expect("bounded");
            assert!(t.starts_with("media/images/019ad3f2"), "{t}");
        }
    }

    #[test]
    fn cuts_stop_at_the_ranges_end_and_never_repeat_it() {
        let range = r(Some("a"), Some("b"));
        let pieces = split_rest(&range, "a0", "a4", 100);
        assert_covers(&range, "a4", &pieces);
        assert!(pieces.len() < 100, "stopped at b: {pieces:?}");
        for p in &pieces[..pieces.len() - 1] {
            assert!(range.contains(p.through.as_deref().expect("bounded")));
        }
    }

    #[test]
    fn keys_outside_printable_ascii_still_split_into_a_cover() {
        let range = r(None, None);
        for (first, last) in [
            ("é1", "é9"),
            ("è", "é"),
            ("a\u{1}", "a\u{2}"),
            ("~~", "~~~"),
            ("k", "k"),
        ] {
            let pieces = split_rest(&range, first, last, 4);
            assert_covers(&range, last, &pieces);
        }
    }

    #[test]
    fn boundaries_are_printable_ascii() {
        let pieces = split_rest(&r(None, None), "p/0001", "p/0009", 5);
        for p in &pieces[..pieces.len() - 1] {
            let t = p.through.as_deref().expect("bounded");
            assert!(t.bytes().all(|b| (b' '..=b'~').contains(&b)), "{t:?}");
        }
    }
}
