//! Unmounting a mount point, whatever process serves it (or none: a dead mount): its
//! serving process is told it was us (so it says so in its log) and waited for, so a
//! mount right after finds the directory free.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sealvol_core::Result;

use crate::records::{self, MountRecord};

/// A mount point unmounted.
#[derive(Debug)]
pub struct Unmounted {
    pub dir: PathBuf,
    /// A lazy unmount's process still serves the files open under it, and ends when
    /// they are closed.
    pub still_serving: bool,
}

/// Unmounts `dir`; `lazy` detaches it even while files are open. `records` is where
/// mounts keep their records (`records::dir`).
pub fn unmount(records: &Path, dir: &Path, lazy: bool) -> Result<Unmounted> {
    // Mount records and the kernel name the mount point by its canonical path.
    let abs = dir
        .canonicalize()
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_path_buf());
    let serving: Vec<MountRecord> = records::list(records)
        .into_iter()
        .filter(|r| Path::new(&r.dir) == abs)
        .collect();
    for r in &serving {
        records::note_unmount(records, r.pid);
    }
    if let Err(e) = crate::point::unmount_dir(&abs, lazy) {
        for r in &serving {
            records::take_unmount_note(records, r.pid);
        }
        return Err(e);
    }
    // Wait for the serving process to notice and exit, so a remount right after works.
    // After a lazy detach it serves the files still open and ends when they close.
    let wait = match lazy {
        true => Duration::from_millis(500),
        false => Duration::from_secs(10),
    };
    let deadline = Instant::now() + wait;
    for r in &serving {
        while records::alive(r.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(Unmounted {
        dir: abs,
        still_serving: serving.iter().any(|r| records::alive(r.pid)),
    })
}
