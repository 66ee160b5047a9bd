//! The Grafana dashboard of `deploy/grafana/`, read as the rules are: its queries (each panel's
//! `targets[].expr`, the panels of collapsed rows included, and the `label_values(selector,
//! label)` of its query variables) with Grafana's variables substituted, then checked by
//! [`super::unexported`] against a live `/metrics`; and its shape: every panel with its own id
//! and a title, every query on the templated data source, every `upcommit_…` selector following
//! the `$job` and `$instance` variables. `promtool check rules` parses each query as PromQL.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::{json, Value};

use super::{samples, tokens, unexported, TARGET_LABELS};

pub const DASHBOARD: &str = include_str!("../../../deploy/grafana/upcommit-dashboard.json");

/// How many queries the dashboard holds (its panels' and its variables'): fewer means some went
/// missing, and an empty file cannot pass.
pub const DASHBOARD_QUERIES: usize = 38;

/// Grafana's own variables, with a value of their kind (a range, a number of seconds …).
const GRAFANA_VARIABLES: [(&str, &str); 6] = [
    ("__rate_interval", "5m"),
    ("__interval", "1m"),
    ("__interval_ms", "60000"),
    ("__range", "1h"),
    ("__range_s", "3600"),
    ("__range_ms", "3600000"),
];

/// What the dashboard's own variables (`$job`, `$instance`) become: a regex matching anything.
/// The dashboard uses them in `=~` matchers and in `job="$job"` (a target label the check leaves
/// alone); an equality matcher on one of the server's labels with a variable would find no
/// such series and be reported, since no value is known for it.
const ANY: &str = ".*";

/// The data source every panel and query names: the dashboard's `datasource` variable.
fn templated() -> Value {
    json!({"type": "prometheus", "uid": "${datasource}"})
}

pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("the dashboard is JSON")
}

/// Every panel, those a row keeps inside it (a collapsed row) included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        out.push(panel);
        out.extend(panel["panels"].as_array().into_iter().flatten());
    }
    out
}

fn variables(dashboard: &Value) -> &[Value] {
    dashboard["templating"]["list"]
        .as_array()
        .map_or(&[], Vec::as_slice)
}

/// `query` with Grafana's variables replaced: `$name`, `${name}`, `${name:format}` and
/// `[[name]]`. A name neither Grafana's nor one of `declared` is an error; a `$` that starts no
/// name (a regex's end anchor) stays.
fn substitute(query: &str, declared: &[&str]) -> Result<String, String> {
    let c: Vec<char> = query.chars().collect();
    let name_char = |ch: char| ch.is_ascii_alphanumeric() || ch == '_';
    let mut out = String::new();
    let mut i = 0;
    while i < c.len() {
        let (name, end) = if c[i] == '$' && c.get(i + 1) == Some(&'{') {
            let close = (i..c.len())
                .find(|&j| c[j] == '}')
                .ok_or_else(|| format!("unclosed ${{ at {i}"))?;
            let inner: String = c[i + 2..close].iter().collect();
            let name = inner.split(':').next().unwrap_or_default().to_owned();
            (name, close + 1)
        } else if c[i] == '$' {
            let mut j = i + 1;
            while j < c.len() && name_char(c[j]) {
                j += 1;
            }
            (c[i + 1..j].iter().collect(), j)
        } else if c[i] == '[' && c.get(i + 1) == Some(&'[') {
            let close = (i + 2..c.len())
                .find(|&j| c[j] == ']' && c.get(j + 1) == Some(&']'))
                .ok_or_else(|| format!("unclosed [[ at {i}"))?;
            (c[i + 2..close].iter().collect(), close + 2)
        } else {
            (String::new(), i)
        };
        if end == i || name.is_empty() {
            out.push(c[i]);
            i += 1;
            continue;
        }
        let value = GRAFANA_VARIABLES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .or_else(|| declared.contains(&name.as_str()).then_some(ANY))
            .ok_or_else(|| format!("unknown variable ${name}"))?;
        out.push_str(value);
        i = end;
    }
    Ok(out)
}

