//! The process's one outgoing HTTP client. Webhook deliveries, the validation hook, the SQS
//! sender, the identity providers' key sets, the store probe's browser-style uploads and
//! reconcile's side-by-side reads all go through the client built here, once, at start: one
//! connection pool, one TLS setup (the system's roots read once), one user agent.
//!
//! It follows no redirect: a hook and a webhook answer where they are configured (a 3xx counts
//! as no answer, and following one would send a signed body somewhere nobody configured); SQS and
//! the store never redirect a signed request. The one caller that follows redirects, the JWKS
//! fetch, does it by hand and bounded (`auth::jwks`). Each caller sets its own time limit per
//! request (`RequestBuilder::timeout`): a hook's is its profile's, a webhook's the events'. That
//! limit covers the connection too: the client sets no connect timeout of its own, which would
//! cut a hook allowed 15 s at the shared client's figure while its handshake is slow.

use std::time::Duration;

/// Idle connections kept per host are closed after this long.
const POOL_IDLE: Duration = Duration::from_secs(60);

/// The client every outgoing call of this process shares; clone it (an `Arc` inside) rather
/// than building another.
pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_idle_timeout(POOL_IDLE)
        .user_agent(concat!("upcommit/", env!("CARGO_PKG_VERSION")))
        .build()
}
