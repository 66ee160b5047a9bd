//! A replica's render workers (issue 46): processes of this same binary (`upcommit
//! render-worker`), kept warm, one render each at a time. The server hands a worker a plan and
//! a source's bytes and gets back a rendition or a refusal; it never decodes pixels itself.
//!
//! A worker goes back to the pool after a render that succeeded, until it has done
//! [`PoolConfig::renders_per_worker`] or rendered a large image (whose heap would stay
//! fragmented under the next render's lower limit); after any refusal, death or time-out it is
//! gone and a fresh one takes its place. A render past its deadline is `SIGKILL`ed and reaped
//! before [`Pool::render`] returns, so the caller's slot and memory are free at once.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::protocol::{frame_head, header_buffer, header_of, Ack, Hello, Job, Plan, Reply};
use super::worker::Args;
use crate::render::{RenderError, Rendered};

/// What a worker holds besides the render's own reservation, whatever the machine: its
/// binary's and libraries' writable data, the allocator's slack. Measured: an idle worker's
/// `VmData` is about 20 MiB (BENCHMARKS.md).
pub const MARGIN: u64 = 64 * 1024 * 1024;

/// [`MARGIN`] and the decoders' and encoders' thread stacks (8 MiB each, writable private
/// mappings `RLIMIT_DATA` counts): dav1d, libde265 and libaom start threads by the number of
/// cores, so a many-core machine needs more (outside review of issue 46).
pub fn margin() -> u64 {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get()) as u64;
    MARGIN + cores.min(256) * 2 * 8 * 1024 * 1024
}

/// A worker that rendered with more than this reserved leaves the pool after it.
const RECYCLE_ABOVE: u64 = 64 * 1024 * 1024;

/// A rendition a worker answers is at most this long: 4 bytes a pixel of its box, and 1 MiB.
fn max_rendition_bytes(job: &Job) -> u64 {
    job.box_
        .pixels()
        .saturating_mul(4)
        .saturating_add(1024 * 1024)
}

/// How long a new worker has to say it is ready.
const HELLO_WITHIN: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct PoolConfig {
    /// The binary that runs `render-worker` (this one, as a rule).
    pub program: PathBuf,
    /// Workers kept ready (the replica's render slots).
    pub warm: usize,
    /// Each worker's hard data limit: the replica's render budget plus [`MARGIN`].
    pub ceiling: u64,
    /// Renders a worker does before it is replaced.
    pub renders_per_worker: u32,
    /// The workers' nice value (0..=19): renders yield the CPU to uploads.
    pub nice: i32,
    /// Render with workers the kernel could not filter (`UPCOMMIT_RENDER_ACCEPT_GAPS=seccomp`).
    pub accept_unfiltered: bool,
    /// The environment a worker gets (and nothing else of the server's).
    pub env: Vec<(String, String)>,
}

/// How a render through a worker ended.
#[derive(Debug)]
pub enum Outcome {
    /// The worker answered: a rendition, or the renderer's refusal.
    Answered(Result<Rendered, RenderError>),
    /// The worker died during the render (what killed it).
    Died(Death),
    /// Past the deadline while it rendered: the worker was killed.
    KilledAtLimit,
    /// Past the deadline before a worker had the source (none free to start, a slow hand-over):
    /// nothing was rendered, and the file is not to blame.
    TimedOut,
    /// No worker could be had.
    Unavailable(String),
}

pub use crate::domain::variants::refusal::Death;

/// What ended a worker, from its exit status.
fn death_of(status: Option<std::process::ExitStatus>) -> Death {
    use std::os::unix::process::ExitStatusExt;
    match status.and_then(|s| s.signal()) {
        Some(libc::SIGSYS) => Death::Filtered,
        Some(libc::SIGABRT) => Death::Aborted,
        Some(libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE) => Death::Crashed,
        Some(libc::SIGKILL) => Death::Killed,
        Some(_) => Death::Signalled,
        None => Death::Exited,
    }
}

/// What the pool counts, for `/metrics`.
pub trait PoolEvents: Send + Sync {
    fn worker_started(&self);
    fn worker_died(&self, death: Death);
    fn worker_killed_at_limit(&self);
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    renders: u32,
}

