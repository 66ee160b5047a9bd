//! Test-only fault and pause points (debug builds only; release builds compile them away), one
//! mechanism for every step a test needs to stop at:
//! - `UPCOMMIT_CRASH_AT=<point>`: the process `kill -9`s itself there (the crash tests);
//! - `UPCOMMIT_PANIC_AT=<point>`: the task panics there, every time it gets there (the job
//!   panic tests); `catalog.<operation>` names every catalog call of that operation;
//! - `UPCOMMIT_PAUSE_AT=<point>` with `UPCOMMIT_PAUSE_GATE=<path>`: it writes `<path>.reached`
//!   and waits until `<path>` exists (at most a minute), so a test can act at exactly that
//!   moment — between a read and its update, between a claim and S3 — then let it go;
//! - `UPCOMMIT_PAUSE_AT=<point>` without a gate: it holds there for 3 seconds (a commit in
//!   flight for the shutdown and lease tests);
//! - [`with_hook`]: an in-process test runs a job's future with a hook that every point of that
//!   future (that task only, never another) awaits, so it can act at each step in turn (the
//!   model test completes link scans at every hygiene step). Only code can set one;
//! - [`with_faults`]: the same for catalog calls — every call a future makes through the
//!   catalog (`catalog::ObservedCatalog`) asks the hook whether to go ahead, fail as an
//!   unavailable database would, or panic, so a test can break a job at each of its catalog
//!   steps in turn (tests/api/job_faults.rs).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// What a hook does at a point: given the point's name, a future the point awaits.
pub type Hook = Arc<dyn Fn(&str) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

tokio::task_local! {
    static HOOK: Hook;
    static FAULTS: FaultHook;
}

/// What a catalog call does under [`with_faults`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// The real call.
    Pass,
    /// An error as from an unreachable database, before the call reaches it.
    Fail(String),
    /// A panic with this message, before the call.
    Panic(String),
}

/// Given a catalog operation's name, what the call does.
pub type FaultHook = Arc<dyn Fn(&str) -> Fault + Send + Sync>;

/// Runs `f` asking `hook` at every catalog call `f` makes (debug builds only).
pub async fn with_faults<F: Future>(hook: FaultHook, f: F) -> F::Output {
    FAULTS.scope(hook, f).await
}

/// What the current task's fault hook says of a call to `op` (always [`Fault::Pass`] in
/// release builds and outside [`with_faults`]).
pub fn catalog_fault(op: &str) -> Fault {
    #[cfg(debug_assertions)]
    {
        let named = std::env::var("UPCOMMIT_PANIC_AT")
            .is_ok_and(|at| at.strip_prefix("catalog.") == Some(op));
        if named {
            return Fault::Panic(format!("UPCOMMIT_PANIC_AT: catalog.{op}"));
        }
        FAULTS.try_with(|hook| hook(op)).unwrap_or(Fault::Pass)
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = op;
        Fault::Pass
    }
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
        if std::env::var("UPCOMMIT_PANIC_AT").as_deref() == Ok(name) {
            panic!("UPCOMMIT_PANIC_AT: {name}");
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
