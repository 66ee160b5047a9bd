//! The Prometheus rules of `deploy/prometheus/` and the Grafana dashboard of `deploy/grafana/`
//! against what the server exports: every metric an expression or a dashboard query names is on
//! `/metrics` of a server that has done the work (an upload committed through a validation hook
//! that failed open, a commit of an upload never uploaded, a presign over the quota, an event
//! delivery attempt to a webhook nobody answers, a bucket check, a sweep and a reconcile run),
//! with every label its matchers use and every value its equality matchers ask for; recorded
//! names are recorded in the file; every alert links its runbook section of
//! `docs/operations.md` and has a firing and a quiet `promtool` unit test. (`promtool` itself
//! runs in scripts/test.sh; scripts/alerts_e2e.sh watches an alert fire in a real Prometheus.)
//! The dashboard's own reading (Grafana's variables, its panels and rows, its shape) is in
//! [`dashboard`].
//!
//! The expressions are read with a small tokenizer, not a PromQL parser: identifiers starting
//! `upcommit_` are metric names, a `{…}` right after one holds its label matchers; identifiers
//! with a colon are recording rules' names. Grouping labels (`by`, `on`) are not checked.

mod dashboard;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{error_code, spawn_app_with, Spawn};

const RULES: &str = include_str!("../../deploy/prometheus/upcommit-rules.yml");
const RULE_TESTS: &str = include_str!("../../deploy/prometheus/upcommit-rules.test.yml");
const OPERATIONS: &str = include_str!("../../docs/operations.md");

/// Labels Prometheus sets on every scraped series itself (the scrape job and the target): a
/// matcher on them is about the target, and a metric exporting one would see it renamed
/// `exported_<label>`.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

/// The values of every `key:` in a YAML file shaped like the rules files: inline scalars, plain
/// or quoted, and `|`/`>` block scalars. Not a YAML parser; `promtool check rules` is the one
/// that judges the syntax.
fn yaml_values(text: &str, key: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut values = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        let trimmed = line.trim_start();
        let item = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        let column = line.len() - item.len();
        let Some(rest) = item
            .strip_prefix(key)
            .and_then(|r| r.strip_prefix(':'))
            .map(str::trim)
        else {
            continue;
        };
        if rest.starts_with('|') || rest.starts_with('>') {
            let mut block = Vec::new();
            while i < lines.len() {
                let next = lines[i];
                let indent = next.len() - next.trim_start().len();
                if !next.trim().is_empty() && indent <= column {
                    break;
                }
                block.push(next.trim());
                i += 1;
            }
            values.push(block.join("\n").trim().to_owned());
        } else {
            let unquoted = ['"', '\'']
                .iter()
                .find_map(|q| rest.strip_prefix(*q)?.strip_suffix(*q))
                .unwrap_or(rest);
            values.push(unquoted.to_owned());
        }
    }
    values
}

#[derive(Debug, Clone, PartialEq)]
struct Matcher {
    label: String,
    op: String,
    value: String,
}

/// One `upcommit_…` metric an expression selects, with its label matchers.
#[derive(Debug, Clone, PartialEq)]
struct Selector {
    metric: String,
    matchers: Vec<Matcher>,
}