/// The selector and the label of `label_values(selector, label)`, the one kind of variable
/// query the check reads.
fn label_values(query: &str) -> Option<(&str, &str)> {
    let inner = query
        .trim()
        .strip_prefix("label_values(")?
        .strip_suffix(')')?;
    let (selector, label) = inner.rsplit_once(',')?;
    Some((selector.trim(), label.trim()))
}

/// One query of the dashboard.
#[derive(Debug)]
pub struct Query {
    /// The panel's title and the query's refId, or the variable's name.
    pub place: String,
    /// The PromQL, variables substituted (a variable's: its `label_values` selector).
    pub promql: Result<String, String>,
    /// The label a `label_values` variable lists.
    lists: Option<String>,
}

/// Every query of the dashboard: its panels' targets and its query variables.
pub fn queries(dashboard: &Value) -> Vec<Query> {
    let declared: Vec<&str> = variables(dashboard)
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    let mut out = Vec::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or_default();
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            out.push(Query {
                place: format!(
                    "panel {title:?} query {}",
                    target["refId"].as_str().unwrap_or("?")
                ),
                promql: if expr.trim().is_empty() {
                    Err("no expr".into())
                } else {
                    substitute(expr, &declared)
                },
                lists: None,
            });
        }
    }
    for variable in variables(dashboard).iter().filter(|v| v["type"] == "query") {
        let query = variable["query"]
            .as_str()
            .or_else(|| variable["query"]["query"].as_str())
            .unwrap_or_default();
        let (promql, lists) = match label_values(query) {
            Some((selector, label)) => (substitute(selector, &declared), Some(label.to_owned())),
            None => (
                Err(format!(
                    "{query:?}: only label_values(selector, label) queries are checked"
                )),
                None,
            ),
        };
        out.push(Query {
            place: format!("variable ${}", variable["name"].as_str().unwrap_or("?")),
            promql,
            lists,
        });
    }
    out
}

/// What the dashboard's queries name that `page` (a `/metrics` text) does not export, as
/// [`unexported`] finds it for the rules, each after where the query is; a query that cannot be
/// read (an unknown variable, a variable query other than `label_values`); a label a variable
/// lists that its metric does not carry.
pub fn unexported_by(dashboard: &Value, page: &str) -> Vec<String> {
    let scraped = samples(page);
    let mut problems = Vec::new();
    for q in queries(dashboard) {
        let promql = match q.promql {
            Ok(p) => p,
            Err(e) => {
                problems.push(format!("{}: {e}", q.place));
                continue;
            }
        };
        problems.extend(
            unexported(std::slice::from_ref(&promql), page)
                .into_iter()
                .map(|p| format!("{}: {p}", q.place)),
        );
        let Some(label) = q.lists.filter(|l| !TARGET_LABELS.contains(&l.as_str())) else {
            continue;
        };
        for s in tokens(&promql).map(|(s, _)| s).unwrap_or_default() {
            if !scraped
                .iter()
                .any(|(name, labels)| *name == s.metric && labels.contains_key(&label))
            {
                problems.push(format!("{}: {} has no label {label}", q.place, s.metric));
            }
        }
    }
    problems
}

