//! The BLAKE3 tree of a file cut into blocks of `2^BLOCK_LOG` bytes: hashing bytes
//! into it (`TreeHasher`), a file's outboard (the chaining value of every block, checked
//! against the file's hash before use), which blocks of a list are proven (`Proven`),
//! and the error a list that fails its proof gets. Knows nothing of chunk lists or
//! readers, so the object formats (`objects.rs`) can carry a proof without depending
//! on how bytes are proven (`proof/mod.rs`).
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use blake3::hazmat::{
    ChainingValue, HasherExt, Mode, merge_subtrees_non_root, merge_subtrees_root,
};

use crate::digest::Hash;
use crate::error::{Error, Result};

/// Blocks of 64 KiB: an outboard is 32 bytes per block (0.05% of the file, about the
/// size of its chunk list), and a block is 64 BLAKE3 chunks, enough for the widest SIMD.
pub const BLOCK_LOG: u8 = 16;

/// The smallest and largest block sizes a chunk list may name (1 KiB, a BLAKE3 chunk;
/// 16 MiB). Outside them a list is damaged, not a reason to allocate.
const MIN_BLOCK_LOG: u8 = 10;
const MAX_BLOCK_LOG: u8 = 24;

pub type Cv = ChainingValue;

/// A file's outboard: the chaining value of each of its blocks, checked to merge into
/// the file's hash before anything is proven with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outboard {
    log: u8,
    size: u64,
    /// Empty when the file is one block (or empty): its hash proves it.
    cvs: Vec<Cv>,
}

impl Outboard {
    /// The outboard of a file of `size` bytes with blocks of `2^log` bytes, as a chunk
    /// list stores it; `check` before use.
    pub fn new(log: u8, size: u64, cvs: Vec<Cv>) -> Result<Outboard> {
        if !(MIN_BLOCK_LOG..=MAX_BLOCK_LOG).contains(&log) {
            return Err(Error::corrupt(format!(
                "its blocks of 2^{log} bytes are not between 2^{MIN_BLOCK_LOG} and 2^{MAX_BLOCK_LOG}"
            )));
        }
        let want = stored_cvs(log, size);
        if cvs.len() as u64 != want {
            return Err(Error::corrupt(format!(
                "it holds {} block hashes for a file of {size} bytes, which has {want}",
                cvs.len()
            )));
        }
        Ok(Outboard { log, size, cvs })
    }

    pub fn log(&self) -> u8 {
        self.log
    }

    pub fn cvs(&self) -> &[Cv] {
        &self.cvs
    }

    pub fn block_len(&self) -> u64 {
        1 << self.log
    }

    /// How many blocks the file has (0 for an empty file).
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(self.block_len())
    }

    /// The file hash these block values merge into; for a file of one block, `None`
    /// (its bytes alone give it).
    fn root(&self) -> Option<Hash> {
        if self.cvs.is_empty() {
            return None;
        }
        Some(Hash(
            *merge(&self.cvs, self.size, self.log, true).as_bytes(),
        ))
    }

    /// Whether these values merge into `file`: what makes them a proof of its blocks.
    pub fn proves(&self, file: &Hash) -> bool {
        match self.root() {
            Some(root) => root == *file,
            // One block or none: each block is checked against the file hash itself.
            None => self.size <= self.block_len(),
        }
    }

    /// Whether `pieces` (in order) are exactly block `b` of the file `file`.
    pub fn block_is(&self, file: &Hash, b: u64, pieces: &[&[u8]]) -> bool {
        let len: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        let start = b << self.log;
        if b >= self.blocks().max(1) || len != (self.size - start).min(self.block_len()) {
            return false;
        }
        if self.cvs.is_empty() {
            let mut h = blake3::Hasher::new();
            for p in pieces {
                h.update(p);
            }
            return Hash(*h.finalize().as_bytes()) == *file;
        }
        block_cv(start, pieces) == self.cvs[b as usize]
    }
}

/// Block values a list stores for a file of `size` bytes: none for one block.
fn stored_cvs(log: u8, size: u64) -> u64 {
    if size <= 1 << log {
        0
    } else {
        size.div_ceil(1 << log)
    }
}

