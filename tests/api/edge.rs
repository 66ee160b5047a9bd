//! The HTTP edge (issue 12, items 13, 14, 17, 18): refused presigns cost no rate-limit token,
//! sizes are exact integers, every response says `nosniff`, CORS for the configured origins, and
//! slow or idle connections are closed without starving real requests.

use serde_json::json;

use crate::helpers::{error_code, spawn_app_with, Spawn};

/// Item 17: three presigns with an unknown profile used to leave the user rate-limited.
#[tokio::test]
async fn refused_presigns_do_not_use_up_the_rate_limit() {
    let app = spawn_app_with(Spawn {
        env: vec![
            // One token every 1,000 s: a taken token does not come back during the test.
            ("UPCOMMIT_PRESIGN_RATE_PER_SEC", "0.001".into()),
            ("UPCOMMIT_PRESIGN_BURST", "2".into()),
        ],
        ..Default::default()
    })
    .await;
    let alice = app.token("alice");
    let refused = [
        json!({"profile": "video", "content_type": "image/png", "size": 10}),
        json!({"profile": "image", "content_type": "text/html", "size": 10}),
        json!({"profile": "image", "content_type": "image/png", "size": 0}),
        json!({"profile": "image", "content_type": "image/png", "size": 1.5}),
        json!({"profile": "image", "content_type": "image/png", "size": 10, "filename": "a\nb"}),
    ];
    for body in &refused {
        let (status, code) = error_code(app.presign(&alice, body.clone()).await).await;
        assert_eq!(status, 400, "{body}: {code}");
    }
    let ok = json!({"profile": "image", "content_type": "image/png", "size": 10});
    for _ in 0..2 {
        assert_eq!(
            app.presign(&alice, ok.clone()).await.status(),
            201,
            "the burst is intact after refused presigns"
        );
    }
    assert_eq!(
        error_code(app.presign(&alice, ok).await).await,
        (429, "rate_limited".to_owned()),
        "accepted presigns still take tokens"
    );
}
