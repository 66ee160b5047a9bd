//! Sending an endpoint's events again, for `upcommit events retry|replay` and the admin API's
//! `POST /v1/admin/webhooks/{id}/retry|replay`: the same checks (the endpoint exists and is
//! enabled — nothing delivers to a disabled one, so its rows would only wait for the retention
//! and then count as discarded) and the same catalog calls, so neither path can do what the
//! other cannot.

use std::sync::Arc;

use crate::catalog::{Catalog, CatalogError};
use crate::config::Settings;

#[derive(Debug, thiserror::Error)]
pub enum RedeliverError {
    #[error("no endpoint with this id")]
    NotFound,
    #[error("endpoint {0} is disabled, so nothing would send these. One removed from the settings comes back when it is listed there again; one removed through the API cannot be enabled again: create an endpoint with another id and replay into it")]
    Disabled(String),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
}

/// What a replay did (or, in a dry run, would do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replayed {
    /// Deliveries made due again (or that would be).
    pub due_again: u64,
    /// Events after the cursor up to this position were pruned: the replay starts after it.
    pub pruned_through: Option<i64>,
}

fn window(settings: &Settings) -> i64 {
    i64::try_from(settings.events.retry_window_secs).unwrap_or(i64::MAX / 4)
}

/// Why the write changed nothing: the endpoint is missing, or disabled. The write itself
/// judged it, in its own transaction (a disable waits for it), so no earlier read of the
/// endpoint — nor of its deliveries' counts — is needed.
async fn refusal(catalog: &Arc<dyn Catalog>, endpoint: &str) -> RedeliverError {
    match catalog.endpoint_exists(endpoint).await {
        Ok(true) => RedeliverError::Disabled(endpoint.to_owned()),
        Ok(false) => RedeliverError::NotFound,
        Err(e) => RedeliverError::Catalog(e),
    }
}

/// Makes the endpoint's failed deliveries (past their retry window, kept) due again for
/// another retry window. A dry run answers how many are failed now.
pub async fn retry(
    catalog: &Arc<dyn Catalog>,
    settings: &Settings,
    endpoint: &str,
    dry_run: bool,
) -> Result<u64, RedeliverError> {
    if dry_run {
        // Counted from the endpoint's row as `events list` shows it; nothing is written.
        let c = catalog
            .endpoint_counts()
            .await?
            .into_iter()
            .find(|c| c.id == endpoint)
            .ok_or(RedeliverError::NotFound)?;
        if !c.enabled {
            return Err(RedeliverError::Disabled(c.id));
        }
        return Ok(u64::try_from(c.failed).unwrap_or(0));
    }
    crate::pause::point("redeliver_checked").await;
    let Some(n) = catalog
        .retry_failed_deliveries(endpoint, window(settings))
        .await?
    else {
        return Err(refusal(catalog, endpoint).await);
    };
    tracing::info!(endpoint, due_again = n, "failed deliveries are due again");
    Ok(n)
}

/// Sends the endpoint every event after feed position `after` again (same ids), in feed order
/// per subject.
pub async fn replay(
    catalog: &Arc<dyn Catalog>,
    settings: &Settings,
    endpoint: &str,
    after: i64,
    dry_run: bool,
) -> Result<Replayed, RedeliverError> {
    crate::pause::point("redeliver_checked").await;
    // As the feed does: say so when events after the cursor were pruned.
    let pruned_through = match catalog.event_positions().await? {
        Some((first, _)) if after < first - 1 => Some(first - 1),
        _ => None,
    };
    let Some(due_again) = catalog
        .replay_deliveries(endpoint, after, window(settings), dry_run)
        .await?
    else {
        return Err(refusal(catalog, endpoint).await);
    };
    if !dry_run {
        tracing::info!(endpoint, after, due_again, "events replayed to an endpoint");
    }
    Ok(Replayed {
        due_again,
        pruned_through,
    })
}
