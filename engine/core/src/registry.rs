//! Namespaces, volumes, sealed versions and tags: sealing a version (its manifest),
//! reading manifests, resolving refs and moving tags by compare-and-swap with an
//! append-only history.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::{Entry, version_digest};
use crate::error::{Error, ErrorKind, Result};
use crate::refs::{Digest, DigestSpec, Name, Ref, Target, VolumeName};
use crate::repo::{Repository, json_error, manifest_key, manifest_prefix, tag_key, tag_prefix};

/// Newest manifest format this build writes.
pub const MANIFEST_FORMAT: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Provenance {
    /// Where the bytes came from: `file:///abs/path`, later `hf://…`, `s3://…`.
    pub source: String,
    /// The source's own revision (an HF commit, ETags), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// `user@host` of the process that sealed the version.
    pub pushed_by: String,
    /// When a sync listed its source (RFC 3339); absent for a push.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listed: Option<String>,
    /// Each synced file's version at the source (ETag, version id), by path.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub objects: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct VersionStats {
    pub bytes: u64,
    pub files: u64,
    pub chunks: u64,
    /// Bytes of chunks this version added to the repository when it was sealed.
    pub new_bytes: u64,
    pub new_chunks: u64,
}

/// One sealed version: `manifests/<ns>/<vol>/<digest>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub volume: String,
    pub digest: String,
    /// RFC 3339, UTC.
    pub created: String,
    pub provenance: Provenance,
    pub stats: VersionStats,
    pub entries: Vec<Entry>,
}

impl Manifest {
    pub fn digest(&self) -> Result<Digest> {
        Digest::parse(&self.digest)
    }
}

/// One move of a tag; the first has no `from`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct TagMove {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub to: String,
    pub at: String,
    pub by: String,
}

/// `tags/<ns>/<vol>/<tag>`: where the tag points now and how it got there.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TagFile {
    pub tag: String,
    pub digest: String,
    pub history: Vec<TagMove>,
}

/// A version just sealed: its digest, whether it is new, and what happened to each tag.
#[derive(Debug, Clone)]
pub struct Sealed {
    pub digest: Digest,
    /// False when an identical version was already sealed (by anyone).
    pub new: bool,
    pub tags: Vec<TagChange>,
}

/// One tag moved by a push or sync, as the compare-and-swap did it.
#[derive(Debug, Clone, Serialize)]
pub struct TagChange {
    pub tag: String,
    /// The digest the tag pointed at before; `None` for a new tag.
    pub from: Option<String>,
    pub to: String,
    /// False when the tag already pointed at `to`.
    pub moved: bool,
}

/// What a tag move did, from the compare-and-swap itself (not from a read before it,
/// which a concurrent mover can make stale).
#[derive(Debug, Clone)]
pub struct TagMoved {
    pub file: TagFile,
    /// The digest the move replaced; `None` for a new tag.
    pub from: Option<String>,
    /// False when the tag already pointed there and nothing was written.
    pub moved: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct VersionInfo {
    pub digest: String,
    pub created: String,
    pub bytes: u64,
    pub files: u64,
    pub new_bytes: u64,
    pub source: String,
    pub pushed_by: String,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct VolumeInfo {
    pub namespace: String,
    pub name: String,
    pub versions: usize,
    pub tags: Vec<String>,
    pub latest_bytes: u64,
    pub updated: String,
}

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

pub fn whoami() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| user_of_uid());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{user}@{host}")
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

    /// Digests of every version of a volume (unordered).
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

