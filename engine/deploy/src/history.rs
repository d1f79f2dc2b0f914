//! Which version to go back to: the versions of a volume sealed before the one a
//! deployment serves, newest first, and the ref text that pins one.

use sealvol_core::registry::VersionInfo;
use sealvol_core::{Digest, Error, Repository, Result, VolumeName};

/// Live versions of `volume` sealed before `current`, newest first. `current` may be
/// in the trash (its manifest is kept there): what came before it is still known.
pub fn before(
    repo: &Repository,
    volume: &VolumeName,
    current: &Digest,
) -> Result<Vec<VersionInfo>> {
    let created = repo.manifest(volume, current)?.created;
    let key = |v: &VersionInfo| (v.created.clone(), v.digest.clone());
    let here = (created, current.to_string());
    Ok(repo
        .versions(volume)?
        .into_iter()
        .filter(|v| v.damaged.is_none() && key(v) < here)
        .collect())
}

/// The version sealed just before `current`.
pub fn previous(repo: &Repository, volume: &VolumeName, current: &Digest) -> Result<Digest> {
    let earlier = before(repo, volume, current)?;
    let v = earlier.first().ok_or_else(|| {
        Error::not_found(format!(
            "{current} is the oldest version of {volume}: there is none before it"
        ))
        .hint(format!(
            "name one with --to; `sealvol volume versions {volume}` lists them"
        ))
    })?;
    Digest::parse(&v.digest)
}

/// A pinned ref for `digest`, written with or without `vol:` as `like` was.
pub fn pinned_text(like: &str, volume: &VolumeName, digest: &Digest) -> String {
    let prefix = if like.starts_with("vol:") { "vol:" } else { "" };
    format!("{prefix}{volume}@{digest}")
}
