//! Reading the registry: manifests, volumes and versions as listings show them, tags,
//! and refs resolved to digests.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::digest::version_digest;
use crate::error::{Error, ErrorKind, Result};
use crate::manifest::{MANIFEST_FORMAT, Manifest};
use crate::outcomes::{TagFile, TagMove};
use crate::refs::{Digest, DigestSpec, Name, Ref, Target, VolumeName, ambiguous_prefix};
use crate::repo::{Repository, manifest_key, manifest_prefix, tag_key, tag_prefix};

#[derive(Debug, Clone, Serialize)]
pub struct VersionInfo {
    pub digest: String,
    pub created: String,
    pub bytes: u64,
    pub files: u64,
    pub new_bytes: u64,
    pub source: String,
    pub pushed_by: String,
    /// What the pusher said about it (`push --label`); not part of the digest.
    pub labels: crate::labels::Labels,
    pub tags: Vec<String>,
    /// Tags that point at it but have expired (they resolve to nothing, hold nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expired_tags: Vec<String>,
    /// Why the manifest cannot be read, for a damaged one (listed, never skipped
    /// silently; its other fields are then empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VolumeInfo {
    pub namespace: String,
    pub name: String,
    pub versions: usize,
    /// Its tags that resolve (not removed, not expired).
    pub tags: Vec<String>,
    /// How many of its tags have expired (listed by `volume tags`).
    pub expired_tags: usize,
    pub latest_bytes: u64,
    pub updated: String,
    /// Damaged manifests and tags of this volume (listed, and skipped by everything
    /// that needs a readable one).
    pub damaged: usize,
    /// Versions in the trash (not counted in `versions`).
    pub trashed: usize,
}

impl Repository {
    /// Reads a manifest and checks that its entries still hash to its name.
    pub fn manifest(&self, vol: &VolumeName, digest: &Digest) -> Result<Manifest> {
        let key = manifest_key(vol, digest);
        let bytes = self.store().get(&key)?.ok_or_else(|| {
            Error::not_found(format!("no version vol:{vol}@{digest}")).hint(format!(
                "list versions with `sealvol volume versions {vol}`"
            ))
        })?;
        let m: Manifest = serde_json::from_slice(&bytes)
            .map_err(|e| Error::corrupt(format!("{key} is damaged: {e}")))?;
        if m.format > MANIFEST_FORMAT {
            return Err(Error::new(
                ErrorKind::Format,
                format!(
                    "{key} has format {}, newer than this sealvol understands",
                    m.format
                ),
            )
            .hint("upgrade sealvol"));
        }
        let actual = version_digest(&m.entries);
        if actual != *digest || m.digest != digest.to_string() {
            return Err(Error::corrupt(format!(
                "{key}: its entries hash to {actual}, not to its name"
            )));
        }
        Ok(m)
    }

    /// Digests of the versions of a volume that are not in the trash (unordered).
    pub fn live_digests(&self, vol: &VolumeName) -> Result<Vec<Digest>> {
        let trashed = self.trashed_digests(vol)?;
        let mut all = self.version_digests(vol)?;
        all.retain(|d| !trashed.contains(d));
        Ok(all)
    }

    /// Digests of every version of a volume, in the trash or not (unordered).
    pub fn version_digests(&self, vol: &VolumeName) -> Result<Vec<Digest>> {
        let prefix = manifest_prefix(vol);
        Ok(self
            .store()
            .list(&prefix)?
            .iter()
            .filter_map(|o| o.key.strip_prefix(&prefix))
            .filter_map(|h| Digest::parse(h).ok())
            .collect())
    }

    /// Every volume, optionally of one namespace, sorted by name.
    pub fn volumes(&self, namespace: Option<&Name>) -> Result<Vec<VolumeName>> {
        let prefix = match namespace {
            Some(ns) => format!("manifests/{ns}/"),
            None => "manifests/".to_string(),
        };
        let mut vols: Vec<VolumeName> = self
            .store()
            .list(&prefix)?
            .iter()
            .filter_map(|o| {
                let mut parts = o.key.strip_prefix("manifests/")?.split('/');
                let ns = Name::parse("namespace", parts.next()?).ok()?;
                let name = Name::parse("volume name", parts.next()?).ok()?;
                Some(VolumeName {
                    namespace: ns,
                    name,
                })
            })
            .collect();
        vols.sort();
        vols.dedup();
        Ok(vols)
    }

