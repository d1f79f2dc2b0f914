//! CSI: a Kubernetes node plugin that publishes sealed versions read-only into pods.
//! kubelet calls it over gRPC on a unix socket (the spec's Identity and Node services,
//! generated from the spec's own protobuf in `proto/`); each publish is a mount of the
//! existing mount engine, in a process of its own that outlives the plugin.
//!
//! - `request`: what a publish asks for (the ref, its attributes, the access), checked;
//! - `targets`: the plugin's own record of each target path it published, which is how
//!   a restarted plugin finds and adopts its mounts;
//! - `node` and `identity`: the two services, the spec's rules (idempotence, codes);
//! - `status`: sealvol's errors as gRPC statuses, one line with the hint;
//! - `server`: the socket (`unix:///…`) and the serving loop;
//! - `pod`: what a pod spec says to mount through the driver (`sealvol deploy k8s`).
//!
//! Mounting itself (flags, the node cache, credentials) is the embedder's: it
//! implements [`Mounter`]. What the plugin promises is written down in
//! docs/SEMANTICS.md ("The CSI node plugin").

mod authority;
mod identity;
pub mod mounter;
mod node;
pub mod pod;
pub mod proto;
pub mod request;
pub mod server;
pub mod status;
pub mod targets;

pub use mounter::{DRIVER_NAME, Mount, Mounter};
pub use server::{Endpoint, Plugin, serve};