/// The metric selectors (`upcommit_…`) and the recorded names (with a colon) an expression uses.
fn tokens(expr: &str) -> Result<(Vec<Selector>, Vec<String>), String> {
    let c: Vec<char> = expr.chars().collect();
    let word_char = |ch: char| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':';
    let (mut selectors, mut recorded) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if matches!(ch, '"' | '\'' | '`') {
            i = string_at(&c, i)?.1;
        } else if ch == '#' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '[' {
            // A range or a subquery's `[2d:30m]`: durations, not names.
            while i < c.len() && c[i] != ']' {
                i += 1;
            }
        } else if ch.is_ascii_alphabetic() || ch == '_' || ch == ':' {
            let start = i;
            while i < c.len() && word_char(c[i]) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let mut j = i;
            while j < c.len() && c[j].is_whitespace() {
                j += 1;
            }
            let mut matchers = Vec::new();
            if j < c.len() && c[j] == '{' {
                (matchers, i) = matchers_at(&c, j + 1)?;
            }
            if word.starts_with("upcommit_") {
                selectors.push(Selector {
                    metric: word,
                    matchers,
                });
            } else if word.contains(':') {
                recorded.push(word);
            }
        } else if ch.is_ascii_digit() || ch == '.' {
            // Numbers and durations (0.99, 5m, 2.5, 1e3).
            while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    Ok((selectors, recorded))
}

/// The string literal opening at `c[at]`, unescaped, and the index after its closing quote.
fn string_at(c: &[char], at: usize) -> Result<(String, usize), String> {
    let quote = c[at];
    let mut value = String::new();
    let mut i = at + 1;
    while i < c.len() {
        match c[i] {
            '\\' if quote != '`' && i + 1 < c.len() => {
                value.push(c[i + 1]);
                i += 2;
            }
            ch if ch == quote => return Ok((value, i + 1)),
            ch => {
                value.push(ch);
                i += 1;
            }
        }
    }
    Err(format!("unterminated string at {at}"))
}

/// The matchers from `c[at]` (just after `{`) to the closing `}`, and the index after it.
fn matchers_at(c: &[char], at: usize) -> Result<(Vec<Matcher>, usize), String> {
    let mut matchers = Vec::new();
    let mut i = at;
    loop {
        while i < c.len() && (c[i].is_whitespace() || c[i] == ',') {
            i += 1;
        }
        if i >= c.len() {
            return Err("unterminated label matchers".into());
        }
        if c[i] == '}' {
            return Ok((matchers, i + 1));
        }
        let start = i;
        while i < c.len() && (c[i].is_ascii_alphanumeric() || c[i] == '_') {
            i += 1;
        }
        let label: String = c[start..i].iter().collect();
        while i < c.len() && c[i].is_whitespace() {
            i += 1;
        }
        let op = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|op| c[i..].starts_with(&op.chars().collect::<Vec<_>>()))
            .ok_or_else(|| format!("no matcher operator after {label:?}"))?;
        i += op.len();
        while i < c.len() && c[i].is_whitespace() {
            i += 1;
        }
        if label.is_empty() || i >= c.len() || !matches!(c[i], '"' | '\'' | '`') {
            return Err(format!("malformed matcher on {label:?}"));
        }
        let (value, end) = string_at(c, i)?;
        i = end;
        matchers.push(Matcher {
            label,
            op: op.to_owned(),
            value,
        });
    }
}

type Sample = (String, BTreeMap<String, String>);

/// Every sample's name and labels in a Prometheus text page.
fn samples(page: &str) -> Vec<Sample> {
    page.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let c: Vec<char> = line.chars().collect();
            let name_end = c
                .iter()
                .position(|ch| *ch == '{' || *ch == ' ')
                .unwrap_or(c.len());
            let name: String = c[..name_end].iter().collect();
            let mut labels = BTreeMap::new();
            if c.get(name_end) == Some(&'{') {
                let (matchers, _) = matchers_at(&c, name_end + 1).expect("a well-formed sample");
                for m in matchers {
                    labels.insert(m.label, m.value);
                }
            }
            (name, labels)
        })
        .collect()
}

