//! The trash: deleting a version, restoring it within the retention window, and
//! purging it once the window has passed (garbage collection does that).
//!
//! A deleted version keeps its manifest where it was, so that a restore brings back
//! exactly what was sealed (digest, provenance, files) and its data stays referenced:
//! deleting is writing `trash/<ns>/<vol>/<digest hex>`, a record of who deleted it,
//! when, and which tags it had. The record's `state` is what restore and purge race
//! for, by compare-and-swap, so exactly one of them wins (docs/GC.md, "The trash").

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::outcomes::{TagFile, TagLeft};
use crate::refs::{Digest, DigestSpec, Name, Ref, Target, VolumeName, ambiguous_prefix};
use crate::repo::{Repository, json_error, manifest_key};
use crate::stamp::{now, now_rfc3339, parse_rfc3339, rfc3339, to_minute, whoami};
use crate::store::ETag;

pub use crate::outcomes::{Deleted, Restored};

pub(crate) const TRASH_PREFIX: &str = "trash/";

/// Where a trash record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrashState {
    /// In the trash, restorable until the window ends.
    Deleted,
    /// A restore won: the version is live; the record is about to be removed.
    Restored,
    /// A purge won: the manifest is being removed; nothing can restore it now.
    Purging,
}

/// `trash/<ns>/<vol>/<digest hex>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrashRecord {
    pub volume: String,
    pub digest: String,
    pub state: TrashState,
    pub deleted_at: String,
    pub deleted_by: String,
    /// The tags that pointed at the version when it was deleted (`--untag` removed them).
    #[serde(default)]
    pub tags: Vec<String>,
    /// When those of them that were to expire would have (RFC 3339, by tag): a restore
    /// points a tag back only until then.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tag_expiry: BTreeMap<String, String>,
}

impl TrashRecord {
    /// When the restore window ends.
    pub fn expires(&self, retention: Duration) -> Option<SystemTime> {
        parse_rfc3339(&self.deleted_at).map(|t| t + retention)
    }

    fn in_trash(&self) -> bool {
        self.state != TrashState::Restored
    }
}

/// A version in the trash, as `volume trash` lists it.
#[derive(Debug, Clone, Serialize)]
pub struct TrashedVersion {
    pub volume: String,
    pub digest: String,
    pub deleted_at: String,
    pub deleted_by: String,
    /// When the window ends (RFC 3339), and whether it has.
    pub expires: String,
    pub expired: bool,
    pub tags: Vec<String>,
    /// From its manifest; zero if that cannot be read.
    pub bytes: u64,
    pub files: u64,
    pub created: String,
    pub source: String,
    /// Set while a garbage collection purges it.
    pub purging: bool,
}

/// How a purge of one version ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purge {
    Purged,
    /// A restore won the race, or the record is gone.
    NotInTrash,
    /// Its window has not passed.
    TooEarly,
    /// A tag points at it again (moved there after the delete): kept.
    Tagged,
}

/// How `unbin_for_seal` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unbin {
    WasLive,
    Restored,
    /// A purge has begun: once it ends the manifest is gone and can be written anew.
    Purging,
    /// The record changed meanwhile: look again.
    Again,
}

pub(crate) fn trash_key(vol: &VolumeName, digest: &Digest) -> String {
    crate::keys::Key::Trash(vol.clone(), *digest).to_string()
}

fn trash_prefix(vol: &VolumeName) -> String {
    crate::keys::volume_folder("trash", vol)
}

impl Repository {
    /// The trash record of a version, with its version for compare-and-swap.
    fn trash_record(&self, vol: &VolumeName, d: &Digest) -> Result<Option<(TrashRecord, ETag)>> {
        let key = trash_key(vol, d);
        match self.store().get_versioned(&key)? {
            None => Ok(None),
            Some((bytes, etag)) => serde_json::from_slice(&bytes)
                .map(|r| Some((r, etag)))
                .map_err(|e| {
                    Error::corrupt(format!("{key} is damaged: {e}"))
                        .hint("`sealvol volume verify` shows what else is damaged")
                }),
        }
    }

    /// The record of a version that is in the trash (deleted or being purged).
    pub fn in_trash(&self, vol: &VolumeName, d: &Digest) -> Result<Option<TrashRecord>> {
        Ok(self
            .trash_record(vol, d)?
            .map(|(r, _)| r)
            .filter(TrashRecord::in_trash))
    }

