//! The seccomp filters a render worker runs under (issue 46), built with rust-vmm's
//! `seccompiler` (Firecracker's). Two filters, both installed before the worker reads a byte
//! of a source:
//!
//! 1. **What decoding needs**, and nothing else: reading its standard input and writing its
//!    standard output and error (the pipes the server gave it; no other descriptor),
//!    memory (`mmap`, `brk`, `mremap`, `madvise`…), threads (`clone` with `CLONE_THREAD` only:
//!    dav1d and libde265 decode on threads), futexes, clocks, signals to itself, and lowering
//!    its own data limit per render. Any other call fails with `ENOSYS` (so glibc's
//!    `pthread_create` falls back from `clone3`, whose flags a filter cannot read, to `clone`).
//! 2. **What it must never do**, which kills the whole worker at once: opening a file
//!    (`open`, `openat`, `openat2`, `creat`), a socket of any kind, `execve`, a new process
//!    (`fork`, `vfork`, `clone` without `CLONE_THREAD`), and reaching another process
//!    (`kill`, `tkill`, `ptrace`, `process_vm_*`). Where both filters answer, the kernel takes
//!    the stricter action: these kill rather than fail.
//!
//! Installing either also sets `no_new_privs`.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The two programs, in the order they are installed: the kill list, then the allow list.
pub fn programs(own_pid: u32) -> Result<[BpfProgram; 2], String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("seccomp on {}: {e:?}", std::env::consts::ARCH))?;
    let kill = SeccompFilter::new(
        denied()?,
        SeccompAction::Allow,
        SeccompAction::KillProcess,
        arch,
    )
    .map_err(|e| format!("the kill list: {e}"))?;
    let allow = SeccompFilter::new(
        allowed(own_pid)?,
        SeccompAction::Errno(libc::ENOSYS as u32),
        SeccompAction::Allow,
        arch,
    )
    .map_err(|e| format!("the allow list: {e}"))?;
    Ok([
        kill.try_into().map_err(|e| format!("the kill list: {e}"))?,
        allow
            .try_into()
            .map_err(|e| format!("the allow list: {e}"))?,
    ])
}

/// Installs both programs on this thread (the worker has no other thread yet, and every
/// thread it starts inherits them).
pub fn apply(own_pid: u32) -> Result<(), String> {
    for p in programs(own_pid)? {
        seccompiler::apply_filter(&p).map_err(|e| format!("installing the filter: {e}"))?;
    }
    Ok(())
}

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

const CLONE_THREAD: u64 = libc::CLONE_THREAD as u64;

fn allowed(own_pid: u32) -> Result<Rules, String> {
    let mut rules: Rules = [
        libc::SYS_close,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_futex,
        libc::SYS_set_robust_list,
        libc::SYS_rseq,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_sigaltstack,
        libc::SYS_exit,
        libc::SYS_exit_group,
        libc::SYS_clock_gettime,
        libc::SYS_clock_nanosleep,
        libc::SYS_nanosleep,
        libc::SYS_getrandom,
        libc::SYS_sched_yield,
        libc::SYS_sched_getaffinity,
        libc::SYS_getpid,
        libc::SYS_gettid,
    ]
    .into_iter()
    .map(|n| (n, Vec::new()))
    .collect();
    // Its pipes only: it reads its standard input and writes its standard output and error,
    // never a descriptor it inherited by mistake (outside review of issue 46: a server started
    // from a shell passed a stray pipe down).
    for n in [libc::SYS_read, libc::SYS_readv] {
        rules.insert(n, vec![rule(vec![cond(0, SeccompCmpOp::Eq, 0)?])?]);
    }
    for n in [libc::SYS_write, libc::SYS_writev] {
        rules.insert(
            n,
            vec![
                rule(vec![cond(0, SeccompCmpOp::Eq, 1)?])?,
                rule(vec![cond(0, SeccompCmpOp::Eq, 2)?])?,
            ],
        );
    }
    // Threads only: a new process would share nothing of the filter's purpose.
    rules.insert(
        libc::SYS_clone,
        vec![rule(vec![cond(
            0,
            SeccompCmpOp::MaskedEq(CLONE_THREAD),
            CLONE_THREAD,
        )?])?],
    );
    // Its own limits only (pid 0: itself), to lower its data limit for each render.
    rules.insert(
        libc::SYS_prlimit64,
        vec![rule(vec![cond(0, SeccompCmpOp::Eq, 0)?])?],
    );
    // Signals to itself only: `abort()` raises SIGABRT with tgkill.
    rules.insert(
        libc::SYS_tgkill,
        vec![rule(vec![cond(0, SeccompCmpOp::Eq, u64::from(own_pid))?])?],
    );
    Ok(rules)
}

fn denied() -> Result<Rules, String> {
    let mut rules: Rules = [
        libc::SYS_openat,
        libc::SYS_openat2,
        libc::SYS_open_by_handle_at,
        libc::SYS_socket,
        libc::SYS_socketpair,
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_kill,
        libc::SYS_tkill,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
    ]
    .into_iter()
    .map(|n| (n, Vec::new()))
    .collect();
    #[cfg(target_arch = "x86_64")]
    for n in [
        libc::SYS_open,
        libc::SYS_creat,
        libc::SYS_fork,
        libc::SYS_vfork,
    ] {
        rules.insert(n, Vec::new());
    }
    // A new process (no CLONE_THREAD) dies here; a thread goes on to the allow list.
    rules.insert(
        libc::SYS_clone,
        vec![rule(vec![cond(
            0,
            SeccompCmpOp::MaskedEq(CLONE_THREAD),
            0,
        )?])?],
    );
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_programs_compile_for_this_machine() {
        let [kill, allow] = programs(1234).expect("programs");
        assert!(!kill.is_empty() && !allow.is_empty());
    }
}
