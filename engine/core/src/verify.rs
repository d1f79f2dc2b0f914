//! Verify: a survey of every object the repository holds (its format file, packs and
//! their trailers, index objects, damage records, chunk lists, manifests, tags), then a
//! report that names each damaged object and exactly which versions, files and tags it
//! breaks, no more and no less, and the commands that fix it. `repair` acts on the same
//! survey.
//!
//! A chunk list is checked entry by entry against its packs' tables, and a chunk copy
//! against its hash when its pack is read (`ReadData`). A file is broken when a chunk
//! copy its list names cannot be used; other copies of the chunk do not save it (a
//! reader follows its list), but `repair` relinks it to one.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;

use crate::digest::{Entry, Hash};
use crate::error::{ErrorKind, Result};
use crate::objects::{self, FOOTER_LEN, FileObject, PackEntry, PackId};
use crate::progress::Progress;
use crate::read::MAX_RUN;
use crate::refs::{Digest, Name, VolumeName};
use crate::registry::{Manifest, TagFile};
use crate::repo::{Kind, Repository};

/// How much chunk data a verify reads and hashes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReadData {
    /// Structure only: names, trailers, indexes, chunk lists, manifests, tags, records.
    None,
    /// Every pack (`--read-data`).
    All,
    /// Packs whose id's first byte is `n - 1` modulo `t` (`--read-data-subset n/t`): `t`
    /// runs with `n` = 1…t read everything once.
    Subset { n: u32, t: u32 },
    /// A random share of the packs (`--read-data-subset 10%`).
    Share(f64),
    /// The default: a random sample of packs, at least 1/16 of the pack bytes and at least
    /// `SAMPLE_MIN` (so a small repository is read whole).
    Sample,
}

/// The least the default sample reads.
pub const SAMPLE_MIN: u64 = 256 << 20;

impl ReadData {
    /// Parses `--read-data-subset`: `N/T` (1 ≤ N ≤ T) or `P%` (0 < P ≤ 100).
    pub fn parse_subset(s: &str) -> Result<ReadData> {
        let bad = || {
            crate::Error::invalid(format!("--read-data-subset {s:?} is not N/T or P%")).hint(
                "for example 1/10 (the first of ten runs that together read every pack) or 5%",
            )
        };
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(bad());
            }
            return Ok(ReadData::Share(p / 100.0));
        }
        let (n, t) = s.split_once('/').ok_or_else(bad)?;
        let (n, t): (u32, u32) = (
            n.trim().parse().map_err(|_| bad())?,
            t.trim().parse().map_err(|_| bad())?,
        );
        if n == 0 || t == 0 || n > t || t > 256 {
            return Err(bad());
        }
        Ok(ReadData::Subset { n, t })
    }

    fn describe(&self) -> String {
        match self {
            ReadData::None => "none".into(),
            ReadData::All => "all".into(),
            ReadData::Subset { n, t } => format!("subset {n}/{t}"),
            ReadData::Share(p) => format!("{:.1}%", p * 100.0),
            ReadData::Sample => "sample".into(),
        }
    }
}

/// One pack as found.
#[derive(Debug, Clone)]
pub struct PackFacts {
    pub size: u64,
    /// Its trailer's entries, or why they cannot be read.
    pub trailer: std::result::Result<Vec<PackEntry>, String>,
    /// Copies that cannot be used, by (offset, chunk hash), with why.
    pub bad: BTreeMap<(u64, Hash), String>,
    /// Whether this run read and hashed its chunks.
    pub read: bool,
}

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
    pub records: Vec<(PackId, Hash)>,
    pub bytes_read: u64,
    pub packs_read: u64,
    pub read_data: String,
    /// The whole repository (false: one version and what it uses).
    pub whole: bool,
}

impl Survey {
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
            return Some((pack_name, "is missing".into()));
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
    survey_packs(repo, &mut s, &present, &chosen, None, record, progress)?;
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
    for vol in repo.volumes(None)? {
        for digest in repo.version_digests(&vol)? {
            let m = manifest_facts(repo, &vol, &digest)?;
            s.manifests.push((vol.clone(), digest, m));
        }
        s.tags.extend(tag_facts(repo, &vol)?);
    }
    s.lost = lost_versions(repo, &s.manifests)?;
    progress.finish();
    Ok(s)
}

