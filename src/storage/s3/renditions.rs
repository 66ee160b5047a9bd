//! Writing a rendition (issue 37): one PUT under `cache/` with `If-None-Match: *`, so that a
//! rendition another replica wrote first is never replaced (where the store keeps the
//! condition: `conditional_put`; where it does not, both writers wrote the same bytes of the
//! same key, and the last one stays).

use super::S3Store;
use crate::storage::errors::classify;
use crate::storage::{NewObject, PutOutcome, StoreError};

impl S3Store {
    pub(super) async fn put_new_object(
        &self,
        obj: &NewObject<'_>,
    ) -> Result<PutOutcome, StoreError> {
        let mut put = self
            .client
            .put_object()
            .bucket(&self.bucket)
            .key(obj.key)
            .content_type(obj.content_type)
            .if_none_match("*")
            .body(obj.body.to_vec().into());
        for (k, v) in obj.metadata {
            put = put.metadata(*k, v);
        }
        match put.send().await.map_err(classify) {
            Ok(out) => Ok(PutOutcome::Created {
                etag: out.e_tag().unwrap_or_default().to_owned(),
            }),
            Err(StoreError::PreconditionFailed) => Ok(PutOutcome::AlreadyThere),
            Err(e) => Err(e),
        }
    }
}