impl Worker {
    /// Whether the process is still there (an idle worker can be killed from outside: the
    /// OOM killer, an operator). A dead one is reaped here.
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

/// The pool's workers: those idle, and how many are rendering or starting, so that it keeps
/// `warm` in all rather than starting a spare for every render.
#[derive(Default)]
struct Workers {
    idle: Vec<Worker>,
    busy: usize,
    starting: usize,
}

pub struct Pool {
    config: PoolConfig,
    workers: Mutex<Workers>,
    events: Arc<dyn PoolEvents>,
}

/// How a worker handed a render went, before its answer is read.
enum Exchange {
    /// It read the plan and the source and said so: what happens next is the file's doing.
    Acknowledged,
    /// It was gone, or went, before it had the whole source: no fault of the file's.
    Lost,
}

impl Pool {
    pub fn new(config: PoolConfig, events: Arc<dyn PoolEvents>) -> Arc<Pool> {
        Arc::new(Pool {
            config,
            workers: Mutex::new(Workers::default()),
            events,
        })
    }

    fn workers(&self) -> std::sync::MutexGuard<'_, Workers> {
        self.workers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts one worker and keeps it: what it says of its filter is the jail's state. An
    /// error when no worker starts, or when it is unfiltered and that is not accepted.
    pub async fn probe(self: &Arc<Self>) -> Result<Hello, String> {
        let (w, hello) = self.spawn().await?;
        self.workers().idle.push(w);
        Ok(hello)
    }

    /// Workers idle now.
    pub fn idle(&self) -> usize {
        self.workers().idle.len()
    }

    /// Renders `job` from `source` in a worker whose data limit is `reserved` plus
    /// [`MARGIN`], killing it at `deadline`. A worker that was gone before it had read the
    /// whole source (killed while idle, say) is replaced once; only what happens after it
    /// acknowledged the source is the file's doing ([`Outcome::Died`]).
    pub async fn render(
        self: &Arc<Self>,
        job: &Job,
        source: &[u8],
        reserved: u64,
        deadline: tokio::time::Instant,
    ) -> Outcome {
        let plan = Plan::of(job, reserved.saturating_add(margin()));
        let mut tries = 0;
        let mut w = loop {
            tries += 1;
            let mut w = match tokio::time::timeout_at(deadline, self.take()).await {
                Ok(Ok(w)) => w,
                Ok(Err(why)) => return Outcome::Unavailable(why),
                Err(_) => return Outcome::TimedOut,
            };
            let handed = tokio::time::timeout_at(deadline, hand(&mut w, &plan, source)).await;
            match handed {
                Ok(Exchange::Acknowledged) => break w,
                Ok(Exchange::Lost) if tries < 2 => {
                    self.retire(w);
                }
                Ok(Exchange::Lost) => {
                    self.retire(w);
                    return Outcome::Unavailable("render workers die before they read".into());
                }
                Err(_) => {
                    // Past the deadline while handing it over (a huge source, a stopped
                    // worker): the file is not blamed.
                    let _ = w.child.start_kill();
                    let _ = w.child.wait().await;
                    self.retire(w);
                    return Outcome::TimedOut;
                }
            }
        };
        let answered = tokio::time::timeout_at(
            deadline,
            read_frame::<Reply>(&mut w.stdout, max_rendition_bytes(job)),
        )
        .await;
        match answered {
            Err(_) => {
                let _ = w.child.start_kill();
                let _ = w.child.wait().await;
                self.events.worker_killed_at_limit();
                self.retire(w);
                Outcome::KilledAtLimit
            }
            Ok(Err(_)) => {
                let death = reap(&mut w.child).await;
                self.events.worker_died(death);
                self.retire(w);
                Outcome::Died(death)
            }
            Ok(Ok((reply, body))) => {
                w.renders += 1;
                let result = reply.into_result(body, job);
                if result.is_ok()
                    && w.renders < self.config.renders_per_worker
                    && reserved <= RECYCLE_ABOVE
                {
                    self.give_back(w);
                } else {
                    self.retire(w);
                }
                Outcome::Answered(result)
            }
        }
    }

    /// An idle worker that is alive, or a new one.
    async fn take(self: &Arc<Self>) -> Result<Worker, String> {
        loop {
            let found = {
                let mut ws = self.workers();
                let w = ws.idle.pop();
                if w.is_some() {
                    ws.busy += 1;
                }
                w
            };
            match found {
                Some(mut w) => {
                    if w.alive() {
                        return Ok(w);
                    }
                    // Killed while idle: forgotten (and reaped), the next one tried.
                    self.retire(w);
                }
                None => break,
            }
        }
        // Counted busy once it exists: a caller that stops waiting (its deadline) while the
        // worker starts drops the start, and the count stays true.
        let (w, _) = self.spawn().await?;
        self.workers().busy += 1;
        Ok(w)
    }