    pub fn volume_infos(&self, namespace: Option<&Name>) -> Result<Vec<VolumeInfo>> {
        let mut out = Vec::new();
        for vol in self.volumes(namespace)? {
            let versions = self.versions(&vol)?;
            let tags = self.tags(&vol)?.into_iter().map(|t| t.tag).collect();
            let latest = versions.first();
            out.push(VolumeInfo {
                namespace: vol.namespace.to_string(),
                name: vol.name.to_string(),
                versions: versions.len(),
                tags,
                latest_bytes: latest.map(|v| v.bytes).unwrap_or(0),
                updated: latest.map(|v| v.created.clone()).unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// Versions of a volume, newest first, with the tags pointing at each.
    pub fn versions(&self, vol: &VolumeName) -> Result<Vec<VersionInfo>> {
        let mut by_digest: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for t in self.tags(vol)? {
            by_digest.entry(t.digest).or_default().push(t.tag);
        }
        let mut out = Vec::new();
        for d in self.version_digests(vol)? {
            let m = self.manifest(vol, &d)?;
            out.push(VersionInfo {
                digest: m.digest.clone(),
                created: m.created.clone(),
                bytes: m.stats.bytes,
                files: m.stats.files,
                new_bytes: m.stats.new_bytes,
                source: m.provenance.source.clone(),
                pushed_by: m.provenance.pushed_by.clone(),
                tags: by_digest.remove(&m.digest).unwrap_or_default(),
            });
        }
        out.sort_by(|a, b| b.created.cmp(&a.created).then(a.digest.cmp(&b.digest)));
        Ok(out)
    }

    pub fn tags(&self, vol: &VolumeName) -> Result<Vec<TagFile>> {
        let prefix = tag_prefix(vol);
        let mut out = Vec::new();
        for o in self.store().list(&prefix)? {
            let Some(name) = o.key.strip_prefix(&prefix) else {
                continue;
            };
            let Ok(tag) = Name::parse("tag", name) else {
                continue;
            };
            if let Some(t) = self.tag(vol, &tag)? {
                out.push(t);
            }
        }
        out.sort_by(|a, b| a.tag.cmp(&b.tag));
        Ok(out)
    }

    pub fn tag(&self, vol: &VolumeName, tag: &Name) -> Result<Option<TagFile>> {
        let key = tag_key(vol, tag);
        match self.store().get(&key)? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| Error::corrupt(format!("{key} is damaged: {e}"))),
        }
    }

    /// Resolves a ref to the digest of an existing version.
    pub fn resolve(&self, r: &Ref) -> Result<Digest> {
        let vol = &r.volume;
        match &r.target {
            Target::Digest(DigestSpec::Full(d)) => {
                if self.store().size(&manifest_key(vol, d))?.is_none() {
                    return Err(missing_version(r));
                }
                Ok(*d)
            }
            Target::Digest(spec @ DigestSpec::Prefix(p)) => {
                let mut found: Vec<Digest> = self
                    .version_digests(vol)?
                    .into_iter()
                    .filter(|d| spec.matches(d))
                    .collect();
                found.sort();
                match found.len() {
                    0 => Err(missing_version(r)),
                    1 => Ok(found[0]),
                    n => Err(Error::new(
                        ErrorKind::Ambiguous,
                        format!(
                            "digest prefix {p} matches {n} versions of {vol}: {}",
                            found
                                .iter()
                                .map(|d| d.short(16))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                    .hint("type more hex digits")),
                }
            }
            Target::Tag(tag) => {
                let t = self.tag(vol, tag)?.ok_or_else(|| {
                    Error::not_found(format!("no tag {tag} on vol:{vol}"))
                        .hint(format!("list tags with `sealvol volume tags {vol}`"))
                })?;
                Digest::parse(&t.digest)
                    .map_err(|_| Error::corrupt(format!("tag {tag} of {vol} is damaged")))
            }
            Target::Latest => {
                let versions = self.versions(vol)?;
                let v = versions.first().ok_or_else(|| {
                    Error::not_found(format!("volume {vol} has no versions"))
                        .hint("list volumes with `sealvol volume ls`")
                })?;
                Digest::parse(&v.digest)
            }
        }
    }

    /// Points `tag` at `to`. With `expected`, only if the tag currently points there
    /// (`Some(None)`: only if it does not exist yet), so a confirmation shown to a person
    /// cannot apply to a tag that moved meanwhile. Without it, retries lost races.
    pub fn move_tag(
        &self,
        vol: &VolumeName,
        tag: &Name,
        to: &Digest,
        expected: Option<Option<Digest>>,
    ) -> Result<TagMoved> {
        if self.store().size(&manifest_key(vol, to))?.is_none() {
            return Err(missing_version(&Ref::pinned(vol.clone(), *to)));
        }
        let key = tag_key(vol, tag);
        for _attempt in 0..16 {
            let current = self.store().get_versioned(&key)?;
            let (mut file, etag) = match &current {
                Some((bytes, etag)) => {
                    let f: TagFile = serde_json::from_slice(bytes)
                        .map_err(|e| Error::corrupt(format!("{key} is damaged: {e}")))?;
                    (f, Some(etag.clone()))
                }
                None => (
                    TagFile {
                        tag: tag.to_string(),
                        digest: String::new(),
                        history: Vec::new(),
                    },
                    None,
                ),
            };
            let from = (!file.digest.is_empty()).then(|| file.digest.clone());
            if let Some(want) = &expected {
                let want = want.map(|d| d.to_string());
                if want != from {
                    return Err(Error::new(
                        ErrorKind::Race,
                        format!(
                            "tag {tag} of {vol} now points at {}, not {}",
                            from.as_deref().unwrap_or("nothing"),
                            want.as_deref().unwrap_or("nothing")
                        ),
                    )
                    .hint("look at the tag again and decide anew"));
                }
            }
            if from.as_deref() == Some(&to.to_string()) {
                return Ok(TagMoved {
                    file,
                    from,
                    moved: false,
                });
            }
            file.digest = to.to_string();
            file.history.push(TagMove {
                from: from.clone(),
                to: to.to_string(),
                at: now_rfc3339(),
                by: whoami(),
            });
            let bytes = serde_json::to_vec_pretty(&file).map_err(json_error)?;
            match self.store().put_if_match(&key, &bytes, etag.as_ref()) {
                Ok(()) => {
                    return Ok(TagMoved {
                        file,
                        from,
                        moved: true,
                    });
                }
                Err(e) if e.kind() == ErrorKind::Race && expected.is_none() => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::new(
            ErrorKind::Race,
            format!("tag {tag} of {vol} keeps changing under us"),
        )
        .hint("try again in a moment"))
    }
}

impl Repository {
    /// Seals a version: writes its manifest (after a barrier: everything the manifest
    /// names is durable first, and every file it names must already be stored), then
    /// moves `tags` to it.
    pub fn seal(
        &self,
        volume: &VolumeName,
        tags: &[Name],
        entries: Vec<Entry>,
        stats: VersionStats,
        provenance: Provenance,
    ) -> Result<Sealed> {
        let digest = version_digest(&entries);
        let manifest = Manifest {
            format: MANIFEST_FORMAT,
            volume: volume.to_string(),
            digest: digest.to_string(),
            created: now_rfc3339(),
            provenance,
            stats,
            entries,
        };
        let bytes = serde_json::to_vec(&manifest).map_err(json_error)?;
        self.barrier()?;
        let sealed_new = self
            .store()
            .put_if_absent(&manifest_key(volume, &digest), &bytes)?;
        self.barrier()?;
        let mut changes = Vec::with_capacity(tags.len());
        for tag in tags {
            let m = self.move_tag(volume, tag, &digest, None)?;
            changes.push(TagChange {
                tag: tag.to_string(),
                from: m.from,
                to: digest.to_string(),
                moved: m.moved,
            });
        }
        Ok(Sealed {
            digest,
            new: sealed_new,
            tags: changes,
        })
    }
}

/// The login name of this process's user, from the password database.
fn user_of_uid() -> String {
    // SAFETY: getuid cannot fail; getpwuid_r writes only into the buffers we pass.
    unsafe {
        let uid = libc::getuid();
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out);
        if rc == 0
            && !out.is_null()
            && !pwd.pw_name.is_null()
            && let Ok(name) = std::ffi::CStr::from_ptr(pwd.pw_name).to_str()
        {
            return name.to_string();
        }
        format!("uid{uid}")
    }
}

fn missing_version(r: &Ref) -> Error {
    Error::not_found(format!("no version {r}")).hint(format!(
        "list versions with `sealvol volume versions {}`",
        r.volume
    ))
}
