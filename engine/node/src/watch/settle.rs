//! When a checkpoint has settled, so that a watch may push it: no change event for the
//! settle period (the runner's clock), no entry changed within it by its own stamps
//! (ctime and mtime, which every write moves), and no process holding one of its files
//! open for writing (`sealvol_core::holders`: the processes this one may inspect).

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::names::has_temporary;
use sealvol_core::error::Result;
use sealvol_core::walk::{WalkKind, walk};

/// What a checkpoint's entries are, as far as a change is concerned: two equal
/// fingerprints mean no entry was added, removed, renamed or written in between.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    entries: Vec<(String, u64, i128, i128, u64)>,
    /// The newest ctime or mtime among them, in ns since the epoch.
    pub newest_ns: i128,
    /// The files a version would hold (temporary ones left out), and their bytes.
    pub bytes: u64,
    pub files: u64,
}

impl Fingerprint {
    /// Walks `dir`. Every entry counts, temporary ones too: a temporary file being
    /// written means the checkpoint is not finished.
    pub fn of(dir: &Path) -> Result<Fingerprint> {
        let listing = walk(dir)?;
        let mut fp = Fingerprint {
            entries: Vec::with_capacity(listing.len()),
            newest_ns: 0,
            bytes: 0,
            files: 0,
        };
        for e in listing {
            let (size, mtime, ctime, ino) = match e.kind {
                WalkKind::File { stamp, .. } => {
                    if !has_temporary(&e.path) {
                        fp.bytes += stamp.size;
                        fp.files += 1;
                    }
                    (stamp.size, stamp.mtime_ns, stamp.ctime_ns, stamp.ino)
                }
                // Links and empty folders: their own stamps, without following them.
                _ => match fs::symlink_metadata(&e.abs) {
                    Ok(m) => {
                        let s = sealvol_core::walk::Stamp::of(&m);
                        (0, s.mtime_ns, s.ctime_ns, s.ino)
                    }
                    Err(_) => (0, 0, 0, 0),
                },
            };
            fp.newest_ns = fp.newest_ns.max(mtime).max(ctime);
            fp.entries.push((e.path, size, mtime, ctime, ino));
        }
        Ok(fp)
    }

    /// How long ago the newest entry changed, by the wall clock; `None` when that is in
    /// the future (a file server whose clock runs ahead), where stamps cannot tell.
    pub fn quiet_for(&self, now: SystemTime) -> Option<Duration> {
        let now_ns = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let age = now_ns - self.newest_ns;
        // Within a second ahead is clock granularity, not skew.
        if age < -1_000_000_000 {
            return None;
        }
        Some(Duration::from_nanos(age.max(0) as u64))
    }
}

pub use sealvol_core::holders::{Holder as Writer, writer_under};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_changes_with_any_write_and_knows_its_newest_stamp() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), b"12345").unwrap();
        let before = Fingerprint::of(dir.path()).unwrap();
        assert_eq!((before.files, before.bytes), (1, 5));
        assert!(before.quiet_for(SystemTime::now()).unwrap() < Duration::from_secs(5));
        assert_eq!(before, Fingerprint::of(dir.path()).unwrap());
        fs::write(dir.path().join("b.tmp"), b"").unwrap();
        let with_tmp = Fingerprint::of(dir.path()).unwrap();
        assert_ne!(before, with_tmp, "a temporary file is a change");
        assert_eq!(with_tmp.files, 1, "but not a file of the version");
        let ahead = SystemTime::now() - Duration::from_secs(3600);
        assert_eq!(before.quiet_for(ahead), None, "stamps from the future");
    }
}
