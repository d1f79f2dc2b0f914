//! Repair: acts on what verify's survey found, in an order that leaves the repository
//! no worse at any moment (a `kill -9` anywhere is safe), and never deletes the last
//! copy of anything: damaged objects move to `quarantine/`.
//!
//! 1. `sealvol.repo`, if damaged, is written anew once the default chunker is shown to
//!    cut a stored file exactly as its chunk list says.
//! 2. Damage records are re-checked: a copy that reads fine is cleared.
//! 3. Healthy chunks of damaged packs that have no healthy copy elsewhere are copied
//!    into new packs (each checked against its hash on the way).
//! 4. Missing or damaged indexes of sound packs are written from their trailers.
//! 5. Chunk lists that name unusable copies are relinked to healthy ones (replaced whole).
//! 6. Only then are damaged packs, their indexes, indexes of missing packs and damaged
//!    chunk lists moved to quarantine.
//! 7. With `--from DIR`, versions still missing data are healed from the folder: a
//!    folder with the version's digest is pushed again; otherwise each file whose bytes
//!    hash to a missing file's hash is stored.
//! 8. Damaged manifests no push healed go to quarantine; a damaged tag, or one pointing
//!    at a version that is gone, is moved to the newest version in its history that is
//!    readable (a move like any other), or quarantined when there is none.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::Path;

use serde::Serialize;

use crate::chunk::{ChunkParams, Cutter};
use crate::digest::{Entry, Hash};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::objects::{self, ChunkRef, FileObject, PackEntry, PackId};
use crate::progress::Progress;
use crate::push;
use crate::read::{Chunks, Origin};
use crate::refs::{Digest, VolumeName};
use crate::repo::{Kind, Repository};
use crate::verify::{self, IndexFacts, Problem, ReadData, Survey};

pub struct RepairOptions<'a> {
    /// Show the plan; change nothing.
    pub dry_run: bool,
    /// Read and hash every pack first, as `verify --read-data` does.
    pub read_data: bool,
    /// A folder holding the files of versions that are missing data.
    pub from: Option<&'a Path>,
    pub progress: &'a dyn Progress,
}

/// One thing repair did (or, with `--dry-run`, would do).
#[derive(Debug, Clone, Serialize)]
pub struct Action {
    /// `rewrite config`, `clear record`, `salvage`, `write index`, `relink`,
    /// `quarantine`, `heal`, `restore tag`.
    pub action: &'static str,
    pub object: String,
    pub detail: String,
}

#[derive(Debug, Default, Serialize)]
pub struct RepairReport {
    pub dry_run: bool,
    pub actions: Vec<Action>,
    /// What is still wrong afterwards (after a dry run: what repair alone cannot fix).
    pub remaining: Vec<Problem>,
    pub remaining_versions: Vec<verify::Affected>,
    pub fix: Vec<verify::Fix>,
}

impl RepairReport {
    fn act(&mut self, action: &'static str, object: impl Into<String>, detail: impl Into<String>) {
        self.actions.push(Action {
            action,
            object: object.into(),
            detail: detail.into(),
        });
    }
}

