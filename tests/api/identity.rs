//! Identity providers: asymmetric tokens checked against a JWKS served by a test server whose
//! key set the test changes and whose fetches it counts. Keys and tokens are minted by PyJWT
//! (`tests/api/identity_mint.py`, in the venv `UPCOMMIT_TEST_PYJWT` names; scripts/test.sh
//! makes it with `ensure_pyjwt_installed`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{json, Value};

use crate::helpers::{error_code, spawn_app_with, Spawn, TestApp, SECRET};

const ISSUER: &str = "https://idp.test/";
const AUDIENCE: &str = "upcommit-api";

/// The provider's JWKS endpoint: its key set, whether it answers, how often it was asked.
#[derive(Clone, Default)]
struct Jwks {
    keys: Arc<Mutex<Vec<Value>>>,
    down: Arc<AtomicBool>,
    hits: Arc<AtomicUsize>,
}

impl Jwks {
    async fn serve() -> (Self, String) {
        let jwks = Jwks::default();
        let state = jwks.clone();
        let app = axum::Router::new()
            .route(
                "/.well-known/jwks.json",
                axum::routing::get(move || {
                    let state = state.clone();
                    async move {
                        state.hits.fetch_add(1, Ordering::SeqCst);
                        if state.down.load(Ordering::SeqCst) {
                            return StatusCode::SERVICE_UNAVAILABLE.into_response();
                        }
                        let keys = state.keys.lock().expect("keys").clone();
                        axum::Json(json!({ "keys": keys })).into_response()
                    }
                }),
            )
            // A key set that moved: `/r/N` redirects N + 1 times before reaching it.
            .route(
                "/r/{n}",
                axum::routing::get(
                    |axum::extract::Path(n): axum::extract::Path<u32>| async move {
                        let next = match n {
                            0 => "/.well-known/jwks.json".to_owned(),
                            n => format!("/r/{}", n - 1),
                        };
                        (StatusCode::FOUND, [("location", next)]).into_response()
                    },
                ),
            )
            .route(
                "/elsewhere",
                axum::routing::get(|| async {
                    (StatusCode::FOUND, [("location", "file:///etc/passwd")]).into_response()
                }),
            );
        let url = format!("{}/.well-known/jwks.json", crate::helpers::serve(app).await);
        (jwks, url)
    }

