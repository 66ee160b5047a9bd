//! Test-only fault and pause points (debug builds only; release builds compile them away), one
//! mechanism for every step a test needs to stop at:
//! - `UPCOMMIT_CRASH_AT=<point>`: the process `kill -9`s itself there (the crash tests);
//! - `UPCOMMIT_PAUSE_AT=<point>` with `UPCOMMIT_PAUSE_GATE=<path>`: it writes `<path>.reached`
//!   and waits until `<path>` exists (at most a minute), so a test can act at exactly that
//!   moment — between a read and its update, between a claim and S3 — then let it go;
//! - `UPCOMMIT_PAUSE_AT=<point>` without a gate: it holds there for 3 seconds (a commit in
//!   flight for the shutdown and lease tests).

/// Crashes or holds here when the environment names this point (debug builds).
pub async fn point(name: &str) {
    #[cfg(debug_assertions)]
    {
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
