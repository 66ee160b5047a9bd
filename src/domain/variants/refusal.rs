//! When a variant of a file is refused without another render (issue 46): its render killed
//! its worker once (a signal, an abort, its memory limit: the same bytes would do it again), or
//! ran past the time limit twice in a row (once may be a busy machine; twice, the file). A
//! render that succeeds forgets both. Pure.

/// What ended a render worker that died in a render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    /// `SIGSYS`: the seccomp filter (a call it may not make).
    Filtered,
    /// `SIGABRT`: an allocation refused at its data limit, or a library's own abort.
    Aborted,
    /// `SIGSEGV`, `SIGBUS`, `SIGILL` or `SIGFPE`.
    Crashed,
    /// `SIGKILL` from elsewhere (the kernel's OOM killer, an operator).
    Killed,
    /// Another signal.
    Signalled,
    /// It exited, or broke the protocol.
    Exited,
}

impl Death {
    pub const ALL: [Death; 6] = [
        Death::Filtered,
        Death::Aborted,
        Death::Crashed,
        Death::Killed,
        Death::Signalled,
        Death::Exited,
    ];

    /// Its name, in metrics and in the recorded failure.
    pub fn as_str(self) -> &'static str {
        match self {
            Death::Filtered => "filtered",
            Death::Aborted => "aborted",
            Death::Crashed => "crashed",
            Death::Killed => "killed",
            Death::Signalled => "signalled",
            Death::Exited => "exited",
        }
    }
}

/// The cause recorded for a render killed at the time limit.
pub const TIMED_OUT: &str = "timed_out";

/// Time-outs in a row that refuse the file.
pub const TIME_OUTS_REFUSED: i64 = 2;

/// Whether a (file, variant) whose last failed render had `cause`, `count` times in a row, is
/// refused at once.
pub fn refused(cause: &str, count: i64) -> bool {
    cause != TIMED_OUT || count >= TIME_OUTS_REFUSED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_death_refuses_at_once_and_a_time_out_on_the_second_in_a_row() {
        for death in [
            "filtered",
            "aborted",
            "crashed",
            "killed",
            "signalled",
            "exited",
        ] {
            assert!(refused(death, 1), "{death}");
        }
        assert!(!refused(TIMED_OUT, 1));
        assert!(refused(TIMED_OUT, 2));
        assert!(refused(TIMED_OUT, 3));
    }
}
