//! A deadline for what the calling thread waits on. A mount's read must end by its
//! `--read-timeout` whatever the origin does (a page fault that never returns hangs the
//! loader; one that fails kills it with SIGBUS, so the wait is bounded and generous),
//! so calls that wait on a network look here and stop waiting when it passes.

use std::cell::Cell;
use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind};

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Runs `f` with `deadline` for what it waits on (the earlier one, if one is set
/// already).
pub fn within<T>(deadline: Instant, f: impl FnOnce() -> T) -> T {
    let outer = DEADLINE.get();
    DEADLINE.set(Some(outer.map_or(deadline, |o| o.min(deadline))));
    let out = f();
    DEADLINE.set(outer);
    out
}

/// The time left before this thread's deadline, if it has one.
pub fn left() -> Option<Duration> {
    DEADLINE
        .get()
        .map(|d| d.saturating_duration_since(Instant::now()))
}

/// The error for a wait cut short by the deadline.
pub fn passed(what: &str) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!("{what}: no answer before the read's deadline"),
    )
    .hint("the origin is slow or unreachable; a longer --read-timeout waits more")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earlier_deadline_holds_and_ends_with_its_scope() {
        assert!(left().is_none());
        let soon = Instant::now() + Duration::from_secs(1);
        within(soon, || {
            within(soon + Duration::from_secs(60), || {
                assert!(left().unwrap() <= Duration::from_secs(1));
            });
            assert!(left().is_some());
        });
        assert!(left().is_none());
    }
}
