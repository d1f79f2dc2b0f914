//! A mount served until it is stopped: its record kept current (the counters within
//! 100 ms of a change, at once when `volume mounts` asks, for it and the console), the order readers first
//! asked for chunks kept for `volume profile save` (at most once a second while it
//! changes, once more at the end), and the record removed when it ends.

use std::path::Path;
use std::time::{Duration, Instant};

use sealvol_core::registry::now_rfc3339;

use crate::records::{self, MountRecord, Recording};
use crate::session::Mount;

/// Why a mount stopped, as its log says it (a signal's reason is the caller's).
pub const BY_UNMOUNT: &str = "by `sealvol volume unmount`";
pub const FROM_OUTSIDE: &str = "from outside: fusermount3 -u or umount";

/// Serves `m` (whose record `rec` is written already) until `wait` returns: `wait`
/// calls its poll every 100 ms or so until the poll says why to stop, or returns a
/// reason of its own (a signal). Returns why it stopped; the caller unmounts.
pub fn until_stopped(
    m: &Mount,
    rec: &mut MountRecord,
    records_dir: &Path,
    state: &Path,
    wait: impl FnOnce(&mut dyn FnMut() -> Option<&'static str>) -> &'static str,
) -> &'static str {
    let Ok(digest) = sealvol_core::Digest::parse(&rec.digest) else {
        return FROM_OUTSIDE;
    };
    let (volume, digest_text) = (rec.volume.clone(), rec.digest.clone());
    let keep_recording = || {
        if let Some(steps) = m.fs().recording() {
            let r = Recording {
                volume: volume.clone(),
                digest: digest_text.clone(),
                recorded: now_rfc3339(),
                steps,
            };
            if let Err(e) = records::write_recording(state, &digest, &r) {
                tracing::warn!("cannot keep the read profile: {e}");
            }
        }
    };
    let pid = rec.pid;
    let mut recorded = Instant::now();
    let mut last = m.stats();
    let mut poll = || {
        if !m.is_running() {
            return Some(match records::take_unmount_note(records_dir, pid) {
                true => BY_UNMOUNT,
                false => FROM_OUTSIDE,
            });
        }
        // Asked before the figures are read: they then count everything done before
        // the question.
        let asked = records::asked(records_dir, pid);
        let now = m.stats();
        let ring = m.fs().tiers().ring().stats();
        if now != last || ring != rec.ring || asked {
            rec.stats = now;
            rec.peers = ring.iter().map(|r| r.url.clone()).collect();
            rec.ring = ring;
            let _ = records::write(records_dir, rec);
            if asked {
                records::answered(records_dir, pid);
            }
            last = now;
            if recorded.elapsed() >= Duration::from_secs(1) {
                keep_recording();
                recorded = Instant::now();
            }
        }
        None
    };
    let stopped = wait(&mut poll);
    keep_recording();
    records::remove(records_dir, pid);
    stopped
}
