//! The rules that read two concerns, checked once every concern has loaded.

use super::source::ConfigError;
use super::Settings;

/// The admin console against the demo's token minting and its sign-in against the identity
/// providers, the minting against the HS256 secret,
/// then each profile's validation hook against the request timeout.
pub(super) fn check(settings: &Settings) -> Result<(), ConfigError> {
    // The console acts on every file and endpoint; a server that hands out tokens to anyone
    // who asks is a development toy, and the two must never be one server.
    if settings.console.enabled && settings.demo.mint_tokens {
        return Err(ConfigError(
            "UPCOMMIT_ADMIN_CONSOLE=true cannot be served with UPCOMMIT_DEMO_MINT_TOKENS=true \
             (minting hands out tokens to anyone): turn minting off to open the console"
                .into(),
        ));
    }
    // The console's sign-in through the identity provider: a page with nowhere to sign in, or
    // whose provider's tokens could never be an admin's, is a setting that cannot work.
    if settings.console.client_id.is_some() {
        if !settings.console.enabled {
            return Err(ConfigError(
                "UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID needs UPCOMMIT_ADMIN_CONSOLE=true".into(),
            ));
        }
        let [provider] = settings.auth.issuers.as_slice() else {
            return Err(ConfigError(
                "UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID needs exactly one identity provider (UPCOMMIT_JWKS_URL, or one [[issuers]] table): the console signs in at its issuer".into(),
            ));
        };
        if provider.admin.is_none() {
            return Err(ConfigError(
                "UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID: the identity provider has no admin claim (UPCOMMIT_JWT_ADMIN_CLAIM and UPCOMMIT_JWT_ADMIN_VALUE), so none of its tokens could open the console".into(),
            ));
        }
        if !(provider.issuer.starts_with("https://") || provider.issuer.starts_with("http://")) {
            return Err(ConfigError(
                "UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID: the provider's issuer must be an http(s) URL (its discovery document is <issuer>/.well-known/openid-configuration)".into(),
            ));
        }
    }
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

#[cfg(test)]
mod tests {
    use crate::config::source::env;
    use crate::config::Settings;

    fn with(extra: &[(&str, &str)]) -> Result<Settings, String> {
        let mut vars = env(extra);
        vars.insert("UPCOMMIT_JWT_SECRET".into(), "0123456789abcdef".into());
        Settings::from_map(&vars).map_err(|e| e.0)
    }

    #[test]
    fn the_console_is_never_served_with_token_minting() {
        let err = with(&[
            ("UPCOMMIT_ADMIN_CONSOLE", "true"),
            ("UPCOMMIT_DEMO", "true"),
            ("UPCOMMIT_DEMO_MINT_TOKENS", "true"),
        ])
        .expect_err("console with minting");
        assert!(err.starts_with("UPCOMMIT_ADMIN_CONSOLE"), "{err}");
        assert!(err.contains("UPCOMMIT_DEMO_MINT_TOKENS"), "{err}");

        // Either alone starts; the demo page without minting may sit beside the console.
        assert!(with(&[("UPCOMMIT_ADMIN_CONSOLE", "true")]).is_ok_and(|s| s.console.enabled));
        assert!(with(&[
            ("UPCOMMIT_ADMIN_CONSOLE", "true"),
            ("UPCOMMIT_DEMO", "true")
        ])
        .is_ok());
        assert!(with(&[
            ("UPCOMMIT_DEMO", "true"),
            ("UPCOMMIT_DEMO_MINT_TOKENS", "true")
        ])
        .is_ok_and(|s| !s.console.enabled));
        // Off by default; the settings file's key turns it on too, and still meets the rule.
        assert!(with(&[]).is_ok_and(|s| !s.console.enabled));
        let mut vars = env(&[]);
        vars.insert("UPCOMMIT_JWT_SECRET".into(), "0123456789abcdef".into());
        let file = "admin_console = true\ndemo = true\ndemo_mint_tokens = true\n";
        let err = Settings::from_sources(Some(file), &|k| vars.get(k).cloned())
            .expect_err("the file's console with the file's minting");
        assert!(err.0.starts_with("UPCOMMIT_ADMIN_CONSOLE"), "{}", err.0);
        let file = "admin_console = true\n";
        assert!(
            Settings::from_sources(Some(file), &|k| vars.get(k).cloned())
                .is_ok_and(|s| s.console.enabled)
        );
        assert!(with(&[("UPCOMMIT_ADMIN_CONSOLE", "maybe")])
            .is_err_and(|e| e.starts_with("UPCOMMIT_ADMIN_CONSOLE")));
    }

    #[test]
    fn the_consoles_provider_sign_in_needs_the_console_and_one_provider_with_an_admin_claim() {
        let provider = [
            ("UPCOMMIT_JWKS_URL", "https://id.example.com/jwks"),
            ("UPCOMMIT_JWT_ISSUER", "https://id.example.com"),
            ("UPCOMMIT_JWT_AUDIENCE", "upcommit"),
            ("UPCOMMIT_JWT_ADMIN_CLAIM", "roles"),
            ("UPCOMMIT_JWT_ADMIN_VALUE", "upcommit-admin"),
        ];
        let mut all: Vec<(&str, &str)> = provider.to_vec();
        all.push(("UPCOMMIT_ADMIN_CONSOLE", "true"));
        all.push(("UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID", "console"));
        let s = with(&all).expect("console with provider sign-in");
        assert_eq!(s.console.client_id.as_deref(), Some("console"));
        assert_eq!(s.console.scope, "openid");

        let without_console: Vec<_> = all
            .iter()
            .copied()
            .filter(|(k, _)| *k != "UPCOMMIT_ADMIN_CONSOLE")
            .collect();
        let e = with(&without_console).expect_err("no console");
        assert!(e.contains("needs UPCOMMIT_ADMIN_CONSOLE=true"), "{e}");

        let no_provider = [
            ("UPCOMMIT_ADMIN_CONSOLE", "true"),
            ("UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID", "console"),
        ];
        let e = with(&no_provider).expect_err("no provider");
        assert!(e.contains("exactly one identity provider"), "{e}");

        let no_admin: Vec<_> = all
            .iter()
            .copied()
            .filter(|(k, _)| !k.starts_with("UPCOMMIT_JWT_ADMIN"))
            .collect();
        let e = with(&no_admin).expect_err("no admin claim");
        assert!(e.contains("no admin claim"), "{e}");

        let mut spaced = all.clone();
        spaced.retain(|(k, _)| *k != "UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID");
        spaced.push(("UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID", "a b"));
        let e = with(&spaced).expect_err("client id with a space");
        assert!(e.contains("UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID"), "{e}");
    }
}
