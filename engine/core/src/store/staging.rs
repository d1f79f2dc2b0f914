//! Staging files and the writers that left them: temporary names that say which
//! process made them, whether that process may still live, and cleaning up after the
//! ones that are gone.

use std::path::{Path, PathBuf};

use crate::error::Result;

impl Staged {
    pub fn new(path: PathBuf) -> Staged {
        Staged(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        // Gone already once published (renamed into place or uploaded and removed).
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A file name no other writer in any process will pick: the host, the pid and a
/// counter shared by everything in this process (several stores or caches may share a
/// directory), `<host>-<pid>-<n>.tmp`. The host and pid let a later writer tell whether
/// the file's owner may still be writing it (`owner_may_live`).
pub fn unique_temp_name() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{}-{n}.tmp", host(), std::process::id())
}

/// This machine's name as it goes into temporary file names (`-` and `/` replaced).
pub fn host() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| {
        let h = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let h: String = h
            .trim()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if h.is_empty() { "host".into() } else { h }
    })
}

/// A temporary file of another machine (or a name we did not make) is left alone this
/// long: we cannot see whether its owner lives.
const FOREIGN_STALE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Whether the owner of a temporary file made by `unique_temp_name` may still be
/// writing it. On this machine the owner is the process with that pid, if it started
/// before the file was last written (a later process with the same pid is not it).
/// Names of another machine, or not ours, count as live for a day.
pub fn owner_may_live(name: &str, modified: std::time::SystemTime) -> bool {
    let old = modified.elapsed().is_ok_and(|age| age > FOREIGN_STALE);
    let Some(stem) = name.strip_suffix(".tmp") else {
        return !old;
    };
    let mut parts = stem.rsplitn(3, '-');
    let (Some(_n), Some(pid)) = (parts.next(), parts.next()) else {
        return !old;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return !old;
    };
    // Names from before the host was part of them (`<pid>-<n>.tmp`) are this machine's.
    if parts.next().is_some_and(|h| h != host()) {
        return !old;
    }
    match process_started(pid) {
        None => false,
        Some(started) => started <= modified + std::time::Duration::from_secs(1),
    }
}

/// Whether a process of this machine that started at `started` is known to be gone:
/// no process has its pid, or the one that has it started later. Another machine's
/// process is never known gone.
pub fn process_gone(host_name: &str, pid: u32, started: std::time::SystemTime) -> bool {
    if host_name != host() {
        return false;
    }
    match process_started(pid) {
        None => true,
        Some(at) => at > started + std::time::Duration::from_secs(1),
    }
}

/// When process `pid` started, from `/proc`; `None` if there is no such process.
pub fn process_started(pid: u32) -> Option<std::time::SystemTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields after the last
    // `)` are plain; start time is field 22, the 20th after it.
    let after = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = after.split_whitespace().nth(19)?.parse().ok()?;
    let btime: u64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    let secs = btime as f64 + ticks as f64 / hz as f64;
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(secs))
}

/// Removes the files of `dir` (a staging directory) whose owner is gone
/// (`owner_may_live`); returns how many and their bytes. A missing directory holds
/// nothing.
pub fn clean_staging_dir(dir: &Path) -> Result<(u64, u64)> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(crate::error::Error::io("cannot list", dir, e)),
    };
    let (mut files, mut bytes) = (0, 0);
    for item in rd.flatten() {
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        // Lock files are names for `flock`, which the kernel releases when its
        // holder dies; deleting one could let two processes lock different inodes.
        if name.starts_with("lock-") {
            continue;
        }
        let Ok(meta) = item.metadata() else { continue };
        let Ok(modified) = meta.modified() else {
            continue;
        };
        if meta.is_file()
            && !owner_may_live(name, modified)
            && std::fs::remove_file(item.path()).is_ok()
        {
            files += 1;
            bytes += meta.len();
        }
    }
    Ok((files, bytes))
}

/// A staging file that is removed when this is dropped, unless publishing moved or
/// consumed it first: a push or copy that fails on the way (a full disk, a store that
/// refused) leaves no staging behind for a later run to find.
#[derive(Debug)]
pub struct Staged(PathBuf);
