//! Pull: a sealed version becomes a local directory, every chunk checked against its
//! BLAKE3 hash and every file against its whole-content hash before it gets its name.
//!
//! Nothing is written outside the target: manifest paths must be clean relative paths,
//! no existing symlink is ever followed, and links from the version are created last.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::digest::{Entry, Hash};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::paths::{is_clean_relative, link_stays_inside};
use crate::progress::Progress;
use crate::read::{Chunks, Tiers};
use crate::refs::{Digest, VolumeName};

#[derive(Debug, Clone, Copy)]
pub struct PullReport {
    pub files: u64,
    pub bytes: u64,
}

/// Pulls `volume@digest` into `target`, reading through `tiers` (a pull fills the
/// node-disk cache on the way: give it `Fill::Inline`).
pub fn pull(
    tiers: &Tiers,
    volume: &VolumeName,
    digest: &Digest,
    target: &Path,
    force: bool,
    progress: &dyn Progress,
) -> Result<PullReport> {
    let manifest = tiers.repo().manifest(volume, digest)?;
    for e in &manifest.entries {
        let ok = is_clean_relative(e.path())
            && match e {
                Entry::Symlink { path, target } => link_stays_inside(path, target),
                _ => true,
            };
        if !ok {
            return Err(Error::corrupt(format!(
                "version {digest} holds an unsafe path {:?}; refusing to pull it",
                e.path()
            )));
        }
    }
    prepare_target(target, force)?;
    let target = target.canonicalize().ctx("cannot open", target)?;

    let files: Vec<&Entry> = manifest
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::File { .. }))
        .collect();
    progress.begin("pull", manifest.stats.bytes, files.len() as u64);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8);
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    while !stop.load(Ordering::Relaxed) {
                        let Some(entry) = files.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            break;
                        };
                        if let Err(e) = pull_file(tiers, &target, entry, force, progress) {
                            stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join()
                .unwrap_or_else(|_| Err(Error::new(ErrorKind::Io, "pull worker panicked")))?;
        }
        Ok(())
    })?;
    for e in &manifest.entries {
        match e {
            Entry::Dir { path } => {
                let p = safe_join(&target, path)?;
                fs::create_dir_all(&p).ctx("cannot create", &p)?;
            }
            Entry::Symlink { path, target: to } => {
                let p = safe_join(&target, path)?;
                if force && fs::symlink_metadata(&p).is_ok() {
                    remove_leaf(&p)?;
                }
                std::os::unix::fs::symlink(to, &p).ctx("cannot create link", &p)?;
            }
            Entry::File { .. } => {}
        }
    }
    progress.finish();
    Ok(PullReport {
        files: manifest.stats.files,
        bytes: manifest.stats.bytes,
    })
}

fn prepare_target(target: &Path, force: bool) -> Result<()> {
    match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => {
            let mut rd = fs::read_dir(target).ctx("cannot list", target)?;
            if rd.next().is_some() && !force {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("{} is not empty", target.display()),
                )
                .hint("pull into an empty directory, or pass --force to overwrite the version's files there"));
            }
            Ok(())
        }
        Ok(_) => Err(Error::new(
            ErrorKind::Conflict,
            format!("{} exists and is not a directory", target.display()),
        )),
        Err(_) => fs::create_dir_all(target).ctx("cannot create", target),
    }
}

/// Joins a clean relative path to the target, creating parent directories and refusing
/// to pass through anything that is not a real directory (a symlink could lead out).
fn safe_join(root: &Path, rel: &str) -> Result<PathBuf> {
    let mut p = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len() - 1] {
        p.push(part);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("{} is in the way (not a directory)", p.display()),
                )
                .hint("remove it, or pull into an empty directory"));
            }
            Err(_) => match fs::create_dir(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if !fs::symlink_metadata(&p)
                        .map(|m| m.is_dir())
                        .unwrap_or(false)
                    {
                        return Err(Error::new(
                            ErrorKind::Conflict,
                            format!("{} is in the way (not a directory)", p.display()),
                        ));
                    }
                }
                Err(e) => return Err(Error::io("cannot create", &p, e)),
            },
        }
    }
    p.push(parts[parts.len() - 1]);
    Ok(p)
}

fn remove_leaf(p: &Path) -> Result<()> {
    let m = fs::symlink_metadata(p).ctx("cannot read", p)?;
    if m.is_dir() {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "{} is a directory where the version has a file",
                p.display()
            ),
        ));
    }
    fs::remove_file(p).ctx("cannot replace", p)
}

fn pull_file(
    tiers: &Tiers,
    root: &Path,
    entry: &Entry,
    force: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let Entry::File {
        path,
        size,
        hash,
        exec,
    } = entry
    else {
        return Ok(());
    };
    let dest = safe_join(root, path)?;
    let obj = tiers.repo().file_object(hash)?;
    if obj.size != *size {
        return Err(Error::corrupt(format!(
            "chunk list of {path} has {} bytes, the manifest says {size}",
            obj.size
        )));
    }
    // Written under a temporary name and renamed once complete and verified, so an
    // interrupted pull never leaves a short file under the real name.
    let name = dest.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = dest.with_file_name(format!(".{name}.sealvol-{}", std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(if *exec { 0o755 } else { 0o644 })
        .open(&tmp)
        .ctx("cannot create", &tmp)?;
    let result = (|| -> Result<()> {
        let mut whole = blake3::Hasher::new();
        tiers.for_each(&obj, 0..obj.chunks.len(), &mut |bytes| {
            whole.update(bytes);
            f.write_all(bytes).ctx("cannot write", &tmp)?;
            progress.advance(bytes.len() as u64);
            Ok(())
        })?;
        if Hash(*whole.finalize().as_bytes()) != *hash {
            return Err(Error::corrupt(format!(
                "{path}: its chunks do not add up to the file's hash"
            )));
        }
        f.flush().ctx("cannot write", &tmp)?;
        if *exec {
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))
                .ctx("cannot chmod", &tmp)?;
        }
        if force && fs::symlink_metadata(&dest).is_ok() {
            remove_leaf(&dest)?;
        }
        fs::rename(&tmp, &dest).ctx("cannot rename into place", &dest)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    progress.file_done();
    result
}
