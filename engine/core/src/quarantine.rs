//! Quarantine: where damaged objects go, out of the repository's way and read by
//! nothing, kept for a person to look at for the retention window
//! (`quarantine/<stamp>/<original key>`, docs/FORMAT.md).

use crate::error::Result;
use crate::repo::Repository;

impl Repository {
    /// Moves a damaged object out of the repository's way into `quarantine/`, where
    /// nothing reads it: the last copy of anything is kept for a person to look at, for
    /// the retention window. Returns where it went.
    pub fn quarantine(&self, key: &str) -> Result<String> {
        let to = format!("{QUARANTINE}{}/{key}", quarantine_stamp());
        self.store().move_object(key, &to)?;
        Ok(to)
    }

    /// Removes quarantine folders made before `before` (garbage collection, after the
    /// retention window); returns how many objects went.
    pub fn prune_quarantine(&self, before: std::time::SystemTime) -> Result<u64> {
        let mut removed = 0;
        for o in self.store().list(QUARANTINE)? {
            let stamp = o.key[QUARANTINE.len()..].split('/').next().unwrap_or("");
            if quarantine_time(stamp).is_some_and(|t| t < before) {
                self.store().delete(&o.key)?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Keeps a copy of bytes about to be overwritten (a damaged tag) in `quarantine/`.
    pub fn quarantine_copy(&self, key: &str, bytes: &[u8]) -> Result<String> {
        let to = format!("{QUARANTINE}{}/{key}", quarantine_stamp());
        self.store().put_if_absent(&to, bytes)?;
        Ok(to)
    }
}

/// Where damaged objects are moved; nothing reads them, and garbage collection removes
/// them once they are older than the retention window.
pub const QUARANTINE: &str = "quarantine/";

/// `quarantine/<stamp>/…`: one folder per process that quarantined something, so a
/// second damaged copy of one object never replaces the first.
fn quarantine_stamp() -> String {
    static STAMP: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    STAMP
        .get_or_init(|| {
            let t = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
            format!("{}-{}", t.replace([':', '-'], ""), std::process::id())
        })
        .clone()
}

/// When a quarantine folder (`20261201T115157Z-<pid>`) was made.
fn quarantine_time(stamp: &str) -> Option<std::time::SystemTime> {
    let t = stamp.get(..16)?;
    let text = format!(
        "{}-{}-{}T{}:{}:{}Z",
        t.get(..4)?,
        t.get(4..6)?,
        t.get(6..8)?,
        t.get(9..11)?,
        t.get(11..13)?,
        t.get(13..15)?
    );
    humantime::parse_rfc3339(&text).ok()
}
