//! An agent with the real sources, started in the test, for the sync tests of this
//! crate; and what they check a sealed version with.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sealvol_core::Repository;
use sealvol_core::testutil::noise;
use sealvol_core::walk::digest_dir;
use sealvol_node::agent::{Agent, AgentSettings, schedule::Limits};
use sealvol_node::jobs::{Job, JobSpec, JobsApi};
use sealvol_node::sync::Trust;
use sealvol_source::{Endpoints, SourceUrl};

/// An agent with the real sources over a repository of its own; the credentials moto
/// takes are the machine's secret `test`, as `sealvol secret set test` stores them.
pub struct Here {
    pub agent: Agent,
    pub repo: PathBuf,
    pub tmp: tempfile::TempDir,
}

pub fn here() -> Here {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let state = tmp.path().join("state");
    sealvol_source::secrets::set(&state, "test", b"test:test").unwrap();
    let settings = AgentSettings {
        batch_bytes: 64 << 20,
        streams: 4,
        run_queue: true,
        trust: Trust::Machine,
        mirrors: None,
        limits: Limits::MACHINE,
        taps: None,
    };
    let agent = Agent::start(
        Repository::open_local(&repo, true, false).unwrap(),
        &state,
        settings,
        Some(Arc::new(sealvol_sources::Sources)),
    )
    .unwrap()
    .expect("no other agent");
    Here { agent, repo, tmp }
}

/// Where S3-kind addresses go: every one to `endpoint`.
pub fn endpoints(endpoint: &str) -> Endpoints {
    Endpoints {
        s3: Some(endpoint.into()),
        r2: Some(endpoint.into()),
        cw: Some(endpoint.into()),
        ..Endpoints::default()
    }
}

impl Here {
    pub fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// `volume sync SOURCE VOLUME [--tag T]… [--exclude P]…` with `--secret test`, the
    /// endpoint as the CLI resolves it from `endpoints`; waits for the job to end.
    pub fn sync(
        &self,
        eps: &Endpoints,
        source: &str,
        volume: &str,
        tags: &[&str],
        exclude: &[&str],
    ) -> Job {
        self.submit(eps, source, volume, |s| {
            s.tags = tags.iter().map(|t| t.to_string()).collect();
            s.exclude = exclude.iter().map(|t| t.to_string()).collect();
            s.secret = Some("test".into());
        })
    }

    /// `volume sync SOURCE VOLUME` with what `flags` set of its spec (tags, filters, a
    /// secret's name), the endpoint resolved from `eps`; waits for the job to end.
    pub fn submit(
        &self,
        eps: &Endpoints,
        source: &str,
        volume: &str,
        flags: impl FnOnce(&mut JobSpec),
    ) -> Job {
        let url = SourceUrl::parse(source).unwrap();
        let mut spec = JobSpec {
            source: url.to_string(),
            volume: volume.into(),
            tags: vec![],
            secret: None,
            include: vec![],
            exclude: vec![],
            endpoint: eps.resolve(&url),
            mirror_to: None,
            started_by: None,
        };
        flags(&mut spec);
        let job = self.agent.submit(spec).unwrap();
        self.ended(job.id)
    }

    /// `volume sync SOURCE w/cancel --detach`: the job's id, once its log says `seen`.
    pub fn detached_until(&self, eps: &Endpoints, source: &str, seen: &str) -> u64 {
        let url = SourceUrl::parse(source).unwrap();
        let job = self
            .agent
            .submit(JobSpec {
                source: url.to_string(),
                volume: "w/cancel".into(),
                tags: vec![],
                secret: Some("test".into()),
                include: vec![],
                exclude: vec![],
                endpoint: eps.resolve(&url),
                mirror_to: None,
                started_by: None,
            })
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let logs = self.agent.logs(job.id).unwrap();
            if logs.contains(seen) {
                return job.id;
            }
            assert!(Instant::now() < deadline, "never saw {seen:?} in\n{logs}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stores a secret as `sealvol secret set NAME` does.
    pub fn set_secret(&self, name: &str, value: &str) {
        sealvol_source::secrets::set(&self.tmp.path().join("state"), name, value.as_bytes())
            .unwrap();
    }

    /// Waits for job `id` to end; the deadline only fails a job that never does.
    pub fn ended(&self, id: u64) -> Job {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let j = self.agent.show(id).unwrap();
            if j.state.is_final() {
                return j;
            }
            assert!(Instant::now() < deadline, "job {id} never ended: {j:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn repository(&self) -> Repository {
        Repository::open_local(&self.repo, false, false).unwrap()
    }

    /// Bytes the repository's packs hold.
    pub fn stored_chunk_bytes(&self) -> u64 {
        let mut total = 0;
        for e in sealvol_testkit::files::under(&self.repo.join("index")) {
            let bytes = std::fs::read(&e).unwrap();
            let entries = sealvol_core::objects::decode_index("index", &bytes).unwrap();
            total += entries.iter().map(|e| e.stored_len as u64).sum::<u64>();
        }
        total
    }

    pub fn volumes(&self) -> Vec<String> {
        self.repository()
            .volumes(None)
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect()
    }
}

pub fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

pub fn sample(root: &Path) {
    write(&root.join("config.json"), b"{\"layers\": 2}");
    write(&root.join("model.safetensors"), &noise(20 << 20, 1)); // three 8 MiB parts
    write(&root.join("tokenizer/vocab.txt"), &noise(300_000, 2));
    write(&root.join("tokenizer/empty.txt"), b"");
    write(&root.join("a/b/c/deep.bin"), &noise(5000, 3));
}

pub fn digest_of(dir: &Path) -> String {
    digest_dir(dir).unwrap().to_string()
}

/// A failed job's error as the CLI prints it: message, then hint.
pub fn error_of(job: &Job) -> String {
    let e = job
        .error
        .as_ref()
        .unwrap_or_else(|| panic!("no error in {job:#?}"));
    format!("{}\nhint: {}", e.message, e.hint.as_deref().unwrap_or(""))
}

pub fn manifest_json(h: &Here, volume: &str, digest: &str) -> serde_json::Value {
    let path = h
        .repo
        .join("manifests")
        .join(volume)
        .join(digest.trim_start_matches("b3:"));
    serde_json::from_slice(&std::fs::read(path).expect("manifest")).unwrap()
}
