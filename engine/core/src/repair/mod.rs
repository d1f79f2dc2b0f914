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
//! 5. Chunk lists that fail their proof are read: if the chunks they name are the
//!    file's after all, they are written anew with a proof built from them (so are
//!    lists written before proofs); chunk lists that name unusable copies are relinked
//!    to healthy ones (replaced whole).
//! 6. Only then are damaged packs, their indexes, indexes of missing packs and damaged
//!    chunk lists moved to quarantine.
//! 7. With `--from DIR`, versions still missing data are healed from the folder: a
//!    folder with the version's digest is pushed again; otherwise each file whose bytes
//!    hash to a missing file's hash is stored.
//! 8. Damaged manifests no push healed go to quarantine; a damaged tag, or one pointing
//!    at a version that is gone, is moved to the newest version in its history that is
//!    readable (a move like any other), or quarantined when there is none.
//! 9. A version whose summary is missing or disagrees with its manifest gets one
//!    written from the manifest (`summary.rs`); so does one whose listing is missing or
//!    does not hash to its digest (`listing.rs`).

mod chunker;
mod copies;
mod heal;
mod state;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::digest::{Entry, Hash};
use crate::error::Result;
use crate::objects::{PackEntry, PackId};
use crate::read::Chunks as _;
use crate::refs::{Digest, VolumeName};
use crate::repo::{Kind, Repository};
use crate::verify::{self, IndexFacts, ReadData};
use state::Repair;
pub use state::{Action, RepairOptions, RepairReport};

pub fn repair(repo: &mut Repository, opts: &RepairOptions) -> Result<RepairReport> {
    let write = !opts.dry_run;
    // Alone: a push building on a pack this moves would name a copy that is gone.
    let alone = if write {
        repo.writers_lock(true)?
    } else {
        None
    };
    if write && alone.is_none() {
        tracing::warn!(
            "{} has no writer lock (a bucket): run repair while nothing else writes to it",
            repo.location()
        );
    }
    let read = if opts.read_data {
        ReadData::All
    } else {
        ReadData::None
    };
    let config_damage = repo.config_damage().map(str::to_string);
    let s = verify::survey_all(repo, read, config_damage.clone(), write, opts.progress)?;
    let mut report = RepairReport {
        dry_run: opts.dry_run,
        ..RepairReport::default()
    };
    if let Some(why) = &config_damage {
        chunker::check_default(repo, &s)?;
        let detail = match write {
            true => format!(
                "{why}; written anew with the default settings, which cut the stored files as their chunk lists say{}",
                repo.rewrite_config()?
                    .map(|k| format!(" (the damaged one is at {k})"))
                    .unwrap_or_default()
            ),
            false => format!("{why}; would be written anew with the default settings"),
        };
        report.act("rewrite config", "sealvol.repo", detail);
    }
    let mut r = Repair {
        repo,
        opts,
        write,
        s,
        report,
        damaged_packs: BTreeSet::new(),
        good: HashMap::new(),
        lost_files: BTreeSet::new(),
        damaged_versions: BTreeMap::new(),
        healed: HashSet::new(),
    };
    r.clear_false_records()?;
    r.salvage()?;
    r.write_indexes()?;
    r.prove_lists()?;
    r.relink()?;
    r.quarantine_damaged()?;
    r.find_damaged_versions();
    // What is left only adds objects and moves tags, which other writers may do too;
    // healing pushes, which take the lock shared.
    drop(alone);
    if let Some(dir) = opts.from {
        heal::from_folder(&mut r, dir)?;
    }
    r.quarantine_manifests()?;
    r.restore_tags()?;
    r.rewrite_trash()?;
    for key in r.repo.rebuild_summaries(!write)? {
        r.report.act(
            "write summary",
            key,
            "missing or disagreeing with its manifest; written from the manifest",
        );
    }
    for key in r.repo.rebuild_listings(!write)? {
        r.report.act(
            "write listing",
            key,
            "missing or not hashing to its digest; written from the manifest",
        );
    }
    r.finish()
}

