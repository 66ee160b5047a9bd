//! When a variant of a file is refused without another render (issue 46): its render killed
//! its worker once (a signal, an abort, its memory limit: the same bytes would do it again), or
//! ran past the time limit twice in a row (once may be a busy machine; twice, the file). A
//! render that succeeds forgets both. Pure.

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
