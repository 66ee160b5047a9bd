//! The spans only an exporter reads, named and attributed as the OpenTelemetry semantic
//! conventions say. Each is [`Span::none`] (free: no allocation, nothing recorded) unless
//! traces are exported. Catalog and S3 spans outside a request or a job run (the pollers' calls)
//! are disabled by the exporter's filter (`filter.rs`): a disabled span costs nothing either.

use axum::http::HeaderMap;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry_http::HeaderExtractor;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::exporting;

/// Makes the request span a child of the caller's span named by the W3C `traceparent` (and
/// `tracestate`) headers. A missing or invalid header leaves it a new trace's root: a bad
/// header is the client's tracing problem, never a reason to refuse the request.
pub fn join_callers_trace(span: &Span, headers: &HeaderMap) {
    let well_formed = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .is_some_and(super::traceparent::well_formed);
    if !well_formed {
        return;
    }
    // Refuses the ids the recommendation calls invalid (all zeros) and keeps
    // `tracestate` when it parses.
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
    // Only fails when the span is disabled or already has children: neither is the case for
    // a span that was just made.
    let _ = span.set_parent(parent);
}

/// The target of request spans that are logged but never start a trace (the probes').
pub const UNTRACED: &str = "upcommit::untraced";

/// The target of the request spans, which start traces.
pub const REQUEST_TARGET: &str = "upcommit::http";

/// The target of the spans made here: exported, never logged.
pub(super) const EXPORT_ONLY: &str = "upcommit::export";

/// A background job's run (the periodic sweep, the unlinked-data run): the root of its trace.
pub fn job(name: &'static str) -> Span {
    if !exporting() {
        return Span::none();
    }
    tracing::info_span!(target: EXPORT_ONLY, "job", otel.name = name, job.name = name)
}

/// A catalog call: one span per call of the [`crate::catalog::Catalog`] trait, whichever
/// backend serves it.
pub fn catalog(operation: &'static str) -> Span {
    if !exporting() {
        return Span::none();
    }
    tracing::info_span!(
        target: EXPORT_ONLY,
        "catalog",
        otel.name = operation,
        otel.kind = "client",
        db.operation.name = operation,
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// Marks a finished catalog or S3 span as failed.
pub fn failed(span: &Span, error_type: &str) {
    span.record("otel.status_code", "error");
    span.record("error.type", error_type);
}

/// An S3 call as the AWS SDK semantic conventions name it: `S3.CopyObject`, with
/// `rpc.system = "aws-api"`, `rpc.service = "S3"` and `rpc.method` the operation.
pub fn s3(operation: &str) -> Span {
    if !exporting() {
        return Span::none();
    }
    tracing::info_span!(
        target: EXPORT_ONLY,
        "s3",
        otel.name = %format_args!("S3.{operation}"),
        otel.kind = "client",
        rpc.system = "aws-api",
        rpc.service = "S3",
        rpc.method = operation,
        http.response.status_code = tracing::field::Empty,
        aws.request_id = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}
