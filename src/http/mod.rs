//! The HTTP layer: routes (one module per resource), extractors, the error envelope, and the
//! one function that builds the middleware stack.

mod admin;
mod console;
mod demo;
mod error;
mod events;
pub mod extract;
mod files;
mod health;
mod link_scans;
mod metrics;
mod multipart;
mod serve;
mod spec;
mod uploads;
mod webhooks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{header, HeaderName, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::{DefaultOnFailure, DefaultOnResponse, TraceLayer};
use tracing::Level;

use crate::config::HttpSettings;
use crate::error::AppError;
use crate::metrics::{Flow, Metrics};
use crate::state::AppState;
use error::ErrorCode;
pub use serve::{bind, serve};

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The whole application router with its middleware.
pub fn router(state: AppState) -> Router {
    let http = state.settings.http.clone();
    let metrics = state.metrics.clone();
    let cors = cors_layer(&state.settings.s3.cors_origins);
    let app = Router::new()
        .merge(uploads::router())
        .merge(multipart::router())
        .merge(files::router())
        .merge(health::router())
        .merge(admin::router())
        .merge(events::router())
        .merge(webhooks::router())
        .merge(link_scans::router())
        .merge(metrics::router())
        .merge(spec::router())
        .merge(demo::router(&state.settings))
        .merge(console::router(&state.settings))
        .fallback(|| async { AppError::RouteNotFound })
        .method_not_allowed_fallback(|| async { AppError::MethodNotAllowed })
        .with_state(state);
    with_middleware(app, &http, metrics, cors)
}

fn with_middleware(
    app: Router,
    http: &HttpSettings,
    metrics: Arc<Metrics>,
    cors: Option<CorsLayer>,
) -> Router {
    let timeout = Duration::from_secs(http.request_timeout_secs);
    app.layer(
        ServiceBuilder::new()
            .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
            .layer(
                TraceLayer::new_for_http()
                    .make_span_with(request_span)
                    .on_response(OnResponse(DefaultOnResponse::new().level(Level::INFO)))
                    // A 5xx is a warning here: a 500 is logged at ERROR once, with its detail,
                    // where the error envelope is made; a 503 (render_busy, render_timeout, a
                    // database away) is the service shedding load as documented.
                    .on_failure(DefaultOnFailure::new().level(Level::WARN)),
            )
            .layer(PropagateRequestIdLayer::new(REQUEST_ID))
            // Outside everything that answers, so errors, fallbacks and preflights carry it too.
            .layer(SetResponseHeaderLayer::overriding(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ))
            // Preflights are answered here, before routing (which would say 405) and before the
            // metrics (a preflight is not an API call).
            .option_layer(cors.map(|layer| {
                let layer = Arc::new(layer);
                middleware::from_fn(move |req: Request, next: Next| {
                    cors_for_browsers(layer.clone(), req, next)
                })
            }))
            .layer(middleware::from_fn(move |req: Request, next: Next| {
                record_request(metrics.clone(), req, next)
            }))
            .layer(CatchPanicLayer::custom(|_| {
                AppError::Internal("handler panicked".into()).into_response()
            }))
            .layer(middleware::from_fn(move |req: Request, next: Next| {
                enforce_timeout(timeout, req, next)
            }))
            .layer(DefaultBodyLimit::max(http.body_limit_bytes)),
    )
}

/// CORS for the browser origins of `UPCOMMIT_CORS_ORIGINS`, or none when the list is empty (an
/// `OPTIONS` then answers 405 as before). Never with credentials: the API takes a bearer token
/// in `Authorization`, which a page sends explicitly and which `*` in `allow-headers` would not
/// cover, so the header is listed by name; no cookie is ever involved, so `*` as an origin lets
/// any page call the API with a token it already holds and nothing more.
fn cors_layer(origins: &[String]) -> Option<CorsLayer> {
    if origins.is_empty() {
        return None;
    }
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        // An origin is scheme://host[:port], never with a path: a trailing slash would match
        // no browser's `Origin` header.
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o.trim_end_matches('/')).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(allow_origin)
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            // A page's OpenTelemetry fetch instrumentation sends the W3C trace headers: a
            // preflight that did not allow them would block the call itself.
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                REQUEST_ID,
                TRACEPARENT,
                TRACESTATE,
            ])
            .expose_headers([REQUEST_ID, header::RETRY_AFTER, header::LOCATION])
            .max_age(Duration::from_secs(600)),
    )
}

