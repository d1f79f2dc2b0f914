//! Engine work the model asks for (`Effect`), what comes back (`Loaded`), and the one
//! function that carries an effect out against the engine's `Api`. The model decides
//! and never does I/O; the event loop runs `perform` on a blocking task.

use std::path::PathBuf;

use sealvol_core::refs::{Digest, Name, Ref, VolumeName};
use sealvol_core::registry::{TagFile, VersionInfo, VolumeInfo};
use sealvol_core::trash::TrashedVersion;
use sealvol_deploy::drift::Matrix;
use sealvol_deploy::rollback::RollbackPlan;
use sealvol_mount::records::MountRecord;
use sealvol_node::api::{Api, Standing, Work};
use sealvol_node::jobs::{Job, JobEvent};
use sealvol_node::watch::{Watch, WatchView};

/// A tag move a person has been shown and may confirm. It names the tag and both
/// digests, so confirming applies exactly what was shown, never "the row under the
/// cursor", and fails if the tag moved meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagMovePlan {
    pub volume: VolumeName,
    pub tag: Name,
    pub from: Option<Digest>,
    pub to: Digest,
}

/// A version a person has been shown and may confirm moving to the trash: the digest,
/// and the tags that point at it (removed with it, each a move in its history).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletePlan {
    pub volume: VolumeName,
    pub digest: Digest,
    pub tags: Vec<String>,
}

/// A version in the trash a person has been shown and may confirm restoring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestorePlan {
    pub volume: VolumeName,
    pub digest: Digest,
    /// The tags it had when deleted (a restore does not move them back).
    pub tags: Vec<String>,
}

/// A rollback a person picked on the Deployments screen: the file, the volume's mount
/// in it, and the version to go to. Planned from the file as it is then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackRequest {
    pub file: PathBuf,
    pub volume: VolumeName,
    pub path: String,
    pub to: Digest,
}

/// Engine work the model asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    LoadVolumes,
    /// Each namespace's quota with what it stores (the Volumes screen's footer).
    LoadQuotas,
    LoadVersions(VolumeName),
    /// Where the volume's versions (or one) stand under the trust policy.
    LoadSigning(VolumeName, Option<Digest>),
    LoadTags(VolumeName),
    MoveTag(TagMovePlan),
    Diff(Ref, Ref),
    LoadFiles(VolumeName, Digest),
    LoadMounts,
    /// The job list, and the live view of this job.
    LoadJobs(Option<u64>),
    CancelJob(u64),
    RetryJob(u64),
    LoadWatches,
    StopWatch(u64),
    /// The trash, of one volume or all.
    LoadTrash(Option<VolumeName>),
    Delete(DeletePlan),
    Restore(RestorePlan),
    /// Deployment files (or folders of them) side by side.
    LoadDeployments(Vec<PathBuf>),
    PlanRollback(RollbackRequest),
    /// Write a plan a person confirmed (only over the bytes it was made from).
    ApplyRollback(Box<RollbackPlan>),
    /// A screen the palette names: check that what it names exists first, so that an
    /// unknown volume, ref or tag is an error and the console stays where it is.
    Open(Open),
    /// Put this text on the clipboard (OSC 52).
    Copy(String),
    /// Start work (a sync, a mount, a watch) as its CLI command does.
    Launch(Work),
    /// The names of stored secrets, for completion.
    LoadSecretNames,
}

/// What the palette asked to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Open {
    Versions(VolumeName),
    Tags(VolumeName),
    Files(Ref),
    Diff(Ref, Ref),
    Trash(Option<VolumeName>),
}

/// What the palette opens, once it is known to exist (refs resolved to digests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    Versions(VolumeName),
    Tags(VolumeName),
    Files(VolumeName, Digest),
    Diff(Ref, Ref),
    Trash(Option<VolumeName>),
}