pub fn repair(repo: &mut Repository, opts: &RepairOptions) -> Result<RepairReport> {
    let config_damage = repo.config_damage().map(str::to_string);
    let mut report = RepairReport {
        dry_run: opts.dry_run,
        ..RepairReport::default()
    };
    let write = !opts.dry_run;
    // Alone: a push building on a pack this moves would name a copy that is gone.
    let alone = if write {
        repo.writers_lock(true)?
    } else {
        None
    };
    let read = if opts.read_data {
        ReadData::All
    } else {
        ReadData::None
    };
    let mut s = verify::survey_all(repo, read, config_damage.clone(), write, opts.progress)?;

    // 1. The format file.
    if let Some(why) = &config_damage {
        check_default_chunker(repo, &s)?;
        if write {
            let kept = repo.rewrite_config()?;
            report.act(
                "rewrite config",
                "sealvol.repo",
                format!("{why}; written anew with the default settings, which cut the stored files as their chunk lists say{}", kept.map(|k| format!(" (the damaged one is at {k})")).unwrap_or_default()),
            );
        } else {
            report.act(
                "rewrite config",
                "sealvol.repo",
                format!("{why}; would be written anew with the default settings"),
            );
        }
    }

    // 2. Damage records that no longer hold.
    for (pack, chunk) in s.records.clone() {
        let gone = !s.packs.contains_key(&pack);
        let sound = !gone && recheck(repo, &s, &pack, &chunk)?;
        if sound || gone {
            if let Some(p) = s.packs.get_mut(&pack) {
                p.bad.retain(|(_, h), _| *h != chunk);
            }
            if sound {
                if write {
                    repo.clear_damage(&pack, &chunk)?;
                }
                report.act(
                    "clear record",
                    Kind::Pack.name(&pack),
                    format!("chunk {} reads fine again", chunk.hex()),
                );
            }
        }
    }

    // 3. Healthy copies, and salvage of the rest from damaged packs.
    let damaged_packs: BTreeSet<PackId> = s
        .packs
        .iter()
        .filter(|(_, p)| p.trailer.is_err() || !p.bad.is_empty())
        .map(|(id, _)| *id)
        .collect();
    let mut good: HashMap<Hash, (PackId, PackEntry)> = HashMap::new();
    for (id, p) in &s.packs {
        if damaged_packs.contains(id) {
            continue;
        }
        for e in p.trailer.as_ref().into_iter().flatten() {
            good.entry(e.hash).or_insert((*id, *e));
        }
    }
    let mut salvage: Vec<(PackId, PackEntry)> = Vec::new();
    let mut wanted: HashSet<Hash> = HashSet::new();
    for id in &damaged_packs {
        for e in s.entries(id).unwrap_or_default() {
            if s.copy_ok(id, e) && !good.contains_key(&e.hash) && wanted.insert(e.hash) {
                salvage.push((*id, *e));
            }
        }
    }
    if !salvage.is_empty() {
        let bytes: u64 = salvage.iter().map(|(_, e)| e.stored_len as u64).sum();
        if write {
            let (packs, saved, lost) = salvage_chunks(repo, &salvage, &mut good)?;
            report.act(
                "salvage",
                format!("{} new pack(s)", packs.len()),
                format!(
                    "{saved} healthy chunk(s) copied out of damaged packs{}",
                    match lost {
                        0 => String::new(),
                        n => format!("; {n} failed their hash on the way and were left"),
                    }
                ),
            );
        } else {
            for (id, e) in &salvage {
                good.insert(e.hash, (*id, *e));
            }
            report.act(
                "salvage",
                format!("{} damaged pack(s)", damaged_packs.len()),
                format!(
                    "would copy {} healthy chunk(s), {bytes} bytes, into new packs",
                    salvage.len()
                ),
            );
        }
    }

    // 4. Indexes of sound packs.
    for (id, p) in &s.packs {
        let Ok(entries) = &p.trailer else { continue };
        if damaged_packs.contains(id) {
            continue;
        }
        let why = match s.indexes.get(id) {
            None => "missing",
            Some(IndexFacts::Ok(e)) if e == entries => continue,
            Some(IndexFacts::Ok(_)) => "disagreed with its pack's trailer",
            Some(IndexFacts::Damaged(_)) => "damaged",
        };
        if write {
            repo.rewrite_index(id, entries)?;
        }
        report.act(
            "write index",
            Kind::Index.name(id),
            format!("was {why}; written from its pack's trailer"),
        );
    }
    if write {
        repo.barrier()?;
    }

    // 5. Chunk lists relinked to healthy copies.
    let mut lost_files: BTreeSet<Hash> = BTreeSet::new();
    for (hash, f) in &s.files {
        let Ok(obj) = f else {
            lost_files.insert(*hash);
            continue;
        };
        let (relinked, fixed, missing) = relink(obj, &s, &damaged_packs, &good);
        if missing > 0 {
            lost_files.insert(*hash);
        }
        if fixed > 0 {
            if write {
                repo.replace_file_object(hash, &relinked)?;
            }
            report.act(
                "relink",
                Kind::File.name(hash),
                format!(
                    "{fixed} chunk(s) now read from healthy copies{}",
                    match missing {
                        0 => String::new(),
                        n => format!("; {n} have no healthy copy anywhere"),
                    }
                ),
            );
        }
    }
    if write {
        repo.barrier()?;
    }

    // 6. Quarantine: damaged packs and their indexes, indexes of missing packs,
    // unreadable chunk lists, stray names.
    let mut quarantine: Vec<(String, String)> = Vec::new();
    for id in &damaged_packs {
        quarantine.push((
            Kind::Pack.name(id),
            "damaged pack (its healthy chunks were copied first)".into(),
        ));
        if s.indexes.contains_key(id) {
            quarantine.push((Kind::Index.name(id), "index of a damaged pack".into()));
        }
    }
    for id in s.indexes.keys() {
        if !s.packs.contains_key(id) {
            quarantine.push((
                Kind::Index.name(id),
                "indexes a pack that is missing".into(),
            ));
        }
    }
    for (hash, f) in &s.files {
        if let Err(why) = f {
            quarantine.push((Kind::File.name(hash), why.clone()));
        }
    }
    for stray in &s.strays {
        quarantine.push((
            stray.clone(),
            "not named as its folder's objects are".into(),
        ));
    }
    for (key, why) in quarantine {
        let to = if write {
            repo.quarantine(&key)?
        } else {
            "quarantine/".into()
        };
        report.act("quarantine", key, format!("{why}; moved to {to}"));
    }

    // Versions still missing data: lost files, damaged manifests, and versions an
    // earlier repair quarantined.
    let mut damaged_versions: BTreeMap<(VolumeName, Digest), bool> = BTreeMap::new();
    for (vol, digest, _) in &s.lost {
        damaged_versions.insert((vol.clone(), *digest), true);
    }
    for (vol, digest, m) in &s.manifests {
        match m {
            Err(_) => {
                damaged_versions.insert((vol.clone(), *digest), true);
            }
            Ok(m) => {
                let lost = m.entries.iter().any(|e| match e {
                    Entry::File { hash, .. } => {
                        lost_files.contains(hash) || !s.files.contains_key(hash)
                    }
                    _ => false,
                });
                if lost {
                    damaged_versions.insert((vol.clone(), *digest), false);
                }
            }
        }
    }

    // What is left only adds objects and moves tags, which other writers may do too;
    // healing pushes, which take the lock shared.
    drop(alone);

    // 7. Healing from a folder.
    let mut healed: HashSet<(VolumeName, Digest)> = HashSet::new();
    if let Some(dir) = opts.from {
        heal_from(
            repo,
            &s,
            dir,
            &damaged_versions,
            &mut lost_files,
            &mut healed,
            &mut report,
            opts,
        )?;
    }

    // 8. Manifests nothing healed, then tags.
    let quarantined: HashSet<(VolumeName, Digest)> =
        s.lost.iter().map(|(v, d, _)| (v.clone(), *d)).collect();
    for ((vol, digest), whole) in &damaged_versions {
        let key = (vol.clone(), *digest);
        if *whole && !healed.contains(&key) && !quarantined.contains(&key) {
            let key = crate::repo::manifest_key(vol, digest);
            let to = if write {
                repo.quarantine(&key)?
            } else {
                "quarantine/".into()
            };
            report.act(
                "quarantine",
                key,
                format!("damaged manifest of vol:{vol}@{digest}; moved to {to}"),
            );
        }
    }
    let readable: HashSet<(VolumeName, String)> = s
        .manifests
        .iter()
        .filter(|(v, d, m)| m.is_ok() || healed.contains(&(v.clone(), *d)))
        .map(|(v, d, _)| (v.clone(), d.to_string()))
        .collect();
    for t in &s.tags {
        let current = t.file.as_ref().ok().map(|f| f.digest.clone());
        if current
            .as_ref()
            .is_some_and(|d| readable.contains(&(t.volume.clone(), d.clone())))
        {
            continue;
        }
        let history = match &t.file {
            Ok(f) => &f.history,
            Err(_) => &t.salvaged,
        };
        let target = history.iter().rev().map(|m| m.to.clone()).find(|d| {
            Some(d) != current.as_ref() && readable.contains(&(t.volume.clone(), d.clone()))
        });
        let why = match (&t.file, &current) {
            (Err(why), _) => why.clone(),
            (Ok(_), Some(d)) => format!("pointed at {d}, which is not a readable version"),
            (Ok(_), None) => "names no version".into(),
        };
        let full = format!("{}:{}", t.volume, t.tag);
        match target {
            Some(to) => {
                if write {
                    let d = Digest::parse(&to)?;
                    repo.move_tag(&t.volume, &t.tag, &d, None)?;
                }
                let back = current
                    .map(|c| format!("; once {c} is sealed again, `sealvol volume tag {}@{c} {}` moves it back", t.volume, t.tag))
                    .unwrap_or_default();
                report.act("restore tag", t.key.clone(), format!("{full}: {why}; moved to {to}, the newest readable version in its history{back}"));
            }
            None => {
                let to = if write {
                    repo.quarantine(&t.key)?
                } else {
                    "quarantine/".into()
                };
                report.act(
                    "quarantine",
                    t.key.clone(),
                    format!("{full}: {why}, and its history names no readable version; moved to {to}; set it again with `sealvol volume tag {}@DIGEST {}`", t.volume, t.tag),
                );
            }
        }
    }

    // Records of copies that left with their packs.
    if write {
        for (pack, chunk) in &s.records {
            if damaged_packs.contains(pack) || !s.packs.contains_key(pack) {
                repo.clear_damage(pack, chunk)?;
            }
        }
        s = verify::survey_all(repo, ReadData::None, None, false, opts.progress)?;
        let after = s.report();
        report.remaining = after.problems;
        report.remaining_versions = after.damaged_versions;
        for (vol, digest, _) in &s.lost {
            report.remaining_versions.push(verify::Affected {
                version: Some(format!("vol:{vol}@{digest}")),
                files: Vec::new(),
                whole: true,
                tags: Vec::new(),
            });
        }
        report.fix = after
            .fix
            .into_iter()
            .filter(|f| f.command != "sealvol repair")
            .collect();
    } else {
        report.remaining_versions = damaged_versions
            .iter()
            .filter(|(k, _)| !healed.contains(k))
            .map(|((vol, digest), whole)| verify::Affected {
                version: Some(format!("vol:{vol}@{digest}")),
                files: Vec::new(),
                whole: *whole,
                tags: Vec::new(),
            })
            .collect();
    }
    Ok(report)
}