    /// Every volume with its counts. A damaged manifest or tag is counted in `damaged`
    /// and takes nothing else down.
    pub fn volume_infos(&self, namespace: Option<&Name>) -> Result<Vec<VolumeInfo>> {
        let mut out = Vec::new();
        let now = crate::stamp::now();
        for vol in self.volumes(namespace)? {
            let trashed = self.trashed_digests(&vol)?.len();
            let (versions, tags) = self.versions_and_tags(&vol)?;
            let latest = versions.iter().find(|v| v.damaged.is_none());
            out.push(VolumeInfo {
                namespace: vol.namespace.to_string(),
                name: vol.name.to_string(),
                versions: versions.len(),
                damaged: versions.iter().filter(|v| v.damaged.is_some()).count()
                    + tags.iter().filter(|t| t.damaged.is_some()).count(),
                expired_tags: tags.iter().filter(|t| t.expired_at(now)).count(),
                tags: tags
                    .into_iter()
                    .filter(|t| !t.expired_at(now))
                    .map(|t| t.tag)
                    .collect(),
                latest_bytes: latest.map(|v| v.bytes).unwrap_or(0),
                updated: latest.map(|v| v.created.clone()).unwrap_or_default(),
                trashed,
            });
        }
        Ok(out)
    }

    /// Versions of a volume (not those in the trash), newest first, with the tags
    /// pointing at each and their labels as they are now (`labels.rs`); damaged
    /// manifests last, marked.
    pub fn versions(&self, vol: &VolumeName) -> Result<Vec<VersionInfo>> {
        let mut versions = self.versions_and_tags(vol)?.0;
        let mut changed = self.changed_labels(vol)?;
        for v in &mut versions {
            if let Some(l) = Digest::parse(&v.digest)
                .ok()
                .and_then(|d| changed.remove(&d))
            {
                v.labels = l;
            }
        }
        Ok(versions)
    }

    fn versions_and_tags(&self, vol: &VolumeName) -> Result<(Vec<VersionInfo>, Vec<TagFile>)> {
        let prefix = manifest_prefix(vol);
        let trashed = self.trashed_digests(vol)?;
        let live: Vec<(Digest, u64)> = self
            .store()
            .list(&prefix)?
            .iter()
            .filter_map(|o| Some((Digest::parse(o.key.strip_prefix(&prefix)?).ok()?, o.size)))
            .filter(|(d, _)| !trashed.contains(d))
            .collect();
        let digests: Vec<Digest> = live.iter().map(|(d, _)| *d).collect();
        let tags = self.tags_of(vol, &digests, false)?;
        let now = crate::stamp::now();
        let mut by_digest: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut expired: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for t in tags.iter().filter(|t| !t.digest.is_empty()) {
            let into = match t.expired_at(now) {
                true => &mut expired,
                false => &mut by_digest,
            };
            into.entry(&t.digest).or_default().push(t.tag.clone());
        }
        let infos = crate::store::in_parallel(&live, self.concurrency(), |(d, size)| {
            self.version_info(vol, d, *size)
        })?;
        let mut out: Vec<VersionInfo> = infos.into_iter().flatten().collect();
        for v in &mut out {
            v.tags = by_digest.remove(v.digest.as_str()).unwrap_or_default();
            v.expired_tags = expired.remove(v.digest.as_str()).unwrap_or_default();
        }
        out.sort_by(|a, b| {
            (
                a.damaged.is_some(),
                std::cmp::Reverse(&a.created),
                &a.digest,
            )
                .cmp(&(
                    b.damaged.is_some(),
                    std::cmp::Reverse(&b.created),
                    &b.digest,
                ))
        });
        Ok((out, tags))
    }

