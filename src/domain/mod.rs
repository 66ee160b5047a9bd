//! Pure domain rules: keys, pairing, profiles, content types, quotas. No I/O lives here, so every
//! rule can be tested exhaustively next to its code.

pub mod bucket_check;
pub mod capabilities;
pub mod checksum;
pub mod content;
pub mod duration;
pub mod encoded_keys;
pub mod events;
pub mod filename;
pub mod ids;
pub mod image;
pub mod jobs;
pub mod json_keys;
pub mod key_ranges;
pub mod keys;
pub mod legacy;
pub mod lifecycle;
pub mod multipart;
pub mod paging;
pub mod prefixes;
pub mod profile;
pub mod queue;
pub mod quota;
pub mod rate;
pub mod reconcile;
pub mod records;
pub mod reserved;
pub mod sniff;
pub mod storage_class;
pub mod sweep;
pub mod temporary;
pub mod validation_hook;
pub mod variants;
pub mod webhooks;
