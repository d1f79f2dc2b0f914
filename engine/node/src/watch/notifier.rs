//! Change events for a watched folder: inotify through `notify` and its debouncer
//! (which pairs the two halves of a rename), or polling where events cannot be
//! trusted: a network file system, whose other clients' writes raise no event here, or
//! a machine out of inotify watches (`max_user_watches`). Either way the runner gets
//! the same thing: which paths changed, and when.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use notify::event::{AccessKind, AccessMode, EventKind, ModifyKind};
use notify::{PollWatcher, RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, NoCache, new_debouncer_opt};

/// How long the debouncer holds events to pair renames and merge bursts, and how often
/// its thread wakes; the runner measures quiet from each event's own time, so this adds
/// no wait to a settle.
const DEBOUNCE: Duration = Duration::from_millis(200);

/// What the runner hears.
#[derive(Debug)]
pub enum Signal {
    /// These paths changed at `at`.
    Changed { paths: Vec<PathBuf>, at: Instant },
    /// Events may have been lost (a queue overflow): anything may have changed.
    Rescan,
    /// The notifier cannot go on as it is (out of watches, say); the runner starts
    /// polling instead.
    Failed(String),
    /// The watched folder itself was removed or renamed away: what is at its path now
    /// (nothing yet, or another folder) must be watched anew.
    Lost,
}

/// How changes are seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    Events,
    Polling { every: Duration, why: String },
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Events => f.write_str("inotify"),
            Mode::Polling { every, why } => write!(
                f,
                "polling every {} ({why})",
                humantime::format_duration(*every)
            ),
        }
    }
}

/// A running notifier; dropping it stops it.
pub enum Notifier {
    Events(Debouncer<RecommendedWatcher, NoCache>),
    Polling(Debouncer<PollWatcher, NoCache>),
}

/// The poll interval: often enough for a settle to be seen on time, never a busy loop.
pub fn poll_every(settle: Duration) -> Duration {
    (settle / 2).clamp(Duration::from_millis(250), Duration::from_secs(5))
}

/// Starts watching `dir` (which exists) with events, or polling when `poll` is set,
/// `dir` is on a network file system, or inotify refuses.
pub fn start(
    dir: &Path,
    poll: Option<String>,
    settle: Duration,
    tx: Sender<Signal>,
) -> Result<(Notifier, Mode), String> {
    let why = poll.or_else(|| {
        network_fs(dir).map(|fs| {
            format!("{dir:?} is on {fs}, whose other clients' writes raise no events here")
        })
    });
    if why.is_none() {
        match events(dir, tx.clone()) {
            Ok(n) => return Ok((Notifier::Events(n), Mode::Events)),
            Err(e) => return polling(dir, settle, tx, format!("inotify refused: {e}")),
        }
    }
    polling(dir, settle, tx, why.unwrap_or_default())
}

/// Polling, after events failed at run time.
pub fn start_polling(
    dir: &Path,
    settle: Duration,
    tx: Sender<Signal>,
    why: String,
) -> Result<(Notifier, Mode), String> {
    polling(dir, settle, tx, why)
}

fn events(
    dir: &Path,
    tx: Sender<Signal>,
) -> notify::Result<Debouncer<RecommendedWatcher, NoCache>> {
    let mut d = new_debouncer_opt::<_, RecommendedWatcher, NoCache>(
        DEBOUNCE,
        Some(DEBOUNCE),
        handler(tx, dir.to_path_buf()),
        NoCache,
        notify::Config::default(),
    )?;
    d.watch(dir, RecursiveMode::Recursive)?;
    Ok(d)
}

fn polling(
    dir: &Path,
    settle: Duration,
    tx: Sender<Signal>,
    why: String,
) -> Result<(Notifier, Mode), String> {
    let every = poll_every(settle);
    let config = notify::Config::default().with_poll_interval(every);
    let mut d = new_debouncer_opt::<_, PollWatcher, NoCache>(
        DEBOUNCE,
        Some(DEBOUNCE),
        handler(tx, dir.to_path_buf()),
        NoCache,
        config,
    )
    .map_err(|e| format!("cannot poll {}: {e}", dir.display()))?;
    d.watch(dir, RecursiveMode::Recursive)
        .map_err(|e| format!("cannot poll {}: {e}", dir.display()))?;
    Ok((Notifier::Polling(d), Mode::Polling { every, why }))
}

fn handler(tx: Sender<Signal>, root: PathBuf) -> impl FnMut(DebounceEventResult) + Send + 'static {
    move |r: DebounceEventResult| match r {
        Ok(events) => {
            for ev in events {
                let moved = matches!(
                    ev.event.kind,
                    EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
                );
                if moved && ev.event.paths.first() == Some(&root) {
                    let _ = tx.send(Signal::Lost);
                } else if ev.event.need_rescan() {
                    let _ = tx.send(Signal::Rescan);
                } else if counts(&ev.event.kind) {
                    let _ = tx.send(Signal::Changed {
                        paths: ev.event.paths.clone(),
                        at: ev.time,
                    });
                }
            }
        }
        Err(errors) => {
            for e in errors {
                let _ = tx.send(Signal::Failed(e.to_string()));
            }
        }
    }
}

/// Whether an event means something was written. Opening and reading do not: the
/// watch's own push reads every file.
fn counts(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Any | EventKind::Other => false,
        EventKind::Create(_) | EventKind::Modify(_) | EventKind::Remove(_) => true,
    }
}

/// The kind of network file system `dir` is on, if it is on one.
pub fn network_fs(dir: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs fills the struct we pass; the path is NUL-terminated.
    let f_type = unsafe {
        let mut s: libc::statfs = std::mem::zeroed();
        if libc::statfs(c.as_ptr(), &mut s) != 0 {
            return None;
        }
        s.f_type as i64
    };
    Some(match f_type {
        0x6969 => "NFS",
        0x517B => "SMB",
        0xFF53_4D42 => "CIFS",
        0xFE53_4D42 => "SMB2",
        0x0102_1997 => "9P",
        0x00C3_6400 => "CephFS",
        0x0BD0_0BD0 => "Lustre",
        0x4750_4653 => "GPFS",
        0x6573_5546 if fuse_is_remote(dir) => "a FUSE network file system",
        _ => return None,
    })
}

/// A FUSE file system that is a network one (sshfs, s3fs, gcsfuse, …) rather than a
/// local overlay: its mount's source names a host or a bucket.
fn fuse_is_remote(dir: &Path) -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    let best = mounts
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (src, at, ty) = (f.next()?, f.next()?, f.next()?);
            dir.starts_with(at).then_some((at.len(), src, ty))
        })
        .max_by_key(|(len, _, _)| *len);
    best.is_some_and(|(_, src, ty)| {
        ty.contains("sshfs") || ty.contains("s3fs") || ty.contains("gcsfuse") || src.contains(':')
    })
}
