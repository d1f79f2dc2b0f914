//! One read of a mounted file, as the read layer's proven read asks for its chunks
//! (`Chunks::fetch_proving`, the one place bytes are decided to be the file's): from
//! the memory tier (`memo.rs`), which fetches what it lacks through the tiers with the
//! blocks inside each run proven as they come in, and the bytes a block at the read's
//! ends reaches into from wherever costs least. `fs.rs` maps a handle and an offset to
//! one of these and answers the kernel with what it proves.

use sealvol_core::error::Result;
use sealvol_core::objects::FileObject;
use sealvol_core::proof::Edge;
use sealvol_core::read::{ChunkBytes, Chunks, Tiers};

use crate::layout::Layout;
use crate::memo::{Memo, Want};

/// One read's chunks as the read layer's proven read (`Chunks::fetch_proving`) asks
/// for them: from the memory tier (which fetches what it lacks through the tiers, with
/// the blocks inside each run proven as it comes in), edges as `edge_bytes` chooses,
/// and a list without a proof proven whole by the tiers. The decision that bytes are
/// the file's is the read layer's, as for a pull.
pub(crate) struct Reading<'a> {
    pub tiers: &'a Tiers,
    pub memo: &'a Memo,
    pub layout: &'a Layout,
    /// The end of the read: an edge past it is the next chunk of a reader reading on.
    pub end: u64,
    /// The reader reads on: the chunk after this read is the next one it asks for.
    pub onward: bool,
}

impl Chunks for Reading<'_> {
    fn fetch_unproven(
        &self,
        obj: &FileObject,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<ChunkBytes>> {
        self.tiers.fetch_unproven(obj, range)
    }

    fn fetch_for_proof(
        &self,
        _obj: &FileObject,
        range: std::ops::Range<usize>,
    ) -> Result<Vec<ChunkBytes>> {
        self.memo
            .get(self.tiers, self.layout, range, Want::Demand, None)
    }

    fn edge_bytes(&self, _obj: &FileObject, x: u64, y: u64, edge: Edge) -> Result<Vec<ChunkBytes>> {
        // The next chunk of a reader reading on is read next anyway.
        let whole = self.onward && x >= self.end;
        self.edge_from(self.layout, x, y, edge, whole)
    }

    fn prove_whole(&self, obj: &FileObject) -> Result<()> {
        self.tiers.prove_whole(obj)
    }

    fn note_unproven(&self, obj: &FileObject, e: &sealvol_core::Error) {
        self.tiers.note_unproven(obj, e)
    }
}

impl Reading<'_> {
    /// Bytes `[x, y)` of a file that a block being proven reaches into: from the memory
    /// tier when it holds their chunks or is fetching them, as whole chunks when `whole`
    /// (a reader reading on will ask for them next) or through a ring, else read for the proof alone
    /// (`Tiers::fetch_edge`: the few KiB the block needs, not whole neighbouring chunks
    /// a reader that jumps around may never ask for); checked whole chunks when the
    /// proof asks for them again.
    fn edge_from(
        &self,
        layout: &Layout,
        x: u64,
        y: u64,
        edge: Edge,
        whole: bool,
    ) -> Result<Vec<ChunkBytes>> {
        let range = layout.chunks_of(x, y);
        // Through a ring the edge is whole chunks either way: kept in memory, the
        // reader's next read finds them (fetched apart from it, a busy reader that
        // read out of order took 1.1x its bytes from the peer).
        if edge == Edge::Checked || whole || self.tiers.edges_are_whole_chunks() {
            let whole = self
                .memo
                .get(self.tiers, layout, range.clone(), Want::Demand, None)?;
            return Ok(sealvol_core::read::slice_bytes(
                &layout.obj,
                range.start,
                &whole,
                x,
                y,
            ));
        }
        let held = match self.memo.peek(layout, range.clone()) {
            Ok(held) => held,
            // Read ahead and on their way: waiting costs less than reading them twice.
            Err(true) => self
                .memo
                .get(self.tiers, layout, range.clone(), Want::Demand, None)?,
            Err(false) => {
                return self
                    .tiers
                    .fetch_edge(&layout.obj, x, y, &self.tiers.counters);
            }
        };
        Ok(sealvol_core::read::slice_bytes(
            &layout.obj,
            range.start,
            &held,
            x,
            y,
        ))
    }
}
