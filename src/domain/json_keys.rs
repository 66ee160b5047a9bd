//! Whether a JSON document repeats a key in one of its objects. RFC 8259 §4 leaves what such an
//! object means to the parser ("many implementations report the last name/value pair only",
//! others the first, others fail): where a decision is read from JSON someone else wrote, a
//! repeated key is an answer two parsers read two ways, never one to act on.

use std::collections::HashSet;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// `true` when some object of `json`, at any depth, holds a key twice (keys compared after
/// their escapes are decoded: `"allow"` and `"\u0061llow"` are one key). Text that is not JSON
/// is `false`: whether it parses is the caller's question.
pub fn repeats_a_key(json: &[u8]) -> bool {
    // One pass over the whole text: it must parse to the end, and it says whether it repeated.
    serde_json::from_slice::<Repeats>(json).is_ok_and(|r| r.0)
}

/// Any JSON value, and whether some object in it holds a key twice.
struct Repeats(bool);

impl<'de> Deserialize<'de> for Repeats {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RepeatsVisitor)
    }
}

struct RepeatsVisitor;

impl<'de> Visitor<'de> for RepeatsVisitor {
    type Value = Repeats;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_str<E>(self, _: &str) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_unit<E>(self) -> Result<Repeats, E> {
        Ok(Repeats(false))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Repeats, A::Error> {
        let mut repeats = false;
        while let Some(Repeats(r)) = seq.next_element::<Repeats>()? {
            repeats |= r;
        }
        Ok(Repeats(repeats))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Repeats, A::Error> {
        let mut seen = HashSet::new();
        let mut repeats = false;
        while let Some(key) = map.next_key::<String>()? {
            repeats |= !seen.insert(key);
            repeats |= map.next_value::<Repeats>()?.0;
        }
        Ok(Repeats(repeats))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_twice_in_any_object_is_found() {
        for repeated in [
            &br#"{"allow": false, "allow": true}"#[..],
            br#"{"allow": true, "allow": true}"#,
            br#"{"allow": true, "\u0061llow": false}"#,
            br#"{"a": 1, "b": {"c": 1, "c": 2}}"#,
            br#"[1, {"x": null, "x": null}]"#,
            br#"{"a": [{"k": 1}, {"k": 1, "k": 2}]}"#,
        ] {
            assert!(repeats_a_key(repeated), "{repeated:?}");
        }
    }

    #[test]
    fn distinct_keys_and_text_that_is_not_json_are_not() {
        for fine in [
            &br#"{"allow": true, "reason": "x"}"#[..],
            br#"{"a": {"k": 1}, "b": {"k": 1}}"#,
            br#"[{"k": 1}, {"k": 2}]"#,
            br#"{"allow": true, "Allow": false}"#,
            br#"{"n": -1, "f": 1.5e300, "s": "\"", "z": null, "t": [true]}"#,
            br#"true"#,
            b"",
            b"{\"a\": 1, \"a\": 2",
            b"not json",
        ] {
            assert!(!repeats_a_key(fine), "{fine:?}");
        }
    }
}
