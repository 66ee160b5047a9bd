//! The connection loop: hyper's HTTP/1 server with a timer, so a connection that never finishes
//! its request head is closed (`axum::serve` runs hyper without one: such a connection was held
//! forever), and a semaphore, so a flood of connections waits in the listen backlog instead of
//! exhausting file descriptors. SIGTERM stops accepting, lets every request in flight finish,
//! and closes the connections serving none.
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{watch, Semaphore};
use tower::ServiceExt;

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

/// Serves `router` on `listener` until `shutdown` resolves, then lets every connection finish
/// the request it is serving and closes the others (idle ones, and ones still sending a head:
/// they hold no request, and would otherwise keep the process up for a header timeout).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    http: &HttpSettings,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Shutdown waits by taking every permit back, which `acquire_many` counts in u32.
    let limit = u32::try_from(http.max_connections)
        .unwrap_or(u32::MAX)
        .max(1);
    let permits = Arc::new(Semaphore::new(limit as usize));
    let (stopping, stop) = watch::channel(false);
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
        let in_flight = Arc::new(AtomicUsize::new(0));
        let service = {
            let (router, in_flight) = (router.clone(), in_flight.clone());
            service_fn(move |req: hyper::Request<Incoming>| {
                let busy = Busy::enter(&in_flight);
                let router = router.clone();
                async move {
                    let response = router.oneshot(req).await;
                    drop(busy);
                    response
                }
            })
        };
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let mut stop = stop.clone();
        tokio::spawn(async move {
            tokio::pin!(conn);
            let ended = tokio::select! {
                ended = conn.as_mut() => ended,
                () = stopped(&mut stop) => {
                    // SIGTERM: no keep-alive; a request being served finishes (bounded by the
                    // request timeout); a connection serving none (idle, or still sending its
                    // head) is closed once it has had a moment to flush a response.
                    conn.as_mut().graceful_shutdown();
                    loop {
                        match tokio::time::timeout(Duration::from_millis(500), conn.as_mut()).await {
                            Ok(ended) => break ended,
                            Err(_) if in_flight.load(Ordering::Acquire) == 0 => break Ok(()),
                            Err(_) => {}
                        }
                    }
                }
            };
            if let Err(e) = ended {
                // Header timeouts and clients that hang up mid-request land here.
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    // Every connection task returns its permit when it ends.
    let _ = permits.acquire_many(limit).await;
    Ok(())
}

/// Resolves once shutdown began (or the server is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not Send; drop it here, not in the caller's select.
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}

/// Counts a request between its head and its response on one connection.
struct Busy(Arc<AtomicUsize>);

impl Busy {
    fn enter(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::AcqRel);
        Self(count.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}
