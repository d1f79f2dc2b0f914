//! Pull: a sealed version becomes a local directory, every byte proven against its
//! file's BLAKE3 proof (which merges into the hash the manifest names) before it is
//! written, and each file complete before it gets its name.
//!
//! Nothing is written outside the target: manifest paths must be clean relative paths,
//! no existing symlink is ever followed, and links from the version are created last.
//!
//! After a pull the target is exactly the version (its digest is the version's digest):
//! what the version does not hold is in the way, refused, or with `force` removed and
//! reported. Files are written under temporary names (`.sealvol-part-PID-N`) that are
//! the pull's own: the next pull into the folder removes any a killed pull left.
//! These promises are written once, in docs/SEMANTICS.md ("What a pull promises").

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::digest::{Entry, Hash};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::paths::{is_clean_relative, link_stays_inside};
use crate::progress::Progress;
use crate::read::{Chunks, Tiers};
use crate::refs::{Digest, VolumeName};

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PullReport {
    pub files: u64,
    pub bytes: u64,
    /// What was in the target and is not in the version, removed under `force`
    /// (directories end in `/`), in path order.
    pub removed: Vec<String>,
    /// Temporaries an interrupted pull had left there, removed.
    pub temporaries_removed: u64,
    /// Files already there with the version's bytes (a pull over a close version),
    /// kept rather than fetched and written again.
    pub kept: u64,
}

/// The prefix of a pull's temporary files; nothing else may start with it.
const PART_PREFIX: &str = ".sealvol-part-";

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
    pull_selected(tiers, volume, digest, target, force, None, progress)
}

/// Which of a version's paths a pull takes (`volume pull --include/--exclude`).
pub type Select<'a> = &'a dyn Fn(&str) -> bool;

/// `pull`, of the entries `select` takes only: the target is then exactly that part of
/// the version (with `force`, what else is there is removed), each file verified as
/// ever. A selection that takes no file is an error, and nothing is written.
pub fn pull_selected(
    tiers: &Tiers,
    volume: &VolumeName,
    digest: &Digest,
    target: &Path,
    force: bool,
    select: Option<Select>,
    progress: &dyn Progress,
) -> Result<PullReport> {
    let mut manifest = tiers.repo().manifest(volume, digest)?;
    if let Some(takes) = select {
        let all = manifest
            .entries
            .iter()
            .filter(|e| matches!(e, Entry::File { .. }))
            .count();
        manifest.entries.retain(|e| takes(e.path()));
        let files: Vec<u64> = manifest
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::File { size, .. } => Some(*size),
                _ => None,
            })
            .collect();
        if files.is_empty() {
            return Err(Error::not_found(format!(
                "the patterns take none of the {all} file(s) of vol:{volume}@{digest}"
            ))
            .hint(format!(
                "`sealvol volume files vol:{volume}@{digest}` lists them; nothing was written"
            )));
        }
        manifest.stats.files = files.len() as u64;
        manifest.stats.bytes = files.iter().sum();
    }
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
    let cleared = prepare_target(target, &manifest.entries, force)?;
    let target = target.canonicalize().ctx("cannot open", target)?;

    let files: Vec<(usize, &Entry)> = manifest
        .entries
        .iter()
        .filter(|e| matches!(e, Entry::File { .. }))
        .enumerate()
        .collect();
    progress.begin("pull", manifest.stats.bytes, files.len() as u64);
    let next = AtomicUsize::new(0);
    let kept = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let small = manifest.small_files();
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8);
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    while !stop.load(Ordering::Relaxed) {
                        let Some(&(n, entry)) = files.get(next.fetch_add(1, Ordering::Relaxed))
                        else {
                            break;
                        };
                        if let Err(e) = pull_file(tiers, &target, n, entry, &small, &kept, progress)
                        {
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
                if fs::symlink_metadata(&p).is_ok() {
                    // Only a link can be here: prepare_target removed anything else.
                    fs::remove_file(&p).ctx("cannot replace", &p)?;
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
        removed: cleared.removed,
        temporaries_removed: cleared.temporaries,
        kept: kept.into_inner(),
    })
}

/// What the version holds at each path, as far as the target's layout goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    File,
    Link,
    Dir,
}

#[derive(Default)]
struct Cleared {
    removed: Vec<String>,
    temporaries: u64,
}

/// Makes `target` ready to receive the version: creates it, removes the temporaries of
/// an interrupted pull, and finds what is in the way (anything the version does not
/// hold, or holds as another kind). Without `force` anything already there refuses
/// the pull, naming it; with `force` what the version does not hold is removed, and
/// its files and links are left to be replaced.
fn prepare_target(target: &Path, entries: &[Entry], force: bool) -> Result<Cleared> {
    match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("{} exists and is not a directory", target.display()),
            )
            .hint("pull into a directory: a new path, or an existing empty one"));
        }
        Err(_) => {
            fs::create_dir_all(target).ctx("cannot create", target)?;
            return Ok(Cleared::default());
        }
    }
    let mut want: HashMap<&str, Want> = HashMap::new();
    for e in entries {
        let path = e.path();
        for (i, _) in path.match_indices('/') {
            want.insert(&path[..i], Want::Dir);
        }
        want.insert(
            path,
            match e {
                Entry::File { .. } => Want::File,
                Entry::Symlink { .. } => Want::Link,
                Entry::Dir { .. } => Want::Dir,
            },
        );
    }
    let mut scan = Scan {
        want: &want,
        extra: Vec::new(),
        kept: Vec::new(),
        cleared: Cleared::default(),
    };
    scan.dir(target, "")?;
    if !force {
        let mut in_way: Vec<String> = scan.kept.iter().map(|(rel, _)| rel.clone()).collect();
        in_way.extend(scan.extra.iter().map(|(rel, _)| rel.clone()));
        if !in_way.is_empty() {
            in_way.sort();
            let shown = in_way
                .iter()
                .take(3)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ");
            let more = match in_way.len() {
                n if n > 3 => format!(" and {} more", n - 3),
                _ => String::new(),
            };
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("{} is not empty: {shown}{more} in the way", target.display()),
            )
            .hint("pull into an empty directory, or pass --force to make it exactly the version (what the version does not hold is removed)"));
        }
    }
    for (rel, path) in &scan.extra {
        remove_tree(path, rel, &mut scan.cleared.removed)?;
    }
    scan.cleared.removed.sort();
    Ok(scan.cleared)
}

