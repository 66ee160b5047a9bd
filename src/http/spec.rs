//! `GET /openapi.yaml`: the API description this server implements, compiled in.

use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use crate::state::AppState;

const SPEC: &str = include_str!("../../openapi.yaml");

pub fn router() -> Router<AppState> {
    Router::new().route("/openapi.yaml", get(spec))
}

async fn spec() -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/yaml; charset=utf-8")], SPEC)
}
