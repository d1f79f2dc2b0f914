//! Walks a local directory into the sorted list of entries a version is made of,
//! refusing what cannot be sealed faithfully (non-UTF-8 names, links that leave the
//! directory, sockets and devices) with an error that names the path.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use crate::digest::{Entry, Hash};
use crate::error::{Error, ErrorKind, IoContext, Result};

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
            Error::usage(format!("{} is a file, not a directory", root.display()))
                .hint("push the directory that contains it"),
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
                return Err(Error::usage(format!(
                    "file name is not UTF-8: {}",
                    abs.display()
                ))
                .hint("rename the file; sealvol stores names as UTF-8 so every client can read them"));
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
                return Err(Error::usage(format!(
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
        return Err(Error::usage(format!(
            "symlink target is not UTF-8: {}",
            abs.display()
        )));
    };
    if !link_stays_inside(rel, t) {
        return Err(Error::new(
            ErrorKind::Usage,
            format!(
                "symlink {} points outside the directory (to {t})",
                abs.display()
            ),
        )
        .hint("replace the link with a copy of its target, or remove it"));
    }
    Ok(t.to_string())
}

/// True if a link at relative path `link` with target `target` resolves inside the
/// volume root without ever climbing above it.
pub fn link_stays_inside(link: &str, target: &str) -> bool {
    if target.is_empty() || target.contains('\0') {
        return false;
    }
    let mut depth: Vec<&str> = link.split('/').collect();
    depth.pop(); // the link's own name
    for c in Path::new(target).components() {
        match c {
            Component::Normal(p) => match p.to_str() {
                Some(p) => depth.push(p),
                None => return false,
            },
            Component::CurDir => {}
            Component::ParentDir => {
                if depth.pop().is_none() {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// True if `path` is a clean relative path: no empty, `.` or `..` parts, no NUL, not
/// absolute. Every path read from a manifest passes this before it touches a disk.
pub fn is_clean_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.contains('\0')
        && path
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != ".." && p.len() <= 255)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_that_climb_out_are_caught() {
        assert!(link_stays_inside("a/b", "c"));
        assert!(link_stays_inside("a/b", "../c"));
        assert!(!link_stays_inside("a/b", "../../c"));
        assert!(!link_stays_inside("b", "/etc/passwd"));
        assert!(!link_stays_inside("a/b", "x/../../../c"));
        assert!(link_stays_inside("a/b", "./x/../y"));
    }

    #[test]
    fn clean_paths() {
        assert!(is_clean_relative("a/b.txt"));
        for bad in ["", "/a", "a//b", "a/./b", "../x", "a/..", "a\0b"] {
            assert!(!is_clean_relative(bad), "{bad:?}");
        }
        assert!(!is_clean_relative(&"x".repeat(256)));
    }
}
