//! A sealed version exported as a ModelPack artifact: its SHA-256s (kept beside the
//! version once computed, `sealvol_sign::version`), then each distinct file read from
//! the repository, every byte proven against the version before it is written, into
//! the destination.

use std::path::Path;
use std::sync::Arc;

use sealvol_core::read::{Chunks, Tiers};
use sealvol_core::registry::Manifest;
use sealvol_core::{Digest, Repository, Result, VolumeName};

use crate::artifact::{self, Artifact};
use crate::layout::{self, Written};

/// The artifact of `volume@digest` (whose manifest is `m`), its SHA-256s read once.
pub fn artifact_of(
    repo: &Arc<Repository>,
    volume: &VolumeName,
    digest: &Digest,
    m: &Manifest,
) -> Result<Artifact> {
    let sha = sealvol_sign::version::sha256s_kept_or_read(repo, volume, digest, m)?;
    artifact::of_version(m, &sha)
}

/// Writes `art` (of a version whose manifest is `m`) into the layout at `dir` under
/// `name`, its bytes read through `tiers`.
pub fn to_layout(
    tiers: &Tiers,
    m: &Manifest,
    art: &Artifact,
    dir: &Path,
    name: Option<&str>,
) -> Result<Written> {
    let small = m.small_files();
    layout::write(dir, art, name, &mut |layer, sink| {
        if layer.size == 0 {
            return Ok(());
        }
        let obj = tiers.repo().file_list(&layer.hash, layer.size, &small)?;
        // Every byte proven to be the file's before the sink sees it.
        tiers.for_each(&obj, 0..obj.chunks.len(), &mut |c| sink(c))
    })
}