/// One walk of the target (never following a link), sorting what it finds.
struct Scan<'a> {
    want: &'a HashMap<&'a str, Want>,
    /// Not in the version, or in it as another kind: removed under `force`.
    extra: Vec<(String, PathBuf)>,
    /// A file or link the version also holds there: replaced.
    kept: Vec<(String, PathBuf)>,
    cleared: Cleared,
}

impl Scan<'_> {
    fn dir(&mut self, dir: &Path, prefix: &str) -> Result<()> {
        for item in fs::read_dir(dir).ctx("cannot list", dir)? {
            let item = item.ctx("cannot list", dir)?;
            let path = item.path();
            let kind = item.file_type().ctx("cannot read", &path)?;
            let name = item.file_name();
            let name = name.to_string_lossy();
            let rel = format!("{prefix}{name}");
            if kind.is_file() && name.starts_with(PART_PREFIX) {
                fs::remove_file(&path).ctx("cannot remove", &path)?;
                self.cleared.temporaries += 1;
                continue;
            }
            let have = if kind.is_dir() {
                Want::Dir
            } else if kind.is_symlink() {
                Want::Link
            } else {
                Want::File
            };
            // A lossy name cannot be in the version, whose paths are UTF-8.
            let matches =
                item.file_name().to_str().is_some() && self.want.get(rel.as_str()) == Some(&have);
            match (matches, have) {
                (true, Want::Dir) => self.dir(&path, &format!("{rel}/"))?,
                (true, _) => self.kept.push((rel, path)),
                (false, _) => self.extra.push((rel, path)),
            }
        }
        Ok(())
    }
}

/// Removes a path the version does not hold, recording each thing removed.
fn remove_tree(path: &Path, rel: &str, removed: &mut Vec<String>) -> Result<()> {
    let m = fs::symlink_metadata(path).ctx("cannot read", path)?;
    if m.is_dir() {
        for item in fs::read_dir(path).ctx("cannot list", path)? {
            let item = item.ctx("cannot list", path)?;
            let name = item.file_name();
            remove_tree(
                &item.path(),
                &format!("{rel}/{}", name.to_string_lossy()),
                removed,
            )?;
        }
        fs::remove_dir(path).ctx("cannot remove", path)?;
        removed.push(format!("{rel}/"));
    } else {
        fs::remove_file(path).ctx("cannot remove", path)?;
        removed.push(rel.to_string());
    }
    Ok(())
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

/// Whether `dest` is a regular file (never a link) of `size` bytes hashing to `hash`.
fn holds(dest: &Path, size: u64, hash: &Hash) -> bool {
    let Ok(m) = fs::symlink_metadata(dest) else {
        return false;
    };
    if !m.is_file() || m.len() != size {
        return false;
    }
    let mut h = blake3::Hasher::new();
    h.update_mmap_rayon(dest).is_ok() && Hash(*h.finalize().as_bytes()) == *hash
}

fn pull_file(
    tiers: &Tiers,
    root: &Path,
    index: usize,
    entry: &Entry,
    small: &crate::small::SmallFiles,
    kept: &AtomicU64,
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
    let mode = if *exec { 0o755 } else { 0o644 };
    if holds(&dest, *size, hash) {
        // Hashing the file in place costs less than fetching and writing it again.
        fs::set_permissions(&dest, fs::Permissions::from_mode(mode)).ctx("cannot chmod", &dest)?;
        kept.fetch_add(1, Ordering::Relaxed);
        progress.advance(*size);
        progress.file_done();
        return Ok(());
    }
    let obj = tiers.repo().file_list(hash, *size, small)?;
    if obj.size != *size {
        return Err(Error::corrupt(format!(
            "chunk list of {path} has {} bytes, the manifest says {size}",
            obj.size
        )));
    }
    // Written under a temporary name and renamed once complete and verified, so an
    // interrupted pull never leaves a short file under the real name.
    let tmp = dest.with_file_name(format!("{PART_PREFIX}{}-{index}", std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(mode)
        .open(&tmp)
        .ctx("cannot create", &tmp)?;
    let result = (|| -> Result<()> {
        // Every byte written is proven to be the file's first (its blocks against the
        // file's proof, which merges into the file's hash), each hashed about once.
        tiers.for_each(&obj, 0..obj.chunks.len(), &mut |bytes| {
            if progress.cancelled() {
                return Err(Error::cancelled());
            }
            f.write_all(bytes).ctx("cannot write", &tmp)?;
            progress.advance(bytes.len() as u64);
            Ok(())
        })?;
        f.flush().ctx("cannot write", &tmp)?;
        if *exec {
            fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))
                .ctx("cannot chmod", &tmp)?;
        }
        // Whatever is still at `dest` is a file the version replaces (prepare_target
        // removed anything else); rename replaces it in one step.
        fs::rename(&tmp, &dest).ctx("cannot rename into place", &dest)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    progress.file_done();
    result
}
