//! Where repository objects live. Every backend (a local directory, an S3-compatible
//! bucket in `sealvol-s3repo`, a `sealvol serve` in `remote.rs`, and for the engine's
//! own tests a store in memory and a decorator that fails on cue) offers the same
//! small set of operations, and the two that make the repository safe for many
//! writers: create-if-absent for immutable objects and compare-and-swap for tags.
//!
//! The trait is shaped by what an object store can do, so that an S3 backend maps each
//! call to one request: ranged reads; listings that come a page at a time, in key order,
//! with sizes; conditional writes as the only coordination (`If-None-Match: *` for
//! `put_if_absent`, `If-Match` on the ETag for `put_if_match`). Calls take `&self` and
//! may run from many threads at once: a remote backend keeps many requests in flight.
//! Only the repository (`repo.rs`, `registry/`) calls a store; everything else asks
//! the repository for typed objects.

pub mod faults;
mod local;
mod memory;
mod object_store;
mod staging;
mod traffic;

pub use faults::Faulty;
pub use local::LocalStore;
pub use memory::MemoryStore;
pub(crate) use object_store::in_parallel;
pub use object_store::{ETag, ObjectInfo, ObjectStore, Page, Requests, Stamp, WriterGuard};
pub use staging::{Staged, clean_staging_dir, owner_may_live, process_started, unique_temp_name};
pub use staging::{host, process_gone};
pub use traffic::Traffic;
