//! The one API the console uses: plain data in and out, over whichever repository the
//! app opened (a folder, a bucket, or a `sealvol serve` through `--remote`). Calls
//! block; callers that must stay responsive run them on a blocking task.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::jobs::{Job, JobEvent, JobsApi};
use crate::watch::{Watch, WatchView};
use sealvol_core::diff::VersionDiff;
use sealvol_core::error::Result;
use sealvol_core::files::VersionFiles;
use sealvol_core::manifest::Manifest;
use sealvol_core::refs::{Digest, Name, Ref, VolumeName};
use sealvol_core::registry::{TagFile, VersionInfo, VolumeInfo};
use sealvol_core::repo::Repository;
use sealvol_core::trash::{Deleted, Restored, TrashedVersion};
use sealvol_deploy::drift::Matrix;
use sealvol_deploy::rollback::RollbackPlan;
use sealvol_mount::records::MountRecord;
use sealvol_sign::Policy;
/// Where a version stands under the trust policy (the console's SIGNED column).
pub use sealvol_sign::Standing;

pub trait Api: Send + Sync {
    /// Where the data lives, for people: a path or a URL.
    fn location(&self) -> String;
    fn volumes(&self) -> Result<Vec<VolumeInfo>>;
    /// Each namespace's quota with what it stores (those this caller sees).
    fn quotas(&self) -> Result<Vec<sealvol_core::usage::QuotaUsage>>;
    fn versions(&self, volume: &VolumeName) -> Result<Vec<VersionInfo>>;
    fn manifest(&self, volume: &VolumeName, digest: &Digest) -> Result<Manifest>;
    /// A version's files with chunk counts and bytes shared with the previous version.
    fn files(&self, volume: &VolumeName, digest: &Digest) -> Result<VersionFiles>;
    fn tags(&self, volume: &VolumeName) -> Result<Vec<TagFile>>;
    /// The digest a ref names (a tag, a prefix, or the newest version).
    fn resolve(&self, r: &Ref) -> Result<Digest>;
    fn diff(&self, from: (&VolumeName, &Digest), to: (&VolumeName, &Digest))
    -> Result<VersionDiff>;
    /// Moves `tag` to `to`, only if it still points at `expected` (see
    /// `Repository::move_tag`).
    fn move_tag(
        &self,
        volume: &VolumeName,
        tag: &Name,
        to: &Digest,
        expected: Option<Digest>,
    ) -> Result<TagFile>;
    /// Versions in the trash, of one volume or all.
    fn trash(&self, volume: Option<&VolumeName>) -> Result<Vec<TrashedVersion>>;
    /// Moves a version to the trash; `untag` removes the tags that point at it.
    fn delete_version(&self, volume: &VolumeName, digest: &Digest, untag: bool) -> Result<Deleted>;
    fn restore_version(&self, volume: &VolumeName, digest: &Digest) -> Result<Restored>;
    /// Deployment files (or folders of them) side by side, every ref resolved now.
    fn deployments(&self, paths: &[PathBuf]) -> Result<Matrix>;
    /// Plans pointing `volume`'s mount at `path` in `file` at `to`, from the file as it
    /// is now; `None` when it is pinned there already.
    fn plan_rollback(
        &self,
        file: &Path,
        volume: &VolumeName,
        path: &str,
        to: &Digest,
    ) -> Result<Option<RollbackPlan>>;
    /// Writes a plan, if the file still holds the bytes it was made from.
    fn apply_rollback(&self, plan: &RollbackPlan) -> Result<()>;
    /// Where `volume`'s versions (or the one `only` names) stand under the trust policy.
    fn signing(
        &self,
        volume: &VolumeName,
        only: Option<&Digest>,
    ) -> Result<Vec<(Digest, Standing)>>;
    /// Live mounts on this node.
    fn mounts(&self) -> Result<Vec<MountRecord>>;
    /// Sync jobs, newest first.
    fn jobs(&self) -> Result<Vec<Job>>;
    /// The live view of one job.
    fn job_event(&self, id: u64) -> Result<JobEvent>;
    fn cancel_job(&self, id: u64) -> Result<Job>;
    fn retry_job(&self, id: u64) -> Result<Job>;
    /// Watches, oldest first, each with what it is doing.
    fn watches(&self) -> Result<Vec<WatchView>>;
    fn stop_watch(&self, id: u64) -> Result<Watch>;
    /// Starts long-running work as the CLI would, and says in one line what started.
    fn launch(&self, work: &Work) -> Result<String>;
    /// The names of the secrets a sync may name (values never leave their store).
    fn secret_names(&self) -> Result<Vec<String>>;
}

