//! `/v1/files`: commit, read the handle, download (redirect or URL), links, restore, copies,
//! renditions (one file's, or many files' for one variant).

mod commit;
mod copies;
mod links;
mod read;
mod variants;
mod variants_batch;

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
        .route(
            "/v1/files/variants/{name}",
            post(variants_batch::variant_urls),
        )
}
