//! A TCP balancer in front of the gateways, as HAProxy in `mode tcp` would be: each connection
//! goes to the next gateway in turn, and a gateway whose connect fails is skipped for that
//! connection. It runs on a thread and runtime of its own, so a test that blocks its own
//! threads never stalls the traffic of the server under test.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

pub(super) struct Counts {
    /// Connections open now through each gateway, in the order given.
    pub(super) open: Vec<AtomicU64>,
    /// Client connections accepted.
    pub(super) connections: AtomicU64,
    /// Connects to a gateway that failed, each followed by a try of the next one.
    pub(super) skipped: AtomicU64,
    /// Client connections closed because no gateway took the connect.
    pub(super) unserved: AtomicU64,
}

pub(super) struct Balancer {
    pub(super) url: String,
    pub(super) counts: Arc<Counts>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Balancer {
    /// Listens on a free loopback port in front of `gateways` (URLs `http://host:port`).
    pub(super) fn start(gateways: &[String]) -> Self {
        let upstream: Vec<SocketAddr> = gateways
            .iter()
            .map(|g| {
                g.trim_start_matches("http://")
                    .parse()
                    .expect("gateway address")
            })
            .collect();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let counts = Arc::new(Counts {
            open: upstream.iter().map(|_| AtomicU64::new(0)).collect(),
            connections: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            unserved: AtomicU64::new(0),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let shared = counts.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .expect("balancer runtime");
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("listener");
                tokio::select! {
                    _ = accept_loop(listener, Arc::new(upstream), shared) => {}
                    _ = stopped => {}
                }
            });
        });
        Self {
            url,
            counts,
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

async fn accept_loop(listener: TcpListener, upstream: Arc<Vec<SocketAddr>>, counts: Arc<Counts>) {
    let next = Arc::new(AtomicUsize::new(0));
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        counts.connections.fetch_add(1, Ordering::Relaxed);
        let (upstream, counts, next) = (upstream.clone(), counts.clone(), next.clone());
        tokio::spawn(async move {
            let first = next.fetch_add(1, Ordering::Relaxed);
            for i in 0..upstream.len() {
                let g = (first + i) % upstream.len();
                let connect =
                    tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(upstream[g]));
                match connect.await {
                    Ok(Ok(server)) => {
                        counts.open[g].fetch_add(1, Ordering::SeqCst);
                        relay(client, server).await;
                        counts.open[g].fetch_sub(1, Ordering::SeqCst);
                        return;
                    }
                    _ => counts.skipped.fetch_add(1, Ordering::Relaxed),
                };
            }
            counts.unserved.fetch_add(1, Ordering::Relaxed);
        });
    }
}

async fn relay(mut client: TcpStream, mut server: TcpStream) {
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    // Either side's reset (a gateway killed mid-request) ends both: the client sees its
    // connection cut, as behind a real balancer.
    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
}

impl Drop for Balancer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