/// Long-running work the console starts: each is a CLI command too, and runs as one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Work {
    /// `volume sync SOURCE VOLUME --detach`, with tags and a secret's name.
    Sync {
        source: String,
        volume: VolumeName,
        tags: Vec<String>,
        secret: Option<String>,
    },
    /// `volume mount REF DIR`: a mount in the background.
    Mount { reference: String, dir: PathBuf },
    /// `volume watch DIR VOLUME --detach`.
    Watch { dir: PathBuf, volume: VolumeName },
}

/// How the app starts work for the console (`Work`): by running its own commands, so
/// that what the console starts is checked and done exactly as the CLI does it.
pub trait Launch: Send + Sync {
    fn launch(&self, work: &Work) -> Result<String>;
    fn secret_names(&self) -> Result<Vec<String>>;
}

/// Each version's standing under `policy`, newest first.
fn standings(
    repo: &Repository,
    volume: &VolumeName,
    only: Option<&Digest>,
    policy: &Policy,
) -> Result<Vec<(Digest, Standing)>> {
    let digests: Vec<Digest> = match only {
        Some(d) => vec![*d],
        None => repo
            .versions(volume)?
            .iter()
            .filter(|v| v.damaged.is_none())
            .filter_map(|v| Digest::parse(&v.digest).ok())
            .collect(),
    };
    digests
        .into_iter()
        .map(|d| Ok((d, policy.standing(repo, volume, &d)?)))
        .collect()
}

/// A repository together with this node's state directory and its agent: what the
/// console talks to, so it sees the node's mounts and sync jobs as well as the registry.
pub struct Node {
    pub repo: Repository,
    pub state: std::path::PathBuf,
    /// The agent (hosted by this process, or reached over its socket).
    pub jobs: Option<Arc<dyn JobsApi>>,
    /// How the console names where it is, when the repository's location does not say
    /// enough (a remote engine, and what its key may do).
    pub label: Option<String>,
    /// How work is started (the app's commands); without one, the console starts none.
    pub launcher: Option<Arc<dyn Launch>>,
    /// config.toml's trust policy, loaded when asked (a key file fixed or removed
    /// shows at the next ask; a broken one fails that action, not the console).
    pub policy: PolicySource,
}

/// Where a node's trust policy comes from: loaded at each use.
pub type PolicySource = Arc<dyn Fn() -> Result<Policy> + Send + Sync>;

/// No policy: every namespace unpoliced.
pub fn no_policy() -> PolicySource {
    Arc::new(|| Ok(Policy::default()))
}

impl Node {
    fn agent(&self) -> Result<&dyn JobsApi> {
        self.jobs.as_deref().ok_or_else(|| {
            sealvol_core::Error::new(
                sealvol_core::ErrorKind::Conflict,
                "this console reaches no agent",
            )
            .hint("another process holds the state database without answering on its socket")
        })
    }
}

