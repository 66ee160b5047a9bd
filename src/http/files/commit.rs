//! `POST /v1/files`: commit an upload. 201 the first time, 200 with the same handle after.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use validator::Validate;

use crate::auth::Identity;
use crate::domain::records::FileHandle;
use crate::error::AppError;
use crate::http::extract::ApiJson;
use crate::services::commit::{self, CommitCommand, CommitOutcome};
use crate::state::AppState;

#[derive(Debug, Deserialize, Validate)]
pub(super) struct CommitBody {
    #[validate(length(min = 1, max = 2048))]
    key: String,
    #[validate(length(max = 4096))]
    final_key: Option<String>,
}

pub(super) async fn commit(
    State(state): State<AppState>,
    who: Identity,
    ApiJson(body): ApiJson<CommitBody>,
) -> Result<(StatusCode, Json<FileHandle>), AppError> {
    let cmd = CommitCommand {
        key: body.key,
        final_key: body.final_key,
    };
    Ok(match commit::commit(&state, &who, cmd).await? {
        CommitOutcome::Created(h) => {
            state.metrics.committed(u64::try_from(h.size).unwrap_or(0));
            crate::services::renditions::render_eagerly(&state, &h);
            (StatusCode::CREATED, Json(h))
        }
        CommitOutcome::Existing(h) => (StatusCode::OK, Json(h)),
    })
}
