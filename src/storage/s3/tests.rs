use super::{content_range_total, quoted_etag};

#[test]
fn copy_result_etags_are_quoted_as_head_gives_them() {
    assert_eq!(quoted_etag("abc"), "\"abc\"");
    assert_eq!(quoted_etag("\"abc\""), "\"abc\"");
    assert_eq!(quoted_etag("\"abc-2\""), "\"abc-2\"");
    assert_eq!(quoted_etag(""), "");
}

#[test]
fn the_total_size_is_read_from_content_range() {
    assert_eq!(content_range_total("bytes 0-63/5008"), Some(5008));
    assert_eq!(content_range_total("bytes 0-0/1"), Some(1));
    assert_eq!(content_range_total("bytes 0-63/*"), None);
    assert_eq!(content_range_total("items 0-63/5008"), None);
    assert_eq!(content_range_total("bytes 0-63/-5"), None);
    assert_eq!(content_range_total(""), None);
}