/// Whether a recorded copy reads fine now.
fn recheck(repo: &Repository, s: &Survey, pack: &PackId, chunk: &Hash) -> Result<bool> {
    let Some(e) = s
        .entries(pack)
        .and_then(|es| es.iter().find(|e| e.hash == *chunk))
    else {
        return Ok(false);
    };
    match repo.pack_range(pack, e.offset, e.stored_len as u64) {
        Ok(b) => Ok(Hash::of(&b) == *chunk),
        Err(e) if matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::Io) => Ok(false),
        Err(e) => Err(e),
    }
}

/// A chunk list with every unusable copy replaced by a healthy one where there is one:
/// (the list, copies replaced, copies with no healthy copy anywhere).
fn relink(
    obj: &FileObject,
    s: &Survey,
    damaged_packs: &BTreeSet<PackId>,
    good: &HashMap<Hash, (PackId, PackEntry)>,
) -> (FileObject, usize, usize) {
    let (mut fixed, mut missing) = (0, 0);
    let mut packs: Vec<PackId> = Vec::new();
    let mut chunks = Vec::with_capacity(obj.chunks.len());
    for c in &obj.chunks {
        let pack = obj.packs[c.pack as usize];
        let usable = !damaged_packs.contains(&pack) && s.copy_ok(&pack, &c.entry);
        let (pack, entry) = match (usable, good.get(&c.entry.hash)) {
            (true, _) => (pack, c.entry),
            (false, Some(&(p, e))) => {
                fixed += 1;
                (p, e)
            }
            (false, None) => {
                missing += 1;
                (pack, c.entry)
            }
        };
        let slot = match packs.iter().position(|p| *p == pack) {
            Some(i) => i,
            None => {
                packs.push(pack);
                packs.len() - 1
            }
        };
        chunks.push(ChunkRef {
            pack: slot as u32,
            entry,
        });
    }
    (
        FileObject {
            size: obj.size,
            packs,
            chunks,
        },
        fixed,
        missing,
    )
}

