//! Keeping a lease alive while the work it guards runs: an S3 call (a CompleteMultipartUpload of
//! thousands of parts, a multipart copy of a large object) can outlast one lease, and a lease
//! that runs out mid-call lets a second caller start the same work beside it.

use std::future::Future;
use std::time::Duration;

/// How often a lease of `lease_secs` is renewed: three times per lease, at most every 100 ms.
pub fn period(lease_secs: u64) -> Duration {
    Duration::from_millis((lease_secs.saturating_mul(1000) / 3).max(100))
}

/// Runs `work` to its end, calling `renew` every `every` meanwhile. The work is not polled
/// while a renewal runs (a short database update).
pub async fn renewing<T, W, R, RF>(work: W, every: Duration, mut renew: R) -> T
where
    W: Future<Output = T>,
    R: FnMut() -> RF,
    RF: Future<Output = ()>,
{
    tokio::pin!(work);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = tick.tick() => renew().await,
        }
    }
}

/// Runs `work` while a lease of `lease_secs` is renewed through `renew(lease_secs)` (true:
/// still held) every [`period`]; a lease that was lost or could not be renewed is logged,
/// naming `what` holds it. The work goes on either way: its own conditional writes (on the
/// lease token) decide what it may still record.
pub async fn holding<T, W, R, RF, E>(
    work: W,
    lease_secs: u64,
    what: &'static str,
    mut renew: R,
) -> T
where
    W: Future<Output = T>,
    R: FnMut(i64) -> RF,
    RF: Future<Output = Result<bool, E>>,
    E: std::fmt::Display,
{
    let secs = i64::try_from(lease_secs).unwrap_or(30);
    renewing(work, period(lease_secs), || {
        let renewal = renew(secs);
        async move {
            match renewal.await {
                Ok(true) => {}
                Ok(false) => tracing::warn!(lease = what, "the lease was lost while the work ran"),
                Err(e) => tracing::warn!(lease = what, error = %e, "could not renew the lease"),
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn renews_while_the_work_runs_and_stops_with_it() {
        use std::sync::atomic::{AtomicU32, Ordering};
        let renewals = AtomicU32::new(0);
        // The work ends only once it has been renewed three times.
        let work = async {
            while renewals.load(Ordering::SeqCst) < 3 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            7
        };
        let out = renewing(work, Duration::from_millis(20), || {
            renewals.fetch_add(1, Ordering::SeqCst);
            async {}
        })
        .await;
        assert_eq!(out, 7);
        assert_eq!(
            renewals.load(Ordering::SeqCst),
            3,
            "no renewal after the work ended"
        );
    }

    #[test]
    fn the_period_is_a_third_of_the_lease_and_never_below_100_ms() {
        assert_eq!(period(30), Duration::from_secs(10));
        assert_eq!(period(1), Duration::from_millis(333));
        assert_eq!(period(0), Duration::from_millis(100));
    }
}
