//! The chunk index: every usable chunk a repository holds, by hash, where it lies,
//! and what is known damaged; what a writer builds on and a reader looks another copy
//! up in (`Repository::load_index`).

use std::collections::HashMap;

use crate::digest::Hash;
use crate::health::Health;
use crate::objects::{self, PackEntry, PackId};
use crate::proof::Outboard;

impl ChunkIndex {
    /// The pack slot of a chunk the server of a remote repository holds.
    pub const ON_SERVER: u32 = u32::MAX;

    /// What a push names chunk `loc` of a file with, to its server.
    pub fn named(&self, loc: &ChunkLoc) -> crate::possession::Named {
        use crate::possession::{Evidence, Named};
        let evidence = match loc.slot {
            ChunkIndex::ON_SERVER => match self.proofs.get(&loc.entry.hash) {
                Some((c, p)) => Evidence::Proof(*c, *p),
                None => Evidence::None,
            },
            slot => match self.packs.get(slot as usize) {
                Some(pack) => Evidence::Copy {
                    pack: *pack,
                    offset: loc.entry.offset,
                },
                None => Evidence::None,
            },
        };
        Named {
            hash: loc.entry.hash,
            len: loc.entry.raw_len,
            evidence,
        }
    }

    /// An index for a push through a server: empty, filled by asking the server.
    pub fn for_remote() -> ChunkIndex {
        ChunkIndex {
            remote: true,
            ..ChunkIndex::default()
        }
    }

    /// Notes that the server holds chunk `hash` of `len` bytes, with the push's proof
    /// that it holds the bytes when the key does not reach the server's copy.
    pub fn add_on_server(
        &mut self,
        hash: Hash,
        len: u32,
        proof: Option<(crate::possession::Challenge, crate::possession::Proof)>,
    ) {
        if let Some(p) = proof
            && !self.chunks.contains_key(&hash)
        {
            self.proofs.insert(hash, p);
        }
        self.chunks.entry(hash).or_insert(ChunkLoc {
            slot: ChunkIndex::ON_SERVER,
            entry: PackEntry {
                hash,
                offset: 0,
                stored_len: len,
                raw_len: len,
                flags: objects::FLAG_RAW,
            },
        });
    }

    /// Adds a pack's usable chunks; where a chunk has several copies, the first usable
    /// one is kept.
    pub fn add_pack(&mut self, id: PackId, entries: &[PackEntry]) {
        let slot = self.packs.len() as u32;
        self.packs.push(id);
        for &entry in entries {
            if self.health.check(&id, &entry).is_ok() {
                self.chunks
                    .entry(entry.hash)
                    .or_insert(ChunkLoc { slot, entry });
            }
        }
    }

    /// A pack just written by this process: it is not in the health listing yet.
    pub fn add_new_pack(&mut self, id: PackId, size: u64) {
        self.health.add_pack(id, size);
    }

    pub fn stored_bytes(&self) -> u64 {
        self.chunks
            .values()
            .map(|c| c.entry.stored_len as u64)
            .sum()
    }
}

/// Where a chunk is: the pack's slot in `ChunkIndex::packs` and its entry.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLoc {
    pub slot: u32,
    pub entry: PackEntry,
}

/// Every usable chunk a repository holds, by hash, and what is known damaged.
#[derive(Default)]
pub struct ChunkIndex {
    pub packs: Vec<PackId>,
    pub chunks: HashMap<Hash, ChunkLoc>,
    pub health: Health,
    /// A writer's share of the writers lock, held as long as it builds on this index.
    pub writing: Option<crate::store::WriterGuard>,
    /// When it was loaded, by the store's clock: what a writer built on was in the
    /// repository then (garbage collection's protection starts from it).
    pub since: Option<std::time::SystemTime>,
    /// Chunks the server of a remote repository holds (`remote.rs`): asked for as a
    /// push goes, and entered with `ChunkIndex::ON_SERVER` for a pack, since where they
    /// lie is the server's business.
    pub remote: bool,
    /// Of those, the ones the server held in a namespace the key does not reach, with
    /// the push's proof that it holds their bytes (`possession.rs`).
    pub proofs: HashMap<Hash, (crate::possession::Challenge, crate::possession::Proof)>,
}

/// A file as a push read it: its hash, and its chunks where the index places them
/// (what its chunk list is made of).
pub struct HashedFile {
    pub hash: Hash,
    pub size: u64,
    pub chunks: Vec<ChunkLoc>,
    /// Its proof, from the same pass as its hash.
    pub outboard: Outboard,
}
