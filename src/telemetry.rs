//! Logging and tracing. Logs: human-readable text by default, JSON in production
//! (`UPCOMMIT_LOG_FORMAT=json`), filtered with `RUST_LOG`. Traces: exported over OTLP/HTTP
//! (protobuf) only when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set; otherwise no exporter, no background thread,
//! and the request, catalog and S3 spans of [`spans`] are never created.

mod filter;
mod otlp;
pub mod spans;
mod traceparent;

use std::sync::OnceLock;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{filter_fn, FilterExt as _};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::LogFormat;

/// The tracer provider, when the environment asks for export. A process has one tracing
/// subscriber, so its exporter is process-wide too; set at most once, by [`init`].
static EXPORTER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// Whether spans are exported. One atomic load: what the hot paths ask before building the
/// span attributes that only an exporter reads.
pub fn exporting() -> bool {
    EXPORTER.get().is_some()
}

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new("info,sqlx=warn,aws_config=warn,aws_smithy_runtime=warn,hyper=warn")
    });
    let provider = match otlp::provider_from_env(&|k| std::env::var(k).ok()) {
        Ok(provider) => provider,
        Err(e) => {
            // Tracing is an aid, never a reason not to serve: say why and go on without it.
            eprintln!("upcommit: tracing export is off: {e}");
            None
        }
    };
    let Some(provider) = provider else {
        // Exactly the subscriber upcommit had before tracing export existed.
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr);
        let _ = match format {
            LogFormat::Json => builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .try_init(),
            LogFormat::Text => builder.try_init(),
        };
        return;
    };
    let logs = match format {
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed(),
    };
    // The spans carry what the conventions name, not the layer's extras (source location,
    // thread, busy/idle times): they cost an allocation or more per span.
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("upcommit"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(filter::Traced::new());
    // The spans made only for the exporter are not logged.
    let logged = filter.and(filter_fn(|meta| meta.target() != spans::EXPORT_ONLY));
    let installed = tracing_subscriber::registry()
        .with(logs.with_filter(logged))
        .with(otel)
        .try_init();
    if installed.is_ok() {
        let _ = EXPORTER.set(provider);
    }
}

/// Sends what is still buffered and stops the exporter's thread; a no-op when nothing is
/// exported. Called once the server has finished its in-flight requests.
pub async fn shutdown() {
    let Some(provider) = EXPORTER.get() else {
        return;
    };
    let provider = provider.clone();
    // The batch processor's shutdown blocks until its last export answers (or times out).
    let flushed = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    match flushed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => eprintln!("upcommit: flushing traces failed: {e}"),
        Err(e) => eprintln!("upcommit: flushing traces failed: {e}"),
    }
}