/// Engine results.
#[derive(Debug)]
pub enum Loaded {
    Volumes(Vec<VolumeInfo>),
    Quotas(Vec<sealvol_core::usage::QuotaUsage>),
    Versions(VolumeName, Vec<VersionInfo>),
    Signing(VolumeName, Vec<(Digest, Standing)>),
    Tags(VolumeName, Vec<TagFile>),
    Moved(TagMovePlan),
    Diff(Box<sealvol_core::diff::VersionDiff>),
    Files(VolumeName, Digest, sealvol_core::files::VersionFiles),
    Mounts(Vec<MountRecord>),
    Jobs(Vec<Job>, Option<Box<JobEvent>>),
    Opened(Opened),
    /// A job was cancelled or queued again: say so, and reload.
    JobChanged(Box<Job>),
    Watches(Vec<WatchView>),
    /// A watch was stopped: say so, and reload.
    WatchStopped(Box<Watch>),
    Trash(Option<VolumeName>, Vec<TrashedVersion>),
    /// Moved to the trash; restorable until this time (RFC 3339).
    Deleted(DeletePlan, String),
    Restored(RestorePlan),
    Deployments(Box<Matrix>),
    /// The plan for a request; `None` when the file pins that version already.
    RollbackPlanned(RollbackRequest, Option<Box<RollbackPlan>>),
    RolledBack(Box<RollbackPlan>),
    Failed(String),
    /// A change that was not made (a tag moved meanwhile, a version gone): said, and
    /// what is shown reloaded, since it is likely stale.
    Refused(String),
    /// Work started: what it was, and the line that says so.
    Launched(Work, String),
    SecretNames(Vec<String>),
}

fn open(api: &dyn Api, o: Open) -> sealvol_core::Result<Opened> {
    // The engine's answer for an unknown volume, with the console's hint.
    let exists = |v: &VolumeName| -> sealvol_core::Result<()> {
        let known: Vec<String> = api
            .volumes()?
            .iter()
            .map(|i| format!("{}/{}", i.namespace, i.name))
            .collect();
        let typed = v.to_string();
        if known.contains(&typed) {
            return Ok(());
        }
        let message = match sealvol_core::suggest::nearest(&typed, known.iter().map(String::as_str))
        {
            Some(near) => format!("no volume {v}; did you mean {near}?"),
            None => format!("no volume {v}"),
        };
        Err(sealvol_core::Error::not_found(message).hint("`:volumes` lists them"))
    };
    Ok(match o {
        Open::Versions(v) => {
            exists(&v)?;
            Opened::Versions(v)
        }
        Open::Tags(v) => {
            exists(&v)?;
            Opened::Tags(v)
        }
        Open::Files(r) => {
            let d = api.resolve(&r)?;
            Opened::Files(r.volume, d)
        }
        Open::Trash(v) => {
            if let Some(v) = &v {
                exists(v)?;
            }
            Opened::Trash(v)
        }
        Open::Diff(a, b) => {
            let da = api.resolve(&a)?;
            let db = api.resolve(&b)?;
            Opened::Diff(Ref::pinned(a.volume, da), Ref::pinned(b.volume, db))
        }
    })
}

