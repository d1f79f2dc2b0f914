//! Mount records: one small JSON file per running mount in `<state>/mounts/`, rewritten
//! by the mount process within 100 ms of a change of its counters, and at once when
//! asked (`fresh`: `<pid>.ask`, which the mount removes once the record is written).
//! The console's Mounts screen and `sealvol volume mounts` read them; a record whose
//! process is gone, or whose directory is no longer mounted, is stale and removed by
//! whoever lists.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use sealvol_core::error::{IoContext, Result};
use sealvol_core::read::TierStats;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MountRecord {
    pub pid: u32,
    /// The mount point, absolute.
    pub dir: String,
    pub volume: String,
    /// The digest this mount serves, fixed at mount time.
    pub digest: String,
    /// The ref as the user gave it (a tag resolves once, at mount time).
    pub requested: String,
    pub cache: Option<String>,
    pub started: String,
    pub files: u64,
    pub bytes: u64,
    /// The cache servers asked before the origin (`--peer`, `--peers-file`), as they
    /// stand now.
    #[serde(default)]
    pub peers: Vec<String>,
    /// What this mount counted of each of them (`read::ring`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ring: Vec<sealvol_core::read::ring::MemberStats>,
    /// Where its Prometheus metrics are served (`--metrics`), `http://ADDR/metrics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<String>,
    pub stats: TierStats,
}

/// Where a node's mount records live, under its state directory.
pub fn dir(state: &Path) -> PathBuf {
    state.join("mounts")
}

fn record_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.json"))
}

pub fn write(dir: &Path, rec: &MountRecord) -> Result<()> {
    let json = serde_json::to_vec_pretty(rec).unwrap_or_default();
    replace(dir, &record_path(dir, rec.pid), &json)
}

/// Writes `path` in `dir` (private to this user) whole or not at all: a reader sees
/// the old file or the new one, never half of one.
fn replace(dir: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    sealvol_core::private::dir(dir)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = fs::remove_file(&tmp);
    sealvol_core::private::create_new()
        .open(&tmp)
        .and_then(|mut f| std::io::Write::write_all(&mut f, bytes))
        .ctx("cannot write", &tmp)?;
    fs::rename(&tmp, path).ctx("cannot write", path)
}

pub fn remove(dir: &Path, pid: u32) {
    let _ = fs::remove_file(record_path(dir, pid));
}

fn ask_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.ask"))
}

/// The records of the live mounts (`list`), each rewritten by its mount after this call
/// began: figures as of now, not of the mount's last report. A mount that does not
/// answer within `patience` (hung, or an older sealvol) is listed as it last wrote.
pub fn fresh(dir: &Path, patience: std::time::Duration) -> Vec<MountRecord> {
    let live = list(dir);
    let asked: Vec<PathBuf> = live
        .iter()
        .map(|r| ask_path(dir, r.pid))
        .filter(|p| fs::write(p, b"").is_ok())
        .collect();
    if asked.is_empty() {
        return live;
    }
    let deadline = std::time::Instant::now() + patience;
    while asked.iter().any(|p| p.exists()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    for p in &asked {
        let _ = fs::remove_file(p);
    }
    list(dir)
}

/// Whether someone asked mount `pid` for its figures now (`fresh`); the mount answers by
/// writing its record, then `answered`.
pub fn asked(dir: &Path, pid: u32) -> bool {
    ask_path(dir, pid).exists()
}

/// Says that the record written last answers the question `fresh` asked.
pub fn answered(dir: &Path, pid: u32) {
    let _ = fs::remove_file(ask_path(dir, pid));
}

fn unmount_note_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.unmounting"))
}

/// Left by `sealvol volume unmount` for the process serving the mount, just before it
/// asks the kernel to unmount, so that the mount's log can say who ended it.
pub fn note_unmount(dir: &Path, pid: u32) {
    let _ = fs::write(unmount_note_path(dir, pid), b"");
}

/// Removes the note (the unmount failed, or the mount has read it); whether there was one.
pub fn take_unmount_note(dir: &Path, pid: u32) -> bool {
    fs::remove_file(unmount_note_path(dir, pid)).is_ok()
}

/// Whether a process runs; a zombie (exited, not yet reaped by its new parent) does not.
pub fn alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and may hold spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Live mounts, newest first; stale records are deleted on the way.
pub fn list(dir: &Path) -> Vec<MountRecord> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mounted = crate::table::mounted_dirs();
    let mut out = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let rec: Option<MountRecord> = fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        match rec {
            Some(r) if alive(r.pid) && mounted.contains(&r.dir) => out.push(r),
            Some(r) if alive(r.pid) => {} // still starting up, or shutting down
            _ => {
                let _ = fs::remove_file(&p);
            }
        }
    }
    out.sort_by(|a, b| b.started.cmp(&a.started).then(a.dir.cmp(&b.dir)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_records_are_removed() {
        let d = tempfile::tempdir().unwrap();
        let rec = MountRecord {
            pid: u32::MAX - 1,
            dir: "/nowhere".into(),
            volume: "a/b".into(),
            digest: "b3:00".into(),
            requested: "a/b".into(),
            cache: None,
            started: "2026-01-01T00:00:00Z".into(),
            files: 0,
            bytes: 0,
            peers: Vec::new(),
            ring: Vec::new(),
            metrics: None,
            stats: TierStats::default(),
        };
        write(d.path(), &rec).unwrap();
        assert!(list(d.path()).is_empty());
        assert!(!record_path(d.path(), rec.pid).exists());
    }
}

/// The order in which a mount's readers first asked for a version's chunks, kept on
/// the node after the mount ends so `volume profile save` can store it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Recording {
    pub volume: String,
    pub digest: String,
    pub recorded: String,
    pub steps: Vec<sealvol_core::profile::Step>,
}

/// `<state>/profiles/<digest hex>.json`: the latest mount of a version records there.
fn recording_path(state: &Path, digest: &sealvol_core::Digest) -> PathBuf {
    state
        .join("profiles")
        .join(format!("{}.json", digest.hex()))
}

pub fn write_recording(state: &Path, digest: &sealvol_core::Digest, rec: &Recording) -> Result<()> {
    let json = serde_json::to_vec(rec).unwrap_or_default();
    replace(
        &state.join("profiles"),
        &recording_path(state, digest),
        &json,
    )
}

/// The recording of the latest mount of `digest` on this node, if there is one.
pub fn read_recording(state: &Path, digest: &sealvol_core::Digest) -> Result<Option<Recording>> {
    let path = recording_path(state, digest);
    match fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
            sealvol_core::Error::corrupt(format!("{} is damaged: {e}", path.display()))
                .hint("mount the version and read it again to record a new one")
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(sealvol_core::Error::io("cannot read", &path, e)),
    }
}
