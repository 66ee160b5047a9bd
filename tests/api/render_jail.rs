//! Issue 46: every render in a worker process of its own, under a seccomp filter and a data
//! limit the kernel enforces. A test build's worker obeys a probe named in the source's bytes
//! (`upcommit-test-probe:<name>;` in a PNG's text chunk; release builds have no such code), so
//! these tests make a real worker, started by the real route, do what the filter forbids, crash
//! in native code, hold a render for a signal from outside, or allocate past its limit — and check that only that
//! render is lost: 422 `image_unrenderable`, the server alive, the next render 200, and the file
//! refused from then on without another decode until an admin clears it.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::helpers::{
    counter_sum, error_code, series_value, server_process, spawn_app_with, TestApp,
};
use crate::renditions::{png_half_clear, spawn};

/// A real `w` × `h` PNG whose text chunk names `probe`.
fn probe_png(probe: &str) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, 64, 48);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        enc.add_text_chunk("Comment".into(), format!("upcommit-test-probe:{probe};"))
            .expect("text chunk");
        let mut w = enc.write_header().expect("header");
        w.write_image_data(&vec![90u8; 64 * 48 * 3]).expect("data");
    }
    out
}

/// Commits `bytes` as alice's PNG; its file id.
async fn committed(app: &TestApp, alice: &str, bytes: Vec<u8>) -> String {
    let p = app.uploaded_bytes(alice, "image", "image/png", bytes).await;
    let h: Value = app
        .commit(alice, &p.key, None)
        .await
        .json()
        .await
        .expect("handle");
    h["id"].as_str().expect("id").to_owned()
}

async fn variant_at(app: &TestApp, base: &str, id: &str, token: &str) -> reqwest::Response {
    app.http
        .get(format!("{base}/v1/files/{id}/variants/thumb"))
        .bearer_auth(token)
        .send()
        .await
        .expect("request sent")
}

/// `GET /v1/admin/render-failures` of the server at `base`, as an admin.
async fn failures_at(app: &TestApp, base: &str) -> Value {
    app.http
        .get(format!("{base}/v1/admin/render-failures"))
        .bearer_auth(app.admin_token("root"))
        .send()
        .await
        .expect("list")
        .json()
        .await
        .expect("json")
}

/// Asserts `resp` is 422 `image_unrenderable`; its message.
async fn unrenderable(resp: reqwest::Response) -> String {
    let (status, code, why) = message(resp).await;
    assert_eq!(
        (status, code.as_str()),
        (422, "image_unrenderable"),
        "{why}"
    );
    why
}

