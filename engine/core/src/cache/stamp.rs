//! A whole file's stamp in the node cache (`<file hash>.ok`): the inode, size, mtime
//! and change time it had when its bytes were checked, so that an open whose file
//! still matches it trusts the file without hashing it again (what this trusts:
//! docs/SEMANTICS.md).

use std::fs;
use std::path::{Path, PathBuf};

impl Stamp {
    const HEADER: &'static str = "sealvol whole-file check 1";

    pub(super) fn of(m: &fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            ino: m.ino(),
            size: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    pub(super) fn encode(&self) -> String {
        format!(
            "{}\n{} {} {} {} {} {}\n",
            Stamp::HEADER,
            self.ino,
            self.size,
            self.mtime.0,
            self.mtime.1,
            self.ctime.0,
            self.ctime.1
        )
    }

    /// A stamp that does not parse is no stamp: the file is hashed again.
    pub(super) fn decode(text: &str) -> Option<Stamp> {
        let (header, fields) = text.split_once('\n')?;
        if header != Stamp::HEADER {
            return None;
        }
        let v: Vec<i64> = fields
            .split_whitespace()
            .map(str::parse)
            .collect::<std::result::Result<_, _>>()
            .ok()?;
        let [ino, size, ms, mn, cs, cn] = v[..] else {
            return None;
        };
        Some(Stamp {
            ino: u64::try_from(ino).ok()?,
            size: u64::try_from(size).ok()?,
            mtime: (ms, mn),
            ctime: (cs, cn),
        })
    }
}

/// What a whole file's stamp records: the file as it was when its bytes were checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    pub(super) ino: u64,
    pub(super) size: u64,
    pub(super) mtime: (i64, i64),
    pub(super) ctime: (i64, i64),
}

pub(super) fn stamp_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".ok");
    PathBuf::from(name)
}

pub(super) fn is_stamp(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "ok")
}