/// Copies chunks out of damaged packs into new ones, each checked against its hash;
/// adds them to `good`. Returns (new packs, chunks copied, chunks that failed).
fn salvage_chunks(
    repo: &Repository,
    salvage: &[(PackId, PackEntry)],
    good: &mut HashMap<Hash, (PackId, PackEntry)>,
) -> Result<(Vec<PackId>, usize, usize)> {
    let target = repo.config().pack_target;
    let (mut packs, mut saved, mut lost) = (Vec::new(), 0, 0);
    let mut batch: Vec<(PackEntry, Vec<u8>)> = Vec::new();
    let mut bytes = 0u64;
    let mut flush = |batch: &mut Vec<(PackEntry, Vec<u8>)>,
                     good: &mut HashMap<Hash, (PackId, PackEntry)>|
     -> Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let (id, entries) = write_pack(repo, batch)?;
        for e in entries {
            good.insert(e.hash, (id, e));
        }
        packs.push(id);
        batch.clear();
        Ok(())
    };
    for (pack, e) in salvage {
        let b = match repo.pack_range(pack, e.offset, e.stored_len as u64) {
            Ok(b) if Hash::of(&b) == e.hash => b,
            Ok(_) => {
                repo.record_damage(pack, e, "repair");
                lost += 1;
                continue;
            }
            Err(err) if matches!(err.kind(), ErrorKind::Corrupt | ErrorKind::Io) => {
                lost += 1;
                continue;
            }
            Err(err) => return Err(err),
        };
        bytes += b.len() as u64;
        batch.push((*e, b));
        saved += 1;
        if bytes >= target {
            flush(&mut batch, good)?;
            bytes = 0;
        }
    }
    flush(&mut batch, good)?;
    Ok((packs, saved, lost))
}