    /// A worker back from a render that went well, kept for the next.
    fn give_back(&self, w: Worker) {
        let mut ws = self.workers();
        ws.busy = ws.busy.saturating_sub(1);
        ws.idle.push(w);
    }

    /// A worker that is done (dropped: killed and reaped if still running), and another
    /// started in its place.
    fn retire(self: &Arc<Self>, w: Worker) {
        drop(w);
        {
            let mut ws = self.workers();
            ws.busy = ws.busy.saturating_sub(1);
        }
        self.refill();
    }

    /// Starts workers in the background until `warm` are idle, rendering or starting.
    fn refill(self: &Arc<Self>) {
        let missing = {
            let mut ws = self.workers();
            let have = ws.idle.len() + ws.busy + ws.starting;
            let missing = self.config.warm.saturating_sub(have);
            ws.starting += missing;
            missing
        };
        for _ in 0..missing {
            let pool = self.clone();
            tokio::spawn(async move {
                let started = pool.spawn().await;
                let mut ws = pool.workers();
                ws.starting -= 1;
                match started {
                    Ok((w, _)) => ws.idle.push(w),
                    Err(why) => tracing::warn!(error = %why, "a render worker did not start"),
                }
            });
        }
    }

    /// A new worker, and what it said of its filter.
    async fn spawn(&self) -> Result<(Worker, Hello), String> {
        let args = Args {
            ceiling: self.config.ceiling,
            nice: self.config.nice,
            parent: std::process::id(),
        };
        let mut child = tokio::process::Command::new(&self.config.program)
            .args(args.to_args())
            .env_clear()
            .envs(self.config.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| {
                format!(
                    "starting {} {}: {e}",
                    self.config.program.display(),
                    super::worker::SUBCOMMAND
                )
            })?;
        let (Some(stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err("the worker's pipes".into());
        };
        self.events.worker_started();
        let hello = tokio::time::timeout(HELLO_WITHIN, read_frame::<Hello>(&mut stdout, 0))
            .await
            .map_err(|_| format!("a render worker said nothing in {HELLO_WITHIN:?}"))?
            .map_err(|e| format!("a render worker's first words: {e}"))?
            .0;
        if !hello.jailed && !self.config.accept_unfiltered {
            return Err(format!(
                "the render workers cannot be filtered ({}); set UPCOMMIT_RENDER_ACCEPT_GAPS=seccomp to render without the filter",
                hello.why.as_deref().unwrap_or("no reason given")
            ));
        }
        let w = Worker {
            child,
            stdin,
            stdout,
            renders: 0,
        };
        Ok((w, hello))
    }
}

/// Writes the plan and the source to `w` and reads its acknowledgement.
async fn hand(w: &mut Worker, plan: &Plan, source: &[u8]) -> Exchange {
    let sent = async {
        let json = serde_json::to_vec(plan).map_err(std::io::Error::other)?;
        w.stdin.write_all(&frame_head(&json)).await?;
        w.stdin
            .write_all(&(source.len() as u64).to_le_bytes())
            .await?;
        w.stdin.write_all(source).await?;
        w.stdin.flush().await?;
        read_frame::<Ack>(&mut w.stdout, 0).await
    };
    match sent.await {
        Ok((Ack { read }, _)) if read == source.len() as u64 => Exchange::Acknowledged,
        _ => Exchange::Lost,
    }
}

/// How a worker whose pipe broke ended: its exit status when it comes within a second, else
/// it is killed.
async fn reap(child: &mut Child) -> Death {
    match tokio::time::timeout(Duration::from_secs(1), child.wait()).await {
        Ok(status) => death_of(status.ok()),
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            Death::Exited
        }
    }
}

/// Reads one frame: its header, and a body of at most `max_body` bytes.
async fn read_frame<T: for<'de> serde::Deserialize<'de>>(
    r: &mut ChildStdout,
    max_body: u64,
) -> std::io::Result<(T, Vec<u8>)> {
    let mut json = header_buffer(r.read_u32_le().await?)?;
    r.read_exact(&mut json).await?;
    let header = header_of(&json)?;
    let len = r.read_u64_le().await?;
    if len > max_body {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame body of {len} bytes"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).await?;
    Ok((header, body))
}
