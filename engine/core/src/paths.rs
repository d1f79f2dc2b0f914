//! Paths inside a version: clean, relative, `/`-separated, and never leading out. Every
//! path read from a manifest, a source listing or an object key passes these checks
//! before it touches a disk. And paths of this machine as people read them (`shown`).

use std::collections::BTreeSet;
use std::path::{Component, Path};

use crate::error::{Error, Result};

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

/// Checks a whole listing of mapped paths: no path twice, and no path that is both a
/// file and a folder of other files (`a` and `a/b`).
pub fn check_listing<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<()> {
    let mut files = BTreeSet::new();
    for p in paths {
        if !files.insert(p) {
            return Err(Error::invalid(format!("source key {p:?} is listed twice"))
                .hint("leave it out with --exclude 'PATTERN', or rename it at the source"));
        }
    }
    for p in &files {
        let mut folder = String::with_capacity(p.len());
        for part in p.split('/') {
            if !folder.is_empty() {
                if files.contains(folder.as_str()) {
                    return Err(Error::invalid(format!(
                        "source key {folder:?} is a file and also a folder of {p:?}"
                    ))
                    .hint("leave one out with --exclude 'PATTERN'"));
                }
                folder.push('/');
            }
            folder.push_str(part);
        }
    }
    Ok(())
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

    #[test]
    fn a_key_that_is_a_file_and_a_folder_is_refused() {
        assert!(check_listing(["a/b", "a/c", "b"]).is_ok());
        let e = check_listing(["a", "a/b"]).unwrap_err();
        assert!(
            e.to_string().contains("\"a\" is a file and also a folder"),
            "{e}"
        );
        assert!(check_listing(["x/y/z", "x/y"]).is_err());
        assert!(check_listing(["dup", "dup"]).is_err());
    }
}

// `shown` is error.rs's (messages name paths through it); kept reachable here.
pub use crate::error::shown;

#[cfg(test)]
mod shown_tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn bytes_that_are_not_utf8_are_c_escapes() {
        let p = std::path::Path::new(std::ffi::OsStr::from_bytes(b"/d/bad\xffname\xc3.bin"));
        assert_eq!(shown(p), "/d/bad\\xFFname\\xC3.bin");
        assert_eq!(shown(std::path::Path::new("/d/ü.bin")), "/d/ü.bin");
    }
}
