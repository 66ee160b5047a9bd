//! What the outbox adds to a commit's transaction, measured within one run so that the
//! machine's run-to-run noise cancels: transactions that insert a file handle (as
//! `record_handle` does) alternate with the same transaction plus the event row the outbox adds
//! (a payload of a handle's size), on the real schema (migrated by the catalog).
//! Usage: `cargo run --release --example outbox_cost -- [DATABASE_URL] [N]`
//! (default `sqlite:///tmp/upcommit-outbox-cost.db`, N = 2000 of each).

use std::time::{Duration, Instant};

use upcommit::catalog::{PostgresCatalog, SqliteCatalog};

fn summary(name: &str, mut d: Vec<Duration>) -> f64 {
    d.sort();
    let us = |x: Duration| x.as_secs_f64() * 1e6;
    let mean = d.iter().map(|x| us(*x)).sum::<f64>() / d.len() as f64;
    println!(
        "{name}: mean {mean:.1} µs, p50 {:.1} µs, p99 {:.1} µs",
        us(d[d.len() / 2]),
        us(d[d.len() * 99 / 100])
    );
    mean
}

macro_rules! run {
    ($pool:expr, $begin:expr, $n:expr) => {{
        let pool = $pool;
        let payload = format!("{{\"type\":\"file.committed\",\"timestamp\":\"2026-12-02T00:00:00.000000Z\",\"data\":{{\"id\":\"x\",\"pad\":\"{}\"}}}}", "p".repeat(480));
        let mut without = Vec::with_capacity($n);
        let mut with = Vec::with_capacity($n);
        for i in 0..(2 * $n + 200) {
            let outbox = i % 2 == 1;
            let id = uuid::Uuid::now_v7().simple().to_string();
            let now = chrono::Utc::now();
            let started = Instant::now();
            let mut tx = pool.begin_with($begin).await.expect("begin");
            sqlx::query(
                "INSERT INTO file_handles (id, upload_id, key, size, content_type, etag, profile, created_by, created_at) \
                 VALUES ($1, $1, $2, 1000, 'image/png', '\"etag\"', 'image', 'bench', $3)",
            )
            .bind(&id)
            .bind(format!("media/bench/{id}.png"))
            .bind(now)
            .execute(&mut *tx)
            .await
            .expect("handle");
            if outbox {
                sqlx::query("INSERT INTO events (id, type, subject, occurred_at, payload) VALUES ($1, 'file.committed', $2, $3, $4)")
                    .bind(format!("evt_{id}"))
                    .bind(&id)
                    .bind(now)
                    .bind(&payload)
                    .execute(&mut *tx)
                    .await
                    .expect("event");
            }
            tx.commit().await.expect("commit");
            // The first 200 warm the caches and the pool.
            if i >= 200 {
                if outbox { with.push(started.elapsed()) } else { without.push(started.elapsed()) }
            }
        }
        let a = summary("handle only      ", without);
        let b = summary("handle + outbox  ", with);
        println!("the outbox row adds {:.1} µs per commit transaction ({:+.1} %)", b - a, (b - a) / a * 100.0);
    }};
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "sqlite:///tmp/upcommit-outbox-cost.db".to_owned());
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(2000);
    if url.starts_with("sqlite:") {
        if let Some(path) = url.strip_prefix("sqlite://") {
            let _ = std::fs::remove_file(path);
        }
        let c = SqliteCatalog::connect(&url, 4).await.expect("sqlite");
        run!(c.pool(), "BEGIN IMMEDIATE", n);
    } else {
        let c = PostgresCatalog::connect(&url, 4).await.expect("postgres");
        run!(c.pool(), "BEGIN", n);
    }
}
