//! Which spans the exporter sees: a trace starts at a request or a job run, and holds what
//! happens inside it. upcommit's INFO spans outside one (a probe's request, a poller's catalog
//! call) are logged as before but never exported: each would be a trace of its own, several a
//! minute, saying nothing.

use tracing::{Metadata, Subscriber};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

use super::spans;

pub(super) struct Traced {
    targets: Targets,
}

impl Traced {
    pub(super) fn new() -> Self {
        Self {
            // `RUST_LOG` chooses what is logged, not what is traced: upcommit's own spans at
            // INFO whatever the log level (the SDK's and the exporter's own calls never).
            targets: Targets::new().with_target("upcommit", tracing::Level::INFO),
        }
    }
}

/// A span that may start a trace.
fn is_root(meta: &Metadata<'_>) -> bool {
    (meta.target() == spans::REQUEST_TARGET && meta.name() == "request")
        || (meta.target() == spans::EXPORT_ONLY && meta.name() == "job")
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Filter<S> for Traced {
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        if !self.targets.would_enable(meta.target(), meta.level()) {
            return false;
        }
        // The context is this filter's view: the innermost span it let through.
        meta.is_event() || is_root(meta) || cx.lookup_current().is_some()
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        if self.targets.would_enable(meta.target(), meta.level()) {
            // Decided per span: it depends on the span it is made in.
            tracing::subscriber::Interest::sometimes()
        } else {
            tracing::subscriber::Interest::never()
        }
    }
}