/// Manifests in quarantine whose version has not been sealed again.
fn lost_versions(
    repo: &Repository,
    live: &[(VolumeName, Digest, std::result::Result<Manifest, String>)],
) -> Result<Vec<(VolumeName, Digest, String)>> {
    let mut out: Vec<(VolumeName, Digest, String)> = Vec::new();
    for o in repo.store().list(crate::repo::QUARANTINE)? {
        let mut parts = o.key.split('/').skip(2);
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
    Ok(out)
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
    let mut hashes = BTreeSet::new();
    if let Ok(m) = &m {
        for e in &m.entries {
            if let Entry::File { hash, .. } = e {
                hashes.insert(*hash);
            }
        }
    }
    s.manifests.push((vol.clone(), *digest, m));
    let mut wanted: HashMap<PackId, HashSet<(u64, Hash)>> = HashMap::new();
    for h in hashes {
        let f = file_facts(repo, &h)?;
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
    let health = repo.health()?;
    let present: Vec<(PackId, u64)> = wanted
        .keys()
        .filter_map(|p| health.pack_size(p).map(|size| (*p, size)))
        .collect();
    let chosen: HashSet<PackId> = present.iter().map(|(p, _)| *p).collect();
    survey_packs(
        repo,
        &mut s,
        &present,
        &chosen,
        Some(&wanted),
        true,
        progress,
    )?;
    for p in wanted.keys() {
        s.indexes.insert(*p, index_facts(repo, p)?);
    }
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

/// Which packs to read: all, a deterministic subset, or a random share.
fn choose(present: &[(PackId, u64)], read: ReadData) -> HashSet<PackId> {
    let total: u64 = present.iter().map(|(_, s)| s).sum();
    let share = |goal: u64| {
        let mut order: Vec<&(PackId, u64)> = present.iter().collect();
        // A fresh order each run, so repeated samples cover the repository.
        let seed = Hash::of(
            format!("{:?}{}", std::time::SystemTime::now(), std::process::id()).as_bytes(),
        );
        order.sort_by_key(|(id, _)| Hash::of(&[seed.0, id.0].concat()));
        let mut got = 0u64;
        order
            .into_iter()
            .take_while(|(_, size)| {
                let take = got < goal;
                got += size;
                take
            })
            .map(|(id, _)| *id)
            .collect()
    };
    match read {
        ReadData::None => HashSet::new(),
        ReadData::All => present.iter().map(|(p, _)| *p).collect(),
        ReadData::Subset { n, t } => present
            .iter()
            .filter(|(p, _)| p.0[0] as u32 % t == n - 1)
            .map(|(p, _)| *p)
            .collect(),
        ReadData::Share(p) => share((total as f64 * p).ceil() as u64),
        ReadData::Sample => share((total / 16).max(SAMPLE_MIN)),
    }
}

/// Trailers of `present` packs, and chunk data of `chosen` ones (only the `wanted`
/// copies, when given); damage records; bad copies recorded as they are found. Packs
/// are surveyed on every core: hashing is the cost once the data is in memory.
#[allow(clippy::too_many_arguments)]
fn survey_packs(
    repo: &Repository,
    s: &mut Survey,
    present: &[(PackId, u64)],
    chosen: &HashSet<PackId>,
    wanted: Option<&HashMap<PackId, HashSet<(u64, Hash)>>>,
    record: bool,
    progress: &dyn Progress,
) -> Result<()> {
    let records: HashSet<(PackId, Hash)> = repo
        .damage_records()?
        .into_iter()
        .map(|(p, c, _)| (p, c))
        .collect();
    let to_read: u64 = present
        .iter()
        .filter(|(p, _)| chosen.contains(p))
        .map(|(_, size)| size)
        .sum();
    progress.begin("verify", to_read, chosen.len() as u64);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4);
    let ctx = PackSurvey {
        repo,
        chosen,
        wanted,
        record,
        records: &records,
        progress,
    };
    let results: Vec<Result<Vec<(usize, PackFacts, u64)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(id, size)) = present.get(i) else {
                            return Ok(out);
                        };
                        let (facts, bytes) = ctx.pack(&id, size)?;
                        out.push((i, facts, bytes));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(crate::Error::new(ErrorKind::Io, "a verify thread panicked"))
                })
            })
            .collect()
    });
    for r in results {
        for (i, facts, bytes) in r? {
            s.bytes_read += bytes;
            s.packs_read += facts.read as u64;
            s.packs.insert(present[i].0, facts);
        }
    }
    s.records = records.into_iter().collect();
    Ok(())
}