/// The chaining value of the subtree starting at byte `start` (a multiple of the block
/// size) made of `pieces`; never the root (the file has more than one block).
fn block_cv(start: u64, pieces: &[&[u8]]) -> Cv {
    let mut h = blake3::Hasher::new();
    if start > 0 {
        h.set_input_offset(start);
    }
    for p in pieces {
        h.update(p);
    }
    h.finalize_non_root()
}

/// Merges the values of the blocks of `len` bytes (more than one block) the way BLAKE3
/// builds its tree: the left subtree is the largest power of two of chunks smaller than
/// the whole, which for more than one block is a whole number of blocks.
fn merge(cvs: &[Cv], len: u64, log: u8, root: bool) -> blake3::Hash {
    let left = blake3::hazmat::left_subtree_len(len);
    let split = (left >> log) as usize;
    let node = |part: &[Cv], len: u64| -> Cv {
        if part.len() == 1 {
            part[0]
        } else {
            *merge(part, len, log, false).as_bytes()
        }
    };
    let (l, r) = (node(&cvs[..split], left), node(&cvs[split..], len - left));
    if root {
        merge_subtrees_root(&l, &r, Mode::Hash)
    } else {
        blake3::Hash::from_bytes(merge_subtrees_non_root(&l, &r, Mode::Hash))
    }
}

/// The file hash and outboard of bytes fed in order, in one BLAKE3 pass: what a push
/// computes instead of a plain hash, at the same cost.
pub struct TreeHasher {
    log: u8,
    /// The block being filled, and where it starts.
    current: blake3::Hasher,
    start: u64,
    filled: u64,
    cvs: Vec<Cv>,
}

impl Default for TreeHasher {
    fn default() -> Self {
        TreeHasher::new(BLOCK_LOG)
    }
}

impl TreeHasher {
    pub fn new(log: u8) -> TreeHasher {
        TreeHasher {
            log,
            current: blake3::Hasher::new(),
            start: 0,
            filled: 0,
            cvs: Vec::new(),
        }
    }

    pub fn update(&mut self, mut data: &[u8]) {
        let block = 1u64 << self.log;
        while !data.is_empty() {
            if self.filled == block {
                self.close_block();
            }
            let take = ((block - self.filled) as usize).min(data.len());
            self.current.update(&data[..take]);
            self.filled += take as u64;
            data = &data[take..];
        }
    }

    /// Closes the block just filled; only called once more bytes follow it, so the
    /// first block is never the whole file here.
    fn close_block(&mut self) {
        self.cvs.push(self.current.finalize_non_root());
        self.start += self.filled;
        self.filled = 0;
        self.current = blake3::Hasher::new();
        self.current.set_input_offset(self.start);
    }

    /// The file's hash and its outboard.
    pub fn finalize(mut self) -> (Hash, Outboard) {
        let size = self.start + self.filled;
        let hash = if self.start == 0 {
            // One block (or none): it is the whole tree.
            Hash(*self.current.finalize().as_bytes())
        } else {
            // Blocks close only when bytes follow, so the last one holds some.
            self.cvs.push(self.current.finalize_non_root());
            Hash(*merge(&self.cvs, size, self.log, true).as_bytes())
        };
        if size <= 1 << self.log {
            self.cvs.clear();
        }
        let log = self.log;
        (
            hash,
            Outboard {
                log,
                size,
                cvs: self.cvs,
            },
        )
    }
}

/// Which blocks of a file were proven, shared by everyone reading it through the same
/// chunk list: each block is hashed once however often it is read.
#[derive(Debug, Default)]
pub struct Proven {
    /// Set once: from the list, or built by reading the whole file (a list written
    /// before proofs).
    outboard: OnceLock<Outboard>,
    bits: OnceLock<Vec<AtomicU64>>,
    /// Every byte proven: the whole file was hashed, or its one chunk is the file.
    all: AtomicBool,
}

impl Proven {
    /// For a list whose outboard was checked against the file's hash.
    pub fn with(outboard: Outboard) -> Proven {
        let p = Proven::default();
        p.set_outboard(outboard);
        p
    }

    pub fn outboard(&self) -> Option<&Outboard> {
        self.outboard.get()
    }

    pub(crate) fn set_outboard(&self, ob: Outboard) {
        let words = ob.blocks().div_ceil(64) as usize;
        let _ = self
            .bits
            .set((0..words).map(|_| AtomicU64::new(0)).collect::<Vec<_>>());
        let _ = self.outboard.set(ob);
    }

