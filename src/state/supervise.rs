//! Keeping the server's background work alive across a panic. Every tick of a scheduled job
//! (sweep, prune, hygiene) and every pass of a background loop (the bucket watch, the event
//! sequencer and delivery, the job gauges) runs inside [`catching`]: a panic there is caught,
//! logged with its message, counted on `/metrics` (`upcommit_task_panics_total`), and the loop
//! goes on to its next tick. A job run the panic abandoned is recorded `failed` with the panic's
//! message and its lease is given back ([`Abandoned`]), so the next tick — on this replica or
//! another — starts a new run at once instead of waiting for the lease to run out.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt as _;

use crate::catalog::Catalog;
use crate::domain::jobs::RunState;
use crate::metrics::Metrics;

/// A job run dropped by a panic: what recording it as failed needs.
pub struct Abandoned {
    pub catalog: Arc<dyn Catalog>,
    pub job: String,
    pub run_id: String,
    pub checkpoint: Option<String>,
    /// The run's summary as last written (JSON), if any.
    pub summary: Option<String>,
    /// The lease's holder; `None` for a dry run, which holds none.
    pub holder: Option<String>,
}

tokio::task_local! {
    /// The runs abandoned by a panic inside the current [`catching`] scope.
    static ABANDONED: Arc<Mutex<Vec<Abandoned>>>;
}

impl Abandoned {
    /// Called from a job handle dropped while its thread panics: handed to the enclosing
    /// [`catching`], which knows the panic's message; outside one (a one-off CLI run), recorded
    /// at once without it.
    pub fn report(self) {
        let mut this = Some(self);
        let handed = ABANDONED.try_with(|list| {
            if let (Ok(mut list), Some(run)) = (list.lock(), this.take()) {
                list.push(run);
            }
        });
        if handed.is_err() {
            if let (Some(run), Ok(rt)) = (this, tokio::runtime::Handle::try_current()) {
                rt.spawn(run.fail("the run panicked".to_owned()));
            }
        }
    }

    /// Records the run `failed` with `reason` (keeping what its summary said so far) and gives
    /// its lease back — whatever the record's write does: each step is caught on its own (the
    /// bug that panicked may panic again here), so nothing escapes to end the caller's loop.
    pub async fn fail(self, reason: String) {
        let summary = failed_summary(self.summary.as_deref(), &reason);
        let now = crate::domain::records::now();
        let recorded = AssertUnwindSafe(self.catalog.update_run(
            &self.run_id,
            RunState::Failed,
            self.checkpoint.as_deref(),
            &summary,
            now,
        ))
        .catch_unwind()
        .await;
        match recorded {
            Ok(Ok(())) => {
                tracing::error!(job = %self.job, run.id = %self.run_id, reason = %reason, "job run recorded as failed")
            }
            // Left `running`: the next run resumes it.
            Ok(Err(e)) => {
                tracing::error!(job = %self.job, run.id = %self.run_id, error = %e, "could not record the panicked run as failed")
            }
            Err(p) => {
                tracing::error!(job = %self.job, run.id = %self.run_id, panic = %panic_message(p.as_ref()), "recording the panicked run as failed panicked too")
            }
        }
        if let Some(holder) = &self.holder {
            let released = AssertUnwindSafe(self.catalog.release_job_lock(&self.job, holder))
                .catch_unwind()
                .await;
            match released {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(job = %self.job, error = %e, "could not give the job's lease back; it runs out")
                }
                Err(p) => {
                    tracing::warn!(job = %self.job, panic = %panic_message(p.as_ref()), "giving the job's lease back panicked; it runs out")
                }
            }
        }
    }
}

/// The summary so far with `error` set (an object; anything else is replaced).
fn failed_summary(summary: Option<&str>, reason: &str) -> String {
    let mut value = summary
        .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    if let Some(map) = value.as_object_mut() {
        map.insert("error".into(), serde_json::Value::String(reason.to_owned()));
    }
    value.to_string()
}

/// The text a panic was raised with.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Runs `work`; a panic inside it is caught (`None`), logged and counted under `task`, and every
/// job run it abandoned is recorded failed with the panic's message and its lease released.
/// Cancelling the returned future cancels `work` (a stopping server aborts its loops).
pub async fn catching<F: Future>(
    task: &'static str,
    metrics: Option<&Metrics>,
    work: F,
) -> Option<F::Output> {
    catching_logged(task, metrics, true, work).await
}

/// [`catching`], logging the panic at error level only when `log` (a loop that ticks several
/// times a second logs the first of a run of panics, not each); it is counted either way.
pub async fn catching_logged<F: Future>(
    task: &'static str,
    metrics: Option<&Metrics>,
    log: bool,
    work: F,
) -> Option<F::Output> {
    let abandoned = Arc::new(Mutex::new(Vec::new()));
    let outcome = ABANDONED
        .scope(abandoned.clone(), AssertUnwindSafe(work).catch_unwind())
        .await;
    match outcome {
        Ok(out) => Some(out),
        Err(payload) => {
            let message = panic_message(payload.as_ref());
            if log {
                tracing::error!(task, panic = %message, "a task panicked: the run it was in is recorded failed and its lease given back");
            }
            if let Some(metrics) = metrics {
                metrics.task_panicked(task);
            }
            let runs = abandoned
                .lock()
                .map(|mut list| std::mem::take(&mut *list))
                .unwrap_or_default();
            for run in runs {
                run.fail(format!("the run panicked: {message}")).await;
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_is_caught_counted_and_the_caller_goes_on() {
        let metrics = Metrics::new();
        let out = catching("sweep", Some(&metrics), async { panic!("boom at step 3") }).await;
        assert!(out.is_none());
        let again = catching("sweep", Some(&metrics), async { 7 }).await;
        assert_eq!(again, Some(7));
        let mut text = String::new();
        metrics.render(&mut text);
        assert!(
            text.contains("upcommit_task_panics_total{task=\"sweep\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn the_failed_summary_keeps_what_the_run_said_and_adds_the_reason() {
        let s = failed_summary(Some(r#"{"deleted":3}"#), "the run panicked: x");
        let v: serde_json::Value = serde_json::from_str(&s).expect("json");
        assert_eq!(v["deleted"], 3);
        assert_eq!(v["error"], "the run panicked: x");
        let s = failed_summary(Some("not json"), "r");
        assert_eq!(s, r#"{"error":"r"}"#);
        assert_eq!(failed_summary(None, "r"), r#"{"error":"r"}"#);
    }

    #[test]
    fn panic_messages_are_read_from_str_and_string_payloads() {
        let a: Box<dyn Any + Send> = Box::new("static");
        let b: Box<dyn Any + Send> = Box::new(String::from("formatted 3"));
        let c: Box<dyn Any + Send> = Box::new(3_u8);
        assert_eq!(panic_message(a.as_ref()), "static");
        assert_eq!(panic_message(b.as_ref()), "formatted 3");
        assert_eq!(panic_message(c.as_ref()), "a panic without a message");
    }
}