impl Repair<'_> {
    /// Moves `key` to quarantine (or, in a dry run, says it would).
    fn move_aside(&mut self, key: String, why: String) -> Result<()> {
        let to = match self.write {
            true => self.repo.quarantine(&key)?,
            false => "quarantine/".into(),
        };
        self.report
            .act("quarantine", key, format!("{why}; moved to {to}"));
        Ok(())
    }

    /// Step 2: damage records that no longer hold.
    fn clear_false_records(&mut self) -> Result<()> {
        for (pack, chunk) in self.s.records.clone() {
            let gone = !self.s.packs.contains_key(&pack);
            let sound = !gone && copies::reads_fine(self.repo, &self.s, &pack, &chunk)?;
            if !(sound || gone) {
                continue;
            }
            if let Some(p) = self.s.packs.get_mut(&pack) {
                p.bad.retain(|(_, h), _| *h != chunk);
            }
            if sound {
                if self.write {
                    self.repo.clear_damage(&pack, &chunk)?;
                }
                self.report.act(
                    "clear record",
                    Kind::Pack.name(&pack),
                    format!("chunk {} reads fine again", chunk.hex()),
                );
            }
        }
        Ok(())
    }

    /// Step 3: healthy copies, and salvage of the rest from damaged packs.
    fn salvage(&mut self) -> Result<()> {
        let s = &self.s;
        self.damaged_packs = s
            .packs
            .iter()
            .filter(|(_, p)| p.trailer.is_err() || !p.bad.is_empty())
            .map(|(id, _)| *id)
            .collect();
        for (id, p) in &s.packs {
            if self.damaged_packs.contains(id) {
                continue;
            }
            for e in p.trailer.as_ref().into_iter().flatten() {
                self.good.entry(e.hash).or_insert((*id, *e));
            }
        }
        let mut salvage: Vec<(PackId, PackEntry)> = Vec::new();
        let mut wanted: HashSet<Hash> = HashSet::new();
        for id in &self.damaged_packs {
            for e in s.entries(id).unwrap_or_default() {
                if s.copy_ok(id, e) && !self.good.contains_key(&e.hash) && wanted.insert(e.hash) {
                    salvage.push((*id, *e));
                }
            }
        }
        if salvage.is_empty() {
            return Ok(());
        }
        if self.write {
            let (packs, saved, lost) =
                crate::copy::copy_chunks(self.repo, &salvage, "repair", &mut self.good)?;
            let failed = match lost {
                0 => String::new(),
                n => format!("; {n} failed their hash on the way and were left"),
            };
            self.report.act(
                "salvage",
                format!("{} new pack(s)", packs.len()),
                format!("{saved} healthy chunk(s) copied out of damaged packs{failed}"),
            );
        } else {
            let bytes: u64 = salvage.iter().map(|(_, e)| e.stored_len as u64).sum();
            for (id, e) in &salvage {
                self.good.insert(e.hash, (*id, *e));
            }
            self.report.act(
                "salvage",
                format!("{} damaged pack(s)", self.damaged_packs.len()),
                format!(
                    "would copy {} healthy chunk(s), {bytes} bytes, into new packs",
                    salvage.len()
                ),
            );
        }
        Ok(())
    }

    /// Step 4: indexes of sound packs, from their trailers.
    fn write_indexes(&mut self) -> Result<()> {
        for (id, p) in &self.s.packs {
            let Ok(entries) = &p.trailer else { continue };
            if self.damaged_packs.contains(id) {
                continue;
            }
            let why = match self.s.indexes.get(id) {
                None => "missing",
                Some(IndexFacts::Ok(e)) if e == entries => continue,
                Some(IndexFacts::Ok(_)) => "disagreed with its pack's trailer",
                Some(IndexFacts::Damaged(_)) => "damaged",
            };
            if self.write {
                self.repo.rewrite_index(id, entries)?;
            }
            self.report.act(
                "write index",
                Kind::Index.name(id),
                format!("was {why}; written from its pack's trailer"),
            );
        }
        if self.write {
            self.repo.barrier()?;
        }
        Ok(())
    }

    /// Step 5a: chunk lists and their proofs. A list that fails its proof, or was
    /// recorded failing it, is read with what it names: if those chunks hash to the file
    /// after all (only its proof was damaged), it is written anew with a proof built from
    /// them; otherwise it stays damaged, for quarantine (the file is then missing data,
    /// healed by `--from`). A list written before proofs gets its proof the same way.
    /// A record whose list proves is cleared.
    fn prove_lists(&mut self) -> Result<()> {
        let recorded: HashSet<Hash> = self.s.list_records.iter().copied().collect();
        let hashes: Vec<Hash> = self.s.files.keys().copied().collect();
        for hash in hashes {
            let key = Kind::File.name(&hash);
            let (obj, why) = match &self.s.files[&hash] {
                Ok(obj) if obj.proof.outboard().is_some() && !recorded.contains(&hash) => {
                    continue;
                }
                Ok(obj) if obj.proof.outboard().is_none() && !recorded.contains(&hash) => {
                    (obj.clone(), "was written before proofs".to_string())
                }
                Ok(obj) => (obj.clone(), "was recorded failing its proof".to_string()),
                Err(why) => {
                    let Some(bytes) = self.repo.store().get(&key)? else {
                        continue;
                    };
                    match crate::objects::FileObject::decode_without_proof(&key, &bytes, &hash) {
                        Ok(obj) => (obj, why.clone()),
                        Err(_) => continue,
                    }
                }
            };
            if self.s.proven_lists.contains(&hash) && obj.proof.outboard().is_some() {
                if self.write {
                    self.repo.clear_list_damage(&hash)?;
                }
                self.s.files.insert(hash, Ok(obj));
                self.report.act(
                    "clear record",
                    key,
                    "its chunks prove against the file again",
                );
                continue;
            }
            if !self.write {
                self.report.act(
                    "prove",
                    key,
                    format!("{why}; would read the chunks it names and write its proof if they are the file's"),
                );
                continue;
            }
            match crate::read::Origin(self.repo).prove_by_reading(&obj) {
                Ok(ob) => {
                    let fresh = crate::objects::FileObject::new(
                        hash,
                        obj.size,
                        obj.packs.clone(),
                        obj.chunks.clone(),
                        Some(ob),
                    );
                    crate::gc::replace_chunk_list(self.repo, &hash, &fresh)?;
                    self.repo.clear_list_damage(&hash)?;
                    self.s.files.insert(hash, Ok(fresh));
                    self.report.act(
                        "prove",
                        key,
                        format!("{why}; its chunks are the file's, and it was written anew with its proof"),
                    );
                }
                Err(e) if crate::proof::is_unproven(&e) => {
                    self.s
                        .files
                        .insert(hash, Err(format!("{why}; {}", e.message())));
                }
                // A chunk it names cannot be read: relink and quarantine deal with it.
                Err(e) if e.kind() == crate::error::ErrorKind::Corrupt => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Step 5: chunk lists relinked to healthy copies.
    fn relink(&mut self) -> Result<()> {
        for (hash, f) in &self.s.files {
            let Ok(obj) = f else {
                self.lost_files.insert(*hash);
                continue;
            };
            let (relinked, fixed, missing) =
                copies::relink(obj, &self.s, &self.damaged_packs, &self.good);
            if missing > 0 {
                self.lost_files.insert(*hash);
            }
            if fixed == 0 {
                continue;
            }
            if self.write {
                crate::gc::replace_chunk_list(self.repo, hash, &relinked)?;
            }
            let still = match missing {
                0 => String::new(),
                n => format!("; {n} without a healthy copy anywhere"),
            };
            self.report.act(
                "relink",
                Kind::File.name(hash),
                format!("{fixed} chunk(s) now read from healthy copies{still}"),
            );
        }
        if self.write {
            self.repo.barrier()?;
        }
        Ok(())
    }

    /// Step 6: damaged packs and their indexes, indexes of missing packs, unreadable
    /// chunk lists, stray names, only now that nothing live names them.
    fn quarantine_damaged(&mut self) -> Result<()> {
        let s = &self.s;
        let mut aside: Vec<(String, String)> = Vec::new();
        for id in &self.damaged_packs {
            aside.push((
                Kind::Pack.name(id),
                "damaged pack (its healthy chunks were copied first)".into(),
            ));
            if s.indexes.contains_key(id) {
                aside.push((Kind::Index.name(id), "index of a damaged pack".into()));
            }
        }
        for id in s.indexes.keys() {
            if !s.packs.contains_key(id) {
                aside.push((
                    Kind::Index.name(id),
                    "indexes a pack that is missing".into(),
                ));
            }
        }
        for (hash, f) in &s.files {
            if let Err(why) = f {
                aside.push((Kind::File.name(hash), why.clone()));
            }
        }
        for stray in &s.strays {
            aside.push((
                stray.clone(),
                "not named as its folder's objects are".into(),
            ));
        }
        for (key, why) in aside {
            self.move_aside(key, why)?;
        }
        Ok(())
    }

    /// Versions still missing data: lost files, damaged manifests, and versions an
    /// earlier repair quarantined.
    fn find_damaged_versions(&mut self) {
        for (vol, digest, _) in &self.s.lost {
            self.damaged_versions.insert((vol.clone(), *digest), true);
        }
        for (vol, digest, m) in &self.s.manifests {
            let whole = match m {
                Err(_) => true,
                Ok(m)
                    if m.entries.iter().any(|e| match e {
                        Entry::File { hash, .. } => {
                            self.lost_files.contains(hash) || !self.s.files.contains_key(hash)
                        }
                        _ => false,
                    }) =>
                {
                    false
                }
                Ok(_) => continue,
            };
            self.damaged_versions.insert((vol.clone(), *digest), whole);
        }
    }

    /// Step 8: a damaged trash record is written anew (the version stays deleted, its
    /// window starting now), the damaged bytes kept in quarantine.
    fn rewrite_trash(&mut self) -> Result<()> {
        for (vol, digest, why) in self.s.trash.clone() {
            let key = crate::trash::trash_key(&vol, &digest);
            let detail = match self.write {
                true => {
                    let kept = self.repo.rewrite_trash_record(&vol, &digest)?;
                    format!(
                        "{why}; written anew: vol:{vol}@{digest} stays in the trash, restorable for the retention window from now (the damaged record is at {kept})"
                    )
                }
                false => format!("{why}; would be written anew, the version staying in the trash"),
            };
            self.report.act("rewrite trash record", key, detail);
        }
        Ok(())
    }

    /// Step 8: damaged manifests nothing healed.
    fn quarantine_manifests(&mut self) -> Result<()> {
        let quarantined: HashSet<(VolumeName, Digest)> = self
            .s
            .lost
            .iter()
            .map(|(v, d, _)| (v.clone(), *d))
            .collect();
        let whole: Vec<(VolumeName, Digest)> = self
            .damaged_versions
            .iter()
            .filter(|(k, whole)| **whole && !self.healed.contains(*k) && !quarantined.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for (vol, digest) in whole {
            self.move_aside(
                crate::repo::manifest_key(&vol, &digest),
                format!("damaged manifest of vol:{vol}@{digest}"),
            )?;
        }
        Ok(())
    }

    /// Step 8: a damaged tag, or one pointing at a version that is gone, moves to the
    /// newest readable version in its history, or goes to quarantine.
    fn restore_tags(&mut self) -> Result<()> {
        let readable: HashSet<(VolumeName, String)> = self
            .s
            .manifests
            .iter()
            .filter(|(v, d, m)| m.is_ok() || self.healed.contains(&(v.clone(), *d)))
            .map(|(v, d, _)| (v.clone(), d.to_string()))
            .collect();
        for t in self.s.tags.clone() {
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
                    if self.write {
                        let d = Digest::parse(&to)?;
                        self.repo.move_tag(&t.volume, &t.tag, &d, None)?;
                    }
                    let back = current
                        .map(|c| format!("; once {c} is sealed again, `sealvol volume tag {}@{c} {}` moves it back", t.volume, t.tag))
                        .unwrap_or_default();
                    self.report.act(
                        "restore tag",
                        t.key.clone(),
                        format!("{full}: {why}; moved to {to}, the newest readable version in its history{back}"),
                    );
                }
                None => self.move_aside(
                    t.key.clone(),
                    format!("{full}: {why}, and its history names no readable version; set it again with `sealvol volume tag {}@DIGEST {}`", t.volume, t.tag),
                )?,
            }
        }
        Ok(())
    }

    /// Clears the records of packs that left, and verifies the structure again: what
    /// remains, and how to heal it.
    fn finish(mut self) -> Result<RepairReport> {
        if !self.write {
            self.report.remaining_versions = self
                .damaged_versions
                .iter()
                .filter(|(k, _)| !self.healed.contains(*k))
                .map(|((vol, digest), whole)| lost(vol, digest, *whole))
                .collect();
            return Ok(self.report);
        }
        for (pack, chunk) in &self.s.records {
            if self.damaged_packs.contains(pack) || !self.s.packs.contains_key(pack) {
                self.repo.clear_damage(pack, chunk)?;
            }
        }
        // Lists recorded failing their proof that are now in quarantine (or gone).
        for hash in &self.s.list_records {
            if !matches!(self.s.files.get(hash), Some(Ok(_))) {
                self.repo.clear_list_damage(hash)?;
            }
        }
        let s = verify::survey_all(self.repo, ReadData::None, None, false, self.opts.progress)?;
        let after = s.report();
        let mut report = self.report;
        report.remaining = after.problems;
        report.remaining_versions = after.damaged_versions;
        for (vol, digest, _) in &s.lost {
            report.remaining_versions.push(lost(vol, digest, true));
        }
        report.fix = after
            .fix
            .into_iter()
            .filter(|f| f.command != "sealvol repair")
            .collect();
        Ok(report)
    }
}

fn lost(vol: &VolumeName, digest: &Digest, whole: bool) -> verify::Affected {
    verify::Affected {
        version: Some(format!("vol:{vol}@{digest}")),
        files: Vec::new(),
        whole,
        tags: Vec::new(),
    }
}