    fn set(&self, keys: &[&Key]) {
        *self.keys.lock().expect("keys") = keys.iter().map(|k| k.jwk.clone()).collect();
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Runs the PyJWT minting script on a batch of requests.
fn mint(requests: &[Value]) -> Vec<Value> {
    let python = std::env::var("UPCOMMIT_TEST_PYJWT").unwrap_or_else(|_| {
        format!(
            "{}/.cache/upcommit/jwt-venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        )
    });
    let mut child = std::process::Command::new(&python)
        .arg("-c")
        .arg(include_str!("identity_mint.py"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{python}: {e} (set UPCOMMIT_TEST_PYJWT to a python with pyjwt and cryptography; scripts/test.sh does)")
        });
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(&serde_json::to_vec(requests).expect("json"))
            .expect("write");
    }
    let out = child.wait_with_output().expect("python ran");
    assert!(out.status.success(), "minting failed");
    serde_json::from_slice(&out.stdout).expect("minted JSON")
}

struct Key {
    kid: String,
    alg: &'static str,
    private_pem: String,
    public_pem: String,
    jwk: Value,
}

fn keys(specs: &[(&str, &'static str)]) -> Vec<Key> {
    let requests: Vec<Value> = specs
        .iter()
        .map(|(kid, alg)| {
            let kty = match *alg {
                "RS256" => "RSA",
                "ES256" => "EC",
                _ => "OKP",
            };
            json!({"op": "keygen", "kty": kty, "kid": kid})
        })
        .collect();
    mint(&requests)
        .into_iter()
        .zip(specs)
        .map(|(k, (kid, alg))| Key {
            kid: (*kid).to_owned(),
            alg,
            private_pem: k["private_pem"].as_str().expect("pem").to_owned(),
            public_pem: k["public_pem"].as_str().expect("pem").to_owned(),
            jwk: k["jwk"].clone(),
        })
        .collect()
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Good claims for `sub`, with `over` replacing or (with `null`) removing some.
fn claims(sub: &str, over: Value) -> Value {
    let mut c = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": sub,
        "iat": now(), "exp": now() + 600,
    });
    for (k, v) in over.as_object().expect("object") {
        if v.is_null() {
            c.as_object_mut().expect("object").remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c
}

/// A `sign` request: `key` signs, with its own alg and kid unless `headers` says otherwise.
fn sign(key: &Key, payload: Value) -> Value {
    sign_as(key, key.alg, json!({"kid": key.kid}), payload)
}

fn sign_as(key: &Key, alg: &str, headers: Value, payload: Value) -> Value {
    json!({"op": "sign", "alg": alg, "private_pem": key.private_pem, "headers": headers, "payload": payload})
}

fn tokens(requests: &[Value]) -> Vec<String> {
    mint(requests)
        .into_iter()
        .map(|t| t.as_str().expect("token").to_owned())
        .collect()
}

async fn provider_app(jwks_url: &str, extra: &[(&'static str, &str)]) -> TestApp {
    let mut env = vec![
        ("UPCOMMIT_JWKS_URL", jwks_url.to_owned()),
        ("UPCOMMIT_JWT_ISSUER", ISSUER.to_owned()),
        ("UPCOMMIT_JWT_AUDIENCE", AUDIENCE.to_owned()),
        ("UPCOMMIT_JWT_ADMIN_CLAIM", "roles".to_owned()),
        ("UPCOMMIT_JWT_ADMIN_VALUE", "upcommit-admin".to_owned()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await
}

fn presign_body() -> Value {
    json!({"profile": "image", "content_type": "image/png", "size": 100, "filename": "a.png"})
}

/// Presigns with `token`: the status and error code (`""` on success).
async fn presign(app: &TestApp, token: &str) -> (u16, String) {
    let resp = app.presign(token, presign_body()).await;
    if resp.status().is_success() {
        return (resp.status().as_u16(), String::new());
    }
    let www = resp.headers().get("www-authenticate").cloned();
    let got = error_code(resp).await;
    if got.0 == 401 {
        assert_eq!(
            www.as_ref().and_then(|v| v.to_str().ok()),
            Some("Bearer"),
            "401 carries WWW-Authenticate"
        );
    }
    got
}

async fn storage_report(app: &TestApp, token: &str) -> (u16, String) {
    let resp = app.get("/v1/admin/storage-report", Some(token)).await;
    if resp.status().is_success() {
        return (resp.status().as_u16(), String::new());
    }
    error_code(resp).await
}

fn ok() -> (u16, String) {
    (201, String::new())
}

fn refused(code: &str) -> (u16, String) {
    (401, code.to_owned())
}

/// RS256, ES256 and EdDSA tokens from PyJWT are accepted; the user is the `sub` (or the
/// configured claim); admin comes only from the role claim, never from `"admin": true`; HS256
/// development tokens are refused beside the provider.
#[tokio::test]
async fn provider_tokens_of_each_algorithm_are_accepted_and_admin_comes_from_the_role_claim() {
    let (jwks, url) = Jwks::serve().await;
    let ks = keys(&[("rsa-1", "RS256"), ("ec-1", "ES256"), ("ed-1", "EdDSA")]);
    jwks.set(&ks.iter().collect::<Vec<_>>());
    let app = provider_app(&url, &[]).await;
    let minted = tokens(&[
        sign(&ks[0], claims("rsa-user", json!({}))),
        sign(
            &ks[1],
            claims("ec-user", json!({"aud": ["other", AUDIENCE]})),
        ),
        sign(&ks[2], claims("ed-user", json!({}))),
        sign(&ks[0], claims("fake-admin", json!({"admin": true}))),
        sign(
            &ks[2],
            claims("real-admin", json!({"roles": ["viewer", "upcommit-admin"]})),
        ),
    ]);
    for (token, user) in minted[..3].iter().zip(["rsa-user", "ec-user", "ed-user"]) {
        assert_eq!(presign(&app, token).await, ok(), "{user}");
        assert_eq!(
            app.db
                .count(&format!(
                    "SELECT COUNT(*) FROM uploads WHERE owner = '{user}'"
                ))
                .await,
            1,
            "the upload belongs to the token's sub"
        );
    }
    assert_eq!(
        storage_report(&app, &minted[3]).await,
        (403, "admin_required".to_owned()),
        "\"admin\": true is not the configured claim"
    );
    assert_eq!(storage_report(&app, &minted[4]).await.0, 200);
    // Beside a provider, tokens signed with the development secret are refused, whatever
    // issuer they name or leave out: whoever held the secret could otherwise act as any
    // provider user (`dev` here could be the provider's `dev`) and, with `"admin": true`, as
    // an admin.
    assert_eq!(
        presign(&app, &app.token("rsa-user")).await,
        refused("token_algorithm_not_allowed")
    );
    assert_eq!(
        storage_report(&app, &app.admin_token("root")).await,
        (401, "token_algorithm_not_allowed".to_owned())
    );
    let secret = app.env["UPCOMMIT_JWT_SECRET"].clone();
    let spoofed = tokens(
        &[json!(format!("{ISSUER} ")), json!([ISSUER]), json!(null)].map(|iss| {
            json!({"op": "hs256_raw", "secret": secret, "payload":
                   {"sub": "rsa-user", "exp": now() + 600, "admin": true, "iss": iss,
                    "aud": AUDIENCE, "roles": ["upcommit-admin"]}})
        }),
    );
    for token in &spoofed {
        assert_eq!(
            storage_report(&app, token).await,
            (401, "token_algorithm_not_allowed".to_owned())
        );
    }
    assert_eq!(jwks.hits(), 1, "one fetch served them all");

    // The user id from another claim.
    let app = provider_app(&url, &[("UPCOMMIT_JWT_USER_CLAIM", "email")]).await;
    let minted = tokens(&[
        sign(
            &ks[0],
            claims("ignored", json!({"email": "bob@example.com"})),
        ),
        sign(&ks[0], claims("no-email", json!({}))),
    ]);
    assert_eq!(presign(&app, &minted[0]).await, ok());
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE owner = 'bob@example.com'")
            .await,
        1
    );
    assert_eq!(presign(&app, &minted[1]).await, refused("unauthorized"));
}

/// Every refusal has its code, and none of them creates anything.
#[tokio::test]
async fn every_bad_provider_token_is_refused_with_its_code() {
    let (jwks, url) = Jwks::serve().await;
    let ks = keys(&[
        ("rsa-1", "RS256"),
        ("ec-1", "ES256"),
        ("stranger", "RS256"),
        ("ed-1", "EdDSA"),
    ]);
    jwks.set(&[&ks[0], &ks[1], &ks[3]]);
    let app = provider_app(&url, &[]).await;
    let rsa = &ks[0];
    let rsa_public_pem = rsa.public_pem.clone();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "wrong issuer",
            sign(rsa, claims("a", json!({"iss": "https://evil.test/"}))),
            "token_issuer_invalid",
        ),
        (
            "no issuer",
            sign(rsa, claims("a", json!({"iss": null}))),
            "token_issuer_invalid",
        ),
        (
            "wrong audience",
            sign(rsa, claims("a", json!({"aud": "someone-else"}))),
            "token_audience_invalid",
        ),
        (
            "no audience",
            sign(rsa, claims("a", json!({"aud": null}))),
            "token_audience_invalid",
        ),
        (
            "expired beyond the leeway",
            sign(rsa, claims("a", json!({"exp": now() - 120}))),
            "token_expired",
        ),
        (
            "not yet valid",
            sign(rsa, claims("a", json!({"nbf": now() + 600}))),
            "token_not_yet_valid",
        ),
        (
            "no exp",
            sign(rsa, claims("a", json!({"exp": null}))),
            "unauthorized",
        ),
        (
            "a kid the provider never published",
            sign_as(
                rsa,
                "RS256",
                json!({"kid": "made-up"}),
                claims("a", json!({})),
            ),
            "token_key_unknown",
        ),
        (
            "no kid",
            sign_as(rsa, "RS256", json!({}), claims("a", json!({}))),
            "token_key_unknown",
        ),
        (
            "signed by a key that is not the kid's",
            sign_as(
                &ks[2],
                "RS256",
                json!({"kid": "rsa-1"}),
                claims("a", json!({})),
            ),
            "unauthorized",
        ),
        (
            "an RSA key's kid on an ES256 token",
            sign_as(
                &ks[1],
                "ES256",
                json!({"kid": "rsa-1"}),
                claims("a", json!({})),
            ),
            "token_algorithm_not_allowed",
        ),
        (
            "PS256 with the RSA key",
            sign_as(
                rsa,
                "PS256",
                json!({"kid": "rsa-1"}),
                claims("a", json!({})),
            ),
            "token_algorithm_not_allowed",
        ),
        (
            "RS512 with the RSA key",
            sign_as(
                rsa,
                "RS512",
                json!({"kid": "rsa-1"}),
                claims("a", json!({})),
            ),
            "token_algorithm_not_allowed",
        ),
        (
            "alg none",
            json!({"op": "unsigned", "headers": {"kid": "rsa-1"}, "payload": claims("a", json!({}))}),
            "token_algorithm_not_allowed",
        ),
        (
            "HS256 with the provider's public key as the secret",
            json!({"op": "hs256_raw", "secret": rsa_public_pem, "headers": {"kid": "rsa-1"},
                   "payload": claims("a", json!({"admin": true, "roles": ["upcommit-admin"]}))}),
            "token_algorithm_not_allowed",
        ),
        (
            "HS256 with the public key, no iss",
            json!({"op": "hs256_raw", "secret": rsa_public_pem, "headers": {"kid": "rsa-1"},
                   "payload": {"sub": "a", "exp": now() + 600, "admin": true}}),
            "token_algorithm_not_allowed",
        ),
    ];
    let requests: Vec<Value> = cases.iter().map(|(_, r, _)| r.clone()).collect();
    let minted = tokens(&requests);
    for ((name, _, code), token) in cases.iter().zip(&minted) {
        assert_eq!(presign(&app, token).await, refused(code), "{name}");
    }
    // Inside the 30 s leeway, an expired token still passes (clocks differ a little).
    let lenient = tokens(&[sign(rsa, claims("late", json!({"exp": now() - 5})))]);
    assert_eq!(presign(&app, &lenient[0]).await, ok());
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM uploads").await,
        1,
        "no refused token created anything"
    );

    // Without the development secret, an HS256 token is refused whoever signed it: the
    // empty secret never verifies anything.
    let app = provider_app(&url, &[("UPCOMMIT_JWT_SECRET", "")]).await;
    let empty_secret = tokens(&[
        json!({"op": "hs256_raw", "secret": "", "payload": {"sub": "a", "exp": now() + 600}}),
    ]);
    assert_eq!(
        presign(&app, &empty_secret[0]).await,
        refused("token_algorithm_not_allowed")
    );
    assert_eq!(
        presign(&app, &app.token("dev")).await,
        refused("token_algorithm_not_allowed")
    );
    let good = tokens(&[sign(&ks[3], claims("ed", json!({})))]);
    assert_eq!(presign(&app, &good[0]).await, ok());
}

/// RFC 7515 §4.1.11: `crit` lists header extensions the recipient must understand, or refuse
/// the token. This server understands none, so a token carrying `crit` is refused whatever it
/// lists — also an empty list or one that is not an array of strings, which the RFC forbids —
/// for both kinds of token: the provider's (RS256, EdDSA) with `token_crit_unsupported`, the
/// HS256 development ones with `unauthorized` (as every refusal of theirs). The same tokens
/// without `crit` pass.
#[tokio::test]
async fn a_token_whose_header_has_crit_is_refused_whichever_kind() {
    let (jwks, url) = Jwks::serve().await;
    let ks = keys(&[("rsa-1", "RS256"), ("ed-1", "EdDSA")]);
    jwks.set(&[&ks[0], &ks[1]]);
    let provider = provider_app(&url, &[]).await;
    let dev = spawn_app_with(Spawn::default()).await;
    let dev_token = |headers: Value| {
        json!({"op": "hs256_raw", "secret": SECRET, "headers": headers,
               "payload": {"sub": "dev", "exp": now() + 600}})
    };
    let crits = [
        json!(["exp"]),
        json!(["b64"]),
        json!(["x-unknown-extension"]),
        json!([]),
        json!("exp"),
        json!([1]),
        json!(null),
        json!({}),
    ];
    let mut requests = vec![
        sign(&ks[0], claims("a", json!({}))),
        sign(&ks[1], claims("b", json!({}))),
        dev_token(json!({})),
    ];
    for crit in &crits {
        requests.push(sign_as(
            &ks[0],
            "RS256",
            json!({"kid": "rsa-1", "crit": crit, "b64": true, "x-unknown-extension": 1}),
            claims("a", json!({})),
        ));
        requests.push(sign_as(
            &ks[1],
            "EdDSA",
            json!({"kid": "ed-1", "crit": crit}),
            claims("b", json!({})),
        ));
        requests.push(dev_token(json!({"crit": crit})));
    }
    let minted = tokens(&requests);
    assert_eq!(presign(&provider, &minted[0]).await, ok(), "without crit");
    assert_eq!(presign(&provider, &minted[1]).await, ok(), "without crit");
    assert_eq!(presign(&dev, &minted[2]).await, ok(), "without crit");
    for (crit, three) in crits.iter().zip(minted[3..].chunks(3)) {
        assert_eq!(
            presign(&provider, &three[0]).await,
            refused("token_crit_unsupported"),
            "RS256, crit {crit}"
        );
        assert_eq!(
            presign(&provider, &three[1]).await,
            refused("token_crit_unsupported"),
            "EdDSA, crit {crit}"
        );
        assert_eq!(
            presign(&dev, &three[2]).await,
            refused("unauthorized"),
            "HS256, crit {crit}"
        );
    }
    let created = "SELECT COUNT(*) FROM uploads";
    assert_eq!(provider.db.count(created).await, 2, "only the controls");
    assert_eq!(dev.db.count(created).await, 1, "only the control");
}

/// Key rotation mid-run: a new key is picked up on its first token; tokens of the old key keep
/// working until the key leaves the JWKS, then they are refused.
#[tokio::test]
async fn rotated_keys_are_picked_up_and_removed_ones_stop_working() {
    let (jwks, url) = Jwks::serve().await;
    let ks = keys(&[("2026-old", "RS256"), ("2026-new", "ES256")]);
    let (old, new) = (&ks[0], &ks[1]);
    jwks.set(&[old]);
    let app = provider_app(
        &url,
        &[
            ("UPCOMMIT_JWKS_REFRESH_SECS", "2"),
            ("UPCOMMIT_JWKS_MAX_AGE_SECS", "60"),
            ("UPCOMMIT_JWKS_MIN_REFETCH_SECS", "1"),
        ],
    )
    .await;
    let minted = tokens(&[
        sign(old, claims("old-key-user", json!({}))),
        sign(new, claims("new-key-user", json!({}))),
    ]);
    assert_eq!(presign(&app, &minted[0]).await, ok());
    assert_eq!(
        presign(&app, &minted[1]).await,
        refused("token_key_unknown"),
        "not published yet"
    );

    jwks.set(&[old, new]);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        presign(&app, &minted[1]).await,
        ok(),
        "new key fetched on its first use"
    );
    assert_eq!(
        presign(&app, &minted[0]).await,
        ok(),
        "old key still published"
    );

    jwks.set(&[new]);
    // The scheduled refresh (every 2 s) drops the old key.
    let mut dropped = false;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if presign(&app, &minted[0]).await == refused("token_key_unknown") {
            dropped = true;
            break;
        }
    }
    assert!(
        dropped,
        "the old key's tokens are refused once it left the JWKS"
    );
    assert_eq!(presign(&app, &minted[1]).await, ok());
}

/// A flood of made-up `kid`s (concurrent, all different) costs the provider at most one fetch
/// per `UPCOMMIT_JWKS_MIN_REFETCH_SECS`.
#[tokio::test]
async fn a_flood_of_unknown_kids_does_not_hammer_the_provider() {
    let (jwks, url) = Jwks::serve().await;
    let ks = keys(&[("real", "EdDSA")]);
    jwks.set(&[&ks[0]]);
    let app = provider_app(&url, &[("UPCOMMIT_JWKS_MIN_REFETCH_SECS", "60")]).await;
    let requests: Vec<Value> = (0..40)
        .map(|i| {
            sign_as(
                &ks[0],
                "EdDSA",
                json!({"kid": format!("made-up-{i}")}),
                claims("a", json!({})),
            )
        })
        .collect();
    let flood = tokens(&requests);
    // The flood comes first, racing the fetch at start.
    let answers = futures::future::join_all(flood.iter().map(|t| presign(&app, t))).await;
    assert!(
        answers.iter().all(|a| *a == refused("token_key_unknown")),
        "{answers:?}"
    );
    let after_flood = jwks.hits();
    assert!(
        after_flood <= 2,
        "{after_flood} fetches for 40 unknown kids"
    );
    let again = futures::future::join_all(flood.iter().map(|t| presign(&app, t))).await;
    assert!(again.iter().all(|a| *a == refused("token_key_unknown")));
    assert_eq!(jwks.hits(), after_flood, "a second flood fetches nothing");
    let good = tokens(&[sign(&ks[0], claims("a", json!({})))]);
    assert_eq!(
        presign(&app, &good[0]).await,
        ok(),
        "the real key still works"
    );
}

/// The provider cannot be reached: fresh cached keys keep serving; once they are past the max
/// age, requests get 503 `identity_provider_unavailable` with Retry-After (not 401), and the
/// provider is asked at most once per interval; when it is back, tokens pass again.
#[tokio::test]
async fn an_unreachable_provider_with_expired_keys_answers_503_with_retry_after() {
    let (jwks, url) = Jwks::serve().await;
    let ks = keys(&[("k", "RS256")]);
    jwks.set(&[&ks[0]]);
    let app = provider_app(
        &url,
        &[
            ("UPCOMMIT_JWKS_REFRESH_SECS", "1"),
            ("UPCOMMIT_JWKS_MAX_AGE_SECS", "2"),
            ("UPCOMMIT_JWKS_MIN_REFETCH_SECS", "1"),
        ],
    )
    .await;
    let minted = tokens(&[sign(&ks[0], claims("a", json!({})))]);
    let token = &minted[0];
    assert_eq!(presign(&app, token).await, ok());
    jwks.down.store(true, Ordering::SeqCst);
    assert_eq!(presign(&app, token).await, ok(), "fresh keys serve");

    tokio::time::sleep(Duration::from_millis(2500)).await;
    let hits_before = jwks.hits();
    for _ in 0..10 {
        let resp = app.presign(token, presign_body()).await;
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        assert_eq!(
            error_code(resp).await,
            (503, "identity_provider_unavailable".to_owned())
        );
        assert!(
            retry_after.is_some_and(|s| (1..=2).contains(&s)),
            "{retry_after:?}"
        );
    }
    assert!(
        jwks.hits() - hits_before <= 3,
        "ten requests while down: {} fetches",
        jwks.hits() - hits_before
    );
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM uploads").await,
        2,
        "nothing created while down"
    );

    jwks.down.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        presign(&app, token).await,
        ok(),
        "back once the provider answers"
    );
}

/// The key set is fetched through at most three redirects, to http(s) locations only: a
/// provider that moved its JWKS keeps working; a longer chain or a redirect to another scheme
/// gives no keys, and the provider's tokens are refused as with a provider that is down.
#[tokio::test]
async fn the_key_set_is_fetched_through_up_to_three_redirects_and_no_further() {
    let (jwks, url) = Jwks::serve().await;
    let ks = keys(&[("k", "RS256")]);
    jwks.set(&[&ks[0]]);
    let base = url.trim_end_matches("/.well-known/jwks.json");
    let minted = tokens(&[sign(&ks[0], claims("a", json!({})))]);
    let token = &minted[0];

    let three = provider_app(&format!("{base}/r/2"), &[]).await;
    assert_eq!(presign(&three, token).await, ok(), "three redirects");
    let four = provider_app(&format!("{base}/r/3"), &[]).await;
    assert_eq!(
        presign(&four, token).await,
        (503, "identity_provider_unavailable".to_owned()),
        "four redirects"
    );
    let other_scheme = provider_app(&format!("{base}/elsewhere"), &[]).await;
    assert_eq!(
        presign(&other_scheme, token).await,
        (503, "identity_provider_unavailable".to_owned()),
        "a redirect to file://"
    );
    assert_eq!(
        jwks.hits(),
        1,
        "only the three-redirect server reached the key set"
    );
}

const ISSUER_A: &str = "https://idp-a.test/";
const ISSUER_B: &str = "https://idp-b.test/realms/partners";

/// Two issuers in the settings file: A keeps bare user ids and has an admin rule; B's user
/// ids start with `b:` and none of its tokens is admin.
async fn two_issuer_app(url_a: &str, url_b: &str, extra: &[(&'static str, &str)]) -> TestApp {
    let config = format!(
        r#"
[[issuers]]
issuer = "{ISSUER_A}"
jwks_url = "{url_a}"
audience = "api-a"
admin_claim = "roles"
admin_value = "upcommit-admin"

[[issuers]]
issuer = "{ISSUER_B}"
jwks_url = "{url_b}"
audience = "api-b"
user_prefix = "b:"
"#
    );
    spawn_app_with(Spawn {
        env: extra.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
        config: Some(config),
        ..Spawn::default()
    })
    .await
}

/// Good claims of issuer A (`"a"`) or B (`"b"`) for `sub`, with `over` as in [`claims`].
fn claims_of(issuer: &str, sub: &str, over: Value) -> Value {
    let (iss, aud) = if issuer == "a" {
        (ISSUER_A, "api-a")
    } else {
        (ISSUER_B, "api-b")
    };
    let mut base = json!({"iss": iss, "aud": aud});
    for (k, v) in over.as_object().expect("object") {
        base[k] = v.clone();
    }
    claims(sub, base)
}

/// A token signed by `key` under a kid nobody published, claiming `iss` (`null`: none).
fn unpublished_kid(key: &Key, iss: Value) -> Value {
    sign_as(
        key,
        key.alg,
        json!({"kid": "unpublished"}),
        claims_of("a", "alice", json!({"iss": iss})),
    )
}

/// Tokens go to the issuer their `iss` names, before any key is looked up: both providers
/// publish a key with the same `kid`, and A's key never verifies a token claiming B (nor the
/// reverse). An unknown `iss` is refused without asking either provider. Audience, admin rule
/// and user ids are each issuer's own: B's `alice` is `b:alice` and cannot read A's `alice`'s
/// file; A's tokens cannot name a user id under B's prefix.
#[tokio::test]
async fn tokens_are_routed_by_iss_and_one_issuers_kid_never_verifies_anothers_token() {
    let (jwks_a, url_a) = Jwks::serve().await;
    let (jwks_b, url_b) = Jwks::serve().await;
    // Same kid, different keys (RSA in both, so only the routing tells them apart).
    let ks = keys(&[("shared", "RS256"), ("shared", "RS256")]);
    let (key_a, key_b) = (&ks[0], &ks[1]);
    jwks_a.set(&[key_a]);
    jwks_b.set(&[key_b]);
    // The development secret stays set: beside [[issuers]], its tokens are refused too.
    // Refetches allowed every second, so a token that reached a provider with an unknown
    // kid would show as a fetch.
    let app = two_issuer_app(&url_a, &url_b, &[("UPCOMMIT_JWKS_MIN_REFETCH_SECS", "1")]).await;

    let minted = tokens(&[
        sign(key_a, claims_of("a", "alice", json!({}))),
        sign(key_b, claims_of("b", "alice", json!({}))),
        // B's iss and audience, signed with A's key under the shared kid.
        sign(
            key_a,
            claims_of("b", "alice", json!({"roles": ["upcommit-admin"]})),
        ),
        // A's iss, signed with B's key under the shared kid: B's `alice` posing as A's.
        sign(
            key_b,
            claims_of("a", "alice", json!({"roles": ["upcommit-admin"]})),
        ),
        // B's token for A's audience.
        sign(key_b, claims_of("b", "alice", json!({"aud": "api-a"}))),
        // Issuers nobody configured, or A's written slightly differently, with a kid no
        // provider published (asking one would fetch its JWKS).
        unpublished_kid(key_a, json!("https://idp-c.test/")),
        unpublished_kid(key_a, json!("https://idp-a.test")),
        unpublished_kid(key_a, json!([ISSUER_A])),
        unpublished_kid(key_a, json!(null)),
        // Admin: A's rule makes an admin; B has no admin rule, whatever B's token says.
        sign(
            key_a,
            claims_of("a", "root", json!({"roles": ["upcommit-admin"]})),
        ),
        sign(
            key_b,
            claims_of(
                "b",
                "root",
                json!({"roles": ["upcommit-admin"], "admin": true}),
            ),
        ),
        // A's user ids may not start with B's prefix (they would be B's users).
        sign(key_a, claims_of("a", "b:alice", json!({}))),
        // B's user ids may start with anything: they are prefixed.
        sign(key_b, claims_of("b", "b:alice", json!({}))),
    ]);
    let owners = |user: &'static str| {
        let db = &app.db;
        async move {
            db.count(&format!(
                "SELECT COUNT(*) FROM uploads WHERE owner = '{user}'"
            ))
            .await
        }
    };
    assert_eq!(presign(&app, &minted[0]).await, ok());
    assert_eq!(owners("alice").await, 1, "A's alice keeps her bare id");
    assert_eq!(presign(&app, &minted[1]).await, ok());
    assert_eq!(owners("b:alice").await, 1, "B's alice is b:alice");
    assert_eq!(owners("alice").await, 1);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let hits = (jwks_a.hits(), jwks_b.hits());

    assert_eq!(
        presign(&app, &minted[2]).await,
        refused("unauthorized"),
        "A's key under the shared kid does not verify a token claiming B"
    );
    assert_eq!(
        presign(&app, &minted[3]).await,
        refused("unauthorized"),
        "B's key under the shared kid does not verify a token claiming A"
    );
    assert_eq!(
        storage_report(&app, &minted[3]).await,
        refused("unauthorized")
    );
    assert_eq!(
        presign(&app, &minted[4]).await,
        refused("token_audience_invalid"),
        "each issuer has its own audience"
    );
    for (i, token) in minted[5..9].iter().enumerate() {
        assert_eq!(
            presign(&app, token).await,
            refused("token_issuer_invalid"),
            "unknown iss #{i}"
        );
    }
    assert_eq!(
        (jwks_a.hits(), jwks_b.hits()),
        hits,
        "refused tokens fetched nothing: known kids, or no issuer to ask"
    );
    // The same unpublished kid with A's issuer does ask A (and only A): the check above
    // would have seen it.
    let unpublished = tokens(&[unpublished_kid(key_a, json!(ISSUER_A))]);
    assert_eq!(
        presign(&app, &unpublished[0]).await,
        refused("token_key_unknown")
    );
    assert_eq!((jwks_a.hits(), jwks_b.hits()), (hits.0 + 1, hits.1));
    assert_eq!(storage_report(&app, &minted[9]).await.0, 200);
    assert_eq!(
        storage_report(&app, &minted[10]).await,
        (403, "admin_required".to_owned()),
        "A's admin rule is A's only"
    );
    assert_eq!(
        presign(&app, &minted[11]).await,
        refused("token_user_id_reserved")
    );
    assert_eq!(presign(&app, &minted[12]).await, ok());
    assert_eq!(owners("b:b:alice").await, 1);
    for hs256 in [
        app.token("alice"),
        app.token("b:alice"),
        app.admin_token("root"),
    ] {
        assert_eq!(
            presign(&app, &hs256).await,
            refused("token_algorithm_not_allowed")
        );
    }
    assert_eq!(
        app.db.count("SELECT COUNT(*) FROM uploads").await,
        3,
        "no refused token created anything"
    );

    // B's alice cannot act as A's alice: A's alice's file is not hers.
    let (_, handle) = app
        .upload_and_commit(&minted[0], "image", "image/png", 100)
        .await;
    let id = handle["id"].as_str().expect("id");
    let path = format!("/v1/files/{id}");
    assert_eq!(app.get(&path, Some(&minted[0])).await.status(), 200);
    assert_eq!(
        error_code(app.get(&path, Some(&minted[1])).await).await,
        (404, "file_not_found".to_owned())
    );
    assert_eq!(
        error_code(app.get(&path, Some(&minted[12])).await).await,
        (404, "file_not_found".to_owned())
    );

    // A flood of made-up kids claiming A costs A a fetch or two (one a second) and B none.
    let flood = tokens(
        &(0..20)
            .map(|i| {
                sign_as(
                    key_a,
                    "RS256",
                    json!({"kid": format!("made-up-{i}")}),
                    claims_of("a", "alice", json!({})),
                )
            })
            .collect::<Vec<_>>(),
    );
    let (a_before, b_before) = (jwks_a.hits(), jwks_b.hits());
    let answers = futures::future::join_all(flood.iter().map(|t| presign(&app, t))).await;
    assert!(answers.iter().all(|a| *a == refused("token_key_unknown")));
    assert!(
        jwks_a.hits() - a_before <= 2,
        "{}",
        jwks_a.hits() - a_before
    );
    assert_eq!(jwks_b.hits(), b_before, "B is never asked for A's kids");
    assert_eq!(
        presign(&app, &minted[1]).await,
        ok(),
        "B's tokens unaffected"
    );
}

/// Each issuer's keys expire and come back on their own: while A's provider is down past the
/// max age, A's tokens get 503 `identity_provider_unavailable` and B's tokens keep passing.
#[tokio::test]
async fn one_issuers_unreachable_provider_does_not_refuse_the_others_tokens() {
    let (jwks_a, url_a) = Jwks::serve().await;
    let (jwks_b, url_b) = Jwks::serve().await;
    let ks = keys(&[("a-1", "ES256"), ("b-1", "EdDSA")]);
    jwks_a.set(&[&ks[0]]);
    jwks_b.set(&[&ks[1]]);
    let app = two_issuer_app(
        &url_a,
        &url_b,
        &[
            ("UPCOMMIT_JWKS_REFRESH_SECS", "1"),
            ("UPCOMMIT_JWKS_MAX_AGE_SECS", "2"),
            ("UPCOMMIT_JWKS_MIN_REFETCH_SECS", "1"),
        ],
    )
    .await;
    let minted = tokens(&[
        sign(&ks[0], claims_of("a", "alice", json!({}))),
        sign(&ks[1], claims_of("b", "bob", json!({}))),
    ]);
    let (a, b) = (&minted[0], &minted[1]);
    assert_eq!(presign(&app, a).await, ok());
    assert_eq!(presign(&app, b).await, ok());

    jwks_a.down.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for _ in 0..3 {
        let resp = app.presign(a, presign_body()).await;
        assert!(resp.headers().contains_key("retry-after"));
        assert_eq!(
            error_code(resp).await,
            (503, "identity_provider_unavailable".to_owned())
        );
        assert_eq!(presign(&app, b).await, ok(), "B's provider is up");
    }
    // B down too, A back: the roles swap.
    jwks_b.down.store(true, Ordering::SeqCst);
    jwks_a.down.store(false, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(presign(&app, a).await, ok(), "A is back");
    assert_eq!(
        error_code(app.presign(b, presign_body()).await).await,
        (503, "identity_provider_unavailable".to_owned())
    );
    assert_eq!(
        app.db
            .count("SELECT COUNT(*) FROM uploads WHERE owner = 'b:bob'")
            .await,
        4
    );
}
