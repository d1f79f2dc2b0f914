//! The pull-through mirror (issue 63; being built): a server started with an upstream
//! Hub seals the repos its clients ask for with sync jobs of its own, and streams each
//! file to them while its job fetches it. This part: the jobs' taps (`TapFor`), which
//! put each file a mirror job reads into the spool under the key its clients ask for
//! it by, so that a client reads it while it comes (`spool.rs`).

use std::sync::Arc;

use sealvol_node::jobs::JobSpec;
use sealvol_source::{FileTap, SourceUrl, Tap};

use super::spool::{Spool, Writer};

/// The name a mirror's jobs are started by (`JobSpec::started_by`): only those are
/// tapped.
pub const STARTED_BY: &str = "hub-mirror";

/// The spool key of file `path` of Hub repo `repo` at commit `sha`.
pub fn spool_key(repo: &str, sha: &str, path: &str) -> String {
    format!("{}@{sha}/{path}", repo.to_ascii_lowercase())
}

/// Taps the mirror's own jobs into its spool.
#[derive(Debug)]
pub struct MirrorTaps {
    pub spool: Arc<Spool>,
}

impl sealvol_node::sync::TapFor for MirrorTaps {
    fn tap_for(&self, spec: &JobSpec) -> Option<Arc<dyn Tap>> {
        if spec.started_by.as_deref() != Some(STARTED_BY) {
            return None;
        }
        // A mirror job reads one commit of one repo: `hf://ORG/NAME@SHA`.
        let SourceUrl::HuggingFace { repo, revision, .. } = SourceUrl::parse(&spec.source).ok()?
        else {
            return None;
        };
        Some(Arc::new(RepoTap {
            spool: Arc::clone(&self.spool),
            repo,
            sha: revision,
        }))
    }
}

struct RepoTap {
    spool: Arc<Spool>,
    repo: String,
    sha: String,
}

impl Tap for RepoTap {
    fn open(&self, key: &str, size: u64) -> Option<Box<dyn FileTap>> {
        let k = spool_key(&self.repo, &self.sha, key);
        match self.spool.start(&k, size) {
            Ok(w) => Some(Box::new(Spooled(w))),
            Err(e) => {
                tracing::warn!("{k} cannot be spooled ({e}): its clients wait for the seal");
                None
            }
        }
    }
}

struct Spooled(Writer);

impl FileTap for Spooled {
    fn bytes(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    fn verified(self: Box<Self>, _passed: &[&'static str]) {
        self.0.verified();
    }

    fn failed(self: Box<Self>, why: &str) {
        self.0.failed(why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealvol_node::sync::TapFor;
    use std::time::Duration;

    fn spec(source: &str, by: Option<&str>) -> JobSpec {
        JobSpec {
            source: source.into(),
            volume: "hf/org--m".into(),
            started_by: by.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn a_mirror_jobs_files_go_to_the_spool_under_the_key_clients_ask_by() {
        let dir = tempfile::tempdir().unwrap();
        let spool = Arc::new(Spool::open(&dir.path().join("spool")).unwrap());
        let taps = MirrorTaps {
            spool: Arc::clone(&spool),
        };
        let sha = "ab".repeat(20);
        assert!(
            taps.tap_for(&spec(&format!("hf://Org/M@{sha}"), None))
                .is_none()
        );
        assert!(taps.tap_for(&spec("s3://b/p/", Some(STARTED_BY))).is_none());
        let tap = taps
            .tap_for(&spec(&format!("hf://Org/M@{sha}"), Some(STARTED_BY)))
            .unwrap();
        let mut f = tap.open("config.json", 5).unwrap();
        f.bytes(b"hello");
        f.verified(&["git-blob-sha1"]);
        let got = spool.get(&spool_key("org/m", &sha, "config.json")).unwrap();
        assert_eq!(got.read_at(0, 5, Duration::ZERO).unwrap(), b"hello");
        assert!(got.verified());
    }
}
