//! What writers keep to while a garbage collection may run (docs/GC.md): the rounds a
//! collection condemns packs and chunk lists in (`rounds`), which a writer that
//! builds on one of them rescues first (`protect`, `replace_chunk_list`) and a
//! writer's index leaves out (`condemned_packs`).
//!
//! The collector itself is the `sealvol-gc` crate (`Collector`), so that a change to
//! it rebuilds only what collects. `Repository::collect` runs it on the repository's
//! own store, or asks the server that owns the repository's writes.

pub mod rounds;

pub use crate::ops::GcOptions;
pub use crate::outcomes::{GcReport, PurgedVersion};
pub(crate) use rounds::protect;
pub use rounds::{condemned_packs, replace_chunk_list};

use crate::error::Result;
use crate::repo::Repository;

/// A garbage collection made on a repository's own store (`sealvol_gc::Here`).
pub trait Collector {
    fn collect_here(&self, repo: &Repository, opts: &GcOptions) -> Result<GcReport>;
}
