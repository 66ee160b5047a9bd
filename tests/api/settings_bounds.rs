//! Every numeric setting accepted at start works at runtime: a server started with every one of
//! them at its upper bound (then, separately, its lower bound, and at seeded values between)
//! presigns, uploads and commits, answers every admin read that meets a clock
//! (`GET /v1/admin/jobs` adds each interval to a run's end), and runs each job — sweep, prune,
//! hygiene and reconcile — to `finished`, today and a year on. The bounds come from the loader
//! itself (`Settings::numeric_settings`), so a setting added later is tried too. (Each value past
//! its bounds is refused at start with its name: the unit test `config::bounds_tests`.)

use std::collections::HashMap;

use upcommit::config::{NumericSetting, Settings};
use upcommit::domain::jobs::RunState;

use crate::helpers::{spawn_app_with, Spawn, TestApp};

/// The environment `spawn_app` would load, to read the registry and check combinations.
fn test_env() -> HashMap<String, String> {
    [
        ("UPCOMMIT_JWT_SECRET", "0123456789abcdef0123456789abcdef"),
        ("UPCOMMIT_BUCKET", "bounds-probe"),
        ("UPCOMMIT_ACCEPT_STORE_GAPS", "post_signature"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn registry() -> Vec<NumericSetting> {
    let vars = test_env();
    Settings::numeric_settings(&|k| vars.get(k).cloned())
}

/// Every setting at `pick(setting)`, except those a rule tying two settings together refuses
/// in this combination: each refusal names its setting, which goes back to its default, until
/// the whole set loads. Returns the chosen values.
fn combination(pick: impl Fn(&NumericSetting) -> i128) -> Vec<(&'static str, String)> {
    let mut chosen: Vec<(&'static str, String)> = registry()
        .iter()
        .map(|s| (s.name, pick(s).to_string()))
        .collect();
    for _ in 0..64 {
        let mut vars = test_env();
        vars.extend(chosen.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        match Settings::from_map(&vars) {
            Ok(_) => return chosen,
            Err(e) => {
                let before = chosen.len();
                // The first setting the refusal names goes back to its default.
                let named = chosen
                    .iter()
                    .position(|(k, _)| e.0.contains(&format!("{k}:")))
                    .or_else(|| chosen.iter().position(|(k, _)| e.0.contains(*k)));
                if let Some(i) = named {
                    chosen.remove(i);
                }
                assert!(
                    chosen.len() < before,
                    "a refusal that names no setting: {e}"
                );
            }
        }
    }
    panic!("no loadable combination");
}

/// Runs each job once as of `at`; each must end `finished`.
async fn every_job_finishes(app: &TestApp, at: chrono::DateTime<chrono::Utc>, what: &str) {
    use upcommit::services::hygiene::{self, HygieneOutcome};
    use upcommit::services::prune::{prune_at, PruneOutcome};
    use upcommit::services::reconcile::{reconcile, ReconcileOptions, ReconcileOutcome};
    use upcommit::services::sweep::{sweep_at, SweepOutcome};
    let parts = app.observed_job().await;
    let (catalog, store, settings) = (&parts.catalog, &parts.store, &parts.settings);
    let state = match Box::pin(sweep_at(catalog, store, settings, false, at))
        .await
        .expect("sweep")
    {
        SweepOutcome::Ran { run, .. } => run.state,
        SweepOutcome::Busy => panic!("{what}: sweep busy"),
    };
    assert_eq!(state, RunState::Finished, "{what}: sweep");
    let state = match Box::pin(prune_at(catalog, settings, false, at))
        .await
        .expect("prune")
    {
        PruneOutcome::Ran { run, .. } => run.state,
        PruneOutcome::Busy => panic!("{what}: prune busy"),
    };
    assert_eq!(state, RunState::Finished, "{what}: prune");
    let state = match Box::pin(hygiene::run(catalog, store, settings, false, at))
        .await
        .expect("hygiene")
    {
        HygieneOutcome::Ran { run, .. } => run.state,
        HygieneOutcome::Busy => panic!("{what}: hygiene busy"),
    };
    assert_eq!(state, RunState::Finished, "{what}: hygiene");
    let options = ReconcileOptions {
        grace: chrono::Duration::zero(),
        quarantine: false,
        quarantine_stray: false,
        workers: settings.jobs.reconcile_workers,
        inventory_taken_at: None,
        remove_orphan_renditions: false,
    };
    let state = match Box::pin(reconcile(catalog, store, settings, &options, None))
        .await
        .expect("reconcile")
    {
        ReconcileOutcome::Ran { run, .. } => run.state,
        ReconcileOutcome::Busy => panic!("{what}: reconcile busy"),
    };
    assert_eq!(state, RunState::Finished, "{what}: reconcile");
}

async fn works_at_runtime(env: Vec<(&'static str, String)>, what: &str) {
    let mut env = env;
    // Hygiene acts on the image profile's files, so its stages meet their settings.
    env.push(("UPCOMMIT_TRACKS_LINKS", "image".into()));
    let app = spawn_app_with(Spawn {
        env,
        ..Spawn::default()
    })
    .await;
    let token = app.token("alice");
    let p = app
        .uploaded(&token, "image", "image/png", 2_000, "PUT")
        .await;
    let committed = app.commit(&token, &p.key, None).await;
    let status = committed.status().as_u16();
    let handle: serde_json::Value = committed.json().await.expect("JSON");
    assert_eq!(status, 201, "{what}: commit: {handle}");
    let key = handle["key"].as_str().expect("key").to_owned();
    let admin = app.admin_token("ops");
    for path in ["/v1/admin/jobs", "/v1/admin/bucket", "/readyz", "/metrics"] {
        let status = app.get(path, Some(&admin)).await.status().as_u16();
        assert_eq!(status, 200, "{what}: GET {path}");
    }
    let now = chrono::Utc::now();
    every_job_finishes(&app, now, what).await;
    every_job_finishes(
        &app,
        now + chrono::Duration::days(366),
        &format!("{what}, a year on"),
    )
    .await;
    let jobs = app.get("/v1/admin/jobs", Some(&admin)).await;
    assert_eq!(
        jobs.status().as_u16(),
        200,
        "{what}: GET /v1/admin/jobs after the runs"
    );
    let jobs: serde_json::Value = jobs.json().await.expect("json");
    for job in jobs["jobs"].as_array().expect("jobs") {
        if job["interval_secs"].is_u64() {
            assert!(job["next_due_at"].is_string(), "{what}: {job}");
        }
    }
    // Hygiene, however its grace and stages are set, never touched a file it had no
    // evidence for (no link scan ever completed): the file is still there.
    assert!(
        app.object_exists(&key).await,
        "{what}: the committed file is gone"
    );
}

#[tokio::test]
async fn a_server_with_every_numeric_setting_at_its_upper_bound_works() {
    let env = combination(|s| s.hi);
    assert!(env.len() > 30, "most settings are tried together: {env:?}");
    works_at_runtime(env, "upper bounds").await;
}

#[tokio::test]
async fn a_server_with_every_numeric_setting_at_its_lower_bound_works() {
    let env = combination(|s| s.lo);
    assert!(env.len() > 30, "most settings are tried together: {env:?}");
    works_at_runtime(env, "lower bounds").await;
}

#[tokio::test]
async fn a_server_with_every_duration_set_to_never_works() {
    let env: Vec<(&'static str, String)> = registry()
        .iter()
        .filter(|s| s.never)
        .map(|s| (s.name, "never".to_owned()))
        .collect();
    assert!(!env.is_empty());
    works_at_runtime(env, "never").await;
}

#[tokio::test]
async fn a_server_with_seeded_values_between_the_bounds_works() {
    // xorshift64*, seeded: a failing combination replays.
    let mut state: u64 = 0x0b0e_f00d_0035;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        u128::from(state.wrapping_mul(0x2545_F491_4F6C_DD1D))
    };
    let picks: HashMap<&'static str, i128> = registry()
        .iter()
        .map(|s| {
            let span = u128::try_from(s.hi - s.lo).expect("hi ≥ lo") + 1;
            (s.name, s.lo + i128::try_from(next() % span).expect("fits"))
        })
        .collect();
    let env = combination(|s| picks[s.name]);
    works_at_runtime(env, "seeded values").await;
}
