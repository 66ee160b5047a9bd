//! Group commit for presigns. Every presign writes its upload and its quota charge in one
//! transaction; one transaction per presign made the commit itself the ceiling (about 0.44 ms
//! each on SQLite, serialized). Here one writer task per catalog takes every presign waiting at
//! that moment (up to [`MAX_BATCH`]) and writes them in one transaction, each inside its own
//! savepoint: an item refused by its quota (or a duplicate) rolls back alone and later items
//! see the charges of the earlier ones, exactly as if they had run one after another. A caller
//! is answered only after the transaction commits, so no URL leaves the server for an upload
//! that is not durably recorded; if the commit fails, every caller of the batch gets the error.
//! Under light load a batch is one presign and nothing waits.

use std::future::Future;

use chrono::NaiveDate;
use tokio::sync::{mpsc, oneshot};

use super::CatalogError;
use crate::domain::multipart::MultipartSession;
use crate::domain::quota::QuotaLimits;
use crate::domain::records::Upload;

/// Presigns written in one transaction at most.
pub const MAX_BATCH: usize = 128;
/// Presigns waiting for the writer at most; more wait to enter the queue.
const QUEUE: usize = 4 * MAX_BATCH;

/// One presign's write: the upload, its multipart session, the quota day and limits.
#[derive(Debug, Clone)]
pub struct NewUpload {
    pub upload: Upload,
    pub session: Option<MultipartSession>,
    pub day: NaiveDate,
    pub limits: QuotaLimits,
}

type Job = (NewUpload, oneshot::Sender<Result<(), CatalogError>>);

/// The handle presigns submit through; the writer task ends when the last handle is dropped.
#[derive(Debug, Clone)]
pub struct GroupCommit {
    queue: mpsc::Sender<Job>,
}

impl GroupCommit {
    /// Starts the writer. `write` writes one batch in one transaction and answers one result
    /// per item, in order.
    pub fn spawn<F, Fut>(write: F) -> Self
    where
        F: Fn(Vec<NewUpload>) -> Fut + Send + 'static,
        Fut: Future<Output = Vec<Result<(), CatalogError>>> + Send,
    {
        let (queue, mut jobs) = mpsc::channel::<Job>(QUEUE);
        tokio::spawn(async move {
            while let Some(first) = jobs.recv().await {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match jobs.try_recv() {
                        Ok(job) => batch.push(job),
                        Err(_) => break,
                    }
                }
                let (items, replies): (Vec<NewUpload>, Vec<_>) = batch.into_iter().unzip();
                let n = items.len();
                let mut results = write(items).await;
                results.resize_with(n, || {
                    Err(CatalogError::Other(
                        "group commit answered too few results".into(),
                    ))
                });
                for (reply, result) in replies.into_iter().zip(results) {
                    // A caller that went away (request timed out) needs no answer.
                    let _ = reply.send(result);
                }
            }
        });
        Self { queue }
    }

    /// Writes one presign with whatever else is waiting; returns once it is durable (or
    /// refused).
    pub async fn submit(&self, item: NewUpload) -> Result<(), CatalogError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((item, reply))
            .await
            .map_err(|_| CatalogError::Unavailable("the presign writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| CatalogError::Unavailable("the presign writer has stopped".into()))?
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::domain::ids::UploadId;
    use crate::domain::records::{now, UploadState};

    fn item(size: i64) -> NewUpload {
        let at = now();
        NewUpload {
            upload: Upload {
                id: UploadId::generate(),
                owner: "u".into(),
                profile: "image".into(),
                content_type: "image/png".into(),
                declared_size: size,
                key: "tmp/k".into(),
                method: "PUT".into(),
                state: UploadState::Issued,
                final_key: None,
                reject_code: None,
                lease_token: None,
                lease_until: None,
                created_at: at,
                expires_at: at,
                commit_deadline: at,
                original_filename: None,
                checksum: None,
            },
            session: None,
            day: at.date_naive(),
            limits: QuotaLimits {
                daily_uploads: 0,
                daily_bytes: 0,
            },
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_presigns_share_a_batch_and_each_gets_its_own_answer() {
        let batches = Arc::new(AtomicUsize::new(0));
        let seen = batches.clone();
        let writer = GroupCommit::spawn(move |items: Vec<NewUpload>| {
            seen.fetch_add(1, Ordering::SeqCst);
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                items
                    .iter()
                    .map(|i| {
                        if i.upload.declared_size % 2 == 0 {
                            Ok(())
                        } else {
                            Err(CatalogError::QuotaExceeded)
                        }
                    })
                    .collect()
            }
        });
        let tasks: Vec<_> = (0..200)
            .map(|n| {
                let w = writer.clone();
                tokio::spawn(async move { (n, w.submit(item(n)).await) })
            })
            .collect();
        for t in tasks {
            let (n, result) = t.await.expect("task");
            match result {
                Ok(()) => assert_eq!(n % 2, 0),
                Err(CatalogError::QuotaExceeded) => assert_eq!(n % 2, 1),
                Err(e) => panic!("{e}"),
            }
        }
        let b = batches.load(Ordering::SeqCst);
        assert!(b < 200, "200 presigns in {b} transactions");
    }
}