/// What surveying one pack needs.
struct PackSurvey<'a> {
    repo: &'a Repository,
    chosen: &'a HashSet<PackId>,
    wanted: Option<&'a HashMap<PackId, HashSet<(u64, Hash)>>>,
    record: bool,
    records: &'a HashSet<(PackId, Hash)>,
    progress: &'a dyn Progress,
}

impl PackSurvey<'_> {
    /// One pack's facts, and the chunk bytes read.
    fn pack(&self, id: &PackId, size: u64) -> Result<(PackFacts, u64)> {
        let repo = self.repo;
        let trailer = read_trailer(repo, id, size);
        let mut facts = PackFacts {
            size,
            trailer: trailer.clone(),
            bad: BTreeMap::new(),
            read: false,
        };
        // The copies this pack should hold: from its trailer, else from its index.
        let entries = match trailer {
            Ok(e) => Some(e),
            Err(_) => match repo.index(id) {
                Ok(Some(e)) => Some(e),
                _ => None,
            },
        };
        for e in entries.iter().flatten() {
            if e.offset + e.stored_len as u64 > size {
                facts.bad.insert(
                    (e.offset, e.hash),
                    format!(
                        "is cut short at {size} bytes: chunk {} at offset {} is gone",
                        e.hash.hex(),
                        e.offset
                    ),
                );
            }
        }
        let mut bytes = 0;
        if self.chosen.contains(id)
            && let Some(entries) = &entries
        {
            let mut check: Vec<&PackEntry> = entries
                .iter()
                .filter(|e| e.offset + e.stored_len as u64 <= size)
                .filter(|e| {
                    self.wanted.is_none_or(|w| {
                        w.get(id)
                            .is_some_and(|set| set.contains(&(e.offset, e.hash)))
                    })
                })
                .collect();
            check.sort_by_key(|e| e.offset);
            for (e, ok) in hash_copies(repo, id, &check, &mut bytes, self.progress)? {
                if !ok {
                    let why = format!(
                        "chunk {} at offset {} fails its hash check",
                        e.hash.hex(),
                        e.offset
                    );
                    if self.record {
                        repo.record_damage(id, &e, "verify");
                    }
                    facts.bad.insert((e.offset, e.hash), why);
                }
            }
            facts.read = true;
            self.progress.file_done();
        }
        // What earlier reads found, unless this run read the copy and found it sound.
        for e in entries.iter().flatten() {
            if self.records.contains(&(*id, e.hash))
                && !facts.read
                && !facts.bad.contains_key(&(e.offset, e.hash))
            {
                facts.bad.insert(
                    (e.offset, e.hash),
                    format!("chunk {} at offset {} failed its hash check when it was read (damage record)", e.hash.hex(), e.offset),
                );
            }
        }
        Ok((facts, bytes))
    }
}

/// Reads the copies `check` (sorted by offset) in runs and says of each whether its
/// bytes hash to its name.
fn hash_copies(
    repo: &Repository,
    pack: &PackId,
    check: &[&PackEntry],
    bytes_read: &mut u64,
    progress: &dyn Progress,
) -> Result<Vec<(PackEntry, bool)>> {
    let mut out = Vec::with_capacity(check.len());
    let mut k = 0;
    while k < check.len() {
        let start = check[k].offset;
        let mut end = start + check[k].stored_len as u64;
        let mut n = 1;
        while k + n < check.len() {
            let e = check[k + n];
            if e.offset < end || e.offset + e.stored_len as u64 - start > MAX_RUN {
                break;
            }
            end = e.offset + e.stored_len as u64;
            n += 1;
        }
        let bytes = match repo.pack_range(pack, start, end - start) {
            Ok(b) => b,
            Err(e) if matches!(e.kind(), ErrorKind::Corrupt) || e.kind() == ErrorKind::Io => {
                // Unreadable here: every copy of the run counts as bad.
                for e in &check[k..k + n] {
                    out.push((**e, false));
                }
                k += n;
                continue;
            }
            Err(e) => return Err(e),
        };
        *bytes_read += bytes.len() as u64;
        progress.advance(bytes.len() as u64);
        for e in &check[k..k + n] {
            let at = (e.offset - start) as usize;
            let ok = Hash::of(&bytes[at..at + e.stored_len as usize]) == e.hash;
            out.push((**e, ok));
        }
        k += n;
    }
    Ok(out)
}

