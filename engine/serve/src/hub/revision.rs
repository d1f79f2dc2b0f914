//! A Hub revision as the version it names. In order: `main` is the tag `main` when the
//! volume has one, else its newest sealed version (a Hub repo always has `main`); 40 or
//! 64 lowercase hex digits are a commit id or a digest (`ids::commit_id`), so a
//! tag that looks like one is not reached this way; `b3:…` is a digest (or a prefix of
//! one); anything else is a tag. A revision that can be none of these (`refs/pr/1`,
//! `..`, a NUL) names no version: not found, never read as a path.

use sealvol_core::error::ErrorKind;
use sealvol_core::refs::{Digest, DigestSpec, Name, Ref, Target, VolumeName};
use sealvol_core::repo::Repository;
use sealvol_core::{Error, Result};

/// The version revision `rev` of `volume` names (deleted versions name none).
pub fn resolve(repo: &Repository, volume: &VolumeName, rev: &str) -> Result<Digest> {
    match parse(volume, rev)? {
        Some(r) => repo.resolve(&r),
        None => main(repo, volume),
    }
}

/// `rev` as a ref of `volume`; `None` for `main` (see `main`).
pub fn parse(volume: &VolumeName, rev: &str) -> Result<Option<Ref>> {
    if rev == "main" {
        return Ok(None);
    }
    let hex =
        |n: usize| rev.len() == n && rev.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    // Built from its parts, never by pasting `rev` into a ref's text.
    let target = match () {
        _ if hex(64) || hex(40) => DigestSpec::parse(&format!("b3:{rev}")).map(Target::Digest),
        _ if rev.starts_with("b3:") => DigestSpec::parse(rev).map(Target::Digest),
        _ => Name::parse("tag", rev).map(Target::Tag),
    };
    let target = target.map_err(|_| no_revision(volume, rev))?;
    Ok(Some(Ref {
        volume: volume.clone(),
        target,
    }))
}

/// `main`: the tag `main` when there is one, else the newest sealed version.
fn main(repo: &Repository, volume: &VolumeName) -> Result<Digest> {
    let tag = Name::parse("tag", "main")?;
    let target = match repo.tag(volume, &tag) {
        Ok(Some(_)) => Target::Tag(tag),
        Ok(None) => Target::Latest,
        Err(e) if e.kind() == ErrorKind::NotFound => Target::Latest,
        Err(e) => return Err(e),
    };
    repo.resolve(&Ref {
        volume: volume.clone(),
        target,
    })
}

fn no_revision(volume: &VolumeName, rev: &str) -> Error {
    Error::not_found(format!("{volume} has no revision {rev:?}"))
        .hint("a revision is main, a tag, a digest (b3:…) or a 40-hex commit id")
}