    /// What a listing shows of one version: from its summary when there is a good
    /// one (`summary.rs`), else from its manifest; `None` if it was deleted since the
    /// listing. `listed_bytes` is the manifest's size as listed.
    fn version_info(
        &self,
        vol: &VolumeName,
        d: &Digest,
        listed_bytes: u64,
    ) -> Result<Option<VersionInfo>> {
        let damaged = |why: String| VersionInfo {
            digest: d.to_string(),
            created: String::new(),
            bytes: 0,
            files: 0,
            new_bytes: 0,
            source: String::new(),
            pushed_by: String::new(),
            labels: Default::default(),
            tags: Vec::new(),
            expired_tags: Vec::new(),
            damaged: Some(why),
        };
        if let Some(s) = self.summary(vol, d)? {
            if s.manifest_bytes != listed_bytes {
                return Ok(Some(damaged(format!(
                    "{} is damaged: it is {listed_bytes} bytes, and was {} when sealed",
                    manifest_key(vol, d),
                    s.manifest_bytes
                ))));
            }
            return Ok(Some(VersionInfo {
                digest: s.digest,
                created: s.created,
                bytes: s.stats.bytes,
                files: s.stats.files,
                new_bytes: s.stats.new_bytes,
                source: s.source,
                pushed_by: s.pushed_by,
                labels: s.labels,
                tags: Vec::new(),
                expired_tags: Vec::new(),
                damaged: None,
            }));
        }
        match self.manifest(vol, d) {
            Ok(m) => Ok(Some(VersionInfo {
                digest: m.digest,
                created: m.created,
                bytes: m.stats.bytes,
                files: m.stats.files,
                new_bytes: m.stats.new_bytes,
                source: m.provenance.source,
                pushed_by: m.provenance.pushed_by,
                labels: m.provenance.labels,
                tags: Vec::new(),
                expired_tags: Vec::new(),
                damaged: None,
            })),
            // Deleted since the listing: not a version any more.
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) if matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::Format) => {
                Ok(Some(damaged(e.message().to_string())))
            }
            Err(e) => Err(e),
        }
    }

    /// Every tag of a volume, sorted by name; a damaged one, or one pointing at a
    /// version that does not exist (or is in the trash), is listed with `damaged` set.
    pub fn tags(&self, vol: &VolumeName) -> Result<Vec<TagFile>> {
        let digests = self.live_digests(vol)?;
        self.tags_of(vol, &digests, false)
    }

    /// `tags`, and the removed tags too (their history, for undoing the removal).
    pub fn tags_with_removed(&self, vol: &VolumeName) -> Result<Vec<TagFile>> {
        let digests = self.live_digests(vol)?;
        self.tags_of(vol, &digests, true)
    }

    fn tags_of(&self, vol: &VolumeName, digests: &[Digest], removed: bool) -> Result<Vec<TagFile>> {
        let prefix = tag_prefix(vol);
        let mut out = Vec::new();
        for o in self.store().list(&prefix)? {
            let Some(name) = o.key.strip_prefix(&prefix) else {
                continue;
            };
            let Ok(tag) = Name::parse("tag", name) else {
                continue;
            };
            let Some(bytes) = self.store().get(&o.key)? else {
                continue;
            };
            let t = match parse_tag(&o.key, &bytes) {
                Ok(t) if t.removed() => match removed {
                    true => t,
                    false => continue,
                },
                Ok(mut t) => {
                    if !Digest::parse(&t.digest).is_ok_and(|d| digests.contains(&d)) {
                        t.damaged = Some(format!(
                            "points at {}, which is not a version of {vol}",
                            t.digest
                        ));
                    }
                    t
                }
                Err(e) => TagFile {
                    tag: tag.to_string(),
                    digest: String::new(),
                    history: salvage_history(&bytes),
                    expires: None,
                    damaged: Some(e.message().to_string()),
                },
            };
            out.push(t);
        }
        out.sort_by(|a, b| a.tag.cmp(&b.tag));
        Ok(out)
    }

    /// A tag file, or `None` if the tag does not exist (a removed one has an empty
    /// `digest`); one that cannot be parsed, or names no valid digest, is an error of
    /// kind `Corrupt`.
    pub fn tag(&self, vol: &VolumeName, tag: &Name) -> Result<Option<TagFile>> {
        let key = tag_key(vol, tag);
        match self.store().get(&key)? {
            None => Ok(None),
            Some(b) => parse_tag(&key, &b).map(Some),
        }
    }

    /// The one answer for a volume that does not exist, whichever command named it:
    /// with the nearest name among the volumes this key may read, if one is near.
    pub fn unknown_volume(&self, vol: &VolumeName) -> Error {
        let known: Vec<String> = self
            .volumes(None)
            .unwrap_or_default()
            .iter()
            .map(|v| v.to_string())
            .collect();
        let typed = vol.to_string();
        let message = match crate::suggest::nearest(&typed, known.iter().map(String::as_str)) {
            Some(near) => format!("no volume {vol}; did you mean {near}?"),
            None => format!("no volume {vol}"),
        };
        Error::not_found(message).hint("list volumes with `sealvol volume ls`")
    }

    /// `Ok` if the volume has a version (in the trash or not), the unknown-volume error
    /// if it has none.
    pub fn require_volume(&self, vol: &VolumeName) -> Result<()> {
        match self.version_digests(vol)?.is_empty() {
            true => Err(self.unknown_volume(vol)),
            false => Ok(()),
        }
    }

    /// `e` for a volume that exists; the unknown-volume error for one that does not,
    /// so a misspelt volume is never reported as a missing tag or version of it.
    pub(crate) fn or_unknown_volume(&self, vol: &VolumeName, e: Error) -> Error {
        match self.version_digests(vol) {
            Ok(d) if d.is_empty() => self.unknown_volume(vol),
            _ => e,
        }
    }

    /// No tag `tag` on an existing volume: with the nearest of its tags, if one is near.
    pub(crate) fn unknown_tag(&self, vol: &VolumeName, tag: &Name) -> Error {
        let known: Vec<String> = self
            .tags(vol)
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.tag)
            .collect();
        let message = match crate::suggest::nearest(tag.as_str(), known.iter().map(String::as_str))
        {
            Some(near) => format!("no tag {tag} on vol:{vol}; did you mean {near}?"),
            None => format!("no tag {tag} on vol:{vol}"),
        };
        Error::not_found(message).hint(format!("list tags with `sealvol volume tags {vol}`"))
    }

    /// Resolves a ref to the digest of an existing version.
    pub fn resolve(&self, r: &Ref) -> Result<Digest> {
        let vol = &r.volume;
        match &r.target {
            Target::Digest(DigestSpec::Full(d)) => {
                if self.store().size(&manifest_key(vol, d))?.is_none() {
                    return Err(self.or_unknown_volume(vol, missing_version(r)));
                }
                if let Some(t) = self.in_trash(vol, d)? {
                    return Err(self.trashed_error(vol, d, &t));
                }
                Ok(*d)
            }
            Target::Digest(spec @ DigestSpec::Prefix(_)) => {
                let all = self.version_digests(vol)?;
                if all.is_empty() {
                    return Err(self.unknown_volume(vol));
                }
                let trashed = self.trashed_digests(vol)?;
                let mut found: Vec<Digest> = all
                    .iter()
                    .filter(|d| spec.matches(d) && !trashed.contains(d))
                    .copied()
                    .collect();
                found.sort();
                match found.len() {
                    0 => match trashed.iter().find(|d| spec.matches(d)) {
                        Some(d) => match self.in_trash(vol, d)? {
                            Some(t) => Err(self.trashed_error(vol, d, &t)),
                            None => Err(missing_version(r)),
                        },
                        None => Err(missing_version(r)),
                    },
                    1 => Ok(found[0]),
                    _ => Err(ambiguous_prefix(spec, vol, &found, "")),
                }
            }
            Target::Tag(tag) => {
                let t = self
                    .tag(vol, tag)
                    // Only a damaged tag is repair's to restore; a refusal (a key that
                    // may not read it) or an unreachable store keeps its own hint.
                    .map_err(|e| match e.kind() {
                        ErrorKind::Corrupt => e.hint(format!(
                            "`sealvol repair` restores it from its history, or set it again with `sealvol volume tag {vol}@DIGEST {tag}`"
                        )),
                        _ => e,
                    })?
                    .ok_or_else(|| self.or_unknown_volume(vol, self.unknown_tag(vol, tag)))?;
                if t.removed() {
                    let last = t.history.last();
                    return Err(Error::not_found(format!(
                        "tag {tag} of vol:{vol} was removed{}",
                        last.map(|m| format!(" by {} on {}", m.by, crate::stamp::to_minute(&m.at)))
                            .unwrap_or_default()
                    ))
                    .hint(format!(
                        "its history: `sealvol volume tags {vol} --history`; point it again with `sealvol volume tag {vol}@DIGEST {tag}`"
                    )));
                }
                if t.expired_at(crate::stamp::now()) {
                    return Err(Error::not_found(format!(
                        "tag {tag} of vol:{vol} expired at {}",
                        t.expires.as_deref().unwrap_or("an unreadable time")
                    ))
                    .hint(format!(
                        "it pointed at {}; point it again with `sealvol volume tag {vol}@DIGEST {tag}` (with --expires for another window)",
                        t.digest
                    )));
                }
                let d = Digest::parse(&t.digest)?;
                if let Some(t) = self.in_trash(vol, &d)? {
                    return Err(self.trashed_error(vol, &d, &t).hint(format!(
                        "tag {tag} points at a version in the trash: restore it with `sealvol volume restore {vol}@{}`, or move the tag",
                        d.short(16)
                    )));
                }
                if self.store().size(&manifest_key(vol, &d))?.is_none() {
                    return Err(Error::corrupt(format!(
                        "tag {tag} of {vol} points at {d}, which is not a version of {vol}"
                    ))
                    .hint(format!(
                        "`sealvol repair` moves it back to the last version it held that exists, or set it with `sealvol volume tag {vol}@DIGEST {tag}`"
                    )));
                }
                Ok(d)
            }
            Target::Latest => {
                let versions = self.versions(vol)?;
                let v =
                    versions
                        .iter()
                        .find(|v| v.damaged.is_none())
                        .ok_or_else(|| match versions.is_empty() {
                            true => self.or_unknown_volume(
                                vol,
                                Error::not_found(format!("every version of {vol} is in the trash"))
                                    .hint(format!(
                                        "restore one: `sealvol volume trash {vol}` lists them"
                                    )),
                            ),
                            false => Error::corrupt(format!("every version of {vol} is damaged")),
                        })?;
                Digest::parse(&v.digest)
            }
        }
    }
}

