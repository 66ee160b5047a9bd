//! Test-only fault and pause points (debug builds only; release builds compile them away), one
//! mechanism for every step a test needs to stop at:
//! - `UPCOMMIT_CRASH_AT=<point>`: the process `kill -9`s itself there (the crash tests);
//! - `UPCOMMIT_PAUSE_AT=<point>` with `UPCOMMIT_PAUSE_GATE=<path>`: it writes `<path>.reached`
//!   and waits until `<path>` exists (at most a minute), so a test can act at exactly that
//!   moment — between a read and its update, between a claim and S3 — then let it go;
//! - `UPCOMMIT_PAUSE_AT=<point>` without a gate: it holds there for 3 seconds (a commit in
//!   flight for the shutdown and lease tests);
//! - [`with_hook`]: an in-process test runs a job's future with a hook that every point of that
//!   future (that task only, never another) awaits, so it can act at each step in turn (the
//!   model test completes link scans at every hygiene step). Only code can set one.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a hook does at a point: given the point's name, a future the point awaits.
pub type Hook = Arc<dyn Fn(&str) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

tokio::task_local! {
    static HOOK: Hook;
}

/// Runs `f` with `hook` called at every pause point `f` reaches (debug builds; release builds
/// compile the points away, so the hook is never called there).
pub async fn with_hook<F: Future>(hook: Hook, f: F) -> F::Output {
    HOOK.scope(hook, f).await
}

/// Crashes or holds here when the environment names this point (debug builds).
pub async fn point(name: &str) {
    #[cfg(debug_assertions)]
    {
        if let Ok(act) = HOOK.try_with(|hook| hook(name)) {
            act.await;
        }
        if std::env::var("UPCOMMIT_CRASH_AT").as_deref() == Ok(name) {
            tracing::error!(
                point = name,
                "UPCOMMIT_CRASH_AT: killing this process with SIGKILL"
            );
            let _ = std::process::Command::new("kill")
                .args(["-9", &std::process::id().to_string()])
                .status();
            std::thread::sleep(std::time::Duration::from_secs(5));
        }
        if std::env::var("UPCOMMIT_PAUSE_AT").as_deref() != Ok(name) {
            return;
        }
        let Ok(gate) = std::env::var("UPCOMMIT_PAUSE_GATE") else {
            tracing::warn!(point = name, "UPCOMMIT_PAUSE_AT: holding here for 3 s");
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            return;
        };
        let gate = std::path::PathBuf::from(gate);
        let _ = std::fs::write(gate.with_extension("reached"), name);
        tracing::warn!(
            point = name,
            "UPCOMMIT_PAUSE_AT: waiting for the test's gate"
        );
        for _ in 0..3000 {
            if gate.exists() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    #[cfg(not(debug_assertions))]
    let _ = name;
}
