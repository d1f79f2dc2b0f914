//! When a checkpoint has settled, so that a watch may push it: no change event for the
//! settle period (the runner's clock), no entry changed within it by its own stamps
//! (ctime and mtime, which every write moves), and no process holding one of its files
//! open for writing. The last is read from `/proc/<pid>/fd` and `fdinfo`: only the
//! processes this one may inspect (its own user's, or all as root) are checked.

use std::fs;
use std::path::{Path, PathBuf};
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

/// A process that holds a file of the checkpoint open for writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    pub pid: u32,
    pub command: String,
    pub path: PathBuf,
}

impl std::fmt::Display for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is open for writing by pid {} ({})",
            self.path.display(),
            self.pid,
            self.command
        )
    }
}

/// The first process found holding a file under `dir` (a canonical path) open for
/// writing. Processes this one may not inspect are skipped.
pub fn writer_under(dir: &Path) -> Option<Writer> {
    let me = std::process::id();
    let procs = fs::read_dir("/proc").ok()?;
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            if !target.starts_with(dir) {
                continue;
            }
            let info = p.path().join("fdinfo").join(fd.file_name());
            if writable(&fs::read_to_string(info).unwrap_or_default()) {
                let command = fs::read_to_string(p.path().join("comm"))
                    .map(|c| c.trim().to_string())
                    .unwrap_or_default();
                return Some(Writer {
                    pid,
                    command,
                    path: target,
                });
            }
        }
    }
    None
}

/// Whether an `fdinfo` text says the descriptor was opened for writing.
fn writable(fdinfo: &str) -> bool {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| {
            let mode = flags & libc::O_ACCMODE as u32;
            mode == libc::O_WRONLY as u32 || mode == libc::O_RDWR as u32
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_open_for_writing_in_another_process_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        fs::write(dir.join("done.bin"), b"x").unwrap();
        assert_eq!(writer_under(&dir), None);
        // A real writer in another process: this process is skipped by design.
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("exec 3>>\"$1/part.bin\"; echo ready; read _")
            .arg("sh")
            .arg(&dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let w = writer_under(&dir).expect("the shell holds part.bin open");
        assert_eq!((w.pid, w.path.clone()), (child.id(), dir.join("part.bin")));
        assert!(w.to_string().contains("open for writing"), "{w}");
        writeln!(child.stdin.take().unwrap()).unwrap();
        child.wait().unwrap();
        assert_eq!(writer_under(&dir), None, "closed when the writer ended");
    }

    #[test]
    fn fdinfo_flags_are_read_as_octal() {
        assert!(writable("pos:\t0\nflags:\t0100001\nmnt_id:\t1\n"));
        assert!(writable("flags:\t02102002\n"));
        assert!(!writable("pos:\t0\nflags:\t0100000\n"));
        assert!(!writable(""));
    }

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
