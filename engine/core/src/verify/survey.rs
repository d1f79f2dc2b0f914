//! The survey: every object of the repository (or of one version) as found, for the
//! report and for `repair`.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::packs::{PackFacts, Packs, choose, survey_packs};
use super::read_data::ReadData;
use crate::digest::{Entry, Hash};
use crate::error::{ErrorKind, Result};
use crate::manifest::Manifest;
use crate::objects::{FileObject, PackEntry, PackId};
use crate::progress::Progress;
use crate::read::Chunks as _;
use crate::refs::{Digest, Name, VolumeName};
use crate::registry::TagFile;
use crate::repo::{Kind, Repository};

/// An index object as found.
#[derive(Debug, Clone)]
pub enum IndexFacts {
    Ok(Vec<PackEntry>),
    Damaged(String),
}

/// A tag as found.
#[derive(Debug, Clone)]
pub struct TagFacts {
    pub volume: VolumeName,
    pub tag: Name,
    pub key: String,
    /// The tag file, or why it cannot be read (then `salvaged` holds what could be).
    pub file: std::result::Result<TagFile, String>,
    pub salvaged: Vec<crate::registry::TagMove>,
}

/// Everything verify found, for its report and for `repair`.
#[derive(Default)]
pub struct Survey {
    pub config: Option<String>,
    pub packs: BTreeMap<PackId, PackFacts>,
    pub indexes: BTreeMap<PackId, IndexFacts>,
    /// Chunk lists by file hash: the list, or why it cannot be read.
    pub files: BTreeMap<Hash, std::result::Result<FileObject, String>>,
    pub manifests: Vec<(VolumeName, Digest, std::result::Result<Manifest, String>)>,
    pub tags: Vec<TagFacts>,
    /// Objects whose names are not what their folder holds.
    pub strays: Vec<String>,
    /// Versions whose damaged manifest `repair` moved to quarantine, and that no push
    /// has sealed again: (volume, digest, where the manifest is).
    pub lost: Vec<(VolumeName, Digest, String)>,
    /// Packs repair moved to quarantine.
    pub quarantined_packs: HashSet<PackId>,
    /// Packs a garbage collection round names (condemned, being swept, or swept).
    pub collected_packs: HashSet<PackId>,
    pub records: Vec<(PackId, Hash)>,
    /// Trash records that cannot be read: (volume, digest, why).
    pub trash: Vec<(VolumeName, Digest, String)>,
    /// Chunk lists recorded as failing their proof (`damage/files/`).
    pub list_records: Vec<Hash>,
    /// Chunk lists proven in this survey by reading the chunks they name.
    pub proven_lists: HashSet<Hash>,
    pub bytes_read: u64,
    pub packs_read: u64,
    pub read_data: String,
    /// The whole repository (false: one version and what it uses).
    pub whole: bool,
}

impl Survey {
    fn take(&mut self, p: Packs) {
        self.packs = p.packs;
        self.bytes_read = p.bytes_read;
        self.packs_read = p.packs_read;
        self.records = p.records;
    }

    /// The entries a pack is known to hold: its trailer's, else its index's.
    pub fn entries(&self, pack: &PackId) -> Option<&[PackEntry]> {
        match (
            self.packs.get(pack).map(|p| &p.trailer),
            self.indexes.get(pack),
        ) {
            (Some(Ok(e)), _) => Some(e),
            (_, Some(IndexFacts::Ok(e))) => Some(e),
            _ => None,
        }
    }

    /// Why the copy a chunk list names cannot be used, and which object is to blame.
    pub fn copy_problem(&self, pack: &PackId, entry: &PackEntry) -> Option<(String, String)> {
        let pack_name = Kind::Pack.name(pack);
        let Some(facts) = self.packs.get(pack) else {
            let why = match self.quarantined_packs.contains(pack) {
                true => {
                    "is in quarantine: repair moved it there, damaged, after copying out its healthy chunks; what it held only there is lost"
                }
                false => "is missing",
            };
            return Some((pack_name, why.into()));
        };
        if let Some(why) = facts.bad.get(&(entry.offset, entry.hash)) {
            return Some((pack_name, why.clone()));
        }
        match self.entries(pack) {
            None => Some((
                pack_name,
                "its trailer and its index are both damaged".into(),
            )),
            Some(entries) if !entries.contains(entry) => Some((
                String::new(),
                format!(
                    "names chunk {} at offset {}, which pack {} does not hold",
                    entry.hash.hex(),
                    entry.offset,
                    pack.hex()
                ),
            )),
            Some(_) => None,
        }
    }