fn read_trailer(
    repo: &Repository,
    id: &PackId,
    size: u64,
) -> std::result::Result<Vec<PackEntry>, String> {
    let entries = match repo.read_pack_entries(id) {
        Ok(e) => e,
        Err(e) if size < (objects::PACK_MAGIC.len() + FOOTER_LEN) as u64 => {
            return Err(format!(
                "is too short to be a pack ({size} bytes): {}",
                e.message()
            ));
        }
        Err(e) => {
            return Err(format!(
                "its trailer is damaged or gone (cut short?): {}",
                e.message()
            ));
        }
    };
    if objects::pack_id(&entries) != *id {
        return Err("its trailer does not match its name".into());
    }
    Ok(entries)
}

fn index_facts(repo: &Repository, id: &PackId) -> Result<IndexFacts> {
    Ok(match repo.index(id) {
        Ok(Some(e)) => IndexFacts::Ok(e),
        Ok(None) => return Ok(IndexFacts::Damaged("is missing".into())),
        Err(e) if e.kind() == ErrorKind::Corrupt => IndexFacts::Damaged(e.message().to_string()),
        Err(e) => return Err(e),
    })
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

// ---- The report ----------------------------------------------------------------------

/// What a damaged object breaks.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Affected {
    /// `vol:ns/name@b3:…`; absent when only a tag is affected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Files of the version that cannot be read back; empty with `whole`.
    pub files: Vec<String>,
    /// The whole version is unreadable (its manifest is damaged).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub whole: bool,
    /// Tags (`ns/name:tag`) that point at the version, or the tag that is broken.
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Problem {
    /// The damaged object: `packs/ab/…`, `index/…`, `files/ab/…`, `manifests/…`, `tags/…`.
    pub object: String,
    /// What is wrong with it, every finding joined by "; ".
    pub problem: String,
    pub details: Vec<String>,
    pub affects: Vec<Affected>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Fix {
    pub command: String,
    pub why: String,
}

#[derive(Debug, Default, Serialize)]
pub struct VerifyReport {
    pub packs: u64,
    pub packs_read: u64,
    pub chunks: u64,
    pub files: u64,
    pub versions: u64,
    pub tags: u64,
    /// Chunk bytes read and hashed.
    pub bytes: u64,
    /// `all`, `sample`, `subset N/T`, `P%`, `none` or `this version`.
    pub read_data: String,
    pub problems: Vec<Problem>,
    /// Versions that cannot be read back in full, with the files that cannot.
    pub damaged_versions: Vec<Affected>,
    pub fix: Vec<Fix>,
    /// Worth knowing, not damage: a pack a killed push left without its index, a
    /// version repair had to quarantine.
    pub notes: Vec<String>,
}

#[derive(Default)]
struct Acc {
    details: Vec<String>,
    files: BTreeSet<Hash>,
    versions: BTreeSet<(String, bool)>,
    tags: BTreeSet<String>,
}

/// Adds a finding about `object`, once.
fn note<'a>(acc: &'a mut BTreeMap<String, Acc>, object: &str, detail: String) -> &'a mut Acc {
    let a = acc.entry(object.to_string()).or_default();
    if !a.details.contains(&detail) {
        a.details.push(detail);
    }
    a
}

