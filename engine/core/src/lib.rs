//! sealvol's core: sealed, content-addressed volumes of model data in a repository.
//!
//! Its one job is the repository and everything that reads or writes it: the formats
//! (refs, digests, chunking, objects), the object store, the repository and its
//! registry of versions and tags with its trash, the read layer every reader goes
//! through (node-disk cache, then origin, every chunk checked), and push, pull, verify,
//! repair, diff and files. Garbage collection runs through `Repository::collect`, with
//! the collector of the `sealvol-gc` crate; core keeps what writers keep to while one
//! runs (`gc/`).
//! It needs no network client, no FUSE and no database, and knows nothing about
//! terminals: the crates around it (mount, node, sources) and the app build on it.

pub mod cache;
pub mod chunk;
pub mod chunk_bytes;
pub mod chunk_index;
pub mod config;
pub mod copy;
pub mod crash;
pub mod damage;
pub mod deadline;
pub mod diff;
pub mod digest;
pub mod error;
pub mod files;
pub mod gc;
pub mod health;
pub mod holders;
pub mod keys;
pub mod labels;
pub mod listing;
pub mod locks;
pub mod manifest;
pub mod mirror;
pub mod objects;
pub mod ops;
pub mod outcomes;
pub mod owner;
pub mod paths;
pub mod patience;
pub mod possession;
pub mod private;
pub mod profile;
pub mod progress;
pub mod prometheus;
pub mod proof;
pub mod proof_tree;
pub mod pull;
pub mod push;
pub mod quarantine;
pub mod read;
pub mod recycled;
pub mod refs;
pub mod registry;
pub mod remote;
pub mod repair;
pub mod repo;
pub mod safetensors;
pub mod signatures;
pub mod small;
pub mod small_file;
pub mod stamp;
pub mod store;
pub mod suggest;
pub mod summary;
pub mod testutil;
pub mod trash;
pub mod usage;
pub mod verify;
pub mod walk;

pub use error::{Error, ErrorKind, Result};
pub use locks::lock;
pub use refs::{Digest, Name, Ref, VolumeName};
pub use repo::Repository;
