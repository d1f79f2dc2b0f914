//! What the repository knows is damaged, so that nothing new is built on it.
//!
//! A chunk copy (one chunk at one place in one pack) is unusable when its pack is gone,
//! when the pack ends before the chunk does (a truncated upload), or when a read found
//! that its bytes fail their hash. The first two show in a listing of `packs/`; the
//! third is written down as a damage record, `damage/<pack id>/<chunk hash>`, by verify
//! and by any reader whose origin read failed its hash. Writers load `Health` with the
//! chunk index and never reuse an unusable copy; a chunk list that names one is
//! replaced by one that names a healthy copy. docs/FORMAT.md ("Damage") states the rule.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::digest::Hash;
use crate::error::Result;
use crate::objects::{FileObject, PackEntry, PackId};
use crate::registry::{now_rfc3339, whoami};
use crate::repo::{Kind, Repository};

const DAMAGE_PREFIX: &str = "damage/";

/// One damage record: a chunk copy that failed its hash when someone read it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DamageRecord {
    pub pack: String,
    pub chunk: String,
    pub offset: u64,
    pub problem: String,
    /// What found it: `verify`, `read` (a mount, pull or diff), `push`.
    pub found_by: String,
    pub by: String,
    pub at: String,
}

/// Why a chunk copy cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unusable {
    /// Its pack is not in the repository.
    PackMissing,
    /// Its pack ends before the chunk does.
    PackShort,
    /// A read found that its bytes fail their hash (a damage record says so).
    FailsHash,
}

impl Unusable {
    pub fn describe(self, pack: &PackId) -> String {
        match self {
            Unusable::PackMissing => format!("pack {} is missing", pack.hex()),
            Unusable::PackShort => format!("pack {} is cut short", pack.hex()),
            Unusable::FailsHash => format!("its copy in pack {} fails its hash check", pack.hex()),
        }
    }
}

/// The packs present (with their sizes) and the damage records: enough to tell, without
/// reading a byte of chunk data, whether a chunk copy can be used.
#[derive(Debug, Default, Clone)]
pub struct Health {
    packs: HashMap<PackId, u64>,
    damaged: HashSet<(PackId, Hash)>,
}

impl Health {
    pub fn load(repo: &Repository) -> Result<Health> {
        let packs = repo
            .list(Kind::Pack)?
            .into_iter()
            .filter_map(|l| {
                l.id.filter(|id| l.name == Kind::Pack.name(id))
                    .map(|id| (id, l.size))
            })
            .collect();
        let damaged = records(repo)?
            .into_iter()
            .map(|(pack, chunk, _)| (pack, chunk))
            .collect();
        Ok(Health { packs, damaged })
    }

    /// Whether the copy of a chunk at `entry` in `pack` can be read.
    pub fn check(&self, pack: &PackId, entry: &PackEntry) -> Result<(), Unusable> {
        let Some(&size) = self.packs.get(pack) else {
            return Err(Unusable::PackMissing);
        };
        if entry.offset + entry.stored_len as u64 > size {
            return Err(Unusable::PackShort);
        }
        if self.damaged.contains(&(*pack, entry.hash)) {
            return Err(Unusable::FailsHash);
        }
        Ok(())
    }

    /// The first unusable chunk of a file, if any: (chunk number, pack, why).
    pub fn first_unusable(&self, obj: &FileObject) -> Option<(usize, PackId, Unusable)> {
        obj.chunks.iter().enumerate().find_map(|(i, c)| {
            let pack = obj.packs[c.pack as usize];
            self.check(&pack, &c.entry).err().map(|u| (i, pack, u))
        })
    }

    pub fn file_ok(&self, obj: &FileObject) -> bool {
        self.first_unusable(obj).is_none()
    }

    pub fn has_pack(&self, pack: &PackId) -> bool {
        self.packs.contains_key(pack)
    }

    pub fn pack_size(&self, pack: &PackId) -> Option<u64> {
        self.packs.get(pack).copied()
    }

    pub(crate) fn add_pack(&mut self, pack: PackId, size: u64) {
        self.packs.insert(pack, size);
    }

    /// Marks a copy damaged in this view only (a writer that just found it bad).
    pub fn mark(&mut self, pack: PackId, chunk: Hash) {
        self.damaged.insert((pack, chunk));
    }

    pub fn recorded(&self) -> usize {
        self.damaged.len()
    }
}

/// Every damage record: (pack, chunk, record). A record that cannot be parsed still
/// counts, by its name: it was written only because something was found bad.
pub fn records(repo: &Repository) -> Result<Vec<(PackId, Hash, Option<DamageRecord>)>> {
    let mut out = Vec::new();
    for o in repo.store().list(DAMAGE_PREFIX)? {
        let mut parts = o.key[DAMAGE_PREFIX.len()..].split('/');
        let (Some(p), Some(c), None) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (Some(pack), Some(chunk)) = (Hash::parse_hex(p), Hash::parse_hex(c)) else {
            continue;
        };
        let record = repo
            .store()
            .get(&o.key)?
            .and_then(|b| serde_json::from_slice(&b).ok());
        out.push((pack, chunk, record));
    }
    Ok(out)
}

fn record_key(pack: &PackId, chunk: &Hash) -> String {
    format!("{DAMAGE_PREFIX}{}/{}", pack.hex(), chunk.hex())
}

/// Writes down that the copy of `entry` in `pack` fails its hash. Idempotent; a failure
/// to write is logged, never turned into the reader's error (which already says what is
/// wrong).
pub fn record(repo: &Repository, pack: &PackId, entry: &PackEntry, found_by: &str, problem: &str) {
    let rec = DamageRecord {
        pack: pack.hex(),
        chunk: entry.hash.hex(),
        offset: entry.offset,
        problem: problem.to_string(),
        found_by: found_by.to_string(),
        by: whoami(),
        at: now_rfc3339(),
    };
    let write = serde_json::to_vec_pretty(&rec)
        .map_err(crate::repo::json_error)
        .and_then(|b| {
            repo.store()
                .put_if_absent(&record_key(pack, &entry.hash), &b)
        });
    if let Err(e) = write {
        tracing::warn!(
            "cannot record damage to chunk {} in pack {}: {e}",
            entry.hash.hex(),
            pack.hex()
        );
    }
}

/// Removes the record of a copy that reads fine again, or whose pack left the repository.
pub fn clear(repo: &Repository, pack: &PackId, chunk: &Hash) -> Result<()> {
    repo.store().delete(&record_key(pack, chunk))
}
