//! The renders' metrics (issue 37): how each render request that missed the cache ended, how
//! long the render itself took, and how often the cache answered.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::{header, Histogram};

/// How a render request that missed the cache ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RenderOutcome {
    /// Rendered and written (or found written by another replica meanwhile).
    Rendered,
    /// The image could not be drawn: corrupt, cut short, past the pixel limit.
    Unrenderable,
    /// A source the renderer does not draw (format, colour model).
    NotRendered,
    /// Every render slot was taken: 503 `render_busy`.
    Busy,
    /// The store or the render's thread failed.
    Failed,
}

impl RenderOutcome {
    pub const ALL: [RenderOutcome; 5] = [
        RenderOutcome::Rendered,
        RenderOutcome::Unrenderable,
        RenderOutcome::NotRendered,
        RenderOutcome::Busy,
        RenderOutcome::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RenderOutcome::Rendered => "rendered",
            RenderOutcome::Unrenderable => "unrenderable",
            RenderOutcome::NotRendered => "not_rendered",
            RenderOutcome::Busy => "busy",
            RenderOutcome::Failed => "failed",
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct RenderMetrics {
    outcomes: Mutex<BTreeMap<RenderOutcome, u64>>,
    /// outcome → the render's own time (decode, resize, encode), for renders that ran.
    durations: Mutex<BTreeMap<RenderOutcome, Histogram>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl RenderMetrics {
    pub(super) fn outcome(&self, outcome: RenderOutcome, ran_for: Option<Duration>) {
        if let Ok(mut map) = self.outcomes.lock() {
            *map.entry(outcome).or_default() += 1;
        }
        if let (Some(d), Ok(mut map)) = (ran_for, self.durations.lock()) {
            map.entry(outcome).or_default().observe(d.as_secs_f64());
        }
    }

    pub(super) fn cache(&self, hit: bool) {
        let n = if hit { &self.hits } else { &self.misses };
        n.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn render(&self, out: &mut String) {
        header(
            out,
            "upcommit_renders_total",
            "counter",
            "Rendition requests that missed the cache, by outcome (rendered, unrenderable, not_rendered, busy, failed).",
        );
        if let Ok(map) = self.outcomes.lock() {
            // Every outcome from zero, so that increase() sees the first of each.
            for o in RenderOutcome::ALL {
                let n = map.get(&o).copied().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "upcommit_renders_total{{outcome=\"{}\"}} {n}",
                    o.as_str()
                );
            }
        }
        header(
            out,
            "upcommit_render_duration_seconds",
            "histogram",
            "A render's own time (decode, resize, encode on its thread), by outcome.",
        );
        if let Ok(map) = self.durations.lock() {
            for (o, h) in map.iter() {
                let labels = format!("outcome=\"{}\"", o.as_str());
                h.render(out, "upcommit_render_duration_seconds", &labels);
            }
        }
        header(
            out,
            "upcommit_rendition_cache_total",
            "counter",
            "Rendition requests answered from cache/ (hit) or that had to render (miss).",
        );
        for (result, n) in [("hit", &self.hits), ("miss", &self.misses)] {
            let _ = writeln!(
                out,
                "upcommit_rendition_cache_total{{result=\"{result}\"}} {}",
                n.load(Ordering::Relaxed)
            );
        }
    }
}
