//! A version as a filesystem, not yet mounted: its entries from the listing (or the
//! manifest), its read tiers, its saved read profile replayed.

use std::sync::Arc;
use std::time::SystemTime;

use sealvol_core::cache::ChunkCache;
use sealvol_core::error::Result;
use sealvol_core::listing::Listing;
use sealvol_core::read::Tiers;
use sealvol_core::read::ring::Ring;
use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::repo::Repository;
use sealvol_core::small::SmallFiles;

use crate::fs::{Limits, VolumeFs};
use crate::tree::Tree;

pub struct MountOptions {
    pub cache: Option<Arc<ChunkCache>>,
    pub limits: Limits,
    /// Threads reading kernel requests.
    pub threads: usize,
    /// Read ahead in the order of the version's newest saved read profile, if any.
    pub replay: bool,
    /// Asked for what the node cache misses before the origin, each run by who owns it.
    pub ring: Arc<Ring>,
    /// Repositories holding the same version, read when the origin fails, in order.
    pub mirrors: Vec<Arc<Repository>>,
}

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            cache: None,
            limits: Limits::default(),
            threads: 4,
            replay: true,
            ring: Arc::default(),
            mirrors: Vec::new(),
        }
    }
}

/// Builds the filesystem for one version without mounting it (tests, and the first
/// half of `mount`).
pub fn open_fs(
    repo: Arc<Repository>,
    volume: &VolumeName,
    digest: &Digest,
    opts: &MountOptions,
) -> Result<VolumeFs> {
    let tiers = Arc::new(
        Tiers::new(repo, opts.cache.clone())
            .keeping_whole_files_from(opts.limits.passthrough_min)
            .keeping_only_what_the_origin_cannot_give_again()
            .with_ring(Arc::clone(&opts.ring))
            .with_mirrors(opts.mirrors.clone()),
    );
    open_fs_over(tiers, volume, digest, opts.limits, opts.replay)
}

/// The filesystem of one version over read tiers of the caller's own (the Python
/// package's, shared by every version it opens), its saved read profile replayed
/// when `replay`.
pub fn open_fs_over(
    tiers: Arc<Tiers>,
    volume: &VolumeName,
    digest: &Digest,
    limits: Limits,
    replay: bool,
) -> Result<VolumeFs> {
    let repo = tiers.repo();
    let (tree, created, small) = read_version(repo, volume, digest)?;
    // A profile is advisory: one that cannot be read only means less read ahead.
    let profile = match replay {
        true => repo.profile(volume, digest).unwrap_or_else(|e| {
            tracing::warn!("cannot read the read profile of vol:{volume}@{digest}: {e}");
            None
        }),
        false => None,
    };
    let fs = VolumeFs::new(tree, created, small, tiers, limits)?;
    if let Some(p) = profile {
        tracing::info!(
            "reading ahead by the saved read profile ({} runs of chunks)",
            p.steps.len()
        );
        fs.replay(p.steps);
    }
    Ok(fs)
}

/// A version's entries, when it was sealed and where its small files are: from its
/// listing and summary, which are small and quick to read whatever the file count,
/// else from its manifest (a version sealed before listings, or one whose listing is
/// damaged).
fn read_version(
    repo: &Repository,
    volume: &VolumeName,
    digest: &Digest,
) -> Result<(Tree, SystemTime, SmallFiles)> {
    let created = |s: &str| humantime::parse_rfc3339(s).unwrap_or(SystemTime::UNIX_EPOCH);
    // The manifest must be there, at the size its summary recorded: a version whose
    // manifest is gone or damaged is not mounted from its listing (it is listed as
    // damaged, and repair may quarantine it).
    if let Some(summary) = repo.summary(volume, digest)?
        && repo.manifest_size(volume, digest)? == Some(summary.manifest_bytes)
        && let Some(listing) = repo.listing(volume, digest)?
    {
        let small = SmallFiles::parse(&summary.small_packs);
        return Ok((Tree::new(listing), created(&summary.created), small));
    }
    tracing::info!("vol:{volume}@{digest} has no listing yet; reading its manifest");
    let manifest = repo.manifest(volume, digest)?;
    let listing = Listing::from_entries(&manifest.entries)?;
    Ok((
        Tree::new(listing),
        created(&manifest.created),
        manifest.small_files(),
    ))
}