    /// Whether the copy at `entry` in `pack` is known good (present, in its pack's
    /// table, not damaged).
    pub fn copy_ok(&self, pack: &PackId, entry: &PackEntry) -> bool {
        self.copy_problem(pack, entry).is_none()
    }
}

/// Surveys the repository. `config` is the damage of `sealvol.repo`, if it was opened
/// despite it.
/// With `record`, every bad copy it reads is written down as a damage record.
pub fn survey_all(
    repo: &Repository,
    read: ReadData,
    config: Option<String>,
    record: bool,
    progress: &dyn Progress,
) -> Result<Survey> {
    let mut s = Survey {
        config,
        read_data: read.describe(),
        whole: true,
        ..Survey::default()
    };
    let listed = repo.list(Kind::Pack)?;
    let mut present = Vec::new();
    for l in listed {
        match l.id {
            Some(id) if l.name == Kind::Pack.name(&id) => present.push((id, l.size)),
            _ => s.strays.push(l.name),
        }
    }
    let chosen = choose(&present, read);
    s.take(survey_packs(
        repo, &present, &chosen, None, record, progress,
    )?);
    for l in repo.list(Kind::Index)? {
        let Some(id) = l.id.filter(|id| l.name == Kind::Index.name(id)) else {
            s.strays.push(l.name);
            continue;
        };
        s.indexes.insert(id, index_facts(repo, &id)?);
    }
    for l in repo.list(Kind::File)? {
        let Some(hash) = l.id.filter(|h| l.name == Kind::File.name(h)) else {
            s.strays.push(l.name);
            continue;
        };
        s.files.insert(hash, file_facts(repo, &hash)?);
    }
    s.list_records = recorded_lists(repo, &mut s.files)?;
    if read == ReadData::All {
        let all: Vec<Hash> = s.files.keys().copied().collect();
        prove_lists(repo, &mut s, &all, record, progress)?;
    }
    for vol in repo.volumes(None)? {
        for digest in repo.version_digests(&vol)? {
            let m = manifest_facts(repo, &vol, &digest)?;
            s.manifests.push((vol.clone(), digest, m));
        }
        s.tags.extend(tag_facts(repo, &vol)?);
    }
    let small = small_files(repo, &mut s);
    if read == ReadData::All {
        prove_lists(repo, &mut s, &small, record, progress)?;
    }
    (s.lost, s.quarantined_packs) = in_quarantine(repo, &s.manifests)?;
    s.trash = repo.damaged_trash()?;
    s.collected_packs = crate::gc::rounds::list(repo)?
        .iter()
        .flat_map(|r| r.round.pack_ids().collect::<Vec<_>>())
        .collect();
    progress.finish();
    Ok(s)
}

/// What repair moved to quarantine that still matters: manifests whose version has not
/// been sealed again, and packs (by id).
#[allow(clippy::type_complexity)]
fn in_quarantine(
    repo: &Repository,
    live: &[(VolumeName, Digest, std::result::Result<Manifest, String>)],
) -> Result<(Vec<(VolumeName, Digest, String)>, HashSet<PackId>)> {
    let mut out: Vec<(VolumeName, Digest, String)> = Vec::new();
    let mut packs = HashSet::new();
    for o in repo.store().list(crate::quarantine::QUARANTINE)? {
        let mut parts = o.key.split('/').skip(2);
        if o.key.split('/').nth(2) == Some("packs")
            && let Some(id) = o.key.rsplit('/').next().and_then(Hash::parse_hex)
        {
            packs.insert(id);
            continue;
        }
        let (Some("manifests"), Some(ns), Some(name), Some(hex), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            continue;
        };
        let (Ok(vol), Ok(digest)) = (
            VolumeName::parse(&format!("{ns}/{name}")),
            Digest::parse(hex),
        ) else {
            continue;
        };
        if !live.iter().any(|(v, d, _)| *v == vol && *d == digest)
            && !out.iter().any(|(v, d, _)| *v == vol && *d == digest)
        {
            out.push((vol, digest, o.key));
        }
    }
    Ok((out, packs))
}

