//! Mount: a sealed version as a read-only FUSE filesystem, ready as soon as its
//! listing is read, whatever the volume's size or file count. Bytes stream lazily
//! through the memory tier (read-ahead), the node-disk cache and the origin repository.
//!
//! - `tree`: the inode table, filled lazily from the version's listing;
//! - `fs`: the filesystem core (plain Rust, errno results), tested without a kernel;
//! - `layout`: a file's chunk list, loaded once and shared;
//! - `memo`: the memory tier, under one bound on the memory it holds;
//! - `readahead`: what is fetched before readers ask (streams, and plans from a
//!   file's format, `safetensors`, and saved read profiles), over the core's read
//!   layer (node cache → origin, coalesced, verified, counted);
//! - `profile`: the order readers first ask for chunks, recorded for
//!   `volume profile save`;
//! - `fuse`: the thin `fuser` adapter;
//! - `table`: which directories the kernel has mounted.
//!
//! What a mount promises (errors, sizes, times, links, tags, damage) is written down
//! once, in docs/SEMANTICS.md.

pub mod fs;
mod fuse;
pub mod layout;
pub mod memo;
pub mod profile;
pub mod readahead;
pub mod table;
pub mod tree;

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use fuser::{Config, MountOption, SessionACL};
use std::time::SystemTime;

use sealvol_core::cache::ChunkCache;
use sealvol_core::error::{Error, ErrorKind, IoContext, Result};
use sealvol_core::listing::Listing;
use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::repo::Repository;

pub use fs::{DEFAULT_READ_TIMEOUT, Limits, VolumeFs};
pub use sealvol_core::read::{Peer, TierStats, Tiers};
use tree::Tree;

pub struct MountOptions {
    pub cache: Option<Arc<ChunkCache>>,
    pub limits: Limits,
    /// Threads reading kernel requests.
    pub threads: usize,
    /// Read ahead in the order of the version's newest saved read profile, if any.
    pub replay: bool,
    /// Asked for what the node cache misses, in order, before the origin.
    pub peers: Vec<Arc<dyn Peer>>,
    /// Repositories holding the same version, read when the origin fails, in order.
    pub mirrors: Vec<Arc<Repository>>,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            cache: None,
            limits: Limits::default(),
            threads: 4,
            replay: true,
            peers: Vec::new(),
            mirrors: Vec::new(),
        }
    }
}

pub struct Mount {
    session: Option<fuser::BackgroundSession>,
    fs: Arc<VolumeFs>,
    dir: PathBuf,
    _claim: MountPointClaim,
}

/// Builds the filesystem for one version without mounting it (tests, and the first
/// half of `mount`).
pub fn open_fs(
    repo: Arc<Repository>,
    volume: &VolumeName,
    digest: &Digest,
    opts: &MountOptions,
) -> Result<VolumeFs> {
    let (tree, created) = read_version(&repo, volume, digest)?;
    // A profile is advisory: one that cannot be read only means less read ahead.
    let profile = match opts.replay {
        true => repo.profile(volume, digest).unwrap_or_else(|e| {
            tracing::warn!("cannot read the read profile of vol:{volume}@{digest}: {e}");
            None
        }),
        false => None,
    };
    let tiers = Arc::new(
        Tiers::new(repo, opts.cache.clone())
            .keeping_whole_files_from(opts.limits.passthrough_min)
            .with_peers(opts.peers.clone())
            .with_mirrors(opts.mirrors.clone()),
    );
    let fs = VolumeFs::new(
        tree,
        created,
        tiers,
        Limits {
            memory: opts.limits.memory,
            max_window: opts.limits.max_window,
            prefetch_threads: opts.limits.prefetch_threads,
            prefetch_piece: opts.limits.prefetch_piece,
            first_window: opts.limits.first_window,
            passthrough_min: opts.limits.passthrough_min,
            read_timeout: opts.limits.read_timeout,
        },
    )?;
    if let Some(p) = profile {
        tracing::info!(
            "reading ahead by the saved read profile ({} runs of chunks)",
            p.steps.len()
        );
        fs.replay(p.steps);
    }
    Ok(fs)
}

