//! What every tier's reader shares: the largest range read at once, and a chunk's
//! bytes checked against its name.

use crate::digest::Hash;
use crate::error::{Error, Result};
use crate::objects::{PackEntry, PackId};
use crate::repo::Repository;

/// The largest single range read from a local origin.
pub const MAX_RUN: u64 = 8 << 20;

/// The largest from a remote one (an object store, `Repository::concurrency` > 1):
/// there each request costs a round trip and the service's own work per request
/// (moto reads the whole object for every range), so fewer, larger ones.
pub const REMOTE_MAX_RUN: u64 = 64 << 20;

/// The largest single range read from `repo`.
pub fn max_run(repo: &Repository) -> u64 {
    match repo.concurrency() {
        0 | 1 => MAX_RUN,
        _ => REMOTE_MAX_RUN,
    }
}

/// Which chunks of a file (by index) a caller proves by their blocks instead of having
/// them checked against their names as they are read.
pub(super) type ByBlocks<'a> = &'a (dyn Fn(usize) -> bool + Sync);

/// A chunk's bytes must hash to its name; the error names the chunk, pack and offset.
pub(super) fn check_chunk(bytes: &[u8], entry: &PackEntry, pack: &PackId) -> Result<()> {
    if Hash::of(bytes) != entry.hash {
        return Err(Error::corrupt(format!(
            "chunk {} in pack {} at offset {} fails its hash check",
            entry.hash.hex(),
            pack.hex(),
            entry.offset
        )));
    }
    Ok(())
}
