//! The render worker: `upcommit render-worker`, started by the server's pool (never by hand),
//! with an empty environment and its standard input and output as pipes to the server.
//!
//! Before it reads a byte of a source it dies with its parent (`PR_SET_PDEATHSIG`), drops its
//! CPU priority, makes no core dump, caps its data (`RLIMIT_DATA`: every private writable
//! mapping, the heap and `mmap` alike) at the ceiling it was started with, loads what the
//! renderer loads from disk (libheif's plugins, TurboJPEG's handles), and installs the seccomp
//! filters (`jail::filter`). Then it says [`Hello`] and serves renders one at a time: for each,
//! it lowers its soft data limit to the render's own, reads the source, renders it and answers.
//! It ends when its input closes.

use std::ffi::OsString;
use std::io::{Read, Write};

use super::protocol::{read_head, write_frame, Ack, Hello, Plan, Reply};

/// The subcommand that runs a worker.
pub const SUBCOMMAND: &str = "render-worker";

/// What a worker is started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Args {
    /// The hard data limit, in bytes: no render may raise its soft limit past it.
    pub ceiling: u64,
    /// Its CPU priority (a nice value, 0..=19).
    pub nice: i32,
    /// The server's pid: a worker whose parent is already another exits at once.
    pub parent: u32,
}

impl Args {
    pub fn to_args(self) -> Vec<String> {
        vec![
            SUBCOMMAND.to_owned(),
            format!("--ceiling={}", self.ceiling),
            format!("--nice={}", self.nice),
            format!("--parent={}", self.parent),
        ]
    }

    fn parse(args: &[OsString]) -> Option<Args> {
        let mut out = Args {
            ceiling: 0,
            nice: 0,
            parent: 0,
        };
        for a in args {
            let a = a.to_str()?;
            let (k, v) = a.split_once('=')?;
            match k {
                "--ceiling" => out.ceiling = v.parse().ok()?,
                "--nice" => out.nice = v.parse().ok()?,
                "--parent" => out.parent = v.parse().ok()?,
                _ => return None,
            }
        }
        (out.ceiling > 0 && out.parent > 0).then_some(out)
    }
}

/// Runs a worker with `args` (the arguments after the subcommand's name); its exit code.
pub fn main(args: &[OsString]) -> i32 {
    let Some(args) = Args::parse(args) else {
        eprintln!("upcommit {SUBCOMMAND}: started by the server only");
        return 64;
    };
    use rustix::process::{self, Resource, Rlimit, Signal};
    if process::set_parent_process_death_signal(Some(Signal::KILL)).is_err()
        || process::getppid().map(|p| p.as_raw_nonzero().get() as u32) != Some(args.parent)
    {
        return 0;
    }
    let _ = process::setpriority_process(None, args.nice);
    let _ = process::setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    );
    if let Err(e) = process::setrlimit(
        Resource::Data,
        Rlimit {
            current: Some(args.ceiling),
            maximum: Some(args.ceiling),
        },
    ) {
        eprintln!("upcommit {SUBCOMMAND}: cannot limit its memory: {e}");
        return 71;
    }
    crate::render::warm();
    let pid = process::getpid().as_raw_nonzero().get() as u32;
    let hello = match super::filter::apply(pid) {
        Ok(()) => Hello {
            jailed: true,
            why: None,
        },
        Err(why) => Hello {
            jailed: false,
            why: Some(why),
        },
    };
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let (mut input, mut output) = (stdin.lock(), stdout.lock());
    if write_frame(&mut output, &hello, &[]).is_err() {
        return 0;
    }
    serve(&mut input, &mut output, args.ceiling);
    0
}

/// Serves renders until the input ends or a pipe breaks.
fn serve(input: &mut impl Read, output: &mut impl Write, ceiling: u64) {
    use rustix::process::{setrlimit, Resource, Rlimit};
    loop {
        let Ok((plan, len)) = read_head::<Plan>(input) else {
            return;
        };
        let limit = plan.memory_limit.min(ceiling);
        // Lowered before the source is read: its bytes count too.
        if setrlimit(
            Resource::Data,
            Rlimit {
                current: Some(limit),
                maximum: Some(ceiling),
            },
        )
        .is_err()
        {
            return;
        }
        let job = plan.job();
        let mut source = Vec::new();
        if len > limit
            || source.try_reserve_exact(len as usize).is_err()
            || input
                .take(len)
                .read_to_end(&mut source)
                .map_or(true, |n| n as u64 != len)
        {
            return;
        }
        if write_frame(output, &Ack { read: len }, &[]).is_err() {
            return;
        }
        let (reply, body) = match job {
            Ok(job) => {
                #[cfg(debug_assertions)]
                probe::run(&source);
                Reply::of(crate::render::render_here(
                    job.source,
                    &source,
                    job.orientation,
                    job.box_,
                    job.fit,
                    job.out,
                    &job.limits,
                ))
            }
            Err(why) => (Reply::BadPlan { why }, Vec::new()),
        };
        drop(source);
        if write_frame(output, &reply, &body).is_err() {
            return;
        }
    }
}

/// Test-only requests (debug builds only; a release build has no such code): a source whose
/// first 64 KiB hold `upcommit-test-probe:<name>;` makes the worker do `<name>` before it
/// renders, so the tests can see the filter and the limits act on a real worker through the
/// real routes:
/// - `open`, `socket`, `exec`, `fork`: what the filter kills the worker for;
/// - `sleep`: holds the render 30 s (a test kills the worker or waits for the time limit);
/// - `alloc`: allocates and touches 4 GiB (past any render's data limit);
/// - `segv`: writes to an unmapped address from native code (a decoder's crash);
/// - `write0`: writes to its standard input, a descriptor the filter does not let it write:
///   the call must fail with `ENOSYS` (the filter's answer), else the worker aborts.
#[cfg(debug_assertions)]
pub mod probe {
    pub const MARKER: &[u8] = b"upcommit-test-probe:";

    pub fn named(source: &[u8]) -> Option<&str> {
        let head = &source[..source.len().min(64 * 1024)];
        let at = head.windows(MARKER.len()).position(|w| w == MARKER)? + MARKER.len();
        let rest = &head[at..];
        let end = rest.iter().position(|&b| b == b';')?;
        std::str::from_utf8(&rest[..end]).ok()
    }

    pub fn run(source: &[u8]) {
        match named(source) {
            Some("open") => {
                let _ = std::fs::read("/etc/hostname");
            }
            Some("socket") => {
                let _ = std::net::UdpSocket::bind("127.0.0.1:0");
            }
            Some("exec") => {
                use std::os::unix::process::CommandExt;
                let _ = std::process::Command::new("/bin/true").exec();
            }
            Some("fork") => {
                let _ = std::process::Command::new("/bin/true").spawn();
            }
            Some("segv") => upcommit_webp::crash_for_tests(),
            Some("write0") => {
                use std::os::fd::AsFd;
                let stdin = std::io::stdin();
                if rustix::io::write(stdin.as_fd(), b"x") != Err(rustix::io::Errno::NOSYS) {
                    std::process::abort();
                }
            }
            Some("sleep") => std::thread::sleep(std::time::Duration::from_secs(30)),
            Some("alloc") => {
                let mut v: Vec<u8> = Vec::new();
                for _ in 0..4096 {
                    v.resize(v.len() + (1 << 20), 1u8);
                }
                std::hint::black_box(&v);
            }
            _ => {}
        }
    }
}
