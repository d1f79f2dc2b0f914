//! A repository offered by a server that owns its writes (`sealvol serve`, reached
//! with `--remote`): a key holder asks for operations, never writes the objects that
//! other writers and readers build on. The client still reads through the store (what
//! its key may see) and uploads packs, which the server checks against their names and
//! indexes itself; everything derived or shared (chunk lists and their proofs, indexes,
//! manifests, listings, summaries, tags, trash and damage records, garbage-collection
//! rounds) the server writes, after checking what it was asked.
//!
//! The registry's operations are asked of it as of the repository itself
//! (`ops::Registry`, `registry/`); what a push asks beyond them is this `Remote`.

use crate::digest::Hash;
use crate::error::Result;
use crate::possession::{Challenge, Evidence, Named};

/// Whether the server holds a chunk a push asks about, as far as the push may know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Not held, or held where the caller may not be told (a private namespace):
    /// upload it.
    No,
    /// Held, and the caller's key reaches it: its namespaces hold it, or it uploaded
    /// the copy. Name it as it is.
    Yours,
    /// Held in a namespace the key does not reach: name it with a proof of possession
    /// under the answer's challenge (`possession.rs`), or upload it.
    Prove,
}

/// The server's answer to which chunks it holds.
#[derive(Debug, Clone)]
pub struct HeldAnswer {
    pub held: Vec<Held>,
    /// Set when any chunk is `Prove`.
    pub challenge: Option<Challenge>,
}

/// What a push asks of the server that owns the repository's writes, beyond the
/// registry's operations (`ops::Registry`): which chunks and files it holds, and the
/// chunk lists it proves and writes itself. A local push writes those itself.
pub trait Remote: crate::ops::Registry {
    /// Which of `hashes` the repository holds a usable copy of (a chunk is stored once
    /// for all namespaces), and which of those the key may name without proving that
    /// it holds the bytes: a push uploads only the others.
    fn have_chunks(&self, hashes: &[Hash]) -> Result<HeldAnswer>;

    /// For each file, its chunk count if its chunk list is stored, proven and names
    /// only usable copies (a push skips such a file), else `None`.
    fn stored_files(&self, hashes: &[Hash]) -> Result<Vec<Option<u64>>>;

    /// Asks the server to store the chunk list of file `hash`: its chunks by hash and
    /// length, in order, all already stored, each with what lets this key name it
    /// (`Evidence`). The server finds them, checks the evidence, proves them by hashing
    /// them into `hash`, and writes the list with its proof. Returns whether a list was
    /// written (false: an equal one was there).
    fn put_list(&self, hash: &Hash, size: u64, chunks: &[Named]) -> Result<bool>;

    /// Small files (`small.rs`), by hash and size, whose one chunk is stored, with what
    /// lets this key name it: for each, whether the server holds it and takes the
    /// evidence (then it needs no list, and counts as sent); the others' lists are sent
    /// with `put_list`. One request for many files, where `put_list` would be one each.
    fn put_small_files(&self, files: &[(Hash, u64, Evidence)]) -> Result<Vec<bool>>;

    /// A garbage collection, which the server runs (admin keys only), condemning and
    /// sweeping what is due without waiting in the request.
    fn collect(&self, opts: &crate::ops::GcOptions) -> Result<crate::outcomes::GcReport>;
}