/// What in `exprs` names something `page` (a `/metrics` text) does not export, or a recorded
/// name `RULES` does not record; empty when everything is there.
fn unexported(exprs: &[String], page: &str) -> Vec<String> {
    let scraped = samples(page);
    let recorded = yaml_values(RULES, "record");
    let mut problems = Vec::new();
    for expr in exprs {
        let (selectors, names) = match tokens(expr) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{expr}: {e}"));
                continue;
            }
        };
        for name in names {
            if !recorded.contains(&name) {
                problems.push(format!("{name}: no rule records it"));
            }
        }
        for s in selectors {
            let series: Vec<&BTreeMap<String, String>> = scraped
                .iter()
                .filter(|(name, _)| *name == s.metric)
                .map(|(_, labels)| labels)
                .collect();
            if series.is_empty() {
                problems.push(format!("{}: not on /metrics", s.metric));
                continue;
            }
            for m in s
                .matchers
                .iter()
                .filter(|m| !TARGET_LABELS.contains(&m.label.as_str()))
            {
                if !series.iter().any(|l| l.contains_key(&m.label)) {
                    problems.push(format!("{}: no label {}", s.metric, m.label));
                } else if m.op == "=" && !series.iter().any(|l| l.get(&m.label) == Some(&m.value)) {
                    problems.push(format!(
                        "{}{{{}=\"{}\"}}: no such series",
                        s.metric, m.label, m.value
                    ));
                }
            }
        }
    }
    problems
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_and_label_the_rules_and_the_dashboard_name_is_on_metrics_of_a_server_that_did_the_work(
) {
    // A hook nobody answers, failing open: the commit goes on and is counted. A webhook
    // endpoint on the same dead port: its delivery attempts are counted (result "retry").
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("free port")
        .local_addr()
        .expect("addr")
        .port();
    let app = spawn_app_with(Spawn {
        config: Some(format!(
            r#"
            [[profiles]]
            name = "scan"
            content_types = ["image/png"]
            max_size = 8388608
            final_prefix = "scanned/"
            validation_hook = {{ url = "http://127.0.0.1:{port}/check", on_error = "allow" }}

            [[events.webhooks]]
            id = "app"
            url = "http://127.0.0.1:{port}/events"
            secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
            types = ["*"]
            "#
        )),
        env: vec![("UPCOMMIT_QUOTA_DAILY_UPLOADS", "2".to_owned())],
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    let p = app.uploaded(&token, "scan", "image/png", 2000, "PUT").await;
    assert_eq!(app.commit(&token, &p.key, None).await.status(), 201);
    // Errors the dashboard shows by operation: S3's read of an object that is not there, and
    // the catalog's quota refusal.
    let never_uploaded = app.presign_ok(&token, "scan", "image/png", 10, "PUT").await;
    let refused = app.commit(&token, &never_uploaded.key, None).await;
    assert_eq!(error_code(refused).await.1, "object_not_uploaded");
    let over = app
        .presign(
            &token,
            json!({"profile": "scan", "content_type": "image/png", "size": 10}),
        )
        .await;
    assert_eq!(error_code(over).await.1, "quota_exceeded");
    app.sweep_after_urls_expire().await;
    let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
        .args(["reconcile", "--json"])
        .envs(&app.env)
        .output()
        .expect("run reconcile");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Prune and hygiene, whose overdue arms name their runs too.
    for job in ["prune", "hygiene"] {
        let out = Command::new(env!("CARGO_BIN_EXE_upcommit"))
            .args([job, "--json"])
            .envs(&app.env)
            .output()
            .expect("run the job");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{job}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let exprs = yaml_values(RULES, "expr");
    assert!(exprs.len() >= 17, "{exprs:?}");
    let board = dashboard::parse(dashboard::DASHBOARD);
    let queries = dashboard::queries(&board).len();
    assert!(queries >= dashboard::DASHBOARD_QUERIES, "{queries} queries");
    // The job and outbox gauges show the runs within a few seconds (a background read every
    // 5 s); the delivery attempt within a second of the commit.
    let started = Instant::now();
    let (page, problems) = loop {
        let page = app
            .get("/metrics", None)
            .await
            .text()
            .await
            .expect("metrics");
        let mut problems = unexported(&exprs, &page);
        problems.extend(dashboard::unexported_by(&board, &page));
        if problems.is_empty() || started.elapsed() > Duration::from_secs(20) {
            break (page, problems);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(problems.is_empty(), "{problems:#?}\n{page}");
    let scraped = samples(&page);
    let renamed: Vec<&Sample> = scraped
        .iter()
        .filter(|(_, labels)| TARGET_LABELS.iter().any(|t| labels.contains_key(*t)))
        .collect();
    assert!(
        renamed.is_empty(),
        "Prometheus would rename these labels: {renamed:?}"
    );
}

/// The check fails on what a typo makes of a rule: an unknown metric, label or value, and a
/// recorded name nothing records.
#[test]
fn a_misspelt_metric_label_value_or_recorded_name_is_reported() {
    let page = "\
# TYPE upcommit_bucket_check_ok gauge
upcommit_bucket_check_ok{check=\"versioning\"} 1
upcommit_event_outbox_depth{stage=\"failed\"} 0
upcommit_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/files\",status=\"201\"} 3
";
    let check = |expr: &str| unexported(&[expr.to_owned()], page);
    assert_eq!(
        check(r#"min by (check) (upcommit_bucket_check_ok{check="versioning"}) == 0"#),
        Vec::<String>::new()
    );
    assert_eq!(
        check(
            r#"sum(rate(upcommit_http_request_duration_seconds_count{route!~"/healthz|/readyz", status=~"5..", job="upcommit"}[5m])) > 0.5"#
        ),
        Vec::<String>::new(),
        "regex matchers check the label only; target labels are not the server's"
    );
    assert_eq!(
        check("min(upcommit_bucket_check_okk) == 0"),
        ["upcommit_bucket_check_okk: not on /metrics"]
    );
    assert_eq!(
        check(r#"upcommit_bucket_check_ok{checks="versioning"}"#),
        ["upcommit_bucket_check_ok: no label checks"]
    );
    assert_eq!(
        check(r#"max(upcommit_event_outbox_depth{stage = "faild"}) > 0"#),
        ["upcommit_event_outbox_depth{stage=\"faild\"}: no such series"]
    );
    assert_eq!(
        check("route:upcommit_http_requests_5xx:ratio_rate5 > 0.05"),
        ["route:upcommit_http_requests_5xx:ratio_rate5: no rule records it"]
    );
    assert_eq!(
        check(r#"upcommit_bucket_check_ok{check="versioning""#),
        [r#"upcommit_bucket_check_ok{check="versioning": unterminated label matchers"#]
    );
}

#[test]
fn expressions_are_read_inline_and_from_block_scalars() {
    let yaml = "\
groups:
  - name: g
    rules:
      - record: a:b:c
        expr: sum(upcommit_x)
      - alert: A
        expr: |
          upcommit_y{l=\"v\"} > 1
          or
          upcommit_z > 2
        for: 5m
      - alert: B
        expr: \"upcommit_w == 0\"
";
    assert_eq!(
        yaml_values(yaml, "expr"),
        [
            "sum(upcommit_x)",
            "upcommit_y{l=\"v\"} > 1\nor\nupcommit_z > 2",
            "upcommit_w == 0"
        ]
    );
    assert_eq!(yaml_values(yaml, "record"), ["a:b:c"]);
    let (selectors, _) = tokens(&yaml_values(yaml, "expr")[1]).expect("tokens");
    let names: Vec<&str> = selectors.iter().map(|s| s.metric.as_str()).collect();
    assert_eq!(names, ["upcommit_y", "upcommit_z"]);
    assert_eq!(
        selectors[0].matchers,
        [Matcher {
            label: "l".into(),
            op: "=".into(),
            value: "v".into()
        }]
    );
}

/// GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn every_alert_links_its_runbook_section_of_operations_md() {
    let anchors: Vec<String> = OPERATIONS
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect();
    let alerts = yaml_values(RULES, "alert");
    let links = yaml_values(RULES, "runbook_url");
    assert_eq!(alerts.len(), links.len(), "one runbook_url per alert");
    for (alert, link) in alerts.iter().zip(&links) {
        assert_eq!(
            *link,
            format!("docs/operations.md#alert-{}", alert.to_lowercase())
        );
        let (_, section) = link.split_once('#').expect("an anchor");
        assert!(
            anchors.iter().any(|a| a == section),
            "docs/operations.md has no heading \"Alert: {alert}\" (#{section})"
        );
    }
}

#[test]
fn every_alert_has_a_firing_and_a_quiet_unit_test() {
    // (alertname, whether that case expects alerts), in the order the test file lists them.
    let lines: Vec<&str> = RULE_TESTS.lines().collect();
    let mut cases = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(name) = line.trim().strip_prefix("alertname:") {
            let expected = lines[i + 1..]
                .iter()
                .find_map(|l| l.trim().strip_prefix("exp_alerts:"))
                .expect("exp_alerts after alertname");
            cases.push((name.trim().to_owned(), expected.trim() != "[]"));
        }
    }
    for alert in yaml_values(RULES, "alert") {
        for firing in [true, false] {
            assert!(
                cases.contains(&(alert.clone(), firing)),
                "no {} case for {alert} in upcommit-rules.test.yml",
                if firing { "firing" } else { "quiet" }
            );
        }
    }
}
