//! [`ObservedCatalog`](super::ObservedCatalog)'s failed renders (issue 46): each call timed
//! and counted like every other catalog call.

use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tracing::Instrument as _;

use super::{error_type, ObservedCatalog};
use crate::catalog::CatalogError;

#[async_trait]
impl crate::catalog::RenderFailureCatalog for ObservedCatalog {
    async fn render_failure(
        &self,
        file: &str,
        content: &str,
        variant: &str,
    ) -> Result<Option<crate::catalog::RenderFailure>, CatalogError> {
        timed!(self, render_failure(file, content, variant))
    }
    async fn record_render_failure(
        &self,
        file: &str,
        content: &str,
        variant: &str,
        cause: &str,
        at: DateTime<Utc>,
    ) -> Result<crate::catalog::RenderFailure, CatalogError> {
        timed!(
            self,
            record_render_failure(file, content, variant, cause, at)
        )
    }
    async fn clear_render_failures(
        &self,
        file: &str,
        content: &str,
        variant: Option<&str>,
    ) -> Result<u64, CatalogError> {
        timed!(self, clear_render_failures(file, content, variant))
    }
    async fn render_failures(
        &self,
        of: Option<(&str, &str)>,
        limit: i64,
    ) -> Result<Vec<crate::catalog::RenderFailure>, CatalogError> {
        timed!(self, render_failures(of, limit))
    }
}
