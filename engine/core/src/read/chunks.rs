//! `Chunks`: where verified chunks come from, and the one place bytes are proven to be
//! a file's (`Chunks::fetch_proving`), over any tier (`Tiers`, `Origin`).

use std::ops::Range;

use super::shared::MAX_RUN;
use crate::chunk_bytes::ChunkBytes;
use crate::error::{Error, Result};
use crate::objects::FileObject;
use crate::proof::{Outboard, TreeHasher, unproven};

/// Where verified chunks come from.
pub trait Chunks {
    /// Chunks `range` of a file, in order, each checked against the hash its chunk list
    /// names for it; not yet proven to be the file's (`fetch` is).
    fn fetch_unproven(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>>;

    /// Chunks `range` of a file, in order, every byte proven to be the file's: checked
    /// against its chunk's hash or taken on its blocks (`fetch_for_proof`), and its
    /// blocks against the file's proof (`proof/`). A list that names other bytes than
    /// the file's fails with `Corrupt`.
    fn fetch(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>> {
        let bytes = obj.start_of(range.start)..obj.start_of(range.end);
        self.fetch_proving(obj, range, bytes)
    }

    /// Chunks `range` of a file (those holding bytes `[start, end)`,
    /// `FileObject::chunks_of`), with every byte of `[start, end)` proven to be the
    /// file's; bytes outside it are the caller's to cut off. What a reader of a few bytes
    /// asks for (a mount's read, an open file of the Python package): the blocks at the
    /// chunks' ends that the range does not touch are not proven, so no neighbouring
    /// bytes are fetched for them.
    fn fetch_covering(&self, obj: &FileObject, start: u64, end: u64) -> Result<Vec<ChunkBytes>> {
        let end = end.min(obj.size);
        if start >= end {
            return Ok(Vec::new());
        }
        self.fetch_proving(obj, obj.chunks_of(start, end), start..end)
    }

    /// The one place a read decides that bytes are the file's: chunks `range` of a
    /// file, with `bytes` (inside them) proven against the file's proof. The chunks come
    /// from `fetch_for_proof` (checked against their names, or taken on the blocks
    /// wholly inside them, proven from these very bytes), every block `bytes` touches is
    /// hashed against the outboard, and what a block reaches into beyond the chunks
    /// comes from `edge_bytes`. A list that names other bytes than the file's fails
    /// with `Corrupt` (`proof::is_unproven`) and is written down (`note_unproven`).
    fn fetch_proving(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        bytes: Range<u64>,
    ) -> Result<Vec<ChunkBytes>> {
        let proven = (|| {
            // A list written before proofs: the file is proven whole, once.
            self.prove_whole(obj)?;
            let got = self.fetch_for_proof(obj, range.clone())?;
            crate::proof::prove(
                obj,
                bytes.start,
                bytes.end,
                range.start,
                &got,
                &mut |x, y, edge| self.edge_bytes(obj, x, y, edge),
            )?;
            Ok(got)
        })();
        proven.inspect_err(|e| {
            if crate::proof::is_unproven(e) {
                self.note_unproven(obj, e);
            }
        })
    }

    /// A chunk list found failing its proof: a reader that can writes it down, so that
    /// garbage collection deletes nothing on its word and verify names it
    /// (`Repository::record_list_damage`). Verify and diff, which judge and report
    /// themselves, do not.
    fn note_unproven(&self, _obj: &FileObject, _e: &Error) {}

    /// What `fetch` proves: chunks `range`, each checked against its hash, or (a reader
    /// that can) taken on the blocks wholly inside the range, already proven from these
    /// very bytes, so that `fetch` hashes only the blocks at the ends again.
    fn fetch_for_proof(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>> {
        self.fetch_unproven(obj, range)
    }

    /// Bytes `[x, y)` of a file that a block being proven reaches into beyond the chunks
    /// at hand: by default always whole chunks, each checked against its hash.
    fn edge_bytes(
        &self,
        obj: &FileObject,
        x: u64,
        y: u64,
        _edge: crate::proof::Edge,
    ) -> Result<Vec<ChunkBytes>> {
        checked_bytes(self, obj, x, y)
    }

    /// Proves a list against its file by reading every chunk it names, in order, and
    /// hashing them into the file's hash, whatever its own proof says (verify with
    /// data, repair).
    fn prove_by_reading(&self, obj: &FileObject) -> Result<Outboard> {
        let mut hasher = TreeHasher::default();
        self.for_each_unproven(obj, 0..obj.chunks.len(), &mut |c| {
            hasher.update(c);
            Ok(())
        })?;
        let (hash, ob) = hasher.finalize();
        if hash != obj.hash {
            return Err(unproven(
                &obj.list_name(),
                "its chunks hash to another file",
            ));
        }
        Ok(ob)
    }

    /// Proves a whole file whose list carries no outboard (written before proofs): its
    /// chunks, read in order, must hash to the file's hash. Builds the outboard as it
    /// goes, so later reads prove block by block.
    fn prove_whole(&self, obj: &FileObject) -> Result<()> {
        let proven = &obj.proof;
        if proven.outboard().is_some() || proven.all() {
            return Ok(());
        }
        let ob = self.prove_by_reading(obj)?;
        proven.set_outboard(ob);
        proven.mark_all();
        Ok(())
    }

    /// Calls `f` with chunks `range` of a file, proven, in order, fetching a window of
    /// up to `MAX_RUN` bytes at a time (so memory stays bounded whatever the file).
    fn for_each(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        f: &mut dyn FnMut(&ChunkBytes) -> Result<()>,
    ) -> Result<()> {
        for w in windows(obj, range) {
            for c in self.fetch(obj, w)? {
                f(&c)?;
            }
        }
        Ok(())
    }

    /// `for_each` with each chunk checked against its hash only: for a caller that
    /// proves the whole file itself before anything it read is used (`prove_by_reading`
    /// hashes it into the file's tree).
    fn for_each_unproven(
        &self,
        obj: &FileObject,
        range: Range<usize>,
        f: &mut dyn FnMut(&ChunkBytes) -> Result<()>,
    ) -> Result<()> {
        for w in windows(obj, range) {
            for c in self.fetch_unproven(obj, w)? {
                f(&c)?;
            }
        }
        Ok(())
    }

    /// Calls `f` with the proven bytes `[start, end)` of a file, in order.
    fn for_bytes(
        &self,
        obj: &FileObject,
        start: u64,
        end: u64,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<()> {
        let end = end.min(obj.size);
        if start >= end {
            return Ok(());
        }
        let (first, last) = (obj.chunk_at(start), obj.chunk_at(end - 1) + 1);
        let mut at = obj.start_of(first);
        self.for_each(obj, first..last, &mut |c| {
            let c_end = at + c.len() as u64;
            let from = start.saturating_sub(at) as usize;
            let to = (end.min(c_end) - at) as usize;
            f(&c[from..to]);
            at = c_end;
            Ok(())
        })
    }
}

/// Bytes `[x, y)` of a file out of its whole chunks, each checked against its hash.
pub(super) fn checked_bytes<C: Chunks + ?Sized>(
    chunks: &C,
    obj: &FileObject,
    x: u64,
    y: u64,
) -> Result<Vec<ChunkBytes>> {
    let (c0, c1) = (obj.chunk_at(x), obj.chunk_at(y - 1) + 1);
    Ok(slice_bytes(
        obj,
        c0,
        &chunks.fetch_unproven(obj, c0..c1)?,
        x,
        y,
    ))
}

/// Bytes `[x, y)` of a file out of its chunks from `first` (`chunks`), as slices.
pub fn slice_bytes(
    obj: &FileObject,
    first: usize,
    chunks: &[ChunkBytes],
    x: u64,
    y: u64,
) -> Vec<ChunkBytes> {
    let mut at = obj.start_of(first);
    let mut out = Vec::new();
    for c in chunks {
        let end = at + c.len() as u64;
        if end > x && at < y {
            out.push(c.sub(x.saturating_sub(at) as usize..(y.min(end) - at) as usize));
        }
        at = end;
    }
    out
}

/// Chunks `range` of a file in windows of up to `MAX_RUN` stored bytes (at least one
/// chunk each).
pub(super) fn windows(
    obj: &FileObject,
    range: Range<usize>,
) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut start = range.start;
    std::iter::from_fn(move || {
        if start >= range.end {
            return None;
        }
        let mut end = start;
        let mut bytes = 0u64;
        while end < range.end && (end == start || bytes < MAX_RUN) {
            bytes += obj.chunks[end].entry.stored_len as u64;
            end += 1;
        }
        let w = start..end;
        start = end;
        Some(w)
    })
}
