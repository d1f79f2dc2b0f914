//! The pull-through mirror (`serve --hf-upstream URL`): a request under `/hf/` for a
//! repo the server does not hold is a repo of the upstream Hub. Its revision is asked
//! upstream (a branch at most once per refresh, `upstream::Revisions`); a commit the
//! mirror sealed is served as any version (tagged `hf-COMMIT` in `NS/org--name`,
//! `upstream::mirror_volume`), told as the upstream's repo at its commit; one it has not
//! is synced by a job of the server's own (one per commit, however many ask), and
//! answered meanwhile from the upstream's metadata and, byte by byte, from the job's
//! files as they come (`coming.rs`, through the jobs' taps into the spool).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealvol_core::refs::{Name, VolumeName};
use sealvol_node::jobs::{JobSpec, JobState, JobsApi};
use sealvol_source::url::HfKind;
use sealvol_source::{FileTap, SourceUrl, Tap};

use super::asked::{Asked, Mirrored};
use super::missing::Missing;
use super::spool::{Spool, Writer};
use super::upstream::{Revisions, Upstream, is_commit, mirror_volume};
use crate::chunks::ChunkService;
use crate::keys::Grant;

/// The name a mirror's jobs are started by (`JobSpec::started_by`): only those are
/// tapped. Not a key's name (a key's is a `Name`, which takes no `:`), so no key's job
/// is, and no key's revocation cancels them.
pub const STARTED_BY: &str = "server:hub-mirror";

/// The tag a sealed commit is found by.
pub fn sealed_tag(commit: &str) -> String {
    format!("hf-{commit}")
}

/// How long a failed sync is answered with its failure before a request starts it
/// again (an upstream that sends wrong bytes is not asked in a loop).
pub const RETRY_AFTER: Duration = Duration::from_secs(30);

/// How many upstream answers (a repo at a commit, with its files' ids) are kept, and
/// how many bytes of them at most (one answer may be up to `upstream::MAX_ANSWER`).
const INFOS: usize = 1024;
const INFO_BYTES: usize = 64 << 20;

/// The upstream's answers by (dataset?, repo lowercased, commit), with their sizes,
/// and their sizes' sum.
type Infos = (
    HashMap<(bool, String, String), (Arc<serde_json::Value>, usize)>,
    usize,
);

/// A repo at a commit the mirror is syncing.
#[derive(Debug, Clone)]
pub struct Coming {
    /// As asked (`Qwen/Qwen3-8B`).
    pub repo: String,
    pub datasets: bool,
    pub commit: String,
    pub volume: VolumeName,
    pub job: u64,
}

/// Where a request goes.
pub enum Routed {
    /// To a version this server holds (asked by its own name, or sealed by the mirror:
    /// the request then names it, `At::mirrored`).
    Here(Asked),
    /// To the upstream's answers and the job's files (`coming.rs`).
    Coming(Coming, Asked),
}

/// A server's Hub mirror.
pub struct Mirror {
    /// Where mirrored repos are sealed (`--hf-namespace`).
    pub namespace: Name,
    pub upstream: Upstream,
    /// The stored secret (of `namespace`) the jobs read the upstream with.
    secret: Option<String>,
    revisions: Revisions,
    pub spool: Arc<Spool>,
    jobs: Arc<dyn JobsApi>,
    /// How long a client waits for bytes that do not come (the server's `--timeout`).
    pub patience: Duration,
    /// The upstream's answers, with their sizes, and their sizes' sum.
    infos: Mutex<Infos>,
    /// The job syncing each source (`hf://ORG/NAME@COMMIT`), and since when it has
    /// been seen failed.
    started: Mutex<HashMap<String, (u64, Option<Instant>)>>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Mirror({} into {})",
            self.upstream.base(),
            self.namespace
        )
    }
}

/// What a mirror is made of (`serve --hf-upstream …`).
pub struct MirrorSettings {
    pub namespace: Name,
    pub upstream: Upstream,
    pub secret: Option<String>,
    pub refresh: Duration,
    pub patience: Duration,
    pub spool: Arc<Spool>,
    pub jobs: Arc<dyn JobsApi>,
}

impl Mirror {
    pub fn new(s: MirrorSettings) -> Arc<Mirror> {
        let m = Arc::new(Mirror {
            namespace: s.namespace,
            upstream: s.upstream,
            secret: s.secret,
            revisions: Revisions::new(s.refresh),
            spool: s.spool,
            jobs: s.jobs,
            patience: s.patience,
            infos: Mutex::default(),
            started: Mutex::default(),
        });
        // Sealed commits' spool files go as soon as their jobs end.
        let weak = Arc::downgrade(&m);
        let _ = std::thread::Builder::new()
            .name("sealvol-hub-sweep".into())
            .spawn(move || {
                while let Some(m) = weak.upgrade() {
                    m.sweep();
                    drop(m);
                    std::thread::sleep(Duration::from_secs(2));
                }
            });
        m
    }