impl Survey {
    pub fn report(&self) -> VerifyReport {
        let mut acc: BTreeMap<String, Acc> = BTreeMap::new();
        if let Some(c) = &self.config {
            note(&mut acc, "sealvol.repo", c.clone());
        }
        for s in &self.strays {
            note(
                &mut acc,
                s,
                "is not named as its folder's objects are (a stray file?)".into(),
            );
        }
        for (id, p) in &self.packs {
            let name = Kind::Pack.name(id);
            if let Err(why) = &p.trailer {
                note(&mut acc, &name, why.clone());
            }
            for why in p.bad.values() {
                note(&mut acc, &name, why.clone());
            }
        }
        for (id, ix) in &self.indexes {
            let name = Kind::Index.name(id);
            match (ix, self.packs.get(id)) {
                (IndexFacts::Damaged(why), Some(_)) if why != "is missing" => {
                    note(&mut acc, &name, why.clone());
                }
                (IndexFacts::Ok(e), Some(p)) => {
                    if let Ok(t) = &p.trailer
                        && t != e
                    {
                        note(&mut acc, &name, "disagrees with its pack's trailer".into());
                    }
                }
                (IndexFacts::Ok(_), None) if self.whole => {
                    note(&mut acc, &name, "indexes a pack that is missing".into());
                }
                _ => {}
            }
        }
        // Chunk lists: each broken one, blamed on the object that breaks it.
        for (hash, f) in &self.files {
            let name = Kind::File.name(hash);
            match f {
                Err(why) => {
                    note(&mut acc, &name, why.clone()).files.insert(*hash);
                }
                Ok(obj) => {
                    for c in &obj.chunks {
                        let pack = obj.packs[c.pack as usize];
                        if let Some((object, why)) = self.copy_problem(&pack, &c.entry) {
                            let object = if object.is_empty() {
                                name.clone()
                            } else {
                                object
                            };
                            note(&mut acc, &object, why).files.insert(*hash);
                        }
                    }
                }
            }
        }
        // Which version holds which file, and the tags on each version.
        let mut tags_on: HashMap<String, Vec<String>> = HashMap::new();
        for t in &self.tags {
            if let Ok(f) = &t.file {
                tags_on
                    .entry(format!("vol:{}@{}", t.volume, f.digest))
                    .or_default()
                    .push(format!("{}:{}", t.volume, t.tag));
            }
        }
        let mut holders: HashMap<Hash, Vec<(String, String)>> = HashMap::new();
        let versions: HashSet<String> = self
            .manifests
            .iter()
            .map(|(v, d, _)| format!("vol:{v}@{d}"))
            .collect();
        for (vol, digest, m) in &self.manifests {
            let version = format!("vol:{vol}@{digest}");
            match m {
                Err(why) => {
                    let key = crate::repo::manifest_key(vol, digest);
                    note(&mut acc, &key, why.clone())
                        .versions
                        .insert((version, true));
                }
                Ok(m) => {
                    for e in &m.entries {
                        if let Entry::File { path, hash, .. } = e {
                            if !self.files.contains_key(hash) {
                                note(&mut acc, &Kind::File.name(hash), "is missing".into())
                                    .files
                                    .insert(*hash);
                            }
                            holders
                                .entry(*hash)
                                .or_default()
                                .push((version.clone(), path.clone()));
                        }
                    }
                }
            }
        }
        let mut history_notes = Vec::new();
        for t in &self.tags {
            let full = format!("{}:{}", t.volume, t.tag);
            match &t.file {
                Err(why) => {
                    note(&mut acc, &t.key, why.clone()).tags.insert(full);
                }
                Ok(f) => {
                    for (n, m) in f.history.iter().enumerate() {
                        let from_ok = m.from.as_deref().is_none_or(|d| Digest::parse(d).is_ok());
                        if Digest::parse(&m.to).is_err() || !from_ok {
                            // The tag still resolves: worth a note, not damage.
                            history_notes.push(format!(
                                "{}: move {} of its history names no valid digest",
                                t.key,
                                n + 1
                            ));
                        }
                    }
                    let target = format!("vol:{}@{}", t.volume, f.digest);
                    if !versions.contains(&target) {
                        note(
                            &mut acc,
                            &t.key,
                            format!(
                                "points at {}, which is not a version of {}",
                                f.digest, t.volume
                            ),
                        )
                        .tags
                        .insert(full);
                    }
                }
            }
        }

        let mut report = VerifyReport {
            packs: self.packs.len() as u64,
            packs_read: self.packs_read,
            chunks: self
                .packs
                .values()
                .map(|p| p.trailer.as_ref().map_or(0, |e| e.len() as u64))
                .sum(),
            files: self.files.len() as u64,
            versions: self.manifests.len() as u64,
            tags: self.tags.len() as u64,
            bytes: self.bytes_read,
            read_data: self.read_data.clone(),
            notes: history_notes,
            ..VerifyReport::default()
        };
        let mut all: BTreeMap<String, (BTreeSet<String>, bool)> = BTreeMap::new();
        for (object, a) in acc {
            let mut by_version: BTreeMap<String, (BTreeSet<String>, bool)> = BTreeMap::new();
            for h in &a.files {
                for (v, path) in holders.get(h).into_iter().flatten() {
                    by_version
                        .entry(v.clone())
                        .or_default()
                        .0
                        .insert(path.clone());
                }
            }
            for (v, whole) in &a.versions {
                by_version.entry(v.clone()).or_default().1 |= whole;
            }
            let mut affects: Vec<Affected> = by_version
                .iter()
                .map(|(v, (files, whole))| Affected {
                    version: Some(v.clone()),
                    files: if *whole {
                        Vec::new()
                    } else {
                        files.iter().cloned().collect()
                    },
                    whole: *whole,
                    tags: tags_on.get(v).cloned().unwrap_or_default(),
                })
                .collect();
            for (v, (files, whole)) in by_version {
                let e = all.entry(v).or_default();
                e.0.extend(files);
                e.1 |= whole;
            }
            if !a.tags.is_empty() {
                affects.push(Affected {
                    version: None,
                    files: Vec::new(),
                    whole: false,
                    tags: a.tags.into_iter().collect(),
                });
            }
            if !self.whole && affects.is_empty() {
                // Checking one version: damage that does not break it is worth a note.
                report.notes.push(format!(
                    "{object}, which this version reads, {}; it does not break the version (`sealvol repair` fixes it)",
                    a.details.join("; ")
                ));
                continue;
            }
            report.problems.push(Problem {
                object,
                problem: a.details.join("; "),
                details: a.details,
                affects,
            });
        }
        report.damaged_versions = all
            .into_iter()
            .map(|(v, (files, whole))| Affected {
                tags: tags_on.get(&v).cloned().unwrap_or_default(),
                version: Some(v),
                files: if whole {
                    Vec::new()
                } else {
                    files.into_iter().collect()
                },
                whole,
            })
            .collect();
        for (id, p) in &self.packs {
            if self.whole && p.trailer.is_ok() && !self.indexes.contains_key(id) {
                report.notes.push(format!(
                    "{} has no index (a push was stopped before writing it); the next push or `sealvol repair` writes it from the pack's trailer",
                    Kind::Pack.name(id)
                ));
            }
        }
        for (vol, digest, at) in &self.lost {
            report.notes.push(format!(
                "vol:{vol}@{digest} is not in the repository: repair moved its damaged manifest to {at}; `sealvol repair --from DIR` seals it again from a folder with that digest"
            ));
        }
        report.fix = self.fixes(&report);
        report
    }

