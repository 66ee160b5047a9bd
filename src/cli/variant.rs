//! `upcommit variant NAME FILE_ID…`: the short-lived URLs of files' renditions (docs/images.md),
//! as an app asks for them — one file through `GET /v1/files/{id}/variants/{name}`, several
//! through the batch route, 100 at a time. Prints one line per file (`id`, size, bytes, URL, or
//! the error's code), or the answers as JSON (`--json`). A 503 (`render_busy`, an outage) is
//! asked again after its `Retry-After`, `--retries` times.
//!
//! Exit codes: 0 every file answered a URL; 2 usage (no token, no id); 3 some file was refused
//! (its line says why); 4 the token was refused; 6 the service is unreachable or failing.

use std::time::Duration;

use serde_json::{json, Value};

use super::api_client::{ApiClient, ApiError};
use super::upload::{EXIT_AUTH, EXIT_REFUSED, EXIT_UNAVAILABLE, EXIT_USAGE};

#[derive(Debug, Clone, clap::Args)]
pub struct VariantArgs {
    /// The variant's name, as the files' profile names it.
    pub name: String,
    /// The files' ids (1 or more).
    #[arg(required = true)]
    pub ids: Vec<String>,
    /// The service's base URL.
    #[arg(long, env = "UPCOMMIT_SERVER", default_value = "http://127.0.0.1:8080")]
    pub server: String,
    /// Bearer token (or UPCOMMIT_TOKEN).
    #[arg(long, env = "UPCOMMIT_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print the answers as JSON on stdout: `{"variant", "files": [...]}`.
    #[arg(long)]
    pub json: bool,
    /// Times a 503 or no answer is asked again (after Retry-After, or 1 s).
    #[arg(long, default_value_t = 4)]
    pub retries: u32,
}

/// Files per batch call (the route's limit).
const BATCH: usize = 100;

async fn retried<F, Fut>(retries: u32, call: F) -> Result<Value, ApiError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Value, ApiError>>,
{
    let mut attempt = 0;
    loop {
        match call().await {
            Err(e) if attempt < retries && e.transient() => {
                let wait = match &e {
                    ApiError::Refused { retry_after, .. } => retry_after.unwrap_or(1),
                    ApiError::Unreachable(_) => 1,
                };
                attempt += 1;
                tokio::time::sleep(Duration::from_secs(wait.min(60))).await;
            }
            other => return other,
        }
    }
}

/// Every file's entry, as the batch route shapes them.
async fn entries(client: &ApiClient, args: &VariantArgs) -> Result<Vec<Value>, ApiError> {
    if let [id] = args.ids.as_slice() {
        let answer = retried(args.retries, || client.variant(id, &args.name)).await;
        return Ok(vec![match answer {
            Ok(r) => json!({ "id": id, "status": 200, "rendition": r }),
            Err(ApiError::Refused {
                status,
                code,
                message,
                ..
            }) if status.is_client_error() && status.as_u16() != 401 && status.as_u16() != 403 => {
                json!({ "id": id, "status": status.as_u16(), "error": { "code": code, "message": message } })
            }
            Err(e) => return Err(e),
        }]);
    }
    let mut out = Vec::with_capacity(args.ids.len());
    for chunk in args.ids.chunks(BATCH) {
        let answer = retried(args.retries, || client.variants(&args.name, chunk)).await?;
        out.extend(answer["files"].as_array().cloned().unwrap_or_default());
    }
    Ok(out)
}

pub async fn run(args: VariantArgs) -> i32 {
    let Some(token) = args.token.clone().filter(|t| !t.is_empty()) else {
        eprintln!("upcommit variant: no token: pass --token or set UPCOMMIT_TOKEN");
        return EXIT_USAGE;
    };
    let client = ApiClient::new(reqwest::Client::new(), &args.server, token);
    let files = match entries(&client, &args).await {
        Ok(f) => f,
        Err(ApiError::Refused {
            status,
            code,
            message,
            ..
        }) => {
            eprintln!("upcommit variant: {code}: {message}");
            return match status.as_u16() {
                401 | 403 => EXIT_AUTH,
                s if s >= 500 => EXIT_UNAVAILABLE,
                _ => EXIT_REFUSED,
            };
        }
        Err(ApiError::Unreachable(e)) => {
            eprintln!("upcommit variant: the service did not answer: {e}");
            return EXIT_UNAVAILABLE;
        }
    };
    let refused = files.iter().filter(|f| f["status"] != 200).count();
    if args.json {
        println!("{}", json!({ "variant": args.name, "files": files }));
    } else {
        for f in &files {
            let r = &f["rendition"];
            if f["status"] == 200 {
                println!(
                    "{}\t{}x{}\t{} bytes\t{}",
                    f["id"].as_str().unwrap_or("?"),
                    r["width"],
                    r["height"],
                    r["size"],
                    r["url"].as_str().unwrap_or("?")
                );
            } else {
                println!(
                    "{}\t{}\t{}",
                    f["id"].as_str().unwrap_or("?"),
                    f["error"]["code"].as_str().unwrap_or("?"),
                    f["error"]["message"].as_str().unwrap_or("")
                );
            }
        }
    }
    if refused > 0 {
        EXIT_REFUSED
    } else {
        0
    }
}
