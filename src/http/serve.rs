//! The connection loop: hyper's HTTP/1 server with a timer, so a connection that never finishes
//! its request head is closed (`axum::serve` runs hyper without one: such a connection was held
//! forever), and a semaphore, so a flood of connections waits in the listen backlog instead of
//! exhausting file descriptors. SIGTERM stops accepting and lets every connection finish its
//! request.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::Semaphore;

use crate::config::HttpSettings;

/// Pending connections the kernel holds for us once `max_connections` are served (capped by
/// `net.core.somaxconn`). `TcpListener::bind` asks for 128, past which a client's SYN is dropped
/// and retried after 1, 3, 7… s: a flood would push a real request to those retries.
const LISTEN_BACKLOG: u32 = 4096;

/// Binds the listen address (the first of its addresses that binds, as `TcpListener::bind`
/// does) with [`LISTEN_BACKLOG`].
pub async fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for a in tokio::net::lookup_host(addr).await? {
        let socket = if a.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(a) {
            Ok(()) => return socket.listen(LISTEN_BACKLOG),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::AddrNotAvailable,
            "the address resolves to nothing",
        )
    }))
}

/// Serves `router` on `listener` until `shutdown` resolves, then waits for open connections to
/// finish their requests (idle ones close at once, slow heads at the header timeout).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    http: &HttpSettings,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Semaphore::new panics above MAX_PERMITS (2^61): a limit that large is no limit anyway.
    let permits = Arc::new(Semaphore::new(
        http.max_connections.min(Semaphore::MAX_PERMITS),
    ));
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    // hyper starts this clock when a connection opens and again whenever it becomes idle, so
    // it bounds both a slow request head and an idle keep-alive connection.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(http.header_read_timeout_secs));
    tokio::pin!(shutdown);
    loop {
        // A permit first: at the limit, new connections stay in the kernel's backlog (in
        // order) rather than being accepted and starved, or refused.
        let permit = tokio::select! {
            () = &mut shutdown => break,
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break, // never closed
            },
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, or a connection reset before accept: neither ends
                    // the server. A short pause keeps EMFILE from spinning.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        let conn = builder.serve_connection(
            TokioIo::new(stream),
            TowerToHyperService::new(router.clone()),
        );
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                // Header timeouts and clients that hang up mid-request land here.
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}
