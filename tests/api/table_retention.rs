//! Every table has a retention: the schema's tables, read from the real database
//! (`sqlite_master`, `information_schema`), must each be classified in [`TABLES`] — pruned (and
//! by which path, and which test shows it), deleted when what it stands for is, bounded by
//! something other than use, or kept on purpose (and why). A new table fails the test until
//! someone says which; a table dropped from the schema fails it until its entry goes.
//! The tables this test shows are filled through use, pruned, and seen to shrink.

use std::collections::BTreeSet;

use serde_json::Value;
use upcommit::config::Settings;
use upcommit::services::prune::{prune_at, PruneOutcome, PruneSummary};

use crate::helpers::{spawn_app_with, Spawn, TestApp, TestDb};
use crate::hygiene::{file, scan, scan_seeing, DAY};
use crate::multipart::{complete, five_mib_parts, sorted, start, upload_parts};

/// What makes a table stop growing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retention {
    /// `upcommit prune` (and the server after every sweep) deletes its rows past a retention;
    /// `by` names the path, `shown_by` the test that fills it through use, prunes it and sees
    /// its row count drop.
    Pruned {
        by: &'static str,
        shown_by: &'static str,
    },
    /// Its rows go when the application or an operator deletes what they stand for.
    Deleted { by: &'static str },
    /// Grows with the code or the configuration, not with use.
    Bounded { why: &'static str },
    /// Grows with use and is kept whole on purpose.
    Kept { why: &'static str },
}

use Retention::{Bounded, Deleted, Kept, Pruned};

const THIS_TEST: &str = "table_retention::use_then_prune_shrinks_every_table_this_test_shows";

/// Every table of the schema, on both databases, and what keeps it from growing for ever.
const TABLES: &[(&str, Retention)] = &[
    (
        "_sqlx_migrations",
        Bounded {
            why: "one row per migration shipped",
        },
    ),
    (
        "render_failures",
        Deleted {
            by: "an admin's DELETE /v1/admin/files/{id}/render-failures, or a render of the variant that succeeds; one row per (file, variant) whose render killed its worker or timed out, kept while it refuses those bytes",
        },
    ),
    (
        "uploads",
        Pruned {
            by: "prune: uploads past UPCOMMIT_UPLOAD_RETENTION (RetentionCatalog::prune_uploads)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "multipart_sessions",
        Pruned {
            by: "prune: with their upload (prune_uploads)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "upload_parts",
        Pruned {
            by: "prune: with their upload (prune_uploads)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "quota_usage",
        Pruned {
            by: "prune: days before the upload retention's cutoff (prune_quota_days)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "file_handles",
        Kept {
            why: "a handle is the file the application stores and links to: it is the file's \
                  record for as long as the application may ask about it; hygiene moves a \
                  handle to `deleted` (its object gone) and keeps the row, so its id answers \
                  `deleted` rather than unknown, a committed upload's retry finds its handle \
                  after the upload row is pruned, and reconcile tells a file deleted on purpose \
                  from one that went missing",
        },
    ),
    (
        "file_links",
        Deleted {
            by: "DELETE /v1/files/{id}/links/{type}/{id}: one row per place the application \
                 uses a file, removed when it stops (bounded by the application's own data)",
        },
    ),
    (
        "job_runs",
        Pruned {
            by: "prune: runs ended before UPCOMMIT_JOB_HISTORY_RETENTION, the newest of each \
                 job, kind and outcome kept (AdminCatalog::prune_runs)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "job_items",
        Pruned {
            by: "prune: with their run (prune_runs)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "job_locks",
        Bounded {
            why: "one row per job name (sweep, prune, hygiene, …), deleted when released",
        },
    ),
    (
        "link_scans",
        Pruned {
            by: "prune: superseded completed scans and abandoned open ones past \
                 UPCOMMIT_JOB_HISTORY_RETENTION, never the latest completed \
                 (RetentionCatalog::expire_scans, prune_scans)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "link_scan_batches",
        Pruned {
            by: "prune: with their scan (prune_scans)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "link_scan_seen",
        Pruned {
            by: "prune: with their scan (prune_scans)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "events",
        Pruned {
            by: "prune: positioned events every endpoint received, older than the upload \
                 retention, never the newest (RetentionCatalog::prune_events)",
            shown_by: THIS_TEST,
        },
    ),
    (
        "event_deliveries",
        Pruned {
            by: "prune: discarded past the retention when undelivered (discard_deliveries), \
                 and with their event (prune_events)",
            shown_by: "retention::a_year_of_events_with_a_dead_and_a_disabled_endpoint_is_pruned_to_the_retention",
        },
    ),
    (
        "event_endpoints",
        Bounded {
            why: "one row per webhook endpoint an operator configured; a removed one is \
                  disabled and kept with its counters (its deliveries are discarded past the \
                  retention)",
        },
    ),
];

/// The tables of the schema the server migrated, from the database itself.
async fn schema_tables(db: &TestDb) -> BTreeSet<String> {
    let sql = match db {
        TestDb::Sqlite(_) => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        }
        TestDb::Postgres(_) => {
            "SELECT CAST(table_name AS TEXT) FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        }
    };
    db.strings(sql).await.into_iter().collect()
}

/// The tables of `schema` that [`TABLES`] does not classify.
fn unclassified(schema: &BTreeSet<String>) -> Vec<String> {
    schema
        .iter()
        .filter(|t| !TABLES.iter().any(|(c, _)| c == t))
        .cloned()
        .collect()
}

async fn rows(app: &TestApp, table: &str) -> i64 {
    app.db.count(&format!("SELECT COUNT(*) FROM {table}")).await
}

#[tokio::test]
async fn every_table_of_the_schema_has_a_retention_or_says_why_it_keeps_everything() {
    let app = spawn_app_with(Spawn::default()).await;
    let schema = schema_tables(&app.db).await;
    let classified: BTreeSet<String> = TABLES.iter().map(|(t, _)| (*t).to_owned()).collect();
    assert_eq!(
        TABLES.len(),
        classified.len(),
        "a table is classified twice"
    );
    let missing = unclassified(&schema);
    assert!(
        missing.is_empty(),
        "tables with no retention: {missing:?} — add a prune path, or say in TABLES why \
         they may keep every row"
    );
    let stale: Vec<&String> = classified.difference(&schema).collect();
    assert!(
        stale.is_empty(),
        "classified but not in the schema: {stale:?}"
    );
    for (table, retention) in TABLES {
        let said = match retention {
            Pruned { by, shown_by } => by.len().min(shown_by.len()),
            Deleted { by } => by.len(),
            Bounded { why } | Kept { why } => why.len(),
        };
        assert!(said >= 20, "{table}: say how, or why, in a sentence");
    }

    // The storage report sizes every table the service writes.
    let sized: BTreeSet<String> = app
        .catalog
        .table_sizes()
        .await
        .expect("table sizes")
        .into_iter()
        .map(|t| t.table)
        .collect();
    let mut expected = schema.clone();
    expected.remove("_sqlx_migrations");
    assert_eq!(sized, expected, "the storage report's tables");

    // And the check catches a table nobody classified.
    app.db
        .execute("CREATE TABLE grows_unnoticed (id TEXT PRIMARY KEY)")
        .await;
    assert_eq!(
        unclassified(&schema_tables(&app.db).await),
        ["grows_unnoticed"]
    );
}

async fn prune_at_days(app: &TestApp, days: i64) -> PruneSummary {
    let settings = Settings::from_map(&app.env).expect("settings");
    let at = chrono::Utc::now() + chrono::Duration::days(days);
    match prune_at(&app.catalog, &settings, false, at)
        .await
        .expect("prune")
    {
        PruneOutcome::Ran { run, summary } => {
            assert_eq!(run.state.as_str(), "finished", "{summary:?}");
            *summary
        }
        PruneOutcome::Busy => panic!("prune busy"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn use_then_prune_shrinks_every_table_this_test_shows() {
    let mut env = five_mib_parts();
    env.extend(crate::hygiene::hygiene_env(DAY));
    let app = spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    // Uploads: committed (small and multipart), and one never committed.
    let (f, _) = file(&app, 300).await;
    app.uploaded(&token, "image", "image/png", 300, "PUT").await;
    let s = start(&app, &token, 12 * 1024 * 1024).await;
    let parts = upload_parts(&app, &token, &s, &[1, 2, 3]).await;
    assert_eq!(
        complete(&app, &token, s.id(), &sorted(parts))
            .await
            .status(),
        200
    );
    assert_eq!(app.commit(&token, s.key(), None).await.status(), 201);
    let (unseen, _) = file(&app, 300).await;
    // Link scans (seeing f only): one superseded, the latest, and one left open.
    scan(&app, &[&f]).await;
    scan(&app, &[&f]).await;
    scan_seeing(&app, &[&f]).await;
    // Maintenance runs, each kind twice (the older one is no job's newest): sweeps; hygiene,
    // whose first run reports the files no scan saw (its findings: the multipart one too); a prune that finds nothing
    // yet. Events positioned.
    app.sweep_after_urls_expire().await;
    app.sweep_after_urls_expire().await;
    let at = Some(crate::hygiene::in_days(2));
    let first = crate::hygiene::hygiene(&app, at);
    assert_eq!(first["summary"]["unlinked"], 2, "{first}");
    crate::hygiene::hygiene(&app, at);
    prune_at_days(&app, 0).await;
    crate::history::sequence_all(&app).await;

    let shown: Vec<&str> = TABLES
        .iter()
        .filter(|(_, r)| matches!(r, Pruned { shown_by, .. } if *shown_by == THIS_TEST))
        .map(|(t, _)| *t)
        .collect();
    let mut before = Vec::new();
    for table in &shown {
        before.push(rows(&app, table).await);
    }
    let summary = prune_at_days(&app, 400).await;
    let mut report = Vec::new();
    for (table, was) in shown.iter().zip(&before) {
        let now = rows(&app, table).await;
        if *was == 0 || now >= *was {
            report.push(format!("{table}: {was} → {now}"));
        }
    }
    assert!(
        report.is_empty(),
        "tables filled through use that the prune did not shrink: {report:?}; {summary:?}"
    );
    // The application still sees its file.
    let file: Value = app
        .get(&format!("/v1/files/{f}"), Some(&token))
        .await
        .json()
        .await
        .expect("file");
    assert_eq!(file["id"], f.as_str());
    assert_eq!(crate::hygiene::status(&app, &unseen).await, "unlinked");
}