/// What keeps the dashboard from importing and following its variables: no uid or title; no
/// `datasource` variable of Prometheus; a panel without an id, with another panel's id, without
/// a title or not within the 24 columns; a panel (rows aside), query or query variable whose
/// data source is not the templated one; a panel without queries; an `upcommit_…` selector
/// without `job="$job"` and `instance=~"$instance"`.
pub fn misshapen(dashboard: &Value) -> Vec<String> {
    let templated = templated();
    let mut problems = Vec::new();
    for key in ["uid", "title"] {
        if dashboard[key]
            .as_str()
            .map_or(true, |s| s.trim().is_empty())
        {
            problems.push(format!("no {key}"));
        }
    }
    if !variables(dashboard).iter().any(|v| {
        v["name"] == "datasource" && v["type"] == "datasource" && v["query"] == "prometheus"
    }) {
        problems.push("no variable \"datasource\" of type datasource, query prometheus".into());
    }
    for variable in variables(dashboard).iter().filter(|v| v["type"] == "query") {
        if variable["datasource"] != templated {
            problems.push(format!(
                "variable ${}: data source {} is not ${{datasource}}",
                variable["name"].as_str().unwrap_or("?"),
                variable["datasource"]
            ));
        }
    }
    let mut ids = BTreeSet::new();
    for panel in panels(dashboard) {
        let title = panel["title"].as_str().unwrap_or_default();
        let name = format!("panel {title:?} (id {})", panel["id"]);
        match panel["id"].as_u64() {
            None => problems.push(format!("{name}: no id")),
            Some(id) if !ids.insert(id) => problems.push(format!("{name}: id {id} is taken")),
            Some(_) => {}
        }
        if title.trim().is_empty() {
            problems.push(format!("{name}: no title"));
        }
        let grid = &panel["gridPos"];
        let (x, w) = (grid["x"].as_u64(), grid["w"].as_u64());
        if !x.zip(w).is_some_and(|(x, w)| w > 0 && x + w <= 24) {
            problems.push(format!("{name}: gridPos {grid} not within the 24 columns"));
        }
        if panel["type"] == "row" {
            continue;
        }
        if panel["datasource"] != templated {
            problems.push(format!(
                "{name}: data source {} is not ${{datasource}}",
                panel["datasource"]
            ));
        }
        let targets = panel["targets"].as_array().map_or(&[][..], Vec::as_slice);
        if targets.is_empty() {
            problems.push(format!("{name}: no query"));
        }
        for target in targets {
            let place = format!("{name} query {}", target["refId"]);
            if !target["datasource"].is_null() && target["datasource"] != templated {
                problems.push(format!(
                    "{place}: data source {} is not ${{datasource}}",
                    target["datasource"]
                ));
            }
            let selectors = tokens(target["expr"].as_str().unwrap_or_default())
                .map(|(s, _)| s)
                .unwrap_or_default();
            for s in selectors {
                for (label, op, value) in [("job", "=", "$job"), ("instance", "=~", "$instance")] {
                    if !s
                        .matchers
                        .iter()
                        .any(|m| m.label == label && m.op == op && m.value == value)
                    {
                        problems.push(format!(
                            "{place}: {} without {label}{op}\"{value}\"",
                            s.metric
                        ));
                    }
                }
            }
        }
    }
    problems
}

#[test]
fn the_dashboard_imports_and_every_panel_follows_the_templated_data_source_and_replicas() {
    let dashboard = parse(DASHBOARD);
    assert_eq!(misshapen(&dashboard), Vec::<String>::new());
    assert_eq!(dashboard["uid"], "upcommit");
    assert_eq!(dashboard["title"], "upcommit");
    assert_eq!(dashboard["schemaVersion"], 39);
    let rows: Vec<&str> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .filter(|p| p["type"] == "row")
        .filter_map(|p| p["title"].as_str())
        .collect();
    assert_eq!(
        rows,
        [
            "Bucket safety",
            "Traffic",
            "Storage",
            "Jobs",
            "Dependencies: S3 and the database",
            "Events and outbox"
        ],
        "the rows docs/operations.md describes"
    );
    let queries = queries(&dashboard);
    assert!(queries.len() >= DASHBOARD_QUERIES, "{queries:#?}");
    let unreadable: Vec<&Query> = queries.iter().filter(|q| q.promql.is_err()).collect();
    assert!(unreadable.is_empty(), "{unreadable:#?}");
}

