//! Walks a local directory into the sorted list of entries a version is made of,
//! refusing what cannot be sealed faithfully (non-UTF-8 names, links that leave the
//! directory, sockets and devices) with an error that names the path; and the digest
//! such a directory would seal as, without a repository.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::digest::{Entry, Hash, version_digest};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::paths::link_stays_inside;
use crate::refs::Digest;

/// What identifies one state of a file on disk. Two equal stamps mean the file was not
/// changed in between (ctime cannot be set from user space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub ino: u64,
    pub dev: u64,
}

impl Stamp {
    pub fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            size: meta.len(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
            ctime_ns: meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128,
            ino: meta.ino(),
            dev: meta.dev(),
        }
    }
}

#[derive(Debug, Clone)]
pub enum WalkKind {
    File { stamp: Stamp, exec: bool },
    Symlink { target: String },
    EmptyDir,
}

#[derive(Debug, Clone)]
pub struct WalkEntry {
    /// Relative, `/`-separated, UTF-8.
    pub path: String,
    pub abs: PathBuf,
    pub kind: WalkKind,
}

impl WalkEntry {
    /// The manifest entry for this path; `hash` is the content hash (files only).
    pub fn to_entry(&self, hash: Hash) -> Entry {
        match &self.kind {
            WalkKind::File { stamp, exec } => Entry::File {
                path: self.path.clone(),
                size: stamp.size,
                hash,
                exec: *exec,
            },
            WalkKind::Symlink { target } => Entry::Symlink {
                path: self.path.clone(),
                target: target.clone(),
            },
            WalkKind::EmptyDir => Entry::Dir {
                path: self.path.clone(),
            },
        }
    }
}

/// Lists `root` recursively, sorted bytewise by relative path.
pub fn walk(root: &Path) -> Result<Vec<WalkEntry>> {
    let meta = fs::metadata(root).ctx("cannot read", root)?;
    if !meta.is_dir() {
        return Err(
            Error::invalid(format!("{} is a file, not a directory", root.display()))
                .hint("give the directory that holds it: a version is a whole directory"),
        );
    }
    let mut out = Vec::new();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let mut children = 0usize;
        for item in fs::read_dir(&dir).ctx("cannot list", &dir)? {
            let item = item.ctx("cannot list", &dir)?;
            children += 1;
            let abs = item.path();
            let name = item.file_name();
            let Some(name) = name.to_str() else {
                return Err(Error::invalid(format!(
                    "file name is not UTF-8: {}",
                    crate::paths::shown(&abs)
                ))
                .hint(
                    "rename the file; sealvol stores names as UTF-8 so every client can read them",
                ));
            };
            let path = if rel.is_empty() {
                name.to_string()
            } else {
                format!("{rel}/{name}")
            };
            let meta = fs::symlink_metadata(&abs).ctx("cannot read", &abs)?;
            let ft = meta.file_type();
            if ft.is_dir() {
                stack.push((abs, path));
            } else if ft.is_file() {
                let exec = meta.permissions().mode() & 0o111 != 0;
                out.push(WalkEntry {
                    path,
                    abs,
                    kind: WalkKind::File {
                        stamp: Stamp::of(&meta),
                        exec,
                    },
                });
            } else if ft.is_symlink() {
                let target = link_target(&abs, &path)?;
                out.push(WalkEntry {
                    path,
                    abs,
                    kind: WalkKind::Symlink { target },
                });
            } else {
                return Err(Error::invalid(format!(
                    "{} is neither a file, a directory nor a symlink",
                    abs.display()
                ))
                .hint("remove sockets, pipes and device files from the directory before pushing"));
            }
        }
        if children == 0 && !rel.is_empty() {
            out.push(WalkEntry {
                path: rel,
                abs: dir,
                kind: WalkKind::EmptyDir,
            });
        }
    }
    out.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Reads a symlink and accepts it only if it stays inside the volume.
fn link_target(abs: &Path, rel: &str) -> Result<String> {
    let target = fs::read_link(abs).ctx("cannot read link", abs)?;
    let Some(t) = target.to_str() else {
        return Err(Error::invalid(format!(
            "symlink target is not UTF-8: {}",
            crate::paths::shown(abs)
        )));
    };
    if !link_stays_inside(rel, t) {
        return Err(Error::new(
            ErrorKind::Invalid,
            format!(
                "symlink {} points outside the directory (to {t})",
                abs.display()
            ),
        )
        .hint("replace the link with a copy of its target, or remove it"));
    }
    Ok(t.to_string())
}

/// The digest `dir` would seal as, computed without a repository. Files are hashed on
/// every core; a file that changes while it is read is an error, as in a push.
pub fn digest_dir(dir: &Path) -> Result<Digest> {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let listing = walk(dir)?;
    let next = AtomicUsize::new(0);
    let hashes: Vec<std::sync::Mutex<Option<Hash>>> = listing
        .iter()
        .map(|_| std::sync::Mutex::new(None))
        .collect();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| -> Result<()> {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(e) = listing.get(i) else {
                            return Ok(());
                        };
                        let WalkKind::File { stamp, .. } = e.kind else {
                            continue;
                        };
                        let changed = || {
                            Error::new(
                                ErrorKind::Changed,
                                format!("{} changed while it was being read", e.abs.display()),
                            )
                        };
                        let f = std::fs::File::open(&e.abs).map_err(|_| changed())?;
                        let mut h = blake3::Hasher::new();
                        let n = h
                            .update_reader(&f)
                            .map_err(|err| Error::io("cannot read", &e.abs, err))?
                            .count();
                        let now = f.metadata().map(|m| Stamp::of(&m)).map_err(|_| changed())?;
                        if n != stamp.size || now != stamp {
                            return Err(changed());
                        }
                        if let Ok(mut slot) = hashes[i].lock() {
                            *slot = Some(Hash(*h.finalize().as_bytes()));
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join()
                .map_err(|_| Error::new(ErrorKind::Io, "hasher panicked"))??;
        }
        Ok(())
    })?;
    let entries: Vec<Entry> = listing
        .iter()
        .zip(hashes)
        .map(|(e, h)| {
            // Every file's slot was filled, or a worker returned its error above.
            let hash = h.into_inner().ok().flatten().unwrap_or(Hash([0; 32]));
            e.to_entry(hash)
        })
        .collect();
    Ok(version_digest(&entries))
}
