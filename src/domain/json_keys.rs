//! Whether a JSON document repeats a key in one of its objects. RFC 8259 §4 leaves what such an
//! object means to the parser ("many implementations report the last name/value pair only",
//! others the first, others fail): where a decision is read from JSON someone else wrote, a
//! repeated key is an answer two parsers read two ways, never one to act on.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// `true` when some object of `json`, at any depth, holds a key twice (keys compared after
/// their escapes are decoded: `"allow"` and `"\u0061llow"` are one key). Text that is not JSON
/// is `false`: whether it parses is the caller's question.
pub fn repeats_a_key(json: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(json).is_ok()
        && serde_json::from_slice::<Distinct>(json).is_err()
}

/// Any JSON value whose objects each hold every key once.
struct Distinct;

impl<'de> Deserialize<'de> for Distinct {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DistinctVisitor)
    }
}

struct DistinctVisitor;

impl<'de> Visitor<'de> for DistinctVisitor {
    type Value = Distinct;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value without repeated keys")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Distinct, E> {
        Ok(Distinct)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Distinct, E> {
        Ok(Distinct)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Distinct, E> {
        Ok(Distinct)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Distinct, E> {
        Ok(Distinct)
    }

    fn visit_str<E>(self, _: &str) -> Result<Distinct, E> {
        Ok(Distinct)
    }

    fn visit_unit<E>(self) -> Result<Distinct, E> {
        Ok(Distinct)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Distinct, A::Error> {
        while seq.next_element::<Distinct>()?.is_some() {}
        Ok(Distinct)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Distinct, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key) {
                return Err(de::Error::custom("a key is repeated"));
            }
            map.next_value::<Distinct>()?;
        }
        Ok(Distinct)
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