/// The shape check fails on what an edit in Grafana or by hand can leave behind.
#[test]
fn a_panel_without_its_own_id_a_title_or_the_templated_data_source_is_reported() {
    let ok = r#"sum(upcommit_committed_files_total{job="$job",instance=~"$instance"})"#;
    let dashboard = json!({
        "uid": "u",
        "title": "t",
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus"},
            {"name": "job", "type": "query", "datasource": {"type": "prometheus", "uid": "prom-1"},
             "query": "label_values(upcommit_committed_files_total, job)"}
        ]},
        "panels": [
            {"type": "row", "id": 1, "title": "Row", "gridPos": {"x": 0, "w": 24}, "collapsed": true, "panels": [
                {"type": "stat", "id": 2, "title": "", "gridPos": {"x": 0, "w": 12},
                 "datasource": templated(), "targets": [{"refId": "A", "expr": ok}]},
                {"type": "stat", "id": 2, "title": "Twin", "gridPos": {"x": 12, "w": 12},
                 "datasource": templated(), "targets": [{"refId": "A", "expr": ok}]}
            ]},
            {"type": "timeseries", "id": 3, "title": "Wide", "gridPos": {"x": 12, "w": 16},
             "datasource": {"type": "prometheus", "uid": "prom-1"},
             "targets": [{"refId": "A", "expr": "sum(upcommit_committed_files_total)",
                          "datasource": {"type": "loki", "uid": "${datasource}"}}]},
            {"type": "timeseries", "title": "No id", "gridPos": {"x": 0, "w": 24},
             "datasource": templated(), "targets": []}
        ]
    });
    assert_eq!(
        misshapen(&dashboard),
        [
            "variable $job: data source {\"type\":\"prometheus\",\"uid\":\"prom-1\"} is not ${datasource}",
            "panel \"\" (id 2): no title",
            "panel \"Twin\" (id 2): id 2 is taken",
            "panel \"Wide\" (id 3): gridPos {\"w\":16,\"x\":12} not within the 24 columns",
            "panel \"Wide\" (id 3): data source {\"type\":\"prometheus\",\"uid\":\"prom-1\"} is not ${datasource}",
            "panel \"Wide\" (id 3) query \"A\": data source {\"type\":\"loki\",\"uid\":\"${datasource}\"} is not ${datasource}",
            "panel \"Wide\" (id 3) query \"A\": upcommit_committed_files_total without job=\"$job\"",
            "panel \"Wide\" (id 3) query \"A\": upcommit_committed_files_total without instance=~\"$instance\"",
            "panel \"No id\" (id null): no id",
            "panel \"No id\" (id null): no query",
        ]
    );
    assert_eq!(
        misshapen(&json!({"panels": []})),
        [
            "no uid",
            "no title",
            "no variable \"datasource\" of type datasource, query prometheus"
        ]
    );
}