/// Writes chunks (already checked) as one new pack and its index.
fn write_pack(
    repo: &Repository,
    chunks: &[(PackEntry, Vec<u8>)],
) -> Result<(PackId, Vec<PackEntry>)> {
    let path = repo.staging_path()?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .ctx("cannot create", &path)?;
    let mut entries = Vec::with_capacity(chunks.len());
    let mut offset = objects::PACK_MAGIC.len() as u64;
    f.write_all(objects::PACK_MAGIC)
        .ctx("cannot write", &path)?;
    for (e, b) in chunks {
        f.write_all(b).ctx("cannot write", &path)?;
        entries.push(PackEntry { offset, ..*e });
        offset += b.len() as u64;
    }
    f.write_all(&objects::encode_trailer(&entries))
        .ctx("cannot write", &path)?;
    drop(f);
    let id = objects::pack_id(&entries);
    repo.publish_pack(&id, &path, &entries)?;
    Ok((id, entries))
}

/// Refuses to rewrite `sealvol.repo` with the default chunker unless it cuts a stored
/// file exactly where its chunk list does (a repository made with other settings would
/// stop deduplicating, silently).
fn check_default_chunker(repo: &Repository, s: &Survey) -> Result<()> {
    let params = ChunkParams::DEFAULT;
    let sample = s
        .files
        .values()
        .filter_map(|f| f.as_ref().ok())
        .filter(|o| o.chunks.len() >= 2 && o.size <= 64 << 20)
        .filter(|o| {
            o.chunks
                .iter()
                .all(|c| s.copy_ok(&o.packs[c.pack as usize], &c.entry))
        })
        .max_by_key(|o| o.chunks.len());
    let Some(obj) = sample else { return Ok(()) };
    let mut data = Vec::with_capacity(obj.size as usize);
    Origin(repo).for_each(obj, 0..obj.chunks.len(), &mut |c| {
        data.extend_from_slice(c);
        Ok(())
    })?;
    let mut lens = Vec::new();
    Cutter::new(params).cut(&data, true, &mut lens);
    let stored: Vec<u32> = obj.chunks.iter().map(|c| c.entry.raw_len).collect();
    if lens != stored {
        return Err(Error::corrupt(
            "sealvol.repo is damaged, and the stored files were not cut with the default chunker settings",
        )
        .hint("restore sealvol.repo from a backup or a mirror of this repository; repair cannot guess its settings"));
    }
    Ok(())
}

