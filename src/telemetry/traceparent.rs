//! The W3C Trace Context `traceparent` shape. The propagator parses the ids leniently (a
//! 30-digit trace id is taken, zero-padded, as another trace's); this is the exact shape the
//! recommendation requires before anything is parsed.

const LEN: usize = 55; // "00-" + 32 + "-" + 16 + "-" + 2

/// `version-traceid-parentid-flags` in lowercase hex with exactly those lengths; version `ff`
/// is forbidden, version `00` has nothing after the flags, and a later version may only add
/// `-`-prefixed fields.
pub fn well_formed(value: &str) -> bool {
    let b = value.as_bytes();
    if b.len() < LEN {
        return false;
    }
    let hex = |s: &[u8]| s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let shape = hex(&b[0..2])
        && &b[0..2] != b"ff"
        && b[2] == b'-'
        && hex(&b[3..35])
        && b[35] == b'-'
        && hex(&b[36..52])
        && b[52] == b'-'
        && hex(&b[53..55]);
    let tail = if &b[0..2] == b"00" {
        b.len() == LEN
    } else {
        b.len() == LEN || b[LEN] == b'-'
    };
    shape && tail
}

#[cfg(test)]
mod tests {
    use super::well_formed;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    #[test]
    fn the_recommendations_example_is_well_formed() {
        assert!(well_formed(&format!("00-{TRACE}-{SPAN}-01")));
        assert!(well_formed(&format!("00-{TRACE}-{SPAN}-00")));
        // A later version may carry more fields after the flags.
        assert!(well_formed(&format!("01-{TRACE}-{SPAN}-01")));
        assert!(well_formed(&format!(
            "01-{TRACE}-{SPAN}-01-what-comes-next"
        )));
    }

    #[test]
    fn every_other_shape_is_refused() {
        for bad in [
            String::new(),
            "not a traceparent".to_owned(),
            format!("ff-{TRACE}-{SPAN}-01"),
            format!("00-{TRACE}-{SPAN}-01-extra"),
            format!("01-{TRACE}-{SPAN}-01extra"),
            format!("00-{}-{SPAN}-01", &TRACE[..30]),
            format!("00-{TRACE}0-{SPAN}-01"),
            format!("00-{TRACE}-{}-01", &SPAN[..15]),
            format!("00-{}-{SPAN}-01", TRACE.to_uppercase()),
            format!("00-{TRACE}-{}-01", SPAN.to_uppercase()),
            format!("00-{TRACE}-{SPAN}-0g"),
            format!("00-{TRACE}-{SPAN}-1"),
            format!("0-{TRACE}-{SPAN}-01-"),
            format!("00_{TRACE}_{SPAN}_01"),
            format!("00-{}-{SPAN}-01", "zz".repeat(16)),
            format!(" 00-{TRACE}-{SPAN}-01"),
        ] {
            assert!(!well_formed(&bad), "{bad:?}");
        }
    }
}