/// tower-http's CORS answers every `OPTIONS` itself; only a browser's preflight (with `Origin`
/// and `Access-Control-Request-Method`) is one, so any other `OPTIONS` is routed (405) as
/// before.
async fn cors_for_browsers(layer: Arc<CorsLayer>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let preflight = headers.contains_key(header::ORIGIN)
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if req.method() == Method::OPTIONS && !preflight {
        return next.run(req).await;
    }
    match layer.layer(next).oneshot(req).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// The request span, under a given target: the same fields for every request.
macro_rules! request_span {
    ($target:expr, $req:expr, $route:expr, $request_id:expr) => {
        tracing::info_span!(
            target: $target,
            "request",
            method = %$req.method(),
            route = %$route,
            request_id = %$request_id,
            user.id = tracing::field::Empty,
            otel.name = tracing::field::Empty,
            otel.kind = tracing::field::Empty,
            http.request.method = tracing::field::Empty,
            http.route = tracing::field::Empty,
            http.response.status_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        )
    };
}

/// Routes an orchestrator or a scraper calls every few seconds: logged like any request, never
/// exported as traces (a trace per probe would drown the ones worth reading).
const PROBES: [&str; 3] = ["/healthz", "/readyz", "/metrics"];

/// One span per request: method, matched route (never the raw URI), request id, user id; with
/// traces exported, the OpenTelemetry HTTP server attributes and the caller's trace as parent.
fn request_span(req: &Request<Body>) -> tracing::Span {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".into());
    let request_id = req
        .headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("-")
        .to_owned();
    if PROBES.contains(&route.as_str()) {
        return request_span!(crate::telemetry::spans::UNTRACED, req, route, request_id);
    }
    let span = request_span!(
        crate::telemetry::spans::REQUEST_TARGET,
        req,
        route,
        request_id
    );
    // The OpenTelemetry names only an exporter reads; without one the request costs what it
    // did before tracing existed.
    if crate::telemetry::exporting() {
        span.record("otel.name", format!("{} {route}", req.method()));
        span.record("otel.kind", "server");
        span.record("http.request.method", req.method().as_str());
        span.record("http.route", route.as_str());
        crate::telemetry::spans::join_callers_trace(&span, req.headers());
    }
    span
}

/// Logs the response as before and, when traces are exported, puts its status on the request
/// span (a 5xx marks the span failed, as the HTTP server conventions say).
#[derive(Clone)]
struct OnResponse(DefaultOnResponse);

impl<B> tower_http::trace::OnResponse<B> for OnResponse {
    fn on_response(self, response: &Response<B>, latency: Duration, span: &tracing::Span) {
        if crate::telemetry::exporting() {
            let status = response.status();
            span.record("http.response.status_code", i64::from(status.as_u16()));
            if status.is_server_error() {
                span.record("otel.status_code", "error");
            }
        }
        self.0.on_response(response, latency, span);
    }
}

/// Times every request by method, matched route and status; counts presign and commit
/// outcomes by error code.
async fn record_request(metrics: Arc<Metrics>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    // MatchedPath is an `Arc<str>`: cloning it allocates nothing.
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let response = next.run(req).await;
    let status = response.status();
    let route = matched.as_ref().map_or("unmatched", MatchedPath::as_str);
    metrics.request(method.as_str(), route, status.as_u16(), started.elapsed());
    let flow = match (&method, route) {
        (&Method::POST, "/v1/uploads") => Some(Flow::Presign),
        (&Method::POST, "/v1/files") => Some(Flow::Commit),
        _ => None,
    };
    if let Some(flow) = flow {
        let outcome = match response.extensions().get::<ErrorCode>() {
            Some(ErrorCode(code)) => code.clone(),
            None if status.is_success() => "ok".to_owned(),
            None => format!("http_{}", status.as_u16()),
        };
        metrics.outcome(flow, &outcome);
    }
    response
}

async fn enforce_timeout(timeout: Duration, req: Request, next: Next) -> Response {
    match tokio::time::timeout(timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => AppError::Timeout.into_response(),
    }
}
