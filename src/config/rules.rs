//! The rules that read two concerns, checked once every concern has loaded.

use super::source::ConfigError;
use super::Settings;

/// The demo's token minting against the HS256 secret, then each profile's validation hook
/// against the request timeout.
pub(super) fn check(settings: &Settings) -> Result<(), ConfigError> {
    if settings.demo.mint_tokens && settings.auth.jwt_secret.expose().is_empty() {
        return Err(ConfigError(
            "UPCOMMIT_DEMO_MINT_TOKENS needs UPCOMMIT_JWT_SECRET (it mints HS256 tokens)".into(),
        ));
    }
    // A hook that may take longer than the request would make the client's retry race
    // the commit still waiting for its answer.
    let request_ms = settings.http.request_timeout_secs.saturating_mul(1000);
    if let Some(p) = settings.uploads.profiles.iter().find(|p| {
        p.validation_hook
            .as_ref()
            .is_some_and(|h| h.timeout.as_millis() >= u128::from(request_ms))
    }) {
        return Err(ConfigError(format!(
            "profiles.{}: validation_hook: timeout_ms must be below UPCOMMIT_REQUEST_TIMEOUT_SECS ({request_ms} ms)",
            p.name
        )));
    }
    Ok(())
}