/// Carries out an effect against the engine. Runs on a blocking task in the console,
/// and directly in tests.
pub fn perform(api: &dyn Api, e: Effect) -> Option<Loaded> {
    let text = |e: sealvol_core::Error| match e.hint_text() {
        Some(h) => format!("{e} ({h})"),
        None => e.to_string(),
    };
    let failed = |e| Loaded::Failed(text(e));
    let refused = |e| Loaded::Refused(text(e));
    Some(match e {
        Effect::LoadVolumes => api.volumes().map(Loaded::Volumes).unwrap_or_else(failed),
        Effect::LoadQuotas => api.quotas().map(Loaded::Quotas).unwrap_or_else(failed),
        Effect::LoadMounts => api.mounts().map(Loaded::Mounts).unwrap_or_else(failed),
        Effect::LoadJobs(id) => match api.jobs() {
            Ok(jobs) => {
                // The selected job, or the newest one when nothing is selected yet.
                let id = id.or_else(|| jobs.first().map(|j| j.id));
                let ev = id.and_then(|id| api.job_event(id).ok()).map(Box::new);
                Loaded::Jobs(jobs, ev)
            }
            Err(e) => failed(e),
        },
        Effect::CancelJob(id) => api
            .cancel_job(id)
            .map(|j| Loaded::JobChanged(Box::new(j)))
            .unwrap_or_else(failed),
        Effect::RetryJob(id) => api
            .retry_job(id)
            .map(|j| Loaded::JobChanged(Box::new(j)))
            .unwrap_or_else(failed),
        Effect::LoadWatches => api.watches().map(Loaded::Watches).unwrap_or_else(failed),
        Effect::StopWatch(id) => api
            .stop_watch(id)
            .map(|w| Loaded::WatchStopped(Box::new(w)))
            .unwrap_or_else(failed),
        Effect::LoadVersions(v) => api
            .versions(&v)
            .map(|x| Loaded::Versions(v, x))
            .unwrap_or_else(failed),
        Effect::LoadSigning(v, only) => api
            .signing(&v, only.as_ref())
            .map(|x| Loaded::Signing(v, x))
            .unwrap_or_else(failed),
        Effect::LoadTags(v) => api
            .tags(&v)
            .map(|x| Loaded::Tags(v, x))
            .unwrap_or_else(failed),
        Effect::MoveTag(plan) => api
            .move_tag(&plan.volume, &plan.tag, &plan.to, plan.from)
            .map(|_| Loaded::Moved(plan))
            .unwrap_or_else(refused),
        Effect::Diff(a, b) => {
            let resolve = |r: &Ref| api.resolve(r).map(|d| (r.volume.clone(), d));
            match resolve(&a).and_then(|x| resolve(&b).map(|y| (x, y))) {
                Ok(((va, da), (vb, db))) => api
                    .diff((&va, &da), (&vb, &db))
                    .map(|d| Loaded::Diff(Box::new(d)))
                    .unwrap_or_else(failed),
                Err(e) => failed(e),
            }
        }
        Effect::Open(o) => open(api, o).map(Loaded::Opened).unwrap_or_else(failed),
        Effect::LoadTrash(v) => api
            .trash(v.as_ref())
            .map(|t| Loaded::Trash(v, t))
            .unwrap_or_else(failed),
        Effect::Delete(plan) => api
            .delete_version(&plan.volume, &plan.digest, !plan.tags.is_empty())
            .map(|d| Loaded::Deleted(plan, d.expires))
            .unwrap_or_else(refused),
        Effect::Restore(plan) => api
            .restore_version(&plan.volume, &plan.digest)
            .map(|_| Loaded::Restored(plan))
            .unwrap_or_else(refused),
        Effect::LoadFiles(v, d) => api
            .files(&v, &d)
            .map(|f| Loaded::Files(v, d, f))
            .unwrap_or_else(failed),
        Effect::LoadDeployments(paths) => api
            .deployments(&paths)
            .map(|m| Loaded::Deployments(Box::new(m)))
            .unwrap_or_else(failed),
        Effect::PlanRollback(req) => api
            .plan_rollback(&req.file, &req.volume, &req.path, &req.to)
            .map(|p| Loaded::RollbackPlanned(req, p.map(Box::new)))
            .unwrap_or_else(failed),
        Effect::ApplyRollback(plan) => api
            .apply_rollback(&plan)
            .map(|()| Loaded::RolledBack(plan))
            .unwrap_or_else(refused),
        Effect::Launch(w) => match api.launch(&w) {
            Ok(said) => Loaded::Launched(w, said),
            Err(e) => failed(e),
        },
        Effect::LoadSecretNames => Loaded::SecretNames(api.secret_names().unwrap_or_default()),
        Effect::Copy(_) => return None,
    })
}