    pub fn all(&self) -> bool {
        self.all.load(Ordering::Relaxed)
    }

    pub fn is_proven(&self, b: u64) -> bool {
        self.all()
            || self
                .bits
                .get()
                .and_then(|w| w.get((b / 64) as usize))
                .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (b % 64)) != 0)
    }

    pub(crate) fn mark(&self, b: u64) {
        if let Some(w) = self.bits.get().and_then(|w| w.get((b / 64) as usize)) {
            w.fetch_or(1 << (b % 64), Ordering::Relaxed);
        }
    }

    /// Marks every block proven (the whole file was hashed, or its one chunk is the file).
    pub fn mark_all(&self) {
        self.all.store(true, Ordering::Relaxed);
    }
}

/// A chunk list that fails its proof: it names other bytes than the file's.
pub fn unproven(what: &str, detail: &str) -> Error {
    Error::corrupt(format!(
        "{what} does not prove against its file's hash ({detail}): it names other bytes than the file's"
    ))
    .hint("`sealvol volume verify` names every such list; `sealvol repair` rebuilds it from the data where the data is still there")
    .because(crate::error::Reason::UnprovenList)
}

/// Whether `e` says a chunk list failed its proof (rather than a chunk copy its hash).
pub fn is_unproven(e: &Error) -> bool {
    e.kind() == crate::error::ErrorKind::Corrupt
        && e.reason() == Some(crate::error::Reason::UnprovenList)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize) -> Vec<u8> {
        crate::testutil::noise(n, 0x12345678)
    }

    #[test]
    fn the_tree_of_blocks_gives_the_plain_blake3_hash() {
        let g = 1usize << BLOCK_LOG;
        for n in [
            0,
            1,
            1023,
            1024,
            g - 1,
            g,
            g + 1,
            2 * g,
            2 * g + 7,
            3 * g,
            5 * g - 1,
            8 * g,
            13 * g + 4321,
        ] {
            let bytes = data(n);
            let want = Hash(*blake3::hash(&bytes).as_bytes());
            // Fed in awkward pieces, across block edges.
            for step in [1000, 4096, 65535, 1 << 20] {
                let mut t = TreeHasher::default();
                for p in bytes.chunks(step) {
                    t.update(p);
                }
                let (h, ob) = t.finalize();
                assert_eq!(h, want, "n={n} step={step}");
                assert!(ob.proves(&want), "n={n}");
                assert_eq!(ob.cvs.len() as u64, stored_cvs(BLOCK_LOG, n as u64));
                for b in 0..ob.blocks() {
                    let s = (b as usize) * g;
                    let e = (s + g).min(n);
                    assert!(ob.block_is(&want, b, &[&bytes[s..e]]), "n={n} b={b}");
                    if e > s {
                        let mut bad = bytes[s..e].to_vec();
                        bad[0] ^= 1;
                        assert!(!ob.block_is(&want, b, &[&bad]), "n={n} b={b}");
                    }
                }
            }
        }
    }

    #[test]
    fn an_outboard_of_another_file_or_shape_does_not_prove() {
        let g = 1usize << BLOCK_LOG;
        let a = data(3 * g + 5);
        let mut t = TreeHasher::default();
        t.update(&a);
        let (ha, ob) = t.finalize();
        let other = Hash(*blake3::hash(b"other").as_bytes());
        assert!(ob.proves(&ha));
        assert!(!ob.proves(&other));
        // A value swapped, or the list of another length.
        let mut cvs = ob.cvs.clone();
        cvs.swap(0, 1);
        assert!(!Outboard::new(BLOCK_LOG, ob.size, cvs).unwrap().proves(&ha));
        assert!(Outboard::new(BLOCK_LOG, ob.size, ob.cvs[..3].to_vec()).is_err());
        assert!(Outboard::new(40, ob.size, ob.cvs.clone()).is_err());
        assert!(Outboard::new(3, ob.size, ob.cvs.clone()).is_err());
        // Block 1's bytes offered as block 2.
        assert!(!ob.block_is(&ha, 2, &[&a[g..2 * g]]));
        assert!(!ob.block_is(&ha, 9, &[&a[g..2 * g]]));
    }
}
