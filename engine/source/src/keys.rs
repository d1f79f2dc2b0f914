//! Keys and file names from a source are untrusted. Each becomes a clean relative path
//! inside the version, or the sync fails with an error naming the key: never a path
//! outside the repository, and never two keys silently folded into one file.

use sealvol_core::error::{Error, Result};

/// What a listed object becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapped {
    /// A file at this clean relative path.
    File(String),
    /// A "folder" marker (a 0-byte key ending in `/`, as S3 consoles make): nothing to
    /// store, its folder exists through the files under it.
    FolderMarker,
}

const MAX_PATH: usize = 4096;

fn bad(key: &str, why: &str) -> Error {
    Error::invalid(format!("source key {key:?} {why}"))
        .hint("leave it out with --exclude 'PATTERN', or rename it at the source")
}

/// Maps one key, relative to the sync's prefix. Keys that are not already clean
/// (`a//b`, `a/./b`, `/x`) are refused rather than normalised: on an object store they
/// are distinct from `a/b` and `x`, and normalising could make two objects one file.
pub fn map_key(key: &str, size: u64) -> Result<Mapped> {
    if key.contains('\0') {
        return Err(bad(key, "holds a NUL byte"));
    }
    if key.is_empty() {
        return Err(bad(key, "is empty"));
    }
    if let Some(folder) = key.strip_suffix('/') {
        if size == 0 && !folder.contains("//") {
            return Ok(Mapped::FolderMarker);
        }
        return Err(bad(key, "ends with / but has bytes"));
    }
    if key.starts_with('/') {
        return Err(bad(key, "is absolute (starts with /)"));
    }
    if key.len() > MAX_PATH {
        return Err(bad(key, "is longer than 4096 bytes"));
    }
    for part in key.split('/') {
        match part {
            "" => return Err(bad(key, "has an empty path component (//)")),
            "." => return Err(bad(key, "has a . component")),
            ".." => return Err(bad(key, "has a .. component, which would leave the volume")),
            p if p.len() > 255 => {
                return Err(bad(key, "has a component longer than 255 bytes"));
            }
            _ => {}
        }
    }
    Ok(Mapped::File(key.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_keys_map_to_themselves() {
        for k in [
            "config.json",
            "1_Pooling/config.json",
            "a/b/c.safetensors",
            "ü/名前.bin",
        ] {
            assert_eq!(map_key(k, 10).unwrap(), Mapped::File(k.into()));
        }
        assert_eq!(map_key("folder/", 0).unwrap(), Mapped::FolderMarker);
    }

    #[test]
    fn hostile_keys_are_refused_with_the_key_named() {
        let long = "x".repeat(256);
        let too_long = format!("{}/y", "a/".repeat(2100));
        for k in [
            "../x",
            "a/../../etc/passwd",
            "/etc/passwd",
            "a/./b",
            "a//b",
            "nul\0byte",
            "",
            long.as_str(),
            too_long.as_str(),
        ] {
            let e = map_key(k, 1).unwrap_err();
            assert!(e.to_string().contains("source key"), "{k:?}: {e}");
            assert!(e.hint_text().unwrap().contains("--exclude"), "{k:?}");
        }
        assert!(map_key("folder/", 5).is_err(), "a folder marker with bytes");
    }
}