/// A version's entries and when it was sealed: from its listing and summary, which
/// are small and quick to read whatever the file count, else from its manifest (a
/// version sealed before listings, or one whose listing is damaged).
fn read_version(
    repo: &Repository,
    volume: &VolumeName,
    digest: &Digest,
) -> Result<(Tree, SystemTime)> {
    let created = |s: &str| humantime::parse_rfc3339(s).unwrap_or(SystemTime::UNIX_EPOCH);
    // The manifest must be there, at the size its summary recorded: a version whose
    // manifest is gone or damaged is not mounted from its listing (it is listed as
    // damaged, and repair may quarantine it).
    if let Some(summary) = repo.summary(volume, digest)?
        && repo.manifest_size(volume, digest)? == Some(summary.manifest_bytes)
        && let Some(listing) = repo.listing(volume, digest)?
    {
        return Ok((Tree::new(listing), created(&summary.created)));
    }
    tracing::info!("vol:{volume}@{digest} has no listing yet; reading its manifest");
    let manifest = repo.manifest(volume, digest)?;
    let listing = Listing::from_entries(&manifest.entries)?;
    Ok((Tree::new(listing), created(&manifest.created)))
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
    let options = |auto_unmount: bool| {
        let mut mount_options = vec![
            MountOption::RO,
            MountOption::NoDev,
            MountOption::NoSuid,
            MountOption::DefaultPermissions,
            MountOption::FSName(format!("sealvol:{volume}@{digest}")),
            MountOption::Subtype("sealvol".into()),
        ];
        // A mount whose process dies must not leave a dead mount point behind;
        // fusermount3's auto_unmount needs allow_other to be permitted.
        if auto_unmount {
            mount_options.push(MountOption::AutoUnmount);
        }
        let mut c = Config::default();
        c.mount_options = mount_options;
        c.acl = if auto_unmount {
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
    let adapter = |fs: &Arc<VolumeFs>| fuse::Adapter {
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
                "mounting with auto_unmount failed ({first}); a killed mount will need \
                 `sealvol volume unmount`. Add user_allow_other to /etc/fuse.conf to fix."
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
    Ok(Mount {
        session: Some(session),
        fs,
        dir,
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
        // With auto_unmount, fuser's own unmount only closes its socket to fusermount3
        // and trusts that helper to unmount; if the helper is gone, joining would wait
        // forever. So detach the mount ourselves, then join.
        if !session.guard.is_finished()
            && let Err(e) = unmount_dir(&self.dir, true)
            && is_mount_point(&self.dir)
        {
            // Leave the threads serving rather than wait on a mount that stays.
            std::mem::forget(session);
            return Err(e);
        }
        let result = session
            .join()
            .map_err(|e| Error::io("the mount ended with an error", &self.dir, e));
        // Let a whole file being kept for passthrough finish (it is half a second for a
        // 512 MiB shard); one cut short leaves only a temporary file the cache removes.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.fs.is_keeping() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        result
    }
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

/// A claim on a mount point: an exclusive `flock` on the directory underneath, held
/// for as long as the mount lives. The kernel's mount table only shows a mount once it
/// exists, so without the claim two mounts started at once would both find the
/// directory free and stack.
pub struct MountPointClaim(#[allow(dead_code)] std::fs::File);

/// The mount point must be an existing, empty directory that is not mounted already
/// (mounting over files would hide them) and that no other mount is claiming.
pub fn check_mount_point(dir: &Path) -> Result<(PathBuf, MountPointClaim)> {
    let meta = std::fs::metadata(dir).map_err(|e| {
        Error::io("cannot use mount point", dir, e).hint("create the directory first")
    })?;
    if !meta.is_dir() {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!("{} is not a directory", dir.display()),
        )
        .hint("mount onto an empty directory"));
    }
    let dir = dir.canonicalize().ctx("cannot use mount point", dir)?;
    let already = || {
        Error::new(
            ErrorKind::Conflict,
            format!("{} is already mounted", dir.display()),
        )
        .hint("unmount it first (sealvol volume unmount DIR), or mount onto another directory")
    };
    // Opened before the mount table is read: if a mount lands in between, this handle
    // is on the directory underneath, whose claim that mount holds.
    let handle = std::fs::File::open(&dir).ctx("cannot use mount point", &dir)?;
    // SAFETY: flock on a descriptor we own; it does not touch memory.
    if unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(already());
    }
    if is_mount_point(&dir) {
        return Err(already());
    }
    let mut rd = std::fs::read_dir(&dir).ctx("cannot list", &dir)?;
    if rd.next().is_some() {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "{} is not empty; a mount would hide its files",
                dir.display()
            ),
        )
        .hint("mount onto an empty directory"));
    }
    Ok((dir, MountPointClaim(handle)))
}

pub fn is_mount_point(dir: &Path) -> bool {
    let d = dir.to_string_lossy();
    table::mounted_dirs().iter().any(|m| *m == d)
}

/// Unmounts a FUSE mount point, whatever process serves it (or none: a dead mount).
/// `lazy` detaches it even while files are open.
pub fn unmount_dir(dir: &Path, lazy: bool) -> Result<()> {
    let dir = match dir.canonicalize() {
        Ok(d) => d,
        // A dead mount (its process killed) cannot be stat'ed; its name still works.
        Err(_) => std::path::absolute(dir).ctx("cannot use", dir)?,
    };
    if !is_mount_point(&dir) {
        return Err(
            Error::not_found(format!("{} is not a sealvol mount", dir.display()))
                .hint("`sealvol volume mounts` lists the active mounts"),
        );
    }
    let mut args = vec!["-u"];
    if lazy {
        args.push("-z");
    }
    let out = Command::new("fusermount3")
        .args(&args)
        .arg(&dir)
        .output()
        .or_else(|_| {
            let mut c = Command::new("umount");
            if lazy {
                c.arg("-l");
            }
            c.arg(&dir).output()
        })
        .map_err(|e| Error::io("cannot run fusermount3", &dir, e))?;
    if !out.status.success() {
        let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let busy = msg.contains("busy");
        let e = Error::new(
            ErrorKind::Io,
            format!("cannot unmount {}: {msg}", dir.display()),
        );
        return Err(if busy {
            e.hint("files are open under it: close them, or pass --lazy")
        } else {
            e
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