/// `--from DIR`: a folder whose digest is a version still missing data is pushed again
/// as that version; otherwise each file whose bytes hash to a lost file is stored.
#[allow(clippy::too_many_arguments)]
fn heal_from(
    repo: &Repository,
    s: &Survey,
    dir: &Path,
    damaged: &BTreeMap<(VolumeName, Digest), bool>,
    lost_files: &mut BTreeSet<Hash>,
    healed: &mut HashSet<(VolumeName, Digest)>,
    report: &mut RepairReport,
    opts: &RepairOptions,
) -> Result<()> {
    let digest = crate::walk::digest_dir(dir)?;
    let matches: Vec<&VolumeName> = damaged
        .keys()
        .filter(|(_, d)| *d == digest)
        .map(|(v, _)| v)
        .collect();
    if !matches.is_empty() {
        for vol in matches {
            if !opts.dry_run {
                let options = push::PushOptions {
                    source: None,
                    stat_cache: None,
                    progress: opts.progress,
                    cancel: None,
                };
                push::push(repo, dir, vol, &[], &options)?;
            }
            healed.insert((vol.clone(), digest));
            report.act(
                "heal",
                format!("vol:{vol}@{digest}"),
                format!("pushed again from {} (same digest)", dir.display()),
            );
        }
        return Ok(());
    }
    // Lost files by size, then by content hash.
    let sizes: HashMap<u64, Vec<Hash>> = {
        let mut m: HashMap<u64, Vec<Hash>> = HashMap::new();
        for (_, _, mf) in &s.manifests {
            for e in mf.iter().flat_map(|m| &m.entries) {
                if let Entry::File { hash, size, .. } = e
                    && (lost_files.contains(hash) || !s.files.contains_key(hash))
                {
                    m.entry(*size).or_default().push(*hash);
                }
            }
        }
        m
    };
    let listing = crate::walk::walk(dir)?;
    let candidates: Vec<&crate::walk::WalkEntry> = listing
        .iter()
        .filter(|e| matches!(e.kind, crate::walk::WalkKind::File { stamp, .. } if sizes.contains_key(&stamp.size)))
        .collect();
    let mut found = Vec::new();
    for e in candidates {
        let h = Hash::of_file(&e.abs)?;
        if sizes.values().flatten().any(|x| *x == h) {
            found.push((e, h));
        }
    }
    if found.is_empty() {
        report.act(
            "heal",
            dir.display().to_string(),
            format!("holds none of the missing files (its digest is {digest})"),
        );
        return Ok(());
    }
    if !opts.dry_run {
        let entries: Vec<&crate::walk::WalkEntry> = found.iter().map(|(e, _)| *e).collect();
        push::store_files(repo, &entries, opts.progress)?;
    }
    for (e, h) in found {
        lost_files.remove(&h);
        report.act(
            "heal",
            Kind::File.name(&h),
            format!("stored again from {}", e.abs.display()),
        );
    }
    // A version whose every file is back is healed (its manifest was readable).
    for ((vol, digest), whole) in damaged {
        if *whole {
            continue;
        }
        let back = s.manifests.iter().any(|(v, d, m)| {
            v == vol
                && d == digest
                && m.as_ref().is_ok_and(|m| {
                    m.entries.iter().all(|e| match e {
                        Entry::File { hash, .. } => !lost_files.contains(hash),
                        _ => true,
                    })
                })
        });
        if back {
            healed.insert((vol.clone(), *digest));
        }
    }
    Ok(())
}
