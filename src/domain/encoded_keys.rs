//! Object keys as S3 writes them URL-encoded, and back. S3 encodes them the HTML-form way
//! (`application/x-www-form-urlencoded`): a space becomes `+` — or `%20` — and a literal `+`
//! becomes `%2B`, so a `+` in the encoded text always stands for a space.
//!
//! Where S3 does so, in AWS's words:
//! - ListObjectsV2 / ListObjectVersions with `encoding-type=url` (`storage::listing`): "returns
//!   encoded key name values in the following response elements: Delimiter, Prefix, Key, and
//!   StartAfter" (API reference, ListObjectsV2 `EncodingType`).
//! - S3 Inventory CSV files (`services::inventory`): "Key name – The object key name (or key)
//!   that uniquely identifies the object in the bucket. When you're using the CSV file format,
//!   the key name is URL-encoded and must be decoded before you can use it." (User Guide,
//!   "Amazon S3 Inventory list"). The page does not say how a space is spelled; in practice it
//!   is `+` (cloud-custodian's inventory reader, issue #1997 "The S3 object key value supplied
//!   in S3 Inventory is URL-encoded with space encoded as plus", fixed by decoding every key
//!   with Python's `unquote_plus`, PR #1998). `%20` is decoded to a space as well, so either
//!   spelling gives the same key.
//! - The same encoder, with its example, in the event notification docs: "The s3 key provides
//!   information about the bucket and object involved in the event. The object key name value
//!   is URL encoded. For example, "red flower.jpg" becomes "red+flower.jpg" (Amazon S3 returns
//!   "application/x-www-form-urlencoded" as the content type in the response)."
//!
//! Only text S3 encoded this way is decoded here: a `+` anywhere else (a key as a client wrote
//! it, a manifest's file key) is a `+`.

/// The key `raw` stands for, or `None` when its bytes, once decoded, are not UTF-8.
pub fn decode_form(raw: &str) -> Option<String> {
    let spaced = raw.replace('+', "%20");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8()
        .ok()
        .map(|k| k.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plus_is_a_space_and_a_literal_plus_is_percent_encoded() {
        assert_eq!(decode_form("a+b.png").as_deref(), Some("a b.png"));
        assert_eq!(decode_form("a%20b.png").as_deref(), Some("a b.png"));
        assert_eq!(decode_form("a%2Bb.png").as_deref(), Some("a+b.png"));
        assert_eq!(decode_form("a%2bb.png").as_deref(), Some("a+b.png"));
        assert_eq!(decode_form("%2B+%2B").as_deref(), Some("+ +"));
        assert_eq!(
            decode_form("exports/100%25+done%21.csv").as_deref(),
            Some("exports/100% done!.csv")
        );
        assert_eq!(decode_form("%C3%A9.png").as_deref(), Some("é.png"));
        assert_eq!(decode_form("%1B%5B2J%0A").as_deref(), Some("\u{1b}[2J\n"));
        assert_eq!(
            decode_form("plain/key.png").as_deref(),
            Some("plain/key.png")
        );
    }

    #[test]
    fn bytes_that_are_not_utf8_once_decoded_are_refused() {
        assert_eq!(decode_form("%FF.png"), None);
        assert_eq!(decode_form("%C3"), None);
    }
}