impl Api for Node {
    fn location(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| self.repo.location().to_string())
    }
    fn volumes(&self) -> Result<Vec<VolumeInfo>> {
        self.repo.volume_infos(None)
    }
    fn quotas(&self) -> Result<Vec<sealvol_core::usage::QuotaUsage>> {
        self.repo.quotas()
    }
    fn versions(&self, volume: &VolumeName) -> Result<Vec<VersionInfo>> {
        self.repo.versions(volume)
    }
    fn manifest(&self, volume: &VolumeName, digest: &Digest) -> Result<Manifest> {
        self.repo.manifest(volume, digest)
    }
    fn files(&self, volume: &VolumeName, digest: &Digest) -> Result<VersionFiles> {
        sealvol_core::files::version_files(&self.repo, volume, digest)
    }
    fn tags(&self, volume: &VolumeName) -> Result<Vec<TagFile>> {
        self.repo.tags(volume)
    }
    fn resolve(&self, r: &Ref) -> Result<Digest> {
        self.repo.resolve(r)
    }
    fn diff(
        &self,
        from: (&VolumeName, &Digest),
        to: (&VolumeName, &Digest),
    ) -> Result<VersionDiff> {
        sealvol_core::diff::diff(&self.repo, from, to)
    }
    fn move_tag(
        &self,
        volume: &VolumeName,
        tag: &Name,
        to: &Digest,
        expected: Option<Digest>,
    ) -> Result<TagFile> {
        self.repo
            .move_tag(volume, tag, to, Some(expected))
            .map(|m| m.file)
    }
    fn trash(&self, volume: Option<&VolumeName>) -> Result<Vec<TrashedVersion>> {
        self.repo.trash(volume)
    }
    fn delete_version(&self, volume: &VolumeName, digest: &Digest, untag: bool) -> Result<Deleted> {
        self.repo
            .delete_version(&Ref::pinned(volume.clone(), *digest), untag)
    }
    fn restore_version(&self, volume: &VolumeName, digest: &Digest) -> Result<Restored> {
        self.repo
            .restore_version(&Ref::pinned(volume.clone(), *digest))
    }
    fn deployments(&self, paths: &[PathBuf]) -> Result<Matrix> {
        sealvol_deploy::drift::matrix(&self.repo, paths)
    }
    fn plan_rollback(
        &self,
        file: &Path,
        volume: &VolumeName,
        path: &str,
        to: &Digest,
    ) -> Result<Option<RollbackPlan>> {
        sealvol_deploy::rollback::plan_file(&self.repo, file, volume, path, *to, &(self.policy)()?)
    }
    fn apply_rollback(&self, plan: &RollbackPlan) -> Result<()> {
        sealvol_deploy::rollback::apply(plan)
    }
    fn signing(
        &self,
        volume: &VolumeName,
        only: Option<&Digest>,
    ) -> Result<Vec<(Digest, Standing)>> {
        standings(&self.repo, volume, only, &(self.policy)()?)
    }
    fn mounts(&self) -> Result<Vec<MountRecord>> {
        Ok(sealvol_mount::records::list(&sealvol_mount::records::dir(
            &self.state,
        )))
    }
    fn jobs(&self) -> Result<Vec<Job>> {
        self.agent()?.list()
    }
    fn job_event(&self, id: u64) -> Result<JobEvent> {
        self.agent()?.event(id)
    }
    fn cancel_job(&self, id: u64) -> Result<Job> {
        self.agent()?.cancel(id)
    }
    fn retry_job(&self, id: u64) -> Result<Job> {
        self.agent()?.retry(id)
    }
    fn watches(&self) -> Result<Vec<WatchView>> {
        self.agent()?.watches()
    }
    fn stop_watch(&self, id: u64) -> Result<Watch> {
        self.agent()?.stop_watch(id)
    }
    fn launch(&self, work: &Work) -> Result<String> {
        match &self.launcher {
            Some(l) => l.launch(work),
            None => Err(sealvol_core::Error::invalid("this console starts nothing")
                .hint("run the command in a shell: `sealvol volume sync|mount|watch …`")),
        }
    }
    fn secret_names(&self) -> Result<Vec<String>> {
        match &self.launcher {
            Some(l) => l.secret_names(),
            None => Ok(Vec::new()),
        }
    }
}
