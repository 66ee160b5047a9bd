//! `/v1/files`: commit, read the handle, download (redirect or URL), links, restore, copies.

mod commit;
mod copies;
mod links;
mod read;
mod variants;

use axum::routing::{get, post, put};
use axum::Router;

use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/files", post(commit::commit))
        .route("/v1/files/{id}", get(read::handle))
        .route("/v1/files/{id}/content", get(read::content))
        .route("/v1/files/{id}/download-url", get(read::download_url))
        .route(
            "/v1/files/{id}/links/{object_type}/{object_id}",
            put(links::put_link).delete(links::delete_link),
        )
        .route("/v1/files/{id}/restore", post(links::restore))
        .route("/v1/files/{id}/copies", post(copies::copy))
        .route("/v1/files/{id}/variants/{name}", get(variants::variant_url))
}
