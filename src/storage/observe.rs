//! An S3 client interceptor that times every call (retries included) into
//! `upcommit_s3_request_duration_seconds{operation, result}`, named by the SDK's own operation
//! name (`HeadObject`, `CopyObject`, …), and, when traces are exported, spans each call as
//! `S3.<operation>` (a child of whatever span made the call). Presigning sends nothing and is
//! neither counted nor spanned.

use std::sync::Arc;
use std::time::Instant;

use aws_sdk_s3::config::interceptors::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors;
use aws_smithy_runtime_api::client::orchestrator::{Metadata, OrchestratorError};
use aws_smithy_types::config_bag::{Storable, StoreReplace};

use crate::metrics::Metrics;

#[derive(Debug)]
pub(super) struct TimingInterceptor {
    metrics: Arc<Metrics>,
}

impl TimingInterceptor {
    pub(super) fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }
}

#[derive(Debug, Clone)]
struct Started(Instant);

impl Storable for Started {
    type Storer = StoreReplace<Self>;
}

/// The call's span, from before serialization to the last attempt's end.
#[derive(Debug, Clone)]
struct CallSpan(tracing::Span);

impl Storable for CallSpan {
    type Storer = StoreReplace<Self>;
}

impl Intercept for TimingInterceptor {
    fn name(&self) -> &'static str {
        "upcommit-timing"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(Started(Instant::now()));
        Ok(())
    }

    /// The first hook that sees the operation's name (a client interceptor's
    /// `read_before_execution` runs before the operation's configuration is applied).
    fn read_before_serialization(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if crate::telemetry::exporting() {
            let operation = cfg.load::<Metadata>().map_or("unknown", Metadata::name);
            let span = crate::telemetry::spans::s3(operation);
            cfg.interceptor_state().store_put(CallSpan(span));
        }
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(Started(at)) = cfg.load::<Started>() {
            let operation = cfg.load::<Metadata>().map_or("unknown", Metadata::name);
            let ok = matches!(context.output_or_error(), Some(Ok(_)));
            self.metrics.s3_call(operation, ok, at.elapsed());
        }
        if let Some(CallSpan(span)) = cfg.load::<CallSpan>() {
            if let Some(response) = context.response() {
                span.record(
                    "http.response.status_code",
                    i64::from(response.status().as_u16()),
                );
                if let Some(id) = response.headers().get("x-amz-request-id") {
                    span.record("aws.request_id", id);
                }
            }
            match context.output_or_error() {
                Some(Ok(_)) => {}
                Some(Err(e)) => crate::telemetry::spans::failed(span, error_type(e)),
                None => crate::telemetry::spans::failed(span, "no_response"),
            }
            // Ends the span now rather than when the SDK drops the call's state.
            cfg.interceptor_state().unset::<CallSpan>();
        }
        Ok(())
    }
}

/// `error.type` of a failed call: what kind of failure, in a few fixed words (the HTTP status,
/// recorded beside it, tells S3's refusals apart).
fn error_type(e: &OrchestratorError<interceptors::context::Error>) -> &'static str {
    if e.is_operation_error() {
        "s3_error"
    } else if e.is_timeout_error() {
        "timeout"
    } else if e.is_connector_error() {
        "connection"
    } else if e.is_response_error() {
        "bad_response"
    } else {
        "client"
    }
}