/// Surveys one version: its manifest, its chunk lists, every chunk they name (read and
/// hashed), the packs those lie in, and the tags that point at it.
pub fn survey_version(
    repo: &Repository,
    vol: &VolumeName,
    digest: &Digest,
    progress: &dyn Progress,
) -> Result<Survey> {
    let mut s = Survey {
        read_data: "this version".into(),
        ..Survey::default()
    };
    let m = manifest_facts(repo, vol, digest)?;
    let mut hashes = BTreeMap::new();
    let mut small = crate::small::SmallFiles::none();
    if let Ok(m) = &m {
        small = m.small_files();
        for e in &m.entries {
            if let Entry::File { hash, size, .. } = e {
                hashes.insert(*hash, *size);
            }
        }
    }
    s.manifests.push((vol.clone(), *digest, m));
    let mut wanted: HashMap<PackId, HashSet<(u64, Hash)>> = HashMap::new();
    for (h, size) in hashes {
        let f = match small.list(repo, &h, size) {
            Some(obj) => Ok(obj),
            None => file_facts(repo, &h)?,
        };
        if let Ok(obj) = &f {
            for c in &obj.chunks {
                wanted
                    .entry(obj.packs[c.pack as usize])
                    .or_default()
                    .insert((c.entry.offset, c.entry.hash));
            }
        }
        s.files.insert(h, f);
    }
    s.list_records = recorded_lists(repo, &mut s.files)?;
    let health = repo.health()?;
    let present: Vec<(PackId, u64)> = wanted
        .keys()
        .filter_map(|p| health.pack_size(p).map(|size| (*p, size)))
        .collect();
    let chosen: HashSet<PackId> = present.iter().map(|(p, _)| *p).collect();
    s.take(survey_packs(
        repo,
        &present,
        &chosen,
        Some(&wanted),
        true,
        progress,
    )?);
    for p in wanted.keys() {
        s.indexes.insert(*p, index_facts(repo, p)?);
    }
    let files: Vec<Hash> = s.files.keys().copied().collect();
    prove_lists(repo, &mut s, &files, true, progress)?;
    s.tags = tag_facts(repo, vol)?
        .into_iter()
        .filter(|t| match &t.file {
            Ok(f) => f.digest == digest.to_string(),
            Err(_) => t
                .salvaged
                .last()
                .is_some_and(|m| m.to == digest.to_string()),
        })
        .collect();
    progress.finish();
    Ok(s)
}

/// The chunk lists recorded as failing their proof; those among `files` count as
/// damaged until a survey that reads their data proves them again.
fn recorded_lists(
    repo: &Repository,
    files: &mut BTreeMap<Hash, std::result::Result<FileObject, String>>,
) -> Result<Vec<Hash>> {
    let mut out = Vec::new();
    for (hash, record) in repo.list_damage()? {
        if let Some(f @ Ok(_)) = files.get_mut(&hash) {
            let why = record.map(|r| r.problem).unwrap_or_else(|| {
                format!(
                    "{} was found failing its proof (damage/files/{})",
                    Kind::File.name(&hash),
                    hash.hex()
                )
            });
            *f = Err(why);
        }
        out.push(hash);
    }
    Ok(out)
}

