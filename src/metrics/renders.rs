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
    /// The store or the render's worker failed to start.
    Failed,
    /// The render killed its worker (issue 46): 422 `image_unrenderable`.
    WorkerDied,
    /// Killed at the time limit: 503 `render_timeout`.
    TimedOut,
    /// Refused without a render: an earlier one killed its worker, or timed out twice.
    Refused,
}

impl RenderOutcome {
    pub const ALL: [RenderOutcome; 8] = [
        RenderOutcome::Rendered,
        RenderOutcome::Unrenderable,
        RenderOutcome::NotRendered,
        RenderOutcome::Busy,
        RenderOutcome::Failed,
        RenderOutcome::WorkerDied,
        RenderOutcome::TimedOut,
        RenderOutcome::Refused,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RenderOutcome::Rendered => "rendered",
            RenderOutcome::Unrenderable => "unrenderable",
            RenderOutcome::NotRendered => "not_rendered",
            RenderOutcome::Busy => "busy",
            RenderOutcome::Failed => "failed",
            RenderOutcome::WorkerDied => "worker_died",
            RenderOutcome::TimedOut => "timed_out",
            RenderOutcome::Refused => "refused",
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
    worker_starts: AtomicU64,
    /// cause → workers that died in a render.
    worker_deaths: Mutex<BTreeMap<&'static str, u64>>,
    killed_at_limit: AtomicU64,
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

    pub(super) fn worker_started(&self) {
        self.worker_starts.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn worker_died(&self, cause: &'static str) {
        if let Ok(mut map) = self.worker_deaths.lock() {
            *map.entry(cause).or_default() += 1;
        }
    }

    pub(super) fn worker_killed_at_limit(&self) {
        self.killed_at_limit.fetch_add(1, Ordering::Relaxed);
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
            "Rendition requests that missed the cache, by outcome (rendered, unrenderable, not_rendered, busy, failed, worker_died, timed_out, refused).",
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
            "upcommit_render_worker_starts_total",
            "counter",
            "Render workers started (issue 46: each render's own process, recycled after a number of renders and after any failure).",
        );
        let _ = writeln!(
            out,
            "upcommit_render_worker_starts_total {}",
            self.worker_starts.load(Ordering::Relaxed)
        );
        header(
            out,
            "upcommit_render_worker_deaths_total",
            "counter",
            "Render workers that died in a render, by cause (filtered: the seccomp filter; aborted: an allocation refused at the memory limit or a library's abort; crashed; killed; signalled; exited).",
        );
        if let Ok(map) = self.worker_deaths.lock() {
            for d in crate::domain::variants::refusal::Death::ALL {
                let n = map.get(d.as_str()).copied().unwrap_or(0);
                let _ = writeln!(
                    out,
                    "upcommit_render_worker_deaths_total{{cause=\"{}\"}} {n}",
                    d.as_str()
                );
            }
        }
        header(
            out,
            "upcommit_render_worker_timeouts_total",
            "counter",
            "Render workers killed at the render time limit (UPCOMMIT_RENDER_TIMEOUT_SECS).",
        );
        let _ = writeln!(
            out,
            "upcommit_render_worker_timeouts_total {}",
            self.killed_at_limit.load(Ordering::Relaxed)
        );
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
