//! Mount points: the checks before a mount (an empty directory no one else is
//! mounting on), whether a directory is mounted, and unmounting one whatever process
//! serves it.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;

use sealvol_core::error::{Error, ErrorKind, IoContext, Result};

use crate::table;

/// for as long as the mount lives. The kernel's mount table only shows a mount once it
/// exists, so without the claim two mounts started at once would both find the
/// directory free and stack.
pub struct MountPointClaim(#[allow(dead_code)] std::fs::File);

/// The mount point must be an existing, empty directory that is not mounted already
/// (mounting over files would hide them) and that no other mount is claiming.
pub fn check_mount_point(dir: &Path) -> Result<(PathBuf, MountPointClaim)> {
    let dir = existing_dir(dir)?;
    // Opened before the mount table is read: if a mount lands in between, this handle
    // is on the directory underneath, whose claim that mount holds.
    let handle = std::fs::File::open(&dir).ctx("cannot use mount point", &dir)?;
    // SAFETY: flock on a descriptor we own; it does not touch memory.
    if unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(already(&dir));
    }
    check_free(&dir)?;
    Ok((dir, MountPointClaim(handle)))
}

/// The checks of [`check_mount_point`] without its claim, for a process that starts
/// the mount in another: it must hold no lock on the directory. A claim's descriptor
/// is copied into every child another thread forks until that child's exec closes
/// it, and the lock lives as long as any copy: a mount process started right after
/// would find the directory claimed (seen with eight publishes at once).
pub fn check_mount_point_free(dir: &Path) -> Result<PathBuf> {
    let dir = existing_dir(dir)?;
    check_free(&dir)?;
    Ok(dir)
}

/// Whether a mount process holds the claim on `dir` (an unmounted directory): one that
/// is starting a mount there right now. The probe takes the claim for a moment, so a
/// process that starts mounts must call it only while none are starting: a forked
/// child would carry the probe's lock until its exec (see [`check_mount_point_free`]).
pub fn claimed(dir: &Path) -> bool {
    let Ok(handle) = std::fs::File::open(dir) else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; it does not touch memory. Closing the
    // handle releases the lock.
    unsafe { libc::flock(handle.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) != 0 }
}

/// An existing directory, by its canonical path.
fn existing_dir(dir: &Path) -> Result<PathBuf> {
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
    Ok(dir)
}

fn already(dir: &Path) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!("{} is already mounted", dir.display()),
    )
    .hint("unmount it first (sealvol volume unmount DIR), or mount onto another directory")
}

/// Not a mount point, and empty.
fn check_free(dir: &Path) -> Result<()> {
    if is_mount_point(dir) {
        return Err(already(dir));
    }
    let mut rd = std::fs::read_dir(dir).ctx("cannot list", dir)?;
    if rd.next().is_some() {
        // A mount started at the same moment may have landed between the two looks:
        // its files are what was listed, and it is said as such.
        if is_mount_point(dir) {
            return Err(already(dir));
        }
        return Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "{} is not empty; a mount would hide its files",
                dir.display()
            ),
        )
        .hint("mount onto an empty directory"));
    }
    Ok(())
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
    // Root unmounts itself (umount2); anyone else needs the setuid fusermount3.
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match root {
        true => {
            let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
                .map_err(|_| Error::invalid(format!("{} holds a NUL byte", dir.display())))?;
            let flags = if lazy { libc::MNT_DETACH } else { 0 };
            // SAFETY: `c` is a NUL-terminated path that lives across the call.
            if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
                return Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EBUSY) {
                return Err(Error::io("cannot unmount", &dir, e));
            }
        }
        false => {
            let mut args = vec!["-u"];
            if lazy {
                args.push("-z");
            }
            let out = match Command::new("fusermount3").args(&args).arg(&dir).output() {
                Ok(out) => out,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::new(
                        ErrorKind::Unavailable,
                        format!(
                            "cannot unmount {}: fusermount3 is not installed, and only it unmounts a FUSE mount for a user who is not root",
                            dir.display()
                        ),
                    )
                    .hint("install the fuse3 package, or unmount as root"));
                }
                Err(e) => return Err(Error::io("cannot run fusermount3 for", &dir, e)),
            };
            if out.status.success() {
                return Ok(());
            }
            let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
            if !msg.contains("busy") {
                return Err(Error::new(
                    ErrorKind::Io,
                    format!("cannot unmount {}: {msg}", dir.display()),
                ));
            }
        }
    }
    // Only a busy mount gets here.
    Err(busy_error(&dir))
}

/// An unmount the kernel refused because the mount is in use: who uses it, as far as
/// this process may see, and what to do.
fn busy_error(dir: &Path) -> Error {
    const SHOWN: usize = 5;
    let holders = sealvol_core::holders::under(dir, SHOWN + 1);
    let who = match holders.len() {
        0 => "files are open under it, by processes this user cannot inspect".to_string(),
        n => {
            let mut lines: Vec<String> =
                holders.iter().take(SHOWN).map(|h| h.to_string()).collect();
            if n > SHOWN {
                lines.push("and more".into());
            }
            lines.join("; ")
        }
    };
    let hint = match holders.first() {
        Some(h) => format!(
            "close them or stop those processes (`kill {}`), or pass --lazy: it is detached now and goes once they close",
            h.pid
        ),
        None => "close the files, or pass --lazy: it is detached now and goes once they close"
            .to_string(),
    };
    Error::new(
        ErrorKind::Conflict,
        format!("cannot unmount {}: it is busy: {who}", dir.display()),
    )
    .hint(hint)
}