/// Proves chunk lists `which` by reading the chunks each names, in order, and hashing
/// them into the file's hash: a list that names other bytes than its file's (whatever
/// its own proof says) is damaged, and recorded as such when `record`. A list whose
/// chunks cannot all be read is left to the pack survey, which names the bad copy.
/// A recorded list that proves is kept in `proven_lists`, for repair to clear.
fn prove_lists(
    repo: &Repository,
    s: &mut Survey,
    which: &[Hash],
    record: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let recorded: HashSet<Hash> = s.list_records.iter().copied().collect();
    let mut todo: Vec<(Hash, FileObject)> = Vec::new();
    for h in which {
        match s.files.get(h) {
            Some(Ok(obj)) => todo.push((*h, obj.clone())),
            // Recorded as failing: read again with what it says, to see if it holds.
            Some(Err(_)) if recorded.contains(h) => {
                if let Ok(obj) = repo.file_object(h) {
                    todo.push((*h, obj));
                }
            }
            _ => {}
        }
    }
    let bytes: u64 = todo.iter().map(|(_, o)| o.size).sum();
    progress.begin("prove", bytes, todo.len() as u64);
    for (h, obj) in todo {
        match crate::read::Origin(repo).prove_by_reading(&obj) {
            Ok(_) => {
                if recorded.contains(&h) {
                    s.files.insert(h, Ok(obj));
                }
                s.proven_lists.insert(h);
            }
            Err(e) if crate::proof::is_unproven(&e) => {
                if record {
                    repo.record_list_damage(&h, e.message(), "verify");
                    if !s.list_records.contains(&h) {
                        s.list_records.push(h);
                    }
                }
                s.files.insert(h, Err(e.message().to_string()));
            }
            Err(e) if e.kind() == ErrorKind::Corrupt => {}
            Err(e) => return Err(e),
        }
        progress.file_done();
    }
    Ok(())
}

fn index_facts(repo: &Repository, id: &PackId) -> Result<IndexFacts> {
    Ok(match repo.index(id) {
        Ok(Some(e)) => IndexFacts::Ok(e),
        Ok(None) => return Ok(IndexFacts::Damaged("is missing".into())),
        Err(e) if e.kind() == ErrorKind::Corrupt => IndexFacts::Damaged(e.message().to_string()),
        Err(e) => return Err(e),
    })
}

/// Small files of the surveyed versions that have no chunk list: their lists as
/// readers make them from the versions' small packs (`small.rs`), added to the
/// survey's lists. Returns their hashes.
fn small_files(repo: &Repository, s: &mut Survey) -> Vec<Hash> {
    let mut added = Vec::new();
    for (_, _, m) in &s.manifests {
        let Ok(m) = m else { continue };
        let small = m.small_files();
        if small.is_empty() {
            continue;
        }
        for e in &m.entries {
            if let Entry::File { hash, size, .. } = e
                && !s.files.contains_key(hash)
                && let Some(obj) = small.list(repo, hash, *size)
            {
                s.files.insert(*hash, Ok(obj));
                added.push(*hash);
            }
        }
    }
    added
}

fn file_facts(repo: &Repository, hash: &Hash) -> Result<std::result::Result<FileObject, String>> {
    Ok(match repo.file_object(hash) {
        Ok(o) => Ok(o),
        Err(e) if e.kind() == ErrorKind::Corrupt => Err(e.message().to_string()),
        Err(e) => return Err(e),
    })
}

fn manifest_facts(
    repo: &Repository,
    vol: &VolumeName,
    digest: &Digest,
) -> Result<std::result::Result<Manifest, String>> {
    Ok(match repo.manifest(vol, digest) {
        Ok(m) => Ok(m),
        Err(e) if matches!(e.kind(), ErrorKind::Corrupt) => Err(e.message().to_string()),
        Err(e) => return Err(e),
    })
}

fn tag_facts(repo: &Repository, vol: &VolumeName) -> Result<Vec<TagFacts>> {
    let mut out = Vec::new();
    for t in repo.tags(vol)? {
        let Ok(tag) = Name::parse("tag", &t.tag) else {
            continue;
        };
        let key = crate::repo::tag_key(vol, &tag);
        let file = match (&t.damaged, t.digest.is_empty()) {
            (Some(why), true) => Err(why.clone()),
            _ => Ok(t.clone()),
        };
        out.push(TagFacts {
            volume: vol.clone(),
            tag,
            key,
            salvaged: t.history.clone(),
            file,
        });
    }
    Ok(out)
}