    /// Where `asked` goes: here, or to the upstream. Blocking.
    pub fn route(
        &self,
        chunks: &ChunkService,
        grant: &Grant,
        mut asked: Asked,
    ) -> Result<Routed, Missing> {
        let repo = chunks.repository();
        let at = asked.at().clone();
        match super::lookup::volume_for(repo, grant, &at.ns, &at.vol) {
            Ok(_) => return Ok(Routed::Here(asked)),
            Err(Missing::Repo(_)) => {}
            Err(m) => return Err(m),
        }
        let repo_id = format!("{}/{}", at.ns, at.vol);
        let volume = mirror_volume(&self.namespace, &repo_id, at.datasets)?;
        if !grant.sees(self.namespace.as_str()) {
            // The mirror is the mirror namespace's: a key that may not see it has none.
            return Err(Missing::Repo(format!(
                "Repository Not Found for url: {repo_id:.200}"
            )));
        }
        let commit = self
            .revisions
            .commit(&repo_id, &at.rev, Instant::now(), || {
                let (sha, json) = self.upstream.revision(at.datasets, &repo_id, &at.rev)?;
                self.keep_info(at.datasets, &repo_id, &sha, json);
                Ok(sha)
            })?;
        if self.sealed(chunks, &volume, &commit)? {
            let a = asked.at_mut();
            a.ns = volume.namespace.to_string();
            a.vol = volume.name.to_string();
            a.rev = sealed_tag(&commit);
            a.mirrored = Some(Mirrored {
                repo: repo_id,
                commit,
                pinned: is_commit(&at.rev),
            });
            return Ok(Routed::Here(asked));
        }
        let job = self.job_for(&repo_id, at.datasets, &commit, &volume)?;
        Ok(Routed::Coming(
            Coming {
                repo: repo_id,
                datasets: at.datasets,
                commit,
                volume,
                job,
            },
            asked,
        ))
    }

    /// Whether `commit` is sealed in `volume`.
    pub fn sealed(
        &self,
        chunks: &ChunkService,
        volume: &VolumeName,
        commit: &str,
    ) -> Result<bool, Missing> {
        let repo = chunks.repository();
        match super::revision::resolve(repo, volume, &sealed_tag(commit)) {
            Ok(_) => Ok(true),
            Err(e)
                if matches!(
                    e.kind(),
                    sealvol_core::error::ErrorKind::NotFound
                        | sealvol_core::error::ErrorKind::Invalid
                ) =>
            {
                Ok(false)
            }
            Err(e) => Err(Missing::Failed(e.to_string())),
        }
    }

    /// The upstream's answer for `c`'s repo at its commit (kept from the revision's
    /// lookup, or asked now). Blocking.
    pub fn info(&self, c: &Coming) -> Result<Arc<serde_json::Value>, Missing> {
        let key = (c.datasets, c.repo.to_ascii_lowercase(), c.commit.clone());
        if let Some((v, _)) = sealvol_core::lock(&self.infos).0.get(&key) {
            return Ok(Arc::clone(v));
        }
        let (_, json) = self.upstream.revision(c.datasets, &c.repo, &c.commit)?;
        Ok(self.keep_info(c.datasets, &c.repo, &c.commit, json))
    }

    fn keep_info(
        &self,
        datasets: bool,
        repo: &str,
        sha: &str,
        json: serde_json::Value,
    ) -> Arc<serde_json::Value> {
        let bytes = json.to_string().len();
        let json = Arc::new(json);
        let mut guard = sealvol_core::lock(&self.infos);
        let (infos, total) = &mut *guard;
        if infos.len() >= INFOS || *total + bytes > INFO_BYTES {
            // Forgotten answers are asked again when needed.
            infos.clear();
            *total = 0;
        }
        let key = (datasets, repo.to_ascii_lowercase(), sha.to_string());
        if let Some((_, old)) = infos.insert(key, (Arc::clone(&json), bytes)) {
            *total -= old;
        }
        *total += bytes;
        json
    }

