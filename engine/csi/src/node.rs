//! The Node service: publish a sealed version at a target path, unpublish it, say how
//! big it is and whether its mount still serves. Idempotent as the spec requires: a
//! publish already done answers OK without a second mount, an unpublish of a path
//! with nothing published answers OK. One target at a time: two publishes of one
//! volume at once make one mount and both succeed.
//!
//! Crash-safe: the intent is recorded before the mount starts, so whatever a `kill -9`
//! leaves (no record and our mount, a record and no mount, a record and a dead
//! process, a half-made target) is told apart at the next start (`adopt`) or the next
//! call, and kubelet's retried publish or unpublish ends it without a human.

use std::collections::HashMap;
use std::fs;
use std::io::ErrorKind as IoKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealvol_core::crash;
use sealvol_core::registry::now_rfc3339;
use sealvol_mount::process;
use sealvol_mount::records::{self, MountRecord};
use tonic::{Request, Response, Status};
use tracing::{info, warn};

use crate::mounter::{Mount, Mounter};
use crate::proto::node_server::Node;
use crate::proto::node_service_capability::{Rpc, rpc};
use crate::proto::volume_usage::Unit;
use crate::proto::*;
use crate::request::{self, Publish};
use crate::status::{self, invalid};
use crate::targets::{Phase, Published, Targets};

pub(crate) struct NodeService {
    inner: Arc<Inner>,
}

struct Inner {
    mounter: Arc<dyn Mounter>,
    targets: Targets,
    /// The mount records of the processes this plugin starts.
    records: PathBuf,
    node_id: String,
    locks: Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>,
}

/// What is at a target path now.
enum State {
    /// Nothing is mounted there.
    Free,
    /// Recorded by this plugin and served by one of its mount processes.
    Live(Box<Published>, Box<MountRecord>),
    /// Served by one of this plugin's mount processes (their records are in its own
    /// state directory), with no target record: a publish cut short by a plugin that
    /// recorded its targets only after the mount.
    Unrecorded,
    /// Recorded by this plugin, still in the mount table, its process gone.
    Dead,
    /// A mount no record and no process of this plugin's names.
    Foreign,
}

/// What [`NodeService::adopt`] found of the mounts a former run made.
#[derive(Debug, Default, PartialEq)]
pub struct Adopted {
    pub serving: usize,
    pub remounted: usize,
    pub forgotten: usize,
    pub failed: usize,
    /// Publishes cut short whose mount came up: recorded as ready, so kubelet's retry
    /// answers OK without a second mount.
    pub finished: usize,
    /// Publishes cut short with no mount to show: their record and empty target are
    /// removed, and kubelet's retry publishes afresh.
    pub undone: usize,
}

/// How long a restarted plugin waits for a mount a cut-short publish started.
const STARTING: Duration = Duration::from_secs(30);

impl NodeService {
    pub(crate) fn new(
        mounter: Arc<dyn Mounter>,
        state: &Path,
        node_id: String,
    ) -> sealvol_core::Result<NodeService> {
        Ok(NodeService {
            inner: Arc::new(Inner {
                mounter,
                targets: Targets::open(state)?,
                records: records::dir(state),
                node_id,
                locks: Mutex::default(),
            }),
        })
    }

    /// Takes over what a former run of the plugin published: mounts still served are
    /// kept, mounts whose process died are mounted again at the same path (pods see
    /// their files again), and records of mounts that are gone are dropped.
    pub(crate) fn adopt(&self) -> Adopted {
        self.inner.adopt()
    }
}

