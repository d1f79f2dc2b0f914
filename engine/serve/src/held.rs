//! A file's chunks as the server holds them, for the read layer's one proven read
//! (`sealvol_core::read::Chunks::fetch_proving`): a run already at hand (fetched and
//! checked for a client's run request), any other chunks through the server's cache in
//! runs of adjacent chunks of one pack (one origin read per stretch of misses), and the
//! few bytes of a block's edge read for the proof alone. What the chunk routes and the
//! Hub's file route (`hub/`) send is proven through it.

use std::ops::Range;

use sealvol_core::objects::FileObject;
use sealvol_core::proof::Edge;
use sealvol_core::read::{ChunkBytes, Chunks};
use sealvol_core::repo::Repository;

use crate::chunks::{ChunkService, Miss};

pub struct HeldChunks<'a> {
    service: &'a ChunkService,
    repo: &'a Repository,
    /// The run being sent, if any: its first chunk's index, and its chunks.
    at_hand: (usize, &'a [ChunkBytes]),
}

impl<'a> HeldChunks<'a> {
    /// A file's chunks, all through the server's cache.
    pub fn new(service: &'a ChunkService, repo: &'a Repository) -> HeldChunks<'a> {
        HeldChunks {
            service,
            repo,
            at_hand: (0, &[]),
        }
    }

    /// With chunks `at_hand.0..` of the file already fetched: `at_hand.1`.
    pub fn with_run(
        service: &'a ChunkService,
        repo: &'a Repository,
        at_hand: (usize, &'a [ChunkBytes]),
    ) -> HeldChunks<'a> {
        HeldChunks {
            service,
            repo,
            at_hand,
        }
    }
}

impl Chunks for HeldChunks<'_> {
    fn fetch_unproven(
        &self,
        obj: &FileObject,
        range: Range<usize>,
    ) -> sealvol_core::Result<Vec<ChunkBytes>> {
        let (first, held) = self.at_hand;
        if !held.is_empty() && range.start >= first && range.end <= first + held.len() {
            return Ok(held[range.start - first..range.end - first].to_vec());
        }
        // Adjacent chunks of one pack, back to back: one run each.
        let mut out = Vec::with_capacity(range.len());
        let mut i = range.start;
        while i < range.end {
            let c = &obj.chunks[i];
            let mut run = vec![(c.entry.hash, c.entry.stored_len)];
            let mut next = c.entry.offset + c.entry.stored_len as u64;
            let mut j = i + 1;
            while j < range.end
                && obj.chunks[j].pack == c.pack
                && obj.chunks[j].entry.offset == next
                && run.len() < crate::chunks::MAX_RUN_CHUNKS
                && next - c.entry.offset + obj.chunks[j].entry.stored_len as u64
                    <= crate::chunks::MAX_RUN_BYTES
            {
                let e = &obj.chunks[j].entry;
                run.push((e.hash, e.stored_len));
                next += e.stored_len as u64;
                j += 1;
            }
            let pack = obj.packs[c.pack as usize];
            out.extend(
                self.service
                    .get_run(&pack, c.entry.offset, &run, None)
                    .map_err(unavailable)?,
            );
            i = j;
        }
        Ok(out)
    }

    fn edge_bytes(
        &self,
        obj: &FileObject,
        x: u64,
        y: u64,
        edge: Edge,
    ) -> sealvol_core::Result<Vec<ChunkBytes>> {
        match edge {
            Edge::Cheap => self.service.edge_bytes(obj, x, y).map_err(unavailable),
            Edge::Checked => {
                let (c0, c1) = (obj.chunk_at(x), obj.chunk_at(y - 1) + 1);
                let whole = self.fetch_unproven(obj, c0..c1)?;
                Ok(sealvol_core::read::slice_bytes(obj, c0, &whole, x, y))
            }
        }
    }

    fn prove_whole(&self, obj: &FileObject) -> sealvol_core::Result<()> {
        sealvol_core::read::Origin(self.repo).prove_whole(obj)
    }

    fn note_unproven(&self, obj: &FileObject, e: &sealvol_core::Error) {
        self.repo
            .record_list_damage(&obj.hash, e.message(), "serve");
    }
}

/// A chunk the server could not give, as the read layer's error.
pub fn unavailable(m: Miss) -> sealvol_core::Error {
    sealvol_core::Error::new(
        sealvol_core::error::ErrorKind::Unavailable,
        format!("{m:?}"),
    )
}