    /// The commands that fix what the report found.
    fn fixes(&self, report: &VerifyReport) -> Vec<Fix> {
        let mut out = Vec::new();
        if !report.problems.is_empty() {
            out.push(Fix {
                command: "sealvol repair".into(),
                why: "rebuilds indexes from pack trailers, relinks chunk lists to healthy copies, restores tags from their history, and moves what is damaged to quarantine/ (`--dry-run` shows the plan first)".into(),
            });
        }
        let mut sources = BTreeSet::new();
        let lost = self.lost.iter().map(|(v, d, _)| format!("vol:{v}@{d}"));
        let damaged = report
            .damaged_versions
            .iter()
            .filter_map(|v| v.version.clone());
        for version in damaged.chain(lost) {
            let source = self
                .manifests
                .iter()
                .find(|(vol, d, _)| format!("vol:{vol}@{d}") == *version)
                .and_then(|(_, _, m)| m.as_ref().ok())
                .map(|m| m.provenance.source.clone());
            sources.insert((version.clone(), source));
        }
        for (version, source) in sources {
            let volume = version
                .trim_start_matches("vol:")
                .split('@')
                .next()
                .unwrap_or_default();
            let fix = match source.as_deref() {
                Some(s) if s.starts_with("file://") => Fix {
                    command: format!("sealvol repair --from {}", &s["file://".len()..]),
                    why: format!(
                        "heals {version} from its source folder, if repair alone cannot (its data has no healthy copy)"
                    ),
                },
                // A sync's source: the same objects seal the same digest.
                Some(s) if s.contains("://") => Fix {
                    command: format!("sealvol volume sync {s} {volume}"),
                    why: format!(
                        "heals {version} from its source, if repair alone cannot (the same objects seal the same digest)"
                    ),
                },
                _ => Fix {
                    command: "sealvol repair --from DIR".into(),
                    why: format!(
                        "heals {version} from a folder holding its files, if repair alone cannot"
                    ),
                },
            };
            out.push(fix);
        }
        out
    }
}
