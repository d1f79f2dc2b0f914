//! What the repository knows is damaged, so that nothing new is built on it.
//!
//! A chunk copy (one chunk at one place in one pack) is unusable when its pack is gone,
//! when the pack ends before the chunk does (a truncated upload), or when a read found
//! that its bytes fail their hash. The first two show in a listing of `packs/`; the
//! third is written down as a damage record (`DamageRecord`) by verify and by any reader
//! whose origin read failed its hash (`Repository::record_damage`). Writers load
//! `Health` with the chunk index and never reuse an unusable copy; a chunk list that
//! names one is replaced by one that names a healthy copy. docs/FORMAT.md ("Damage")
//! states the rule.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::digest::Hash;
use crate::objects::{FileObject, PackEntry, PackId};

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
    /// Its pack is condemned by a garbage collection (for writers only: the pack is
    /// still there for readers, but nothing new may be built on it).
    Condemned,
}

impl Unusable {
    pub fn describe(self, pack: &PackId) -> String {
        match self {
            Unusable::PackMissing => format!("pack {} is missing", pack.hex()),
            Unusable::PackShort => format!("pack {} is cut short", pack.hex()),
            Unusable::FailsHash => format!("its copy in pack {} fails its hash check", pack.hex()),
            Unusable::Condemned => {
                format!("pack {} is condemned by a garbage collection", pack.hex())
            }
        }
    }
}

/// The packs present (with their sizes) and the damage records: enough to tell, without
/// reading a byte of chunk data, whether a chunk copy can be used.
#[derive(Debug, Default, Clone)]
pub struct Health {
    packs: HashMap<PackId, u64>,
    damaged: HashSet<(PackId, Hash)>,
    /// Packs a garbage collection has condemned, as a writer sees them (docs/GC.md).
    condemned: HashSet<PackId>,
}

impl Health {
    /// The packs present, with their sizes, and the copies damage records name.
    pub fn new(
        packs: impl IntoIterator<Item = (PackId, u64)>,
        damaged: impl IntoIterator<Item = (PackId, Hash)>,
    ) -> Health {
        Health {
            packs: packs.into_iter().collect(),
            damaged: damaged.into_iter().collect(),
            condemned: HashSet::new(),
        }
    }

    /// What a writer must also avoid: packs a garbage collection condemned.
    pub(crate) fn avoid(&mut self, condemned: impl IntoIterator<Item = PackId>) {
        self.condemned.extend(condemned);
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
        if self.condemned.contains(pack) {
            return Err(Unusable::Condemned);
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

    /// The packs present.
    pub fn packs(&self) -> impl Iterator<Item = &PackId> {
        self.packs.keys()
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