async fn message(resp: reqwest::Response) -> (u16, String, String) {
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.expect("json");
    (
        status,
        v["error"]["code"].as_str().unwrap_or("").to_owned(),
        v["error"]["message"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn a_worker_that_opens_a_file_a_socket_execs_or_forks_is_killed_by_the_filter_and_only_that_render_is_lost(
) {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let honest = committed(&app, &alice, png_half_clear(300, 200)).await;
    for probe in ["open", "socket", "exec", "fork"] {
        let id = committed(&app, &alice, probe_png(probe)).await;
        let why = unrenderable(
            app.get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
                .await,
        )
        .await;
        assert!(
            why.contains("ended its worker (filtered)"),
            "{probe}: {why}"
        );
        // The server goes on: another file renders.
        let r = app
            .get(&format!("/v1/files/{honest}/variants/whole"), Some(&alice))
            .await;
        assert_eq!(r.status(), 200, "{probe}: an honest render after it");
    }
    let metrics = app.metrics_text().await;
    assert_eq!(
        counter_sum(
            &metrics,
            "upcommit_render_worker_deaths_total",
            "cause=\"filtered\""
        ),
        4.0,
        "{metrics}"
    );
    assert_eq!(
        counter_sum(
            &metrics,
            "upcommit_renders_total",
            "outcome=\"worker_died\""
        ),
        4.0
    );
}

#[tokio::test]
async fn a_render_past_its_memory_limit_is_stopped_by_the_kernel_and_the_server_goes_on() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let id = committed(&app, &alice, probe_png("alloc")).await;
    let why = unrenderable(
        app.get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
            .await,
    )
    .await;
    assert!(why.contains("ended its worker (aborted)"), "{why}");
    let honest = committed(&app, &alice, png_half_clear(300, 200)).await;
    let r = app
        .get(&format!("/v1/files/{honest}/variants/thumb"), Some(&alice))
        .await;
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn a_file_whose_render_killed_its_worker_is_refused_without_another_render_until_an_admin_clears_it(
) {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let id = committed(&app, &alice, probe_png("open")).await;
    let first = app
        .get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
        .await;
    assert_eq!(error_code(first).await, (422, "image_unrenderable".into()));
    let starts = |m: &str| counter_sum(m, "upcommit_render_worker_starts_total", "");
    let deaths = |m: &str| counter_sum(m, "upcommit_render_worker_deaths_total", "");
    let before = app.metrics_text().await;

    // Again: refused at once, no worker started or killed for it.
    let why = unrenderable(
        app.get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
            .await,
    )
    .await;
    assert!(why.contains("refused until an operator clears it"), "{why}");
    let after = app.metrics_text().await;
    assert_eq!(deaths(&after), deaths(&before), "no worker died again");
    assert_eq!(
        counter_sum(&after, "upcommit_renders_total", "outcome=\"refused\""),
        1.0
    );

    // The admin sees it, and clears it: the next request renders (and dies) again.
    let admin = app.admin_token("root");
    let listed: Value = app
        .get("/v1/admin/render-failures", Some(&admin))
        .await
        .json()
        .await
        .expect("json");
    let rows = listed["failures"].as_array().expect("failures");
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(rows[0]["file_id"], id.as_str());
    assert_eq!(rows[0]["variant"], "thumb");
    assert_eq!(rows[0]["cause"], "filtered");
    let detail: Value = app
        .get(&format!("/v1/admin/files/{id}"), Some(&admin))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(
        detail["render_failures"][0]["cause"], "filtered",
        "{detail}"
    );
    let not_admin = app
        .delete(
            &format!("/v1/admin/files/{id}/render-failures"),
            Some(&alice),
        )
        .await;
    assert_eq!(error_code(not_admin).await.0, 403);
    let list_not_admin = app.get("/v1/admin/render-failures", Some(&alice)).await;
    assert_eq!(error_code(list_not_admin).await.0, 403);
    let no_such_id = app
        .delete("/v1/admin/files/not-an-id/render-failures", Some(&admin))
        .await;
    assert_eq!(
        error_code(no_such_id).await,
        (404, "file_not_found".to_owned())
    );
    let cleared: Value = app
        .delete(
            &format!("/v1/admin/files/{id}/render-failures"),
            Some(&admin),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(cleared["cleared"], 1);
    let (_, _, why) = message(
        app.get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
            .await,
    )
    .await;
    assert!(why.contains("ended its worker (filtered)"), "{why}");
    assert!(starts(&app.metrics_text().await) > starts(&before) - 1.0);
    assert_eq!(deaths(&app.metrics_text().await), deaths(&before) + 1.0);
}

/// The pids of `server`'s render workers now in a render held by the `sleep` probe (in
/// `clock_nanosleep`, where an idle worker waits in `read`).
fn sleeping_workers(server: u32) -> Vec<u32> {
    workers_of(server)
        .into_iter()
        .filter(|pid| {
            // A single-threaded worker: its main thread's syscall is the process's.
            let syscall =
                std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
            let nr = syscall.split(' ').next().unwrap_or("");
            nr == "230" || nr == "35"
        })
        .collect()
}

/// The pids of `server`'s render workers.
fn workers_of(server: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split(' ').nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid != Some(server) {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if cmdline.windows(13).any(|w| w == b"render-worker") {
            found.push(pid);
        }
    }
    found
}

/// Waits (at most a minute, polling) until exactly one of `server`'s workers is in the
/// `sleep` probe's render; its pid.
async fn the_sleeping_worker(server: u32) -> u32 {
    for _ in 0..1200 {
        if let [pid] = sleeping_workers(server)[..] {
            return pid;
        }

        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no worker of {server} reached the sleep probe");
}

#[tokio::test]
async fn a_worker_killed_mid_render_by_sigkill_or_sigsegv_costs_that_render_only_and_a_fresh_one_renders_the_next(
) {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    // A server process of its own: its workers are its children, found by their parent.
    let (mut server, base) = server_process(
        &app,
        &[
            ("UPCOMMIT_RENDER_TIMEOUT_SECS", "120"),
            ("RUST_LOG", "warn"),
        ],
        Stdio::null(),
    )
    .await;
    let honest = committed(&app, &alice, png_half_clear(300, 200)).await;
    // A crash in native code (the `segv` probe), and a SIGKILL from outside mid-render.
    for (signal, cause) in [(None, "crashed"), (Some("-KILL"), "killed")] {
        let probe = if signal.is_some() { "sleep" } else { "segv" };
        let id = committed(&app, &alice, probe_png(probe)).await;
        let request = {
            let (app_http, base, id, alice) =
                (app.http.clone(), base.clone(), id.clone(), alice.clone());
            tokio::spawn(async move {
                app_http
                    .get(format!("{base}/v1/files/{id}/variants/thumb"))
                    .bearer_auth(alice)
                    .send()
                    .await
                    .expect("sent")
            })
        };
        if let Some(signal) = signal {
            let pid = the_sleeping_worker(server.id()).await;
            let killed = std::process::Command::new("kill")
                .args([signal, &pid.to_string()])
                .status()
                .expect("kill");
            assert!(killed.success());
        }
        let why = unrenderable(request.await.expect("task")).await;
        assert!(why.contains(&format!("({cause})")), "{cause}: {why}");
        // The next render goes to a fresh worker and succeeds.
        let r = variant_at(&app, &base, &honest, &alice).await;
        assert_eq!(r.status(), 200, "{cause}: the next render");
        let metrics = app.metrics_text_at(&base).await;
        assert_eq!(
            counter_sum(
                &metrics,
                "upcommit_render_worker_deaths_total",
                &format!("cause=\"{cause}\"")
            ),
            1.0,
            "{metrics}"
        );
        // Refused at once from then on.
        let (_, _, again) = message(variant_at(&app, &base, &id, &alice).await).await;
        assert!(again.contains("refused until an operator"), "{again}");
    }
    assert!(
        server.try_wait().expect("status").is_none(),
        "the server lives"
    );
    let _ = server.kill();
    let _ = server.wait();
}

#[tokio::test]
async fn a_render_past_the_time_limit_is_killed_and_a_second_time_out_in_a_row_refuses_the_file() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let (mut server, base) = server_process(
        &app,
        &[
            // Well past an honest render's store reads and decode on a busy machine; well
            // short of the probe's 30 s.
            ("UPCOMMIT_RENDER_TIMEOUT_SECS", "5"),
            ("UPCOMMIT_RENDER_CONCURRENCY", "1"),
            ("RUST_LOG", "warn"),
        ],
        Stdio::null(),
    )
    .await;
    let id = committed(&app, &alice, probe_png("sleep")).await;
    let honest = committed(&app, &alice, png_half_clear(300, 200)).await;
    for n in 1..=2 {
        let (status, code, _) = message(variant_at(&app, &base, &id, &alice).await).await;
        assert_eq!(
            (status, code.as_str()),
            (503, "render_timeout"),
            "time-out {n}"
        );
        // The slot is free again as the answer comes: with one slot, the next file renders
        // at once rather than answering render_busy.
        let r = variant_at(&app, &base, &honest, &alice).await;
        assert_eq!(r.status(), 200, "after time-out {n}");
        let _ = app
            .http
            .get(format!("{base}/v1/files/{honest}/variants/whole"))
            .bearer_auth(&alice)
            .send()
            .await;
    }
    assert!(
        sleeping_workers(server.id()).is_empty(),
        "no worker outlives its limit"
    );
    let why = unrenderable(variant_at(&app, &base, &id, &alice).await).await;
    assert!(why.contains("ran past the time limit"), "{why}");
    let metrics = app.metrics_text_at(&base).await;
    assert_eq!(
        series_value(&metrics, "upcommit_render_worker_timeouts_total"),
        Some(2.0),
        "{metrics}"
    );
    let _ = server.kill();
    let _ = server.wait();
}

#[tokio::test]
async fn a_worker_holds_no_secret_of_the_server() {
    // The worker's environment is what the pool gives it: nothing of the server's.
    let app = spawn_app_with(spawn()).await;
    let (mut server, base) = server_process(&app, &[("RUST_LOG", "warn")], Stdio::null()).await;
    let alice = app.token("alice");
    let honest = committed(&app, &alice, png_half_clear(300, 200)).await;
    assert_eq!(variant_at(&app, &base, &honest, &alice).await.status(), 200);
    let mut checked = 0;
    for pid in workers_of(server.id()) {
        let env = std::fs::read(format!("/proc/{pid}/environ")).expect("environ");
        let env = String::from_utf8_lossy(&env);
        for secret in [
            "UPCOMMIT_JWT_SECRET",
            "DATABASE_URL",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
        ] {
            assert!(!env.contains(secret), "{secret} in a worker's environment");
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        assert!(status.contains("NoNewPrivs:\t1"), "{status}");
        assert!(status.contains("Seccomp:\t2"), "{status}");
        checked += 1;
    }
    assert!(checked >= 1, "a worker of the server was found");
    let _ = server.kill();
    let _ = server.wait();
}

/// A 1 × 1 PNG whose `iCCP` chunk inflates to `inflated` bytes (a decoder reads the profile
/// before any pixel): a few hundred kilobytes on the wire.
fn png_with_a_huge_profile(inflated: usize) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..inflated >> 20 {
        z.write_all(&zeros).expect("deflate");
    }
    let profile = z.finish().expect("deflate");
    let chunk = |kind: &[u8], data: &[u8]| {
        let mut c = (data.len() as u32).to_be_bytes().to_vec();
        c.extend(kind);
        c.extend(data);
        let mut crc = flate2::Crc::new();
        crc.update(kind);
        crc.update(data);
        c.extend(crc.sum().to_be_bytes());
        c
    };
    let mut p = b"\x89PNG\r\n\x1a\n".to_vec();
    p.extend(chunk(b"IHDR", &[0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0]));
    let mut iccp = b"icc\0\0".to_vec();
    iccp.extend(profile);
    p.extend(chunk(b"iCCP", &iccp));
    let mut pixel = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    pixel.write_all(&[0, 1, 2, 3]).expect("deflate");
    p.extend(chunk(b"IDAT", &pixel.finish().expect("deflate")));
    p.extend(chunk(b"IEND", &[]));
    p
}

#[tokio::test]
async fn a_png_of_one_pixel_whose_profile_inflates_to_390_mb_is_refused_before_any_worker_reads_it()
{
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let bomb = png_with_a_huge_profile(390 << 20);
    assert!(bomb.len() < 1 << 20, "{} bytes on the wire", bomb.len());
    let id = committed(&app, &alice, bomb).await;
    let why = unrenderable(
        app.get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
            .await,
    )
    .await;
    assert!(
        why.contains("needs about"),
        "refused by the estimate: {why}"
    );
    let metrics = app.metrics_text().await;
    assert_eq!(
        counter_sum(&metrics, "upcommit_render_worker_deaths_total", ""),
        0.0,
        "no worker was asked"
    );
}

#[tokio::test]
async fn a_worker_cannot_write_to_a_descriptor_other_than_its_output() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let id = committed(&app, &alice, probe_png("write0")).await;
    let r = app
        .get(&format!("/v1/files/{id}/variants/thumb"), Some(&alice))
        .await;
    assert_eq!(r.status(), 200, "the write failed with the filter's ENOSYS");
}

#[tokio::test]
async fn the_same_bytes_uploaded_again_are_refused_without_killing_another_worker() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let first = committed(&app, &alice, probe_png("open")).await;
    let (status, _, why) = message(
        app.get(&format!("/v1/files/{first}/variants/thumb"), Some(&alice))
            .await,
    )
    .await;
    assert_eq!(status, 422, "{why}");
    // Again and again, as new files (new keys, new ids), by its owner or anyone.
    for user in ["alice", "mallory"] {
        let token = app.token(user);
        let again = committed(&app, &token, probe_png("open")).await;
        let why = unrenderable(
            app.get(&format!("/v1/files/{again}/variants/thumb"), Some(&token))
                .await,
        )
        .await;
        assert!(why.contains("refused until an operator"), "{why}");
        // Its admin page shows what refuses it: the first file's row, by its bytes.
        let detail: Value = app
            .get(
                &format!("/v1/admin/files/{again}"),
                Some(&app.admin_token("root")),
            )
            .await
            .json()
            .await
            .expect("json");
        assert_eq!(
            detail["render_failures"][0]["file_id"],
            first.as_str(),
            "{detail}"
        );
        assert_eq!(detail["render_failures"][0]["cause"], "filtered");
    }
    let metrics = app.metrics_text().await;
    assert_eq!(
        counter_sum(&metrics, "upcommit_render_worker_deaths_total", ""),
        1.0,
        "one worker died, for the first file only"
    );
    // An admin's clear of the first file clears its bytes: the copies render (and die) again.
    let admin = app.admin_token("root");
    let cleared: Value = app
        .delete(
            &format!("/v1/admin/files/{first}/render-failures"),
            Some(&admin),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(cleared["cleared"], 1);
}

#[tokio::test]
async fn a_worker_killed_while_idle_is_not_blamed_on_the_next_file() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let (mut server, base) = server_process(&app, &[("RUST_LOG", "warn")], Stdio::null()).await;
    // The server's idle worker(s), killed from outside (the OOM killer, an operator).
    let idle = workers_of(server.id());
    assert!(!idle.is_empty(), "a worker waits from the start");
    for pid in &idle {
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .expect("kill");
        assert!(killed.success());
    }
    let honest = committed(&app, &alice, png_half_clear(300, 200)).await;
    let r = variant_at(&app, &base, &honest, &alice).await;
    assert_eq!(r.status(), 200, "an honest file renders on a fresh worker");
    let listed = failures_at(&app, &base).await;
    assert_eq!(listed["failures"], serde_json::json!([]), "nothing blamed");
    let _ = server.kill();
    let _ = server.wait();
}

#[tokio::test]
async fn a_render_that_started_late_behind_another_and_ran_out_is_not_a_strike() {
    let app = spawn_app_with(spawn()).await;
    let alice = app.token("alice");
    let (mut server, base) = server_process(
        &app,
        &[("UPCOMMIT_RENDER_TIMEOUT_SECS", "5"), ("RUST_LOG", "warn")],
        Stdio::null(),
    )
    .await;
    let id = committed(&app, &alice, probe_png("sleep")).await;
    let ask = || {
        let (http, base, id, alice) = (app.http.clone(), base.clone(), id.clone(), alice.clone());
        tokio::spawn(async move {
            http.get(format!("{base}/v1/files/{id}/variants/thumb"))
                .bearer_auth(alice)
                .send()
                .await
                .expect("sent")
        })
    };
    // The first holds the key's render for its whole limit; the second, asked once the first's
    // worker is rendering, waits behind it and starts its own worker with what is left.
    let first = ask();
    the_sleeping_worker(server.id()).await;
    let second = ask();
    for r in [first.await.expect("first"), second.await.expect("second")] {
        assert_eq!(error_code(r).await, (503, "render_timeout".to_owned()));
    }
    let listed = failures_at(&app, &base).await;
    assert_eq!(listed["failures"][0]["cause"], "timed_out", "{listed}");
    assert_eq!(
        listed["failures"][0]["count"], 1,
        "one strike, not two: {listed}"
    );
    let _ = server.kill();
    let _ = server.wait();
}

#[tokio::test]
async fn a_servers_workers_die_with_it_even_when_it_is_killed() {
    let app = spawn_app_with(spawn()).await;
    let (mut server, _) = server_process(&app, &[("RUST_LOG", "warn")], Stdio::null()).await;
    let workers = workers_of(server.id());
    assert!(!workers.is_empty(), "a worker waits from the start");
    server.kill().expect("SIGKILL");
    let _ = server.wait();
    // No orphan: each worker gets SIGKILL from the kernel as its parent dies.
    for _ in 0..200 {
        let alive: Vec<u32> = workers
            .iter()
            .copied()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| !s.contains(") Z "))
            })
            .collect();
        if alive.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("workers {workers:?} outlived their server");
}
