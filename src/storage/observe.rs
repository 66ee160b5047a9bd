//! An S3 client interceptor that times every call (retries included) into
//! `upcommit_s3_request_duration_seconds{operation, result}`, named by the SDK's own operation
//! name (`HeadObject`, `CopyObject`, …). Presigning sends nothing and is not counted.

use std::sync::Arc;
use std::time::Instant;

use aws_sdk_s3::config::interceptors::{
    BeforeSerializationInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
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
        Ok(())
    }
}