/// A tag file, checked: valid JSON naming a valid digest.
pub(super) fn parse_tag(key: &str, bytes: &[u8]) -> Result<TagFile> {
    let mut t: TagFile = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt(format!("{key} is damaged: {e}")))?;
    let removal = t.digest.is_empty() && t.history.last().is_some_and(|m| m.to.is_empty());
    if !removal && Digest::parse(&t.digest).is_err() {
        return Err(Error::corrupt(format!(
            "{key} is damaged: {:?} is not a digest",
            t.digest
        )));
    }
    t.damaged = None;
    Ok(t)
}

/// What can be read of a damaged tag file's history: every complete move, in order, up
/// to the first one that is cut or unreadable. A tag file is written whole by one
/// rename, so damage is from outside (a disk, a hand edit), and a cut file keeps its
/// oldest moves.
pub fn salvage_history(bytes: &[u8]) -> Vec<TagMove> {
    let text = String::from_utf8_lossy(bytes);
    let Some(start) = text
        .find("\"history\"")
        .and_then(|h| text[h..].find('[').map(|b| h + b + 1))
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let (mut depth, mut in_string, mut escaped, mut from) = (0usize, false, false, 0usize);
    for (i, ch) in text[start..].char_indices() {
        let i = start + i;
        if in_string {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '{' => {
                if depth == 0 {
                    from = i;
                }
                depth += 1;
            }
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    match serde_json::from_str::<TagMove>(&text[from..=i]) {
                        Ok(m) if m.to.is_empty() || Digest::parse(&m.to).is_ok() => out.push(m),
                        _ => break,
                    }
                }
            }
            ']' if depth == 0 => break,
            _ => {}
        }
    }
    out
}

