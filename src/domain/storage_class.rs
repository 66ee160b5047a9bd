//! Which S3 storage classes hygiene may archive into: only classes whose objects stay readable
//! at once. An object in GLACIER (Flexible Retrieval) or DEEP_ARCHIVE answers GetObject and
//! CopyObject with `InvalidObjectState` until a RestoreObject finishes hours later, so a restore
//! (which copies the object back in place) and every download of a restored file would fail.
//! upcommit refuses those classes at start rather than half-support them.

/// Classes whose objects GetObject and CopyObject read at once.
pub const INSTANTLY_READABLE: [&str; 6] = [
    "STANDARD",
    "STANDARD_IA",
    "ONEZONE_IA",
    "INTELLIGENT_TIERING",
    "GLACIER_IR",
    "REDUCED_REDUNDANCY",
];

/// Classes that need a RestoreObject (hours) before the object can be read.
pub const NEEDS_RESTORE: [&str; 2] = ["GLACIER", "DEEP_ARCHIVE"];

/// Why `class` (upper case) cannot be the archive class; `None` when it can.
pub fn refusal(class: &str) -> Option<String> {
    if INSTANTLY_READABLE.contains(&class) {
        return None;
    }
    let choices = INSTANTLY_READABLE.join(", ");
    Some(if NEEDS_RESTORE.contains(&class) {
        format!(
            "{class} is not instantly readable: its objects need a RestoreObject (hours) before \
             a restore or a download can read them, which upcommit does not do; use GLACIER_IR \
             (instant retrieval) or one of {choices}"
        )
    } else {
        format!("{class:?} is not a storage class upcommit can archive into; use one of {choices}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instantly_readable_classes_are_accepted() {
        for class in INSTANTLY_READABLE {
            assert_eq!(refusal(class), None, "{class}");
        }
    }

    #[test]
    fn classes_that_need_a_restore_are_refused_with_the_way_out() {
        for class in NEEDS_RESTORE {
            let why = refusal(class).expect("refused");
            assert!(why.contains("not instantly readable"), "{why}");
            assert!(why.contains("GLACIER_IR"), "{why}");
        }
    }

    #[test]
    fn unknown_classes_are_refused() {
        for class in ["GLACIER_DEEP", "", "COLD", "EXPRESS_ONEZONE"] {
            assert!(refusal(class).is_some(), "{class}");
        }
    }
}
