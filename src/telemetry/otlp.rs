//! Whether the environment asks for trace export, and the OTLP/HTTP pipeline when it does.
//! Only the standard OpenTelemetry variables are read (they are not upcommit settings); the SDK
//! and the exporter read the rest themselves (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TIMEOUT`,
//! `OTEL_TRACES_SAMPLER`, `OTEL_BSP_*`, `OTEL_RESOURCE_ATTRIBUTES`).

use opentelemetry::Key;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";

/// The service name when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` gives one.
const SERVICE: &str = "upcommit";

/// What the environment asks for; `Err` says why an asked-for export cannot be had.
pub(super) fn wanted(get: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    // The specification: an empty value is the same as an unset one.
    let var = |k: &str| {
        get(k)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    // The endpoint as the exporter will read it: untrimmed (it would not parse " http://…" and
    // would send to localhost:4318 instead), the traces variable first whenever it is set at all.
    let Some((name, endpoint)) = [TRACES_ENDPOINT, ENDPOINT]
        .into_iter()
        .find_map(|k| get(k).filter(|v| !v.is_empty()).map(|v| (k, v)))
    else {
        return Ok(false);
    };
    if endpoint.trim().is_empty() && var(ENDPOINT).is_none() {
        return Ok(false);
    }
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Ok(false);
    }
    match var("OTEL_TRACES_EXPORTER").as_deref() {
        None | Some("otlp") => {}
        Some("none") => return Ok(false),
        Some(other) => {
            return Err(format!(
                "OTEL_TRACES_EXPORTER={other}: upcommit exports with otlp only"
            ))
        }
    }
    let protocol =
        var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL").or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"));
    if let Some(other) = protocol.filter(|p| p != "http/protobuf") {
        return Err(format!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other}: upcommit exports http/protobuf only"
        ));
    }
    // The exporter would quietly send an unparsable endpoint's spans to localhost:4318.
    let parsed = endpoint.parse::<axum::http::Uri>().ok();
    let absolute = parsed.is_some_and(|u| {
        matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some_and(|h| !h.is_empty())
    });
    if !absolute {
        return Err(format!(
            "{name}={endpoint:?}: not an http:// or https:// URL"
        ));
    }
    Ok(true)
}

/// The tracer provider with a batch OTLP/HTTP exporter, or `None` when export is not asked for.
pub(super) fn provider_from_env(
    get: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<SdkTracerProvider>, String> {
    if !wanted(get)? {
        return Ok(None);
    }
    // The endpoint, headers and timeout come from the standard variables (the exporter reads
    // them); `/v1/traces` is appended to `OTEL_EXPORTER_OTLP_ENDPOINT`, not to the traces one.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .build()
        .map_err(|e| format!("OTLP exporter: {e}"))?;
    let detected = Resource::builder().build();
    let named = detected
        .get(&Key::from_static_str("service.name"))
        .is_some_and(|v| v.as_str() != "unknown_service");
    let resource = if named {
        detected
    } else {
        Resource::builder().with_service_name(SERVICE).build()
    };
    // The batch processor exports from a thread of its own; `OTEL_TRACES_SAMPLER` is read by
    // the SDK's default configuration (parent-based always-on when unset).
    Ok(Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build(),
    ))
}

#[cfg(test)]
mod tests {
    use super::wanted;

    fn with(vars: &[(&str, &str)]) -> Result<bool, String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        wanted(&|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        assert_eq!(with(&[]), Ok(false));
        assert_eq!(
            with(&[
                ("OTEL_SERVICE_NAME", "svc"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "k=v"),
                ("OTEL_TRACES_SAMPLER", "always_on"),
            ]),
            Ok(false)
        );
        // Empty is unset.
        assert_eq!(
            with(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", ""),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "  ")
            ]),
            Ok(false)
        );
    }

    #[test]
    fn either_endpoint_turns_export_on() {
        assert_eq!(
            with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]),
            Ok(true)
        );
        assert_eq!(
            with(&[(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://collector:4318/v1/traces"
            )]),
            Ok(true)
        );
    }

    #[test]
    fn an_endpoint_that_is_no_url_is_refused_rather_than_sent_elsewhere() {
        for bad in [
            "collector:4318",
            "not a url",
            "ftp://collector/",
            "http://",
            "http://127.0.0.1:4318 ",
            " http://127.0.0.1:4318",
        ] {
            let err = with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", bad)]).expect_err(bad);
            assert!(err.contains("OTEL_EXPORTER_OTLP_ENDPOINT"), "{err}");
        }
        // The traces endpoint is the one used when both are set.
        assert!(with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector")
        ])
        .is_err());
        // A traces endpoint of blanks is set for the exporter: it is not skipped for the other.
        assert!(with(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "  ")
        ])
        .is_err());
        assert_eq!(
            with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otlp.example.com")]),
            Ok(true)
        );
    }

    #[test]
    fn the_standard_off_switches_win_over_an_endpoint() {
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");
        assert_eq!(with(&[on, ("OTEL_SDK_DISABLED", "TRUE")]), Ok(false));
        assert_eq!(with(&[on, ("OTEL_SDK_DISABLED", "false")]), Ok(true));
        assert_eq!(with(&[on, ("OTEL_TRACES_EXPORTER", "none")]), Ok(false));
        assert_eq!(with(&[on, ("OTEL_TRACES_EXPORTER", "otlp")]), Ok(true));
    }

    #[test]
    fn an_export_upcommit_cannot_do_is_refused_with_the_reason() {
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317");
        let err = with(&[on, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).expect_err("grpc");
        assert!(err.contains("http/protobuf"), "{err}");
        assert!(with(&[on, ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")]).is_err());
        assert_eq!(
            with(&[on, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")]),
            Ok(true)
        );
        assert!(with(&[on, ("OTEL_TRACES_EXPORTER", "zipkin")]).is_err());
    }
}
