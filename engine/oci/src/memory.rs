//! What a push remembers between runs, in one folder (`STATE/oci`):
//!
//! - `uploads/KEY`: where an unfinished chunked upload of one blob to one repository
//!   stands (the place the registry named), so a push run again resumes it instead of
//!   sending the blob again; forgotten once the blob is complete, or after 7 days (the
//!   age at which registries purge unfinished uploads);
//! - `pushed/KEY`: the repositories of one registry pushed to lately (at most
//!   `MAX_PUSHED`, newest first), so a blob one of them holds is mounted from it rather
//!   than sent.
//!
//! A record is a file, read as untrusted: one that does not read as what it should is
//! forgotten. Losing the memory costs only bytes sent again, so a record that cannot be
//! written is logged, never an error.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Repositories remembered per registry.
pub const MAX_PUSHED: usize = 4;
/// An unfinished upload older than this is forgotten.
const UPLOAD_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// A record longer than this is not one this code wrote.
const MAX_RECORD: u64 = 16 << 10;

/// The memory kept in one folder.
#[derive(Debug, Clone)]
pub struct Memory {
    dir: PathBuf,
}

impl Memory {
    pub fn at(dir: &Path) -> Memory {
        Memory {
            dir: dir.to_path_buf(),
        }
    }

    /// Where the upload of `digest` to `host/repo` stands, if one was left unfinished.
    pub fn upload(&self, host: &str, repo: &str, digest: &str) -> Option<String> {
        let text = self.read(&self.upload_file(host, repo, digest))?;
        let place = text.trim();
        // Only a place on the registry itself: a record never sends credentials away.
        let ours = place.starts_with(&format!("http://{host}/"))
            || place.starts_with(&format!("https://{host}/"));
        (ours && !place.contains(char::is_whitespace)).then(|| place.to_string())
    }

    /// Remembers where the upload of `digest` to `host/repo` stands.
    pub fn keep_upload(&self, host: &str, repo: &str, digest: &str, place: &str) {
        self.write(&self.upload_file(host, repo, digest), place);
    }

    /// Forgets the upload of `digest` to `host/repo` (complete, or not resumable).
    pub fn forget_upload(&self, host: &str, repo: &str, digest: &str) {
        let _ = std::fs::remove_file(self.upload_file(host, repo, digest));
    }

    /// Forgets unfinished uploads older than the registries keep them.
    pub fn sweep_uploads(&self) {
        let Ok(entries) = std::fs::read_dir(self.dir.join("uploads")) else {
            return;
        };
        let now = SystemTime::now();
        for e in entries.flatten() {
            let old = e
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > UPLOAD_AGE);
            if old {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// The repositories of `host` pushed to lately, newest first; each a valid name.
    pub fn pushed(&self, host: &str) -> Vec<String> {
        let Some(text) = self.read(&self.pushed_file(host)) else {
            return Vec::new();
        };
        text.lines()
            .filter(|r| crate::destination::repository_name_ok(r))
            .take(MAX_PUSHED)
            .map(str::to_string)
            .collect()
    }

    /// Remembers that `host/repo` was pushed to.
    pub fn note_pushed(&self, host: &str, repo: &str) {
        let mut repos = vec![repo.to_string()];
        repos.extend(self.pushed(host).into_iter().filter(|r| r != repo));
        repos.truncate(MAX_PUSHED);
        self.write(&self.pushed_file(host), &(repos.join("\n") + "\n"));
    }

    fn upload_file(&self, host: &str, repo: &str, digest: &str) -> PathBuf {
        self.dir.join("uploads").join(key(&[host, repo, digest]))
    }

    fn pushed_file(&self, host: &str) -> PathBuf {
        self.dir.join("pushed").join(key(&[host]))
    }

    fn read(&self, file: &Path) -> Option<String> {
        use std::io::Read;
        let mut text = String::new();
        std::fs::File::open(file)
            .ok()?
            .take(MAX_RECORD)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    }

    /// Writes `text` whole or not at all (a temporary file renamed over the record).
    fn write(&self, file: &Path, text: &str) {
        let written = (|| {
            let dir = file.parent().unwrap_or(&self.dir);
            sealvol_core::private::dir(dir).map_err(|e| std::io::Error::other(e.to_string()))?;
            let tmp = file.with_extension("tmp");
            std::fs::write(&tmp, text)?;
            std::fs::rename(&tmp, file)
        })();
        if let Err(e) = written {
            tracing::warn!(
                "cannot remember a push's progress in {}: {e}",
                file.display()
            );
        }
    }
}

/// A record's file name: a hash of what it is about (names may hold any character).
fn key(parts: &[&str]) -> String {
    blake3::hash(parts.join("\n").as_bytes()).to_hex()[..32].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_are_remembered_only_on_their_registry_and_forgotten_when_done() {
        let d = tempfile::tempdir().unwrap();
        let m = Memory::at(d.path());
        assert_eq!(m.upload("r:5000", "a", "sha256:1"), None);
        m.keep_upload(
            "r:5000",
            "a",
            "sha256:1",
            "http://r:5000/v2/a/blobs/uploads/u?_state=x",
        );
        assert_eq!(
            m.upload("r:5000", "a", "sha256:1").as_deref(),
            Some("http://r:5000/v2/a/blobs/uploads/u?_state=x")
        );
        assert_eq!(m.upload("r:5000", "b", "sha256:1"), None);
        // A place elsewhere (the file edited, or another registry's) is not used.
        m.keep_upload("r:5000", "a", "sha256:2", "https://elsewhere.example/v2/x");
        assert_eq!(m.upload("r:5000", "a", "sha256:2"), None);
        m.keep_upload("r:5000", "a", "sha256:3", "http://r:5000.evil/v2/x");
        assert_eq!(m.upload("r:5000", "a", "sha256:3"), None);
        m.forget_upload("r:5000", "a", "sha256:1");
        assert_eq!(m.upload("r:5000", "a", "sha256:1"), None);
    }

    #[test]
    fn the_repositories_pushed_to_are_few_newest_first_and_valid() {
        let d = tempfile::tempdir().unwrap();
        let m = Memory::at(d.path());
        for r in ["a", "b", "c", "b", "d", "e"] {
            m.note_pushed("h", r);
        }
        assert_eq!(m.pushed("h"), ["e", "d", "b", "c"]);
        assert!(m.pushed("other").is_empty());
        std::fs::write(m.pushed_file("h"), "ok/x\n../../etc\nBAD\n").unwrap();
        assert_eq!(m.pushed("h"), ["ok/x"]);
    }
}
