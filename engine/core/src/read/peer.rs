//! Another machine that serves chunks by hash, as the read layer asks it.

use crate::digest::Hash;
use crate::error::Result;
use crate::objects::PackId;

/// Another machine that serves chunks by hash: `sealvol serve`, the in-cluster tier.
pub trait Peer: Send + Sync {
    /// Where it is, for logs.
    fn name(&self) -> &str;

    /// Puts in `into` (replacing what it held, keeping its memory) the stored bytes of
    /// `chunks` (hash, stored length), which lie back to back in `pack` from `offset`,
    /// in order, for a reader of file `file` (whose chunk list names them: a server
    /// lets a key read only chunks of files its namespaces hold, and proves them).
    /// Unverified: the caller checks every chunk.
    fn read_run(
        &self,
        file: &Hash,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        into: &mut Vec<u8>,
    ) -> Result<()>;

    /// Asks it something cheap, within a short bound: Ok when it answers now. A peer
    /// passed over is asked nothing else until it answers this (`liveness.rs`).
    fn probe(&self) -> Result<()> {
        Ok(())
    }
}
