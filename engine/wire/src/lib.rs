//! The protocol between `sealvol serve` and its clients (a node's `--remote`, a peer
//! reading through the ring, a fellow server): what each side builds and reads, so a
//! client needs nothing of the server's code and the server nothing of its clients'.
//!
//! - `protocol`: the protocol's version, said both ways, and who answers whom;
//! - `ops`: the `/v1/ops/` bodies a push and the registry's operations send and get
//!   back, with their limits and headers;
//! - `named`: how a push names chunks (chunk lists and small files, in bytes);
//! - `objects`: the object routes' listing page, the key's own view, the version header;
//! - `jobs`: a server-side job as a client submits it, and stored secrets as listed;
//! - `ring`: what servers of a ring and their readers say (run requests, the id route,
//!   a server's report of itself);
//! - `membership`: the ring's keys, the challenge and the proof a server answers it with.

pub mod jobs;
pub mod membership;
pub mod named;
pub mod objects;
pub mod ops;
pub mod protocol;
pub mod ring;
