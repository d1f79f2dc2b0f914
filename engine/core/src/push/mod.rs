//! Push: files become a sealed version, uploading only the chunks the repository
//! lacks.
//!
//! - `local`: a local directory, with the stat cache that skips unchanged files;
//! - `stream`: files streamed from a source (a sync), with no local copy;
//! - `pipeline`: both read through it. Three stages run at once so that both cores
//!   work: one thread reads files in large blocks and cuts chunks; a pool hashes
//!   chunks; the calling thread, in file order, feeds each file's whole-content hash
//!   and hands new chunks to the pack writer;
//! - `packs`: the pack writer and publisher threads (fsync, publish, index) off the
//!   critical path; `buffers`: the recycled block buffers that bound memory.
//! - `stored`: what a push builds on (the chunk index after recovery, the files
//!   stored whole); `lists`: the chunk lists a push writes to the repository's own
//!   store; `inputs`: where the pipeline gets a file's bytes; `report`: what it says.
//!
//! Write order is the repository's safety rule: packs → index → chunk lists →
//! (barrier) → manifest → tags (`Repository::seal`). A push killed at any point leaves
//! no manifest pointing at missing data, and its finished packs are re-indexed and
//! reused by the next push.

mod buffers;
mod inputs;
pub(crate) mod lists;
mod local;
mod packs;
mod pipeline;
mod report;
pub(crate) mod stored;
mod stream;

pub use inputs::Inputs;
pub use local::{PushOptions, SealGuard, StatCache, push, store_files};
pub use report::PushReport;
pub use stored::{ASK_AT_ONCE, COLLECTED_RETRIES, index_after_recovery, stored_file, stored_files};
pub use stream::{
    Ingested, StoredFiles, StreamFile, check_stream_listing, ingest, seal_listing, seal_streams,
};
