//! `/v1/files`: commit, read the handle, download.

mod commit;
mod read;

use axum::routing::{get, post};
use axum::Router;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/files", post(commit::commit))
        .route("/v1/files/{id}", get(read::handle))
        .route("/v1/files/{id}/content", get(read::content))
}