pub(super) fn missing_version(r: &Ref) -> Error {
    Error::not_found(format!("no version {r}")).hint(format!(
        "list versions with `sealvol volume versions {}`",
        r.volume
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_tag_file_keeps_its_complete_moves() {
        let d = |n: u8| format!("b3:{}", hex::encode([n; 32]));
        let file = TagFile {
            tag: "prod".into(),
            digest: d(3),
            history: (1..=3)
                .map(|n| TagMove {
                    from: (n > 1).then(|| d(n - 1)),
                    to: d(n),
                    at: "2026-12-01T00:00:00.000Z".into(),
                    by: "a \"quoted\" {user}".into(),
                    expires: None,
                })
                .collect(),
            expires: None,
            damaged: None,
        };
        let text = serde_json::to_string_pretty(&file).unwrap();
        assert_eq!(salvage_history(text.as_bytes()), file.history);
        let cut = &text[..text.rfind("\"to\"").unwrap()];
        assert_eq!(salvage_history(cut.as_bytes()), file.history[..2]);
        assert!(salvage_history(b"{\"tag\":").is_empty());
        assert!(salvage_history(b"").is_empty());
        // A move whose digest is garbage ends the salvage there.
        let bad = text.replacen(&d(2), "b3:nothex", 1);
        assert_eq!(salvage_history(bad.as_bytes()).len(), 1);
    }
}