/// The live check fails on what a typo makes of a dashboard query, in a panel a collapsed row
/// keeps or at the top, and in a variable.
#[test]
fn a_misspelt_metric_in_a_dashboard_is_reported() {
    let page = "\
upcommit_committed_files_total 1
upcommit_outcomes_total{flow=\"commit\",outcome=\"ok\"} 1
";
    let dashboard = |expr: &str, variable: &str| {
        json!({
            "templating": {"list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                {"name": "job", "type": "query", "query": {"query": variable, "refId": "V"}},
                {"name": "instance", "type": "query",
                 "query": "label_values(upcommit_committed_files_total{job=\"$job\"}, instance)"}
            ]},
            "panels": [
                {"type": "row", "id": 1, "title": "Row", "collapsed": true, "panels": [
                    {"type": "timeseries", "id": 2, "title": "Outcomes", "targets": [
                        {"refId": "A", "expr": expr}
                    ]}
                ]}
            ]
        })
    };
    let good = r#"sum by (outcome) (rate(upcommit_outcomes_total{job="$job",instance=~"${instance:regex}",flow="commit"}[$__rate_interval]))"#;
    let listing = "label_values(upcommit_committed_files_total, job)";
    assert_eq!(
        unexported_by(&dashboard(good, listing), page),
        Vec::<String>::new()
    );
    assert_eq!(
        unexported_by(
            &dashboard(
                &good.replace("upcommit_outcomes_total", "upcommit_outcome_total"),
                listing
            ),
            page
        ),
        ["panel \"Outcomes\" query A: upcommit_outcome_total: not on /metrics"]
    );
    assert_eq!(
        unexported_by(
            &dashboard(&good.replace("\"commit\"", "\"comit\""), listing),
            page
        ),
        ["panel \"Outcomes\" query A: upcommit_outcomes_total{flow=\"comit\"}: no such series"]
    );
    assert_eq!(
        unexported_by(&dashboard(&good.replace("$job", "$jbo"), listing), page),
        ["panel \"Outcomes\" query A: unknown variable $jbo"]
    );
    assert_eq!(
        unexported_by(
            &dashboard(good, "label_values(upcommit_committed_file_total, job)"),
            page
        ),
        ["variable $job: upcommit_committed_file_total: not on /metrics"]
    );
    assert_eq!(
        unexported_by(
            &dashboard(good, "label_values(upcommit_outcomes_total, outcomes)"),
            page
        ),
        ["variable $job: upcommit_outcomes_total has no label outcomes"]
    );
    assert_eq!(
        unexported_by(&dashboard(good, "query_result(up)"), page),
        ["variable $job: \"query_result(up)\": only label_values(selector, label) queries are checked"]
    );
}

#[test]
fn grafanas_variables_are_substituted_before_a_query_is_read() {
    let declared = ["job", "instance"];
    assert_eq!(
        substitute(
            r#"rate(x{job="$job",instance=~"${instance:regex}",a=~"[[job]]",route=~"/v1/files$"}[$__rate_interval]) * $__range_s"#,
            &declared
        ),
        Ok(r#"rate(x{job=".*",instance=~".*",a=~".*",route=~"/v1/files$"}[5m]) * 3600"#.to_owned())
    );
    assert_eq!(
        substitute("rate(x[$__interval])", &declared),
        Ok("rate(x[1m])".to_owned())
    );
    assert_eq!(
        substitute("x{a=\"$nope\"}", &declared),
        Err("unknown variable $nope".to_owned())
    );
    assert_eq!(
        substitute("rate(x[${__rate_interval", &declared),
        Err("unclosed ${ at 7".to_owned())
    );
    assert_eq!(
        label_values(r#"label_values(upcommit_x{job="$job",a="b"}, instance)"#),
        Some((r#"upcommit_x{job="$job",a="b"}"#, "instance"))
    );
    assert_eq!(label_values("label_names()"), None);
}

/// The tokenizer reads names, not grammar: `promtool check rules` (Debian's prometheus package,
/// which scripts/test.sh installs) parses every query, as a recording rule, with Prometheus's
/// own parser.
#[test]
fn every_dashboard_query_parses_as_promql() {
    let dashboard = parse(DASHBOARD);
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let queries = queries(&dashboard);
    for (i, q) in queries.iter().enumerate() {
        let promql = q.promql.as_ref().expect("a readable query");
        rules.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: {}\n",
            serde_json::to_string(promql).expect("a JSON string is a YAML scalar")
        ));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("dashboard-queries.yml");
    std::fs::write(&path, &rules).expect("write rules");
    let out = Command::new("promtool")
        .arg("check")
        .arg("rules")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| {
            panic!("promtool: {e} (install Debian's prometheus package; scripts/test.sh does)")
        });
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}\n{rules}");
    assert!(
        said.contains(&format!("SUCCESS: {} rules found", queries.len())),
        "{said}"
    );
}
