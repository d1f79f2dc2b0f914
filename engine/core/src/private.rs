//! Everything under the state directory is its user's alone: directories 0700, files
//! 0600. It holds the database, job logs that name sources and buckets, mount logs and
//! the secrets; no other user of the machine should read them.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::error::{IoContext, Result};

/// Creates `dir` (and its parents) 0700; an existing one made under a looser umask is
/// tightened.
pub fn dir(dir: &Path) -> Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .ctx("cannot create", dir)?;
    restrict(dir, 0o700)
}

/// Sets `path`'s mode when it is looser than `mode`.
pub fn restrict(path: &Path, mode: u32) -> Result<()> {
    let m = fs::metadata(path).ctx("cannot read", path)?;
    if m.permissions().mode() & 0o777 & !mode != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).ctx("cannot secure", path)?;
    }
    Ok(())
}

/// Opens `path` for appending, created 0600.
pub fn append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Options for a new file 0600, written once.
pub fn create_new() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true).mode(0o600);
    o
}
