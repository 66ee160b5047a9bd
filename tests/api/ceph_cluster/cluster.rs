//! A throwaway Ceph cluster from `scripts/ceph.sh`, stopped when dropped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::helpers::free_port;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/ceph.sh");

pub(super) struct Ceph {
    dir: PathBuf,
    env: HashMap<String, String>,
    /// How long `scripts/ceph.sh start` took.
    pub(super) started_in: Duration,
}

/// A port `p` with `p + 1` free too (gateways take P and P+1, the monitor Q and Q+1).
fn free_pair() -> u16 {
    loop {
        let p = free_port();
        if p < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
}

impl Ceph {
    /// Three OSDs (pool size 3, min size 2), two gateways, GLACIER_IR in the default placement.
    /// The S3 user's key is the process's own AWS key, as the Garage cluster imports it.
    pub(super) fn start(root: &Path) -> Self {
        let dir = root.join("ceph");
        let key = std::env::var("AWS_ACCESS_KEY_ID").expect("AWS_ACCESS_KEY_ID (any value)");
        let secret =
            std::env::var("AWS_SECRET_ACCESS_KEY").expect("AWS_SECRET_ACCESS_KEY (any value)");
        let (port, mon_port) = (free_pair(), free_pair());
        let started = Instant::now();
        let out = Command::new(SCRIPT)
            .arg("start")
            .arg(&dir)
            .args([
                "--osds",
                "3",
                "--gateways",
                "2",
                "--archive-class",
                "GLACIER_IR",
            ])
            .args([
                "--port",
                &port.to_string(),
                "--mon-port",
                &mon_port.to_string(),
            ])
            .env("CEPH_KEY_ID", key)
            .env("CEPH_SECRET", secret)
            .output()
            .expect("run scripts/ceph.sh");
        let started_in = started.elapsed();
        // Whatever happened, the guard stops what was started.
        let mut ceph = Self {
            dir,
            env: HashMap::new(),
            started_in,
        };
        assert!(
            out.status.success(),
            "scripts/ceph.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = std::fs::read_to_string(ceph.dir.join("env")).expect("DIR/env");
        ceph.env = env
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), unquote(v)))
            .collect();
        ceph
    }

    /// The gateways' URLs, gw1 first.
    pub(super) fn endpoints(&self) -> Vec<String> {
        self.env["CEPH_ENDPOINTS"]
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// `kill -9` of one daemon (`osd.2`, `client.rgw.gw1`); its pid file goes too, so that
    /// `stop` never signals a pid the system has handed to another process since.
    pub(super) fn kill(&self, daemon: &str) {
        let file = self.dir.join("run").join(format!("{daemon}.pid"));
        let pid = std::fs::read_to_string(&file).expect("pid file");
        let pid = pid.trim();
        let status = Command::new("kill")
            .args(["-9", pid])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -9 {daemon} ({pid})");
        let proc = PathBuf::from(format!("/proc/{pid}"));
        for _ in 0..100 {
            // Gone, or a zombie whose parent (init: the daemons daemonize) has not reaped it.
            let state = std::fs::read_to_string(proc.join("stat")).unwrap_or_default();
            if state.is_empty() || state.contains(") Z ") {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = std::fs::remove_file(file);
    }
}

impl Ceph {
    /// Sends `signal` (`STOP`, `CONT`) to one daemon: `STOP` hangs it as a stalled disk or
    /// kernel does — its sockets stay open and nothing on them is answered.
    pub(super) fn signal(&self, daemon: &str, signal: &str) {
        let file = self.dir.join("run").join(format!("{daemon}.pid"));
        let pid = std::fs::read_to_string(&file).expect("pid file");
        let status = Command::new("kill")
            .args([&format!("-{signal}"), pid.trim()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill -{signal} {daemon}");
    }

    /// Takes RGW's completion lock (`RGWCompleteMultipart`, exclusive, on the upload's meta
    /// object in the bucket's non-EC pool) of the S3 multipart upload `upload_id` for `secs`,
    /// as a gateway that dies in the middle of CompleteMultipartUpload leaves it.
    pub(super) fn hold_completion_lock(&self, upload_id: &str, secs: u32) {
        let conf = self.dir.join("ceph.conf");
        let pool = "default.rgw.buckets.non-ec";
        let rados = |args: &[&str]| {
            let out = Command::new("rados")
                .arg("-c")
                .arg(&conf)
                .args(["-p", pool])
                .args(args)
                .output()
                .expect("rados");
            assert!(
                out.status.success(),
                "rados {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let listing = rados(&["ls"]);
        let meta = listing
            .lines()
            .find(|o| o.contains(upload_id) && o.ends_with(".meta"))
            .unwrap_or_else(|| panic!("no meta object of {upload_id}: {listing}"));
        rados(&[
            "lock",
            "get",
            meta,
            "RGWCompleteMultipart",
            "--lock-cookie",
            "a-dead-gateway",
            "--lock-duration",
            &secs.to_string(),
        ]);
    }

    /// The lines of `daemon`'s log (`client.rgw.gw2`) that contain `needle`.
    pub(super) fn log_lines(&self, daemon: &str, needle: &str) -> Vec<String> {
        let log = self.dir.join("log").join(format!("{daemon}.log"));
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }

    /// How long after `since` the monitor counts one OSD fewer up than the three started (read
    /// with `ceph osd stat`, about every half second).
    pub(super) async fn marked_down_after(&self, since: Instant) -> Duration {
        let conf = self.dir.join("ceph.conf");
        tokio::task::spawn_blocking(move || {
            while since.elapsed() < Duration::from_secs(120) {
                let out = Command::new("ceph")
                    .arg("-c")
                    .arg(&conf)
                    .args(["--connect-timeout", "5", "osd", "stat", "-f", "json"])
                    .output()
                    .expect("ceph osd stat");
                let stat: serde_json::Value =
                    serde_json::from_slice(&out.stdout).unwrap_or_default();
                if stat["num_up_osds"] == 2 {
                    return since.elapsed();
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            panic!("the monitor still counts three OSDs up after 120 s");
        })
        .await
        .expect("ceph osd stat thread")
    }
}

/// A value as `printf %q` wrote it: every special character behind a backslash (the script's
/// values are URLs, keys and spaces, nothing that needs `$'…'`).
fn unquote(v: &str) -> String {
    let mut out = String::new();
    let mut chars = v.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

impl Drop for Ceph {
    fn drop(&mut self) {
        let _ = Command::new(SCRIPT).arg("stop").arg(&self.dir).status();
    }
}
