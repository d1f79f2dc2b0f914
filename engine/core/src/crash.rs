//! Named points where a test ends this process exactly as `kill -9` would, so that
//! "killed at every point of a publish" is a test that lands on each point every run
//! instead of a sleep that lands somewhere. `SEALVOL_CRASH_AT=NAME` arms one point;
//! nothing else reads it, and with it unset a point costs one environment look-up.
//! The points are listed where they are kept (docs/SEMANTICS.md, "The CSI node plugin").

/// The environment variable that names the point to die at.
pub const CRASH_AT: &str = "SEALVOL_CRASH_AT";

/// Dies here with SIGKILL when `SEALVOL_CRASH_AT` is `name`: no destructor runs, no
/// file is closed cleanly, as with a node's OOM killer or `kill -9`.
pub fn point(name: &str) {
    if std::env::var_os(CRASH_AT).is_some_and(|v| v == name) {
        tracing::warn!("{CRASH_AT}={name}: dying here as kill -9 would");
        // SAFETY: sends a signal to this process; touches no memory.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}
