//! POST forms, sent over HTTP as a browser sends them: a form as signed must work, a body over
//! the policy's size range must be refused, and so must a form whose policy was altered after
//! signing (only a store that checks the signature over the policy can tell).

use chrono::Utc;

use super::answer::{http_answer, Answer, SIGNATURE_REFUSED, SIZE_REFUSED};
use super::{Probe, BODY, TYPE};
use crate::domain::capabilities::Finding;
use crate::signing::post_policy::PostForm;
use crate::storage::{ObjectStore, PresignInput};

impl Probe<'_> {
    async fn form(&self, name: &str) -> Result<PostForm, String> {
        let now = Utc::now();
        self.store
            .presign_post(&PresignInput {
                key: &self.key(name),
                content_type: TYPE,
                size: BODY.len() as u64,
                now,
                expires_at: now + chrono::Duration::minutes(5),
                checksum: None,
            })
            .await
            .map_err(|e| format!("signing a probe form: {e}"))
    }

    async fn send_form(&self, form: &PostForm, body: &[u8]) -> Answer {
        let mut multipart = reqwest::multipart::Form::new();
        for (k, v) in &form.fields {
            multipart = multipart.text(k.clone(), v.clone());
        }
        multipart = multipart.part(
            "file",
            reqwest::multipart::Part::bytes(body.to_vec()).file_name("probe"),
        );
        http_answer(
            self.http
                .post(&form.url)
                .timeout(super::CALL)
                .multipart(multipart)
                .send()
                .await,
        )
        .await
    }

    /// `(post_size_range, post_signature)`.
    pub(super) async fn post_forms(&self) -> (Finding, Finding) {
        let both = |why: String| (Finding::Unknown(why.clone()), Finding::Unknown(why));
        // A form as signed, with the bytes it was signed for, must work first.
        let ok = match self.form("post-ok").await {
            Ok(f) => f,
            Err(why) => return both(why),
        };
        match self.send_form(&ok, BODY).await {
            Answer::Stored => {}
            other => return both(format!("a form as signed was {other}")),
        }
        let size = match self.form("post-size").await {
            Ok(f) => {
                let mut more = BODY.to_vec();
                more.extend_from_slice(BODY);
                self.send_form(&f, &more).await.refused_as(
                    SIZE_REFUSED,
                    "a form bound to one size stored a body of twice that size",
                )
            }
            Err(why) => Finding::Unknown(why),
        };
        let signature = match self.form("post-signature").await {
            Ok(mut f) => match widen_policy(&mut f) {
                // The same bytes pass the signed policy and the altered one: only the
                // signature can refuse them.
                Some(()) => self.send_form(&f, BODY).await.refused_as(
                    SIGNATURE_REFUSED,
                    "a form whose policy was altered after signing was stored",
                ),
                None => Finding::Unknown("the form has no policy to alter".into()),
            },
            Err(why) => Finding::Unknown(why),
        };
        (size, signature)
    }
}

/// Alters a signed form's policy so that the same body still meets it: the size range is
/// widened. Only a store that checks the signature over the policy can tell.
fn widen_policy(form: &mut PostForm) -> Option<()> {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let (_, value) = form.fields.iter_mut().find(|(k, _)| k == "policy")?;
    let mut doc: serde_json::Value =
        serde_json::from_slice(&engine.decode(value.as_bytes()).ok()?).ok()?;
    for c in doc.get_mut("conditions")?.as_array_mut()? {
        if c.get(0).and_then(|v| v.as_str()) == Some("content-length-range") {
            *c = serde_json::json!(["content-length-range", 1, 1_000_000]);
        }
    }
    *value = engine.encode(doc.to_string());
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_keeps_every_condition_but_the_size() {
        use base64::Engine as _;
        let engine = base64::engine::general_purpose::STANDARD;
        let policy = serde_json::json!({"expiration": "x", "conditions": [
            {"bucket": "b"}, ["eq", "$key", "k"], ["content-length-range", 4, 4]]});
        let mut form = PostForm {
            url: "http://s3/b".into(),
            fields: vec![("policy".into(), engine.encode(policy.to_string()))],
        };
        widen_policy(&mut form).expect("widened");
        let got: serde_json::Value =
            serde_json::from_slice(&engine.decode(&form.fields[0].1).expect("base64"))
                .expect("JSON");
        assert_eq!(
            got["conditions"],
            serde_json::json!([{"bucket": "b"}, ["eq", "$key", "k"], ["content-length-range", 1, 1_000_000]])
        );
    }
}