    /// The job syncing `repo` at `commit` into `volume`: the one started before (by
    /// this process, or by one before it and resumed), else a new one. A failed one is
    /// its failure for `RETRY_AFTER`, then retried. Blocking.
    fn job_for(
        &self,
        repo: &str,
        datasets: bool,
        commit: &str,
        volume: &VolumeName,
    ) -> Result<u64, Missing> {
        let source = SourceUrl::HuggingFace {
            kind: if datasets {
                HfKind::Dataset
            } else {
                HfKind::Model
            },
            repo: repo.to_string(),
            revision: commit.to_string(),
        }
        .to_string();
        let failed = |e: sealvol_core::Error| {
            Missing::Failed(format!("the mirror cannot sync {repo:.100}@{commit}: {e}"))
        };
        let mut started = sealvol_core::lock(&self.started);
        if let Some((id, failed_since)) = started.get_mut(&source) {
            let id = *id;
            match self.jobs.show(id) {
                Ok(j) if !j.state.is_final() => return Ok(id),
                Ok(j) if matches!(j.state, JobState::Failed | JobState::Cancelled) => {
                    let since = *failed_since.get_or_insert_with(Instant::now);
                    if since.elapsed() < RETRY_AFTER {
                        let why = j.reason.unwrap_or_else(|| "it failed".into());
                        return Err(Missing::Failed(format!(
                            "the mirror's sync of {repo:.100}@{commit} (job {id}) failed: {why:.500}; it is tried again {}s after",
                            RETRY_AFTER.as_secs()
                        )));
                    }
                    self.jobs.retry(id).map_err(failed)?;
                    started.insert(source, (id, None));
                    return Ok(id);
                }
                // Ready but not sealed (its tag was removed), or gone: a new one.
                _ => {}
            }
        }
        let live = self.jobs.list().map_err(failed)?.into_iter().find(|j| {
            j.spec.started_by.as_deref() == Some(STARTED_BY)
                && j.spec.source == source
                && !j.state.is_final()
        });
        let id = match live {
            Some(j) => j.id,
            None => {
                let spec = JobSpec {
                    source: source.clone(),
                    volume: volume.to_string(),
                    tags: vec![sealed_tag(commit)],
                    secret: self.secret.clone(),
                    endpoint: sealvol_source::endpoints::Resolved {
                        url: Some(self.upstream.base().to_string()),
                        path_style: false,
                    },
                    started_by: Some(STARTED_BY.to_string()),
                    ..Default::default()
                };
                self.jobs.submit(spec).map_err(failed)?.id
            }
        };
        if started.len() >= INFOS {
            started.retain(|_, (id, _)| self.jobs.show(*id).is_ok_and(|j| !j.state.is_final()));
        }
        started.insert(source, (id, None));
        Ok(id)
    }

    /// The job's state now, and its bytes done (progress). Blocking.
    pub fn job(&self, id: u64) -> Result<sealvol_node::jobs::Job, Missing> {
        self.jobs
            .show(id)
            .map_err(|e| Missing::Failed(format!("the mirror's job {id}: {e}")))
    }

    /// Forgets the spool files of jobs that ended ready (their versions serve them).
    fn sweep(&self) {
        let ids: Vec<(String, u64)> = sealvol_core::lock(&self.started)
            .iter()
            .map(|(s, (id, _))| (s.clone(), *id))
            .collect();
        for (source, id) in ids {
            if let Ok(j) = self.jobs.show(id)
                && j.state == JobState::Ready
                && let Ok(SourceUrl::HuggingFace { repo, revision, .. }) = SourceUrl::parse(&source)
            {
                self.spool.forget_prefix(&spool_key(&repo, &revision, ""));
                sealvol_core::lock(&self.started).remove(&source);
            }
        }
    }
}

/// The spool key of file `path` of Hub repo `repo` at commit `sha`.
pub fn spool_key(repo: &str, sha: &str, path: &str) -> String {
    format!("{}@{sha}/{path}", repo.to_ascii_lowercase())
}

/// Taps the mirror's own jobs into its spool.
#[derive(Debug)]
pub struct MirrorTaps {
    pub spool: Arc<Spool>,
    /// Counts the bytes the jobs read upstream (`/metrics`).
    pub upstream_bytes: Arc<std::sync::atomic::AtomicU64>,
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
            upstream_bytes: Arc::clone(&self.upstream_bytes),
            repo,
            sha: revision,
        }))
    }
}

struct RepoTap {
    spool: Arc<Spool>,
    upstream_bytes: Arc<std::sync::atomic::AtomicU64>,
    repo: String,
    sha: String,
}

impl Tap for RepoTap {
    fn open(&self, key: &str, size: u64) -> Option<Box<dyn FileTap>> {
        let k = spool_key(&self.repo, &self.sha, key);
        match self.spool.start(&k, size) {
            Ok(w) => Some(Box::new(Spooled(w, Arc::clone(&self.upstream_bytes)))),
            Err(e) => {
                tracing::warn!("{k} cannot be spooled ({e}): its clients wait for the seal");
                None
            }
        }
    }
}

struct Spooled(Writer, Arc<std::sync::atomic::AtomicU64>);

impl FileTap for Spooled {
    fn bytes(&mut self, bytes: &[u8]) {
        sealvol_core::read::add(&self.1, bytes.len() as u64);
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
            upstream_bytes: Arc::default(),
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
