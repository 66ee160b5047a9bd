//! Test-only pause points for races (debug builds only; release builds compile them away):
//! with `UPCOMMIT_PAUSE_AT=<point>` and `UPCOMMIT_PAUSE_GATE=<path>`, a process reaching
//! `<point>` writes `<path>.reached` and waits until `<path>` exists (at most a minute), so a
//! test can act at exactly that moment — between a read and its update, between a claim and
//! S3 — and then let the process go, without guessing at timings.

/// Holds here when the environment names this point (debug builds).
pub async fn point(name: &str) {
    #[cfg(debug_assertions)]
    {
        if std::env::var("UPCOMMIT_PAUSE_AT").as_deref() != Ok(name) {
            return;
        }
        let Ok(gate) = std::env::var("UPCOMMIT_PAUSE_GATE") else {
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
