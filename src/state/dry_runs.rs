//! The dry runs this replica started through the admin API (`POST
//! /v1/admin/jobs/hygiene/dry-run`): at most one at a time — a second request while one runs
//! gets the running one's id, so a script looping on the route cannot pile up runs and their
//! findings (review 36: 669 in 0.7 s) — and none left `running` by a shutdown: `serve` waits
//! a few seconds for it, then stops it and records it as failed.

use std::future::Future;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::task::JoinHandle;

#[derive(Debug, Default)]
pub struct DryRuns {
    current: Mutex<Option<(String, JoinHandle<()>)>>,
}

impl DryRuns {
    pub fn new() -> Self {
        Self::default()
    }

    /// The run in flight (`false`: not started by this call), or the one `start` begins and
    /// spawns (`true`). Callers queue on the lock, so two at once start one run. A run whose
    /// record says it ended (`ended`, asked of its id) is not in flight, even while its task
    /// is still winding down: two dry runs asked one after the other, the first ended, are two
    /// runs (a fresh clone's test command once saw one id for both).
    pub async fn one_at_a_time<F, Fut, E, D, DFut>(
        &self,
        start: F,
        ended: D,
    ) -> Result<(String, bool), E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(String, JoinHandle<()>), E>>,
        D: FnOnce(String) -> DFut,
        DFut: Future<Output = bool>,
    {
        let mut current = self.current.lock().await;
        if let Some((id, task)) = current.as_ref() {
            if !task.is_finished() && !ended(id.clone()).await {
                return Ok((id.clone(), false));
            }
        }
        let (id, task) = start().await?;
        *current = Some((id.clone(), task));
        Ok((id, true))
    }

    /// At shutdown: waits up to `within` for the run in flight to end; past that, stops it and
    /// returns its id, for the caller to record as failed.
    pub async fn stop(&self, within: Duration) -> Option<String> {
        let (id, mut task) = self.current.lock().await.take()?;
        if tokio::time::timeout(within, &mut task).await.is_ok() {
            return None;
        }
        task.abort();
        // Wait for the abort, so nothing of the run writes after its row is marked failed.
        let _ = task.await;
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn running(_: String) -> bool {
        false
    }

    #[tokio::test]
    async fn a_run_whose_record_ended_is_not_in_flight_while_its_task_winds_down() {
        let runs = DryRuns::new();
        runs.one_at_a_time(|| async { spawned("a", 60) }, running)
            .await
            .expect("started");
        // Its task still runs (60 s), but its record says it ended: the next is a new run.
        assert_eq!(
            runs.one_at_a_time(|| async { spawned("b", 60) }, |id| async move { id == "a" })
                .await,
            Ok(("b".to_owned(), true))
        );
        assert_eq!(
            runs.one_at_a_time(|| async { spawned("c", 60) }, |id| async move { id == "a" })
                .await,
            Ok(("b".to_owned(), false))
        );
        runs.stop(Duration::from_millis(10)).await;
    }

    fn spawned(id: &str, secs: u64) -> Result<(String, JoinHandle<()>), ()> {
        let task = tokio::spawn(tokio::time::sleep(Duration::from_secs(secs)));
        Ok((id.to_owned(), task))
    }

    #[tokio::test]
    async fn a_second_start_while_one_runs_gets_the_running_one() {
        let runs = DryRuns::new();
        assert_eq!(
            runs.one_at_a_time(|| async { spawned("a", 60) }, running)
                .await,
            Ok(("a".to_owned(), true))
        );
        assert_eq!(
            runs.one_at_a_time(|| async { spawned("b", 60) }, running)
                .await,
            Ok(("a".to_owned(), false))
        );
        // Stopped past the wait: its id comes back to be recorded as failed.
        assert_eq!(
            runs.stop(Duration::from_millis(10)).await,
            Some("a".to_owned())
        );
        assert_eq!(runs.stop(Duration::from_millis(10)).await, None);
    }

    #[tokio::test]
    async fn once_it_ended_the_next_start_begins_a_new_one() {
        let runs = DryRuns::new();
        runs.one_at_a_time(|| async { spawned("a", 0) }, running)
            .await
            .expect("started");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            runs.one_at_a_time(|| async { spawned("b", 0) }, running)
                .await,
            Ok(("b".to_owned(), true))
        );
        // Ended within the wait: nothing to record.
        assert_eq!(runs.stop(Duration::from_secs(5)).await, None);
    }

    #[tokio::test]
    async fn a_failed_start_keeps_nothing() {
        let runs = DryRuns::new();
        let failed: Result<(String, bool), ()> =
            runs.one_at_a_time(|| async { Err(()) }, running).await;
        assert_eq!(failed, Err(()));
        assert_eq!(runs.stop(Duration::from_millis(10)).await, None);
    }
}
