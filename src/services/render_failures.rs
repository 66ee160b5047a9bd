//! What a failed render says of its file (issue 46): a worker's death or a render killed at
//! the time limit recorded per (file, variant) and per bytes, forgotten after a render that
//! succeeds; and why a refused one is refused, for its 422. Whether a record refuses the next
//! request is the domain's rule (`domain::variants::refusal`).

use crate::domain::records::FileHandle;
use crate::domain::variants::{refusal, Variant};
use crate::state::AppState;

/// Records what a render's failure says of the file (`cause`: a worker's death, a time-out),
/// or forgets earlier failures after a render that succeeded (`rendered`) when there were some
/// (`had_failed`).
pub(crate) async fn settle(
    state: &AppState,
    file: &FileHandle,
    variant: &Variant,
    had_failed: bool,
    rendered: bool,
    cause: Option<&'static str>,
) {
    match (rendered, cause) {
        (true, _) if had_failed => {
            if let Err(e) = state
                .catalog
                .clear_render_failures(file.id.as_str(), &content_of(file), Some(&variant.name))
                .await
            {
                tracing::warn!(error = %e, "a rendered variant's past failures stay recorded");
            }
        }
        (false, Some(cause)) => {
            tracing::warn!(file.id = %file.id, variant = %variant.name, cause, "a render failed in its worker");
            if let Err(e) = state
                .catalog
                .record_render_failure(
                    file.id.as_str(),
                    &content_of(file),
                    &variant.name,
                    cause,
                    chrono::Utc::now(),
                )
                .await
            {
                tracing::error!(error = %e, "a failed render could not be recorded");
            }
        }
        _ => {}
    }
}

/// A file's bytes as the store names them (`ETag:size`): a failure recorded for one file
/// refuses every file of the same bytes (an attacker's re-uploads of a file that killed a
/// worker kill no more workers).
pub fn content_of(file: &FileHandle) -> String {
    let etag = file.etag.trim_matches('"');
    if etag.is_empty() {
        String::new()
    } else {
        format!("{etag}:{}", file.size)
    }
}

/// Why a variant is refused without a render, for its 422.
pub(crate) fn refused_because(f: &crate::catalog::RenderFailure) -> String {
    if f.cause == refusal::TIMED_OUT {
        format!(
            "its last {} renders ran past the time limit; refused until an operator clears it (DELETE /v1/admin/files/{{id}}/render-failures)",
            f.count
        )
    } else {
        format!(
            "an earlier render of these bytes ended its worker ({}); refused until an operator clears it (DELETE /v1/admin/files/{{id}}/render-failures)",
            f.cause
        )
    }
}