/// Runs blocking work (the filesystem, the repository, mount processes) off the
/// gRPC threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Status::internal(format!("the plugin's worker failed: {e}")))?
}

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        _: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "sealvol publishes without staging (no STAGE_UNSTAGE_VOLUME)",
        ))
    }

    async fn node_unstage_volume(
        &self,
        _: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        Err(Status::unimplemented(
            "sealvol publishes without staging (no STAGE_UNSTAGE_VOLUME)",
        ))
    }

    async fn node_publish_volume(
        &self,
        req: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let p = request::publish(req.get_ref())?;
        let inner = Arc::clone(&self.inner);
        let id = p.volume_id.clone();
        let result = blocking(move || inner.publish(p)).await;
        if let Err(s) = &result {
            warn!(volume_id = %id, code = ?s.code(), "publish refused: {}", s.message());
        }
        result.map(|()| Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let r = req.into_inner();
        request::volume_id(&r.volume_id)?;
        let target = request::target(&r.target_path)?;
        let inner = Arc::clone(&self.inner);
        let result = blocking(move || inner.unpublish(&r.volume_id, &target)).await;
        if let Err(s) = &result {
            warn!(code = ?s.code(), "unpublish failed: {}", s.message());
        }
        result.map(|()| Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_volume_stats(
        &self,
        req: Request<NodeGetVolumeStatsRequest>,
    ) -> Result<Response<NodeGetVolumeStatsResponse>, Status> {
        let r = req.into_inner();
        request::volume_id(&r.volume_id)?;
        let path = request::target(&r.volume_path)?;
        let inner = Arc::clone(&self.inner);
        blocking(move || inner.stats(&r.volume_id, &path))
            .await
            .map(Response::new)
    }

    async fn node_expand_volume(
        &self,
        _: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        Err(Status::unimplemented("a sealed version never changes size"))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        let cap = |t: rpc::Type| NodeServiceCapability {
            r#type: Some(node_service_capability::Type::Rpc(Rpc { r#type: t as i32 })),
        };
        Ok(Response::new(NodeGetCapabilitiesResponse {
            capabilities: vec![
                cap(rpc::Type::GetVolumeStats),
                cap(rpc::Type::VolumeCondition),
            ],
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        Ok(Response::new(NodeGetInfoResponse {
            node_id: self.inner.node_id.clone(),
            // No limit: a mount is a process and a directory, not a device slot.
            max_volumes_per_node: 0,
            accessible_topology: None,
        }))
    }
}

impl Inner {
    /// One lock per target path, held for the whole of a publish or unpublish.
    fn lock(&self, target: &Path) -> Arc<Mutex<()>> {
        let mut m = sealvol_core::lock(&self.locks);
        Arc::clone(m.entry(target.to_path_buf()).or_default())
    }

    fn state(&self, target: &Path) -> State {
        if !sealvol_mount::point::is_mount_point(target) {
            return State::Free;
        }
        let served = records::list(&self.records)
            .into_iter()
            .find(|r| Path::new(&r.dir) == target);
        match (self.targets.get(target), served) {
            (Some(p), Some(r)) => State::Live(Box::new(p), Box::new(r)),
            (None, Some(_)) => State::Unrecorded,
            (Some(_), None) => State::Dead,
            (None, None) => State::Foreign,
        }
    }

    /// Unmounts a mount one of this plugin's processes serves: at once when no file is
    /// open, else lazily (the path is free at once, the process serves the open files
    /// until they close).
    fn unmount_ours(&self, target: &Path) -> Result<(), Status> {
        if process::unmount(&self.records, target, false).is_err() {
            process::unmount(&self.records, target, true).map_err(|e| status::of(&e))?;
        }
        Ok(())
    }

    fn publish(&self, p: Publish) -> Result<(), Status> {
        let target = canonical(&p.target)?.ok_or_else(|| {
            Status::failed_precondition(format!(
                "the parent of target path {} does not exist; kubelet makes it before a publish",
                p.target.display()
            ))
        })?;
        self.check_peers(p.peers.as_deref())?;
        let lock = self.lock(&target);
        let _held = sealvol_core::lock(&lock);
        match self.state(&target) {
            State::Live(old, _) if same(&old, &p) => {
                if old.phase == Phase::Mounting {
                    // A publish cut short whose mount came up: this is its answer.
                    self.targets
                        .put(&Published {
                            phase: Phase::Ready,
                            ..(*old).clone()
                        })
                        .map_err(|e| status::of(&e))?;
                }
                info!(target = %target.display(), "already published: {} as {}", old.requested, old.pinned);
                return Ok(());
            }
            State::Live(old, _) if old.phase == Phase::Mounting => {
                // Never answered to kubelet, so no pod reads it: replaced.
                warn!(target = %target.display(), "a publish cut short mounted {}; asked for {} now: mounting that", old.pinned, p.reference);
                self.unmount_ours(&target)?;
            }
            State::Unrecorded => {
                warn!(target = %target.display(), "a publish cut short left a mount with no record: mounting again");
                self.unmount_ours(&target)?;
            }
            State::Live(old, _) => {
                return Err(Status::already_exists(format!(
                    "{} already holds {} (volume {}{}); unpublish it first",
                    target.display(),
                    old.pinned,
                    old.volume_id,
                    if old.volume_id == p.volume_id {
                        ", other attributes"
                    } else {
                        ""
                    }
                )));
            }
            State::Foreign => {
                return Err(Status::already_exists(format!(
                    "{} already holds a mount this plugin did not make; nothing was mounted",
                    target.display()
                )));
            }
            State::Dead => {
                warn!(target = %target.display(), "the mount's process is gone: mounting again");
                let _ = sealvol_mount::point::unmount_dir(&target, true);
            }
            State::Free => {}
        }
        let exists = match fs::symlink_metadata(&target) {
            Ok(m) if m.is_dir() => {
                if !is_empty_dir(&target) {
                    return Err(Status::failed_precondition(format!(
                        "target path {} is not empty; a mount would hide its files",
                        target.display()
                    )));
                }
                true
            }
            Ok(_) => {
                return Err(Status::failed_precondition(format!(
                    "target path {} is a file, not a directory; nothing was mounted",
                    target.display()
                )));
            }
            Err(e) if e.kind() == IoKind::NotFound => false,
            Err(e) => {
                return Err(Status::internal(format!(
                    "cannot use {}: {e}",
                    target.display()
                )));
            }
        };
        let failed = |e: sealvol_core::Error| {
            let s = status::of(&e);
            // The key is the driver's, never the pod's: say where it comes from.
            let whose = match s.code() {
                tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
                    " (the driver's key: SEALVOL_API_KEY in the plugin's environment, the Secret sealvol-node in deploy/kubernetes)"
                }
                _ => "",
            };
            Status::new(
                s.code(),
                format!(
                    "cannot publish {}: {}{whose}; nothing was mounted",
                    p.reference,
                    s.message()
                ),
            )
        };
        let pinned = self.mounter.resolve(&p.reference).map_err(failed)?;
        let mut rec = Published {
            volume_id: p.volume_id.clone(),
            target: target.display().to_string(),
            requested: p.reference.clone(),
            pinned: pinned.clone(),
            ephemeral: p.ephemeral,
            pod: p.pod.clone(),
            peers: p.peers.clone(),
            prefetch_memory: p.prefetch_memory.clone(),
            published: now_rfc3339(),
            phase: Phase::Mounting,
        };
        // The intent first: a plugin killed from here on leaves a record that says
        // what it was doing, so its next run tells its mount from anyone else's.
        self.targets.put(&rec).map_err(|e| status::of(&e))?;
        crash::point("csi-intent-recorded");
        let undo = |s: Status| {
            self.targets.remove(&target);
            if !exists {
                let _ = fs::remove_dir(&target);
            }
            s
        };
        if !exists {
            fs::create_dir(&target).map_err(|e| {
                undo(Status::internal(format!(
                    "cannot create {}: {e}",
                    target.display()
                )))
            })?;
            crash::point("csi-target-made");
        }
        let m = Mount {
            pinned,
            requested: p.reference.clone(),
            target: target.clone(),
            peers: p.peers.clone(),
            prefetch_memory: p.prefetch_memory.clone(),
        };
        self.mounter.mount(&m).map_err(|e| undo(failed(e)))?;
        crash::point("csi-mount-ready");
        rec.phase = Phase::Ready;
        if let Err(e) = self.targets.put(&rec) {
            let _ = process::unmount(&self.records, &target, true);
            return Err(undo(status::of(&e)));
        }
        crash::point("csi-publish-recorded");
        info!(
            target = %target.display(),
            pod = rec.pod.as_deref().unwrap_or("-"),
            "published {} as {}", rec.requested, rec.pinned
        );
        Ok(())
    }

    fn check_peers(&self, asked: Option<&[String]>) -> Result<(), Status> {
        let Some(asked) = asked else { return Ok(()) };
        let known = self.mounter.peers().map_err(|e| status::of(&e))?;
        let known: Vec<&str> = known.iter().map(|k| k.trim_end_matches('/')).collect();
        match asked.iter().find(|a| !known.contains(&a.as_str())) {
            None => Ok(()),
            Some(a) => Err(Status::permission_denied(format!(
                "the peers attribute names {a}, which is not one of this driver's cache servers ({}); the driver's key goes only to its own: list them in the driver's config",
                if known.is_empty() {
                    "it has none".to_string()
                } else {
                    known.join(", ")
                }
            ))),
        }
    }

    fn unpublish(&self, volume_id: &str, target: &Path) -> Result<(), Status> {
        let Some(target) = canonical(target)? else {
            return Ok(()); // its parent is gone: nothing is published there
        };
        let lock = self.lock(&target);
        let held = sealvol_core::lock(&lock);
        if let Some(p) = self
            .targets
            .get(&target)
            .filter(|p| p.volume_id != volume_id)
        {
            return Err(Status::failed_precondition(format!(
                "{} holds volume {}, not {volume_id}; nothing was unmounted",
                target.display(),
                p.volume_id
            )));
        }
        match self.state(&target) {
            State::Foreign => {
                return Err(Status::failed_precondition(format!(
                    "{} holds a mount this plugin did not make; nothing was unmounted",
                    target.display()
                )));
            }
            // Files still open (a reader mid-read) keep the mount's process serving
            // them; the path is free at once and the process ends when they close.
            State::Live(..) | State::Unrecorded => self.unmount_ours(&target)?,
            State::Dead => {
                sealvol_mount::point::unmount_dir(&target, true).map_err(|e| status::of(&e))?;
            }
            State::Free => {}
        }
        crash::point("csi-unmounted");
        match fs::remove_dir(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == IoKind::NotFound => {}
            Err(e) => warn!(target = %target.display(), "left in place: {e}"),
        }
        self.targets.remove(&target);
        drop(held);
        sealvol_core::lock(&self.locks).remove(&target);
        info!(target = %target.display(), "unpublished {volume_id}");
        Ok(())
    }

    fn stats(&self, volume_id: &str, path: &Path) -> Result<NodeGetVolumeStatsResponse, Status> {
        let not_here = || {
            Status::not_found(format!(
                "volume {volume_id} is not published at {}",
                path.display()
            ))
        };
        let path = canonical(path)?.ok_or_else(not_here)?;
        let p = self
            .targets
            .get(&path)
            .filter(|p| p.volume_id == volume_id)
            .ok_or_else(not_here)?;
        let (usage, condition) = match self.state(&path) {
            State::Live(_, r) => (
                usage(r.bytes, r.files),
                VolumeCondition {
                    abnormal: false,
                    message: format!("serving {}", p.pinned),
                },
            ),
            _ => (
                Vec::new(),
                VolumeCondition {
                    abnormal: true,
                    message: format!(
                        "the mount of {} at {} is gone; a restart of the plugin mounts it again, or restart the pod",
                        p.pinned,
                        path.display()
                    ),
                },
            ),
        };
        Ok(NodeGetVolumeStatsResponse {
            usage,
            volume_condition: Some(condition),
        })
    }

    fn adopt(&self) -> Adopted {
        let mut a = Adopted::default();
        for p in self.targets.all() {
            let target = PathBuf::from(&p.target);
            let lock = self.lock(&target);
            let _held = sealvol_core::lock(&lock);
            if p.phase == Phase::Mounting {
                self.settle(&p, &target, &mut a);
                continue;
            }
            match self.state(&target) {
                State::Live(..) => a.serving += 1,
                // A mount killed with -9 is cleared from the mount table by its guard:
                // an empty target still there is one kubelet has not unpublished.
                State::Free if !is_empty_dir(&target) => {
                    self.targets.remove(&target);
                    a.forgotten += 1;
                }
                State::Dead | State::Free => {
                    let _ = sealvol_mount::point::unmount_dir(&target, true);
                    let m = Mount {
                        pinned: p.pinned.clone(),
                        requested: p.requested.clone(),
                        target: target.clone(),
                        peers: p.peers.clone(),
                        prefetch_memory: p.prefetch_memory.clone(),
                    };
                    match self.mounter.mount(&m) {
                        Ok(()) => a.remounted += 1,
                        Err(e) => {
                            warn!(target = %target.display(), "cannot mount {} again: {}", p.pinned, status::line(&e));
                            a.failed += 1;
                        }
                    }
                }
                // Its record says ready: a process serving it with no record
                // cannot be.
                State::Foreign | State::Unrecorded => {
                    self.targets.remove(&target);
                    a.forgotten += 1;
                }
            }
        }
        a
    }

    /// A publish cut short: kubelet never heard its answer and will ask again (or
    /// unpublish). A mount that came up is kept and recorded as ready; one still
    /// starting is waited for; with no mount to show, the record and the empty target
    /// it made go, and kubelet's retry publishes afresh.
    fn settle(&self, p: &Published, target: &Path, a: &mut Adopted) {
        let deadline = Instant::now() + STARTING;
        loop {
            let waiting = Instant::now() < deadline;
            match self.state(target) {
                State::Live(..) => {
                    let ready = Published {
                        phase: Phase::Ready,
                        ..p.clone()
                    };
                    match self.targets.put(&ready) {
                        Ok(()) => a.finished += 1,
                        Err(e) => {
                            warn!(target = %target.display(), "cannot record the mount of {}: {}", p.pinned, status::line(&e));
                            a.failed += 1;
                        }
                    }
                    return;
                }
                // Its mount process holds the directory and has not mounted yet; or
                // has mounted and not yet written its own record.
                State::Free if waiting && sealvol_mount::point::claimed(target) => {}
                State::Dead if waiting => {}
                State::Free => {
                    if sealvol_mount::point::claimed(target) {
                        warn!(target = %target.display(), "the mount of {} is still starting after {}s; kubelet's retry will find it", p.pinned, STARTING.as_secs());
                        a.failed += 1;
                        return;
                    }
                    self.targets.remove(target);
                    let _ = fs::remove_dir(target); // only if empty: kubelet's retry makes it again
                    a.undone += 1;
                    return;
                }
                State::Dead | State::Unrecorded => {
                    let _ = sealvol_mount::point::unmount_dir(target, true);
                    self.targets.remove(target);
                    let _ = fs::remove_dir(target);
                    a.undone += 1;
                    return;
                }
                State::Foreign => {
                    self.targets.remove(target);
                    a.forgotten += 1;
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A publish already done: same volume, same ref, same attributes.
fn same(old: &Published, p: &Publish) -> bool {
    old.volume_id == p.volume_id
        && old.requested == p.reference
        && old.peers == p.peers
        && old.prefetch_memory == p.prefetch_memory
}

/// The target with its parent's symlinks resolved, as the mount table and the mount
/// records name it; none when the parent does not exist. The target itself is not
/// resolved: a dead mount there cannot be.
fn canonical(target: &Path) -> Result<Option<PathBuf>, Status> {
    let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
        return Err(invalid(
            format!("target path {} has no parent", target.display()),
            "give kubelet's target path",
        ));
    };
    match parent.canonicalize() {
        Ok(p) => Ok(Some(p.join(name))),
        Err(e) if e.kind() == IoKind::NotFound => Ok(None),
        Err(e) => Err(Status::internal(format!(
            "cannot use {}: {e}",
            parent.display()
        ))),
    }
}

fn is_empty_dir(dir: &Path) -> bool {
    fs::read_dir(dir)
        .map(|mut d| d.next().is_none())
        .unwrap_or(false)
}

fn usage(bytes: u64, files: u64) -> Vec<VolumeUsage> {
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    vec![
        VolumeUsage {
            available: 0,
            total: n(bytes),
            used: n(bytes),
            unit: Unit::Bytes as i32,
        },
        VolumeUsage {
            available: 0,
            total: n(files),
            used: n(files),
            unit: Unit::Inodes as i32,
        },
    ]
}
