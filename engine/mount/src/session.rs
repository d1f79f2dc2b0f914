//! A mounted version: the kernel's FUSE session over a `VolumeFs`, served from
//! background threads until it is unmounted.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{Config, MountOption, SessionACL};

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::read::TierStats;
use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::repo::Repository;

use crate::fs::VolumeFs;
use crate::open::{MountOptions, open_fs};
use crate::point::{MountPointClaim, check_mount_point, unmount_dir};

pub struct Mount {
    session: Option<fuser::BackgroundSession>,
    guard: Option<crate::guard::Guard>,
    fs: Arc<VolumeFs>,
    dir: PathBuf,
    /// This mount's device in the mount table (`table::device_at`), read once it is up:
    /// what the end of the mount unmounts, and nothing else at the same directory.
    device: Option<String>,
    _claim: MountPointClaim,
}

/// Mounts `volume@digest` at `dir` and serves it from background threads until
/// `unmount` (or until someone runs `fusermount3 -u`).
pub fn mount(
    repo: Arc<Repository>,
    volume: &VolumeName,
    digest: &Digest,
    dir: &Path,
    opts: MountOptions,
) -> Result<Mount> {
    let (dir, claim) = check_mount_point(dir)?;
    let fs = Arc::new(open_fs(repo, volume, digest, &opts)?);
    // Readable by every user where the system permits it (root, or user_allow_other):
    // a serving process often runs as another user than the mount.
    let options = |allow_other: bool| {
        let mount_options = vec![
            MountOption::RO,
            MountOption::NoDev,
            MountOption::NoSuid,
            MountOption::DefaultPermissions,
            MountOption::FSName(format!("sealvol:{volume}@{digest}")),
            MountOption::Subtype("sealvol".into()),
        ];
        let mut c = Config::default();
        c.mount_options = mount_options;
        c.acl = if allow_other {
            SessionACL::All
        } else {
            SessionACL::Owner
        };
        c.n_threads = Some(opts.threads.max(1));
        c.clone_fd = true;
        c
    };
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let adapter = |fs: &Arc<VolumeFs>| crate::fuse::Adapter {
        fs: Arc::clone(fs),
        uid,
        gid,
        passthrough: false,
        backing: Default::default(),
        passed: Default::default(),
    };
    let session = match fuser::Session::new(adapter(&fs), &dir, &options(true)) {
        Ok(s) => s,
        Err(first) => {
            tracing::warn!(
                "mounting for all users failed ({first}); only this user can read the \
                 mount. Add user_allow_other to /etc/fuse.conf to fix."
            );
            fuser::Session::new(adapter(&fs), &dir, &options(false)).map_err(|e| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot mount at {}: {e}", dir.display()),
                )
                .hint("is FUSE available (/dev/fuse, fusermount3 from the fuse3 package)?")
            })?
        }
    };
    let session = session
        .spawn()
        .map_err(|e| Error::io("cannot start the mount's threads", &dir, e))?;
    raise_kernel_readahead(&dir);
    let device = crate::table::device_at(&dir);
    // A mount whose process is killed must not leave a dead mount point behind.
    let guard = crate::guard::start(&dir)
        .inspect_err(|e| {
            tracing::warn!(
                "cannot start the mount's guard ({e}); if this process is killed, \
                 `sealvol volume unmount {}` clears the mount point",
                dir.display()
            )
        })
        .ok();
    Ok(Mount {
        session: Some(session),
        guard,
        fs,
        dir,
        device,
        _claim: claim,
    })
}

impl Mount {
    pub fn fs(&self) -> &VolumeFs {
        &self.fs
    }

    /// The filesystem, for a thread that outlives this borrow (the metrics endpoint).
    pub fn shared_fs(&self) -> Arc<VolumeFs> {
        Arc::clone(&self.fs)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn stats(&self) -> TierStats {
        self.fs.stats()
    }

    /// False once the kernel has let go of the mount (someone unmounted it).
    pub fn is_running(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| !s.guard.is_finished())
    }

    /// Unmounts and waits for the serving threads to finish.
    pub fn unmount(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        // Detach the mount ourselves (lazily: a reader holding a file open must not
        // stop an unmount), then join. Only while this mount is still the one at the
        // directory: once the kernel has let go (unmounted from outside, or detached
        // and its last open file closed) another mount may already stand there, a CSI
        // publish of the same pod a moment later. A mount left dead at the directory
        // (its threads ended with an error) is the guard's to clear, below.
        if self.serving_here(&session)
            && let Err(e) = unmount_dir(&self.dir, true)
            && self.serving_here(&session)
        {
            // Leave the threads serving (and the guard watching) rather than wait on a
            // mount that stays.
            std::mem::forget(session);
            return Err(e);
        }
        let result = join_leaving_the_path(session)
            .map_err(|e| Error::io("the mount ended with an error", &self.dir, e));
        drop(self.guard.take());
        // Let a whole file being kept for passthrough finish (it is half a second for a
        // 512 MiB shard); one cut short leaves only a temporary file the cache removes.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.fs.is_keeping() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        result
    }
}

impl Mount {
    /// Whether the mount the kernel shows at this mount's directory is this one. A
    /// device number is unique among live mounts only, and is handed out again once a
    /// mount ends, so the table is read first and the threads checked after: a session
    /// still serving then had its device when the table was read.
    fn serving_here(&self, session: &fuser::BackgroundSession) -> bool {
        self.device.is_some()
            && crate::table::device_at(&self.dir) == self.device
            && !session.guard.is_finished()
    }
}

/// Joins the session's threads without letting fuser unmount its mount point on the
/// way out. fuser's session unmounts by path when it is dropped unless its device
/// reads as closed, and on a mount that was detached lazily that check can still say
/// open after the kernel let go: the process that served a CSI target before an
/// unpublish then unmounted the mount a publish had just made at the same path when
/// its last reader closed (one run in three beside two CPU hogs). So the session is
/// never dropped: its threads are joined, and its descriptor of `/dev/fuse` (whose
/// connection has ended once they are) stays open until this process exits; the
/// unmounting is [`Mount::shutdown`]'s, of this mount only.
fn join_leaving_the_path(session: fuser::BackgroundSession) -> std::io::Result<()> {
    let session = std::mem::ManuallyDrop::new(session);
    // SAFETY: `guard` is read out once and `session` is never used or dropped again,
    // so the handle has exactly one owner.
    let threads = unsafe { std::ptr::read(&session.guard) };
    threads
        .join()
        .map_err(|_| std::io::Error::other("the mount's threads panicked"))?
}

/// The kernel reads a FUSE file ahead by 128 KiB, so a sequential reader sends one
/// small request after another. A larger window for this mount's backing device lets it
/// ask for up to 1 MiB per request (measured: 563 → 792 MB/s cold). Needs root; without
/// it the default stays, which is only slower.
fn raise_kernel_readahead(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    let dev = meta.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let knob = format!("/sys/class/bdi/{major}:{minor}/read_ahead_kb");
    if let Err(e) = std::fs::write(&knob, "4096") {
        tracing::debug!("cannot raise read-ahead at {knob}: {e}");
    }
}

/// A mount dropped without `unmount` (a panic, an early return) still goes away rather
/// than leave a mount point whose process is gone.
impl Drop for Mount {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!("{e}");
        }
    }
}
