//! An image's width and height at commit (issue 37): read from its header, the validation's
//! read first and more ranged reads while the header goes on, then judged against its
//! profile's bounds.

use std::borrow::Cow;

use super::{Failure, Lease};
use crate::domain::image::{self, Dimensions, Format, Header, Parsed};
use crate::domain::records::Upload;
use crate::domain::sniff::read_len;
use crate::error::AppError;
use crate::state::AppState;
use crate::storage::ObjectHead;

/// Why a header was not read.
enum Unread {
    /// Not a readable header of the format (what is wrong).
    Invalid(&'static str),
    /// A read found another object (another ETag) or none.
    Changed,
    Store(crate::storage::StoreError),
}

/// The header of the image at `key` (`head` its HEAD, `first` its first bytes), reading more
/// of the same object (its ETag checked) while the header goes on. `Ok(None)`: not an image
/// format whose header is read.
async fn read(
    state: &AppState,
    key: &str,
    content_type: &str,
    head: &ObjectHead,
    first: &[u8],
) -> Result<Option<Header>, Unread> {
    let Some(format) = Format::of_content_type(content_type) else {
        return Ok(None);
    };
    let size = usize::try_from(head.size).unwrap_or(usize::MAX);
    let mut bytes = Cow::Borrowed(first);
    loop {
        match image::read_header(format, &bytes, bytes.len() >= size) {
            Parsed::Found(h) => return Ok(Some(h)),
            Parsed::Invalid(why) => return Err(Unread::Invalid(why)),
            Parsed::NeedMore(n) => {
                // At least twice what was read: a header of thousands of tiny segments asks
                // for a few bytes more at each one, and a read per segment made a 1 MB file
                // cost tens of thousands of GETs (review of issue 37). Doubling from 64 KiB
                // reaches the 1 MiB limit in five reads.
                let want = n
                    .max(bytes.len().saturating_mul(2))
                    .min(image::MAX_HEADER_BYTES.max(n));
                let more = state
                    .store
                    .sniff(key, u64::try_from(want).unwrap_or(u64::MAX))
                    .await
                    .map_err(Unread::Store)?;
                match more {
                    Some(s) if s.head.etag == head.etag && s.first.len() > bytes.len() => {
                        bytes = Cow::Owned(s.first)
                    }
                    _ => return Err(Unread::Changed),
                }
            }
        }
    }
}

/// The upload's image size as displayed, before it is promoted. A header that cannot be read,
/// or an image outside its profile's bounds, refuses the upload for good (422
/// `image_unreadable`, `image_too_many_pixels`, `image_dimensions_out_of_range`), as a wrong
/// type does; a read that finds another object is retryable (`object_changed`).
pub(super) async fn checked_size(
    state: &AppState,
    upload: &Upload,
    head: &ObjectHead,
    first: &[u8],
) -> Result<Option<Dimensions>, Failure> {
    let reject = |e: AppError| Failure::Reject(e, Some(Box::new(head.clone())));
    let header = match read(state, &upload.key, &upload.content_type, head, first).await {
        Ok(None) => return Ok(None),
        Ok(Some(h)) => h,
        Err(Unread::Invalid(why)) => {
            tracing::info!(why, "the image's header cannot be read");
            return Err(reject(AppError::ImageUnreadable));
        }
        Err(Unread::Changed) => return Err(Failure::Release(AppError::ObjectChanged)),
        Err(Unread::Store(e)) => return Err(Failure::Release(e.into())),
    };
    let bounds = state
        .settings
        .profile(&upload.profile)
        .map(|p| p.image_bounds)
        .unwrap_or_default();
    match bounds.check(&header) {
        Ok(()) => Ok(Some(header.displayed())),
        Err(out) => {
            tracing::info!(%out, "the image is outside its profile's bounds");
            Err(reject(AppError::ImageOutOfBounds(out)))
        }
    }
}

/// An earlier attempt's copy, recorded now that its source is gone: the size is read from the
/// final object (that attempt judged it before copying). Best effort: the copy is the upload's
/// and is recorded whatever this read finds; a header not read leaves the size unknown.
pub(super) async fn size_of_final(
    state: &AppState,
    upload: &Upload,
    fin: &ObjectHead,
    lease: &Lease,
) -> Option<Dimensions> {
    Format::of_content_type(&upload.content_type)?;
    let key = lease.final_key.as_str();
    let first = match state.store.sniff(key, read_len(&upload.content_type)).await {
        Ok(Some(s)) if s.head.etag == fin.etag => s.first,
        _ => {
            tracing::warn!("the final object's header was not read: its image size is unknown");
            return None;
        }
    };
    match read(state, key, &upload.content_type, fin, &first).await {
        Ok(h) => h.map(|h| h.displayed()),
        Err(_) => {
            tracing::warn!("the final object's header was not read: its image size is unknown");
            None
        }
    }
}