    /// Digests of a volume's versions that are in the trash.
    pub(crate) fn trashed_digests(&self, vol: &VolumeName) -> Result<Vec<Digest>> {
        let prefix = trash_prefix(vol);
        let mut out = Vec::new();
        for o in self.store().list(&prefix)? {
            let Some(d) = o
                .key
                .strip_prefix(&prefix)
                .and_then(|h| Digest::parse(h).ok())
            else {
                continue;
            };
            // A record that cannot be read still means "deleted": it was written only
            // by a delete, and hiding a version is the safe way to be wrong.
            match self.trash_record(vol, &d) {
                Ok(Some((r, _))) if !r.in_trash() => {}
                Ok(None) => {}
                _ => out.push(d),
            }
        }
        Ok(out)
    }

    /// The error for a ref that names a version in the trash.
    pub(crate) fn trashed_error(&self, vol: &VolumeName, d: &Digest, r: &TrashRecord) -> Error {
        let when = to_minute(&r.deleted_at);
        Error::not_found(format!(
            "vol:{vol}@{} is in the trash (deleted by {} on {when})",
            d.short(16),
            r.deleted_by
        ))
        .hint(format!(
            "restore it with `sealvol volume restore {vol}@{}`",
            d.short(16)
        ))
    }

    /// Moves a version to the trash. A version a tag points at is refused unless
    /// `untag`, which removes each such tag first (a move to nothing in its history).
    pub(crate) fn delete_here(&self, r: &Ref, untag: bool) -> Result<Deleted> {
        self.check_writable()?;
        let vol = &r.volume;
        let d = self.resolve(r)?;
        // An expired tag resolves to nothing: it holds nothing either.
        let now = now();
        let holding_files: Vec<TagFile> = self
            .tags(vol)?
            .into_iter()
            .filter(|t| t.digest == d.to_string() && !t.expired_at(now))
            .collect();
        let holding: Vec<Name> = holding_files
            .iter()
            .filter_map(|t| Name::parse("tag", &t.tag).ok())
            .collect();
        if !holding.is_empty() && !untag {
            let names: Vec<String> = holding.iter().map(|t| t.to_string()).collect();
            return Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "vol:{vol}@{} is what tag {} points at",
                    d.short(16),
                    names.join(", ")
                ),
            )
            .hint(format!(
                "move the tag first (`sealvol volume tag {vol}@DIGEST {}`), or pass --untag to remove it",
                names[0]
            )));
        }
        let mut untagged = Vec::new();
        for t in &holding {
            // Only if it still points here: a tag moved meanwhile is left where it went.
            match self.remove_tag(vol, t, Some(d)) {
                Ok(_) => untagged.push(t.to_string()),
                Err(e) if e.kind() == ErrorKind::Race => {}
                Err(e) => return Err(e),
            }
        }
        let record = TrashRecord {
            volume: vol.to_string(),
            digest: d.to_string(),
            state: TrashState::Deleted,
            deleted_at: now_rfc3339(),
            deleted_by: whoami(),
            tags: holding.iter().map(|t| t.to_string()).collect(),
            tag_expiry: holding_files
                .iter()
                .filter_map(|t| Some((t.tag.clone(), t.expires.clone()?)))
                .collect(),
        };
        let bytes = serde_json::to_vec_pretty(&record).map_err(json_error)?;
        let key = trash_key(vol, &d);
        // Over the leftover of an earlier restore, by compare-and-swap; a record in the
        // trash means someone deleted it first.
        let expected = match self.trash_record(vol, &d)? {
            Some((old, _)) if old.in_trash() => {
                return Err(self.trashed_error(vol, &d, &old));
            }
            Some((_, etag)) => Some(etag),
            None => None,
        };
        self.store()
            .put_if_match(&key, &bytes, expected.as_ref())
            .map_err(|e| match e.kind() {
                ErrorKind::Race => Error::new(
                    ErrorKind::Race,
                    format!(
                        "vol:{vol}@{} was deleted or restored by someone else at the same time",
                        d.short(16)
                    ),
                )
                .hint(format!(
                    "look at `sealvol volume trash {vol}` and decide anew"
                )),
                _ => e,
            })?;
        self.barrier()?;
        Ok(Deleted {
            volume: vol.to_string(),
            digest: d.to_string(),
            untagged,
            expires: record
                .expires(self.config().retention)
                .map(rfc3339)
                .unwrap_or_default(),
        })
    }

    /// Brings a version back from the trash, exactly as it was sealed. Fails once its
    /// window has passed, and when a purge has begun.
    pub(crate) fn restore_here(&self, r: &Ref) -> Result<Restored> {
        self.check_writable()?;
        let vol = &r.volume;
        let d = self.resolve_in_trash(r)?;
        let (mut record, etag) = self.trash_record(vol, &d)?.ok_or_else(|| not_in_trash(r))?;
        match record.state {
            TrashState::Restored => return Err(not_in_trash(r)),
            TrashState::Purging => {
                return Err(Error::not_found(format!(
                    "vol:{vol}@{} is being purged by a garbage collection; it can no longer be restored",
                    d.short(16)
                )));
            }
            TrashState::Deleted => {}
        }
        let retention = self.config().retention;
        if let Some(end) = record.expires(retention)
            && now() >= end
        {
            return Err(Error::not_found(format!(
                "vol:{vol}@{} was deleted on {}; its restore window ({}) ended on {}",
                d.short(16),
                to_minute(&record.deleted_at),
                humantime::format_duration(retention),
                to_minute(&rfc3339(end)),
            ))
            .hint("it can no longer be restored; `sealvol volume gc` purges it"));
        }
        if self.store().size(&manifest_key(vol, &d))?.is_none() {
            return Err(Error::corrupt(format!(
                "vol:{vol}@{} is in the trash but its manifest is missing",
                d.short(16)
            ))
            .hint("`sealvol volume verify` shows what else is damaged"));
        }
        record.state = TrashState::Restored;
        let bytes = serde_json::to_vec_pretty(&record).map_err(json_error)?;
        let key = trash_key(vol, &d);
        // The compare-and-swap that a purge's own one (deleted → purging) excludes.
        self.store()
            .put_if_match(&key, &bytes, Some(&etag))
            .map_err(|e| match e.kind() {
                ErrorKind::Race => Error::new(
                    ErrorKind::Race,
                    format!(
                        "vol:{vol}@{} was restored or purged by someone else at the same time",
                        d.short(16)
                    ),
                )
                .hint(format!("look at `sealvol volume versions {vol}`")),
                _ => e,
            })?;
        self.barrier()?;
        // The version is live from here on; the record is only a leftover now.
        self.store().delete(&key)?;
        let (retagged, not_retagged) = self.point_tags_back(vol, &d, &record)?;
        Ok(Restored {
            volume: vol.to_string(),
            digest: d.to_string(),
            tags: record.tags,
            retagged,
            not_retagged,
        })
    }

    /// After a restore: points each tag the version had when it was deleted back at it,
    /// where the tag points nowhere now (removed, or expired since) and its own expiry
    /// (kept in the record) has not passed; the others are left, with why.
    fn point_tags_back(
        &self,
        vol: &VolumeName,
        d: &Digest,
        record: &TrashRecord,
    ) -> Result<(Vec<String>, Vec<TagLeft>)> {
        let now = now();
        let (mut back, mut left) = (Vec::new(), Vec::new());
        let mut leave = |tag: &str, why: String| {
            left.push(TagLeft {
                tag: tag.to_string(),
                why,
            })
        };
        for t in &record.tags {
            let Ok(tag) = Name::parse("tag", t) else {
                continue;
            };
            let expires = record.tag_expiry.get(t).cloned();
            if let Some(at) = &expires
                && humantime::parse_rfc3339(at).map_or(true, |at| at <= now)
            {
                leave(t, format!("it expired at {at}"));
                continue;
            }
            let current = match self.tag(vol, &tag) {
                Ok(c) => c,
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    leave(t, e.message().to_string());
                    continue;
                }
                Err(e) => return Err(e),
            };
            let expected = match &current {
                None => None,
                Some(c) if c.removed() => None,
                Some(c) if c.expired_at(now) => Digest::parse(&c.digest).ok(),
                Some(c) => {
                    leave(t, format!("it points at {} now", c.digest));
                    continue;
                }
            };
            match self.move_tag_until(vol, &tag, d, Some(expected), expires) {
                Ok(_) => back.push(t.clone()),
                // Moved by someone else meanwhile: theirs stands.
                Err(e) if e.kind() == ErrorKind::Race => {
                    leave(t, "it was moved meanwhile".to_string())
                }
                Err(e) => return Err(e),
            }
        }
        Ok((back, left))
    }

    /// Which trashed version a ref names: a digest or prefix among the volume's
    /// trashed versions (a tag or "latest" names live versions only).
    fn resolve_in_trash(&self, r: &Ref) -> Result<Digest> {
        let vol = &r.volume;
        let Target::Digest(spec) = &r.target else {
            return Err(Error::invalid(format!(
                "{r} names a live version; a restore needs the digest of one in the trash"
            ))
            .hint(format!("list them with `sealvol volume trash {vol}`")));
        };
        let trashed = self.trashed_digests(vol)?;
        let mut found: Vec<Digest> = trashed.into_iter().filter(|d| spec.matches(d)).collect();
        found.sort();
        match found.len() {
            1 => Ok(found[0]),
            0 => {
                // Say whether it is live, or unknown altogether.
                let live = match spec {
                    DigestSpec::Full(d) => self.store().size(&manifest_key(vol, d))?.is_some(),
                    DigestSpec::Prefix(_) => {
                        self.version_digests(vol)?.iter().any(|d| spec.matches(d))
                    }
                };
                Err(match live {
                    true => {
                        Error::not_found(format!("{r} is not in the trash: it is a live version"))
                            .hint(format!("list the trash with `sealvol volume trash {vol}`"))
                    }
                    false => self.or_unknown_volume(vol, not_in_trash(r)),
                })
            }
            _ => Err(ambiguous_prefix(spec, vol, &found, " in the trash")),
        }
    }

    /// Versions in the trash, of one volume or all, newest deletion first.
    pub fn trash(&self, vol: Option<&VolumeName>) -> Result<Vec<TrashedVersion>> {
        let vols = match vol {
            Some(v) => {
                self.require_volume(v)?;
                vec![v.clone()]
            }
            None => self.volumes(None)?,
        };
        let retention = self.config().retention;
        let now = now();
        let mut out = Vec::new();
        for v in vols {
            for d in self.trashed_digests(&v)? {
                let Some((r, _)) = self.trash_record(&v, &d).ok().flatten() else {
                    continue;
                };
                let m = self.manifest(&v, &d).ok();
                let expires = r.expires(retention);
                out.push(TrashedVersion {
                    volume: v.to_string(),
                    digest: d.to_string(),
                    deleted_at: r.deleted_at.clone(),
                    deleted_by: r.deleted_by.clone(),
                    expires: expires.map(rfc3339).unwrap_or_default(),
                    expired: expires.is_some_and(|e| now >= e),
                    tags: r.tags.clone(),
                    bytes: m.as_ref().map_or(0, |m| m.stats.bytes),
                    files: m.as_ref().map_or(0, |m| m.stats.files),
                    created: m.as_ref().map(|m| m.created.clone()).unwrap_or_default(),
                    source: m.map(|m| m.provenance.source).unwrap_or_default(),
                    purging: r.state == TrashState::Purging,
                });
            }
        }
        out.sort_by(|a, b| {
            b.deleted_at
                .cmp(&a.deleted_at)
                .then(a.digest.cmp(&b.digest))
        });
        Ok(out)
    }

    /// Purges a version whose window has passed (at `now`): wins the record from any
    /// restore by compare-and-swap, removes the manifest, then the record. Its data is
    /// left for the collection that follows.
    pub fn purge(&self, vol: &VolumeName, d: &Digest, now: SystemTime) -> Result<Purge> {
        let Some((mut record, etag)) = self.trash_record(vol, d)? else {
            return Ok(Purge::NotInTrash);
        };
        let key = trash_key(vol, d);
        match record.state {
            TrashState::Restored => return Ok(Purge::NotInTrash),
            // A purge that was interrupted: finish it.
            TrashState::Purging => {}
            TrashState::Deleted => {
                if record
                    .expires(self.config().retention)
                    .is_none_or(|end| now < end)
                {
                    return Ok(Purge::TooEarly);
                }
                // An expired tag holds nothing (and would hold it for ever).
                if self
                    .tags(vol)?
                    .iter()
                    .any(|t| t.digest == d.to_string() && !t.expired_at(now))
                {
                    return Ok(Purge::Tagged);
                }
                record.state = TrashState::Purging;
                let bytes = serde_json::to_vec_pretty(&record).map_err(json_error)?;
                match self.store().put_if_match(&key, &bytes, Some(&etag)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::Race => return Ok(Purge::NotInTrash),
                    Err(e) => return Err(e),
                }
                self.barrier()?;
            }
        }
        // Listing and summary, then manifest: a record without a manifest is a finished purge,
        // never a manifest without its record (which would be a live version again);
        // a manifest without its summary still lists, a summary alone never does.
        self.delete_profiles(vol, d)?;
        self.delete_signatures(vol, d)?;
        self.delete_labels(vol, d)?;
        self.delete_listing(vol, d)?;
        self.delete_summary(vol, d)?;
        self.store().delete(&manifest_key(vol, d))?;
        self.barrier()?;
        self.store().delete(&key)?;
        Ok(Purge::Purged)
    }

    /// Takes a version out of the trash because a push sealed the same files again:
    /// whatever its window, a fresh push makes it live. Loses to a purge in progress.
    pub(crate) fn unbin_for_seal(&self, vol: &VolumeName, d: &Digest) -> Result<Unbin> {
        let Some((mut record, etag)) = self.trash_record(vol, d)? else {
            return Ok(Unbin::WasLive);
        };
        match record.state {
            TrashState::Restored => return Ok(Unbin::WasLive),
            TrashState::Purging => return Ok(Unbin::Purging),
            TrashState::Deleted => {}
        }
        record.state = TrashState::Restored;
        let bytes = serde_json::to_vec_pretty(&record).map_err(json_error)?;
        let key = trash_key(vol, d);
        match self.store().put_if_match(&key, &bytes, Some(&etag)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Race => return Ok(Unbin::Again),
            Err(e) => return Err(e),
        }
        self.barrier()?;
        self.store().delete(&key)?;
        Ok(Unbin::Restored)
    }

    /// Writes a damaged trash record anew, keeping the damaged bytes in quarantine: the
    /// version stays deleted (hiding it is the safe way to be wrong), its window starting
    /// now, as a delete by repair. Returns where the damaged record went.
    pub fn rewrite_trash_record(&self, vol: &VolumeName, d: &Digest) -> Result<String> {
        let key = trash_key(vol, d);
        let kept = match self.store().get(&key)? {
            Some(bytes) => self.quarantine_copy(&key, &bytes)?,
            None => String::new(),
        };
        let rec = TrashRecord {
            volume: vol.to_string(),
            digest: d.to_string(),
            state: TrashState::Deleted,
            deleted_at: now_rfc3339(),
            deleted_by: format!("{} (repair: the record was damaged)", whoami()),
            tags: Vec::new(),
            tag_expiry: BTreeMap::new(),
        };
        let bytes = serde_json::to_vec_pretty(&rec).map_err(json_error)?;
        self.store().put(&key, &bytes)?;
        Ok(kept)
    }

    /// The trash records that cannot be read: (volume, digest, why).
    pub fn damaged_trash(&self) -> Result<Vec<(VolumeName, Digest, String)>> {
        let mut out = Vec::new();
        for (vol, d) in self.all_trashed()? {
            match self.trash_record(&vol, &d) {
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    out.push((vol, d, e.message().to_string()));
                }
                r => {
                    r?;
                }
            }
        }
        Ok(out)
    }

    /// Every trash record in the repository: (volume, digest).
    pub fn all_trashed(&self) -> Result<Vec<(VolumeName, Digest)>> {
        let mut out = Vec::new();
        for o in self.store().list(TRASH_PREFIX)? {
            let mut parts = o.key[TRASH_PREFIX.len()..].split('/');
            let (Some(ns), Some(name), Some(hex), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let (Ok(vol), Ok(d)) = (
                VolumeName::parse(&format!("{ns}/{name}")),
                Digest::parse(hex),
            ) else {
                continue;
            };
            out.push((vol, d));
        }
        Ok(out)
    }
}

fn not_in_trash(r: &Ref) -> Error {
    Error::not_found(format!("no version {r} in the trash")).hint(format!(
        "list the trash with `sealvol volume trash {}`",
        r.volume
    ))
}
