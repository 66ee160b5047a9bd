//! The HTTP server: where it listens, its timeouts and limits, and the pages it may serve (the
//! demo upload page, the admin console).

use super::file::FileSettings;
use super::source::{ConfigError, Source};

/// Address the HTTP server binds (`UPCOMMIT_LISTEN`).
pub(super) fn listen(src: &Source<'_>, f: &mut FileSettings) -> String {
    src.string("UPCOMMIT_LISTEN", f.listen.take(), "127.0.0.1:8080")
}

#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Request timeout in seconds (`UPCOMMIT_REQUEST_TIMEOUT_SECS`, default 30).
    pub request_timeout_secs: u64,
    /// Largest request body in bytes (`UPCOMMIT_BODY_LIMIT_BYTES`, default 65536).
    pub body_limit_bytes: usize,
    /// Seconds a connection has to send a complete request head, counted from when it opens or
    /// from its last response (so it is also the keep-alive idle timeout); then it is closed
    /// (`UPCOMMIT_HEADER_READ_TIMEOUT_SECS`, default 30, at least 1).
    pub header_read_timeout_secs: u64,
    /// Connections served at once; further ones wait in the listen backlog until one closes
    /// (`UPCOMMIT_MAX_CONNECTIONS`, default 4096, at least 1).
    pub max_connections: usize,
}

impl HttpSettings {
    /// Timeouts and limits; the timeouts and the connection limit are at least 1.
    pub(super) fn load(src: &Source<'_>, f: &FileSettings) -> Result<Self, ConfigError> {
        Ok(HttpSettings {
            request_timeout_secs: src.number(
                "UPCOMMIT_REQUEST_TIMEOUT_SECS",
                f.request_timeout_secs,
                30,
                1..=86_400,
            )?,
            // Request bodies are small JSON documents; the bytes go straight to S3.
            body_limit_bytes: src.number(
                "UPCOMMIT_BODY_LIMIT_BYTES",
                f.body_limit_bytes,
                64 * 1024,
                1024..=64 * 1024 * 1024,
            )?,
            header_read_timeout_secs: src.number(
                "UPCOMMIT_HEADER_READ_TIMEOUT_SECS",
                f.header_read_timeout_secs,
                30,
                1..=3600,
            )?,
            max_connections: src.number(
                "UPCOMMIT_MAX_CONNECTIONS",
                f.max_connections,
                4096,
                1..=1_000_000,
            )?,
        })
    }
}

/// The browser upload page, for trying the service and for the browser test.
#[derive(Debug, Clone, Default)]
pub struct DemoSettings {
    /// Serve the upload page at `/demo` (`UPCOMMIT_DEMO`, default false).
    pub enabled: bool,
    /// Dev mode only: let the page mint short-lived tokens for any user id
    /// (`UPCOMMIT_DEMO_MINT_TOKENS`, default false; needs `UPCOMMIT_DEMO`).
    pub mint_tokens: bool,
}

impl DemoSettings {
    /// The page and its token minting; minting without the page is refused here, minting
    /// without a secret in `rules`.
    pub(super) fn load(src: &Source<'_>, f: &FileSettings) -> Result<Self, ConfigError> {
        let demo = DemoSettings {
            enabled: src.flag("UPCOMMIT_DEMO", f.demo, false)?,
            mint_tokens: src.flag("UPCOMMIT_DEMO_MINT_TOKENS", f.demo_mint_tokens, false)?,
        };
        if demo.mint_tokens && !demo.enabled {
            return Err(ConfigError(
                "UPCOMMIT_DEMO_MINT_TOKENS needs UPCOMMIT_DEMO=true (it mints tokens for the demo page)"
                    .into(),
            ));
        }
        Ok(demo)
    }
}

/// The admin console (`/admin`): pages over the admin API for operators.
#[derive(Debug, Clone, Default)]
pub struct ConsoleSettings {
    /// Serve the console at `/admin` (`UPCOMMIT_ADMIN_CONSOLE`, default false). Never with the
    /// demo's token minting (`rules`).
    pub enabled: bool,
    /// The console's OAuth client id at the identity provider (`UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID`,
    /// default none: pasted tokens only): with it the sign-in page offers the provider's
    /// authorization code flow with PKCE, as a public client whose redirect URI is
    /// `<origin>/admin`. Needs the console on and exactly one identity provider with an admin
    /// claim (`rules`).
    pub client_id: Option<String>,
    /// The scopes the console asks the provider for (`UPCOMMIT_ADMIN_CONSOLE_SCOPE`, default
    /// `openid`).
    pub scope: String,
}

impl ConsoleSettings {
    pub(super) fn load(src: &Source<'_>, f: &mut FileSettings) -> Result<Self, ConfigError> {
        let client_id = src.string(
            "UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID",
            f.admin_console_client_id.take(),
            "",
        );
        if client_id
            .chars()
            .any(|c| c.is_control() || c.is_whitespace())
            || client_id.len() > 256
        {
            return Err(ConfigError(
                "UPCOMMIT_ADMIN_CONSOLE_CLIENT_ID: at most 256 characters, no spaces or control characters".into(),
            ));
        }
        let scope = src.string(
            "UPCOMMIT_ADMIN_CONSOLE_SCOPE",
            f.admin_console_scope.take(),
            "openid",
        );
        if scope.is_empty() || scope.chars().any(|c| c.is_control()) || scope.len() > 512 {
            return Err(ConfigError(
                "UPCOMMIT_ADMIN_CONSOLE_SCOPE: space-separated scopes, at most 512 characters"
                    .into(),
            ));
        }
        Ok(ConsoleSettings {
            enabled: src.flag("UPCOMMIT_ADMIN_CONSOLE", f.admin_console, false)?,
            client_id: (!client_id.is_empty()).then_some(client_id),
            scope,
        })
    }
}
