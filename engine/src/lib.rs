//! The sealvol engine: content-addressed, sealed volumes of model data.
//!
//! It knows nothing about terminals. The parts, each in its own module:
//! refs and digests, chunking, the object store, the repository and its registry,
//! push, pull, verify, and process-local state.

pub mod agent;
pub mod api;
pub mod cache;
pub mod chunk;
pub mod diff;
pub mod digest;
pub mod error;
pub mod files;
pub mod jobs;
pub mod mount;
pub mod objects;
pub mod progress;
pub mod pull;
pub mod push;
pub mod refs;
pub mod registry;
pub mod repo;
pub mod secrets;
pub mod sources;
pub mod state;
pub mod store;
pub mod sync;
#[cfg(test)]
mod testutil;
pub mod verify;
pub mod walk;

pub use error::{Error, ErrorKind, Result};
pub use refs::{Digest, Name, Ref, VolumeName};
pub use repo::Repository;
