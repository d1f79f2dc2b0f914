//! Mount: a sealed version as a read-only FUSE filesystem, ready as soon as its
//! listing is read, whatever the volume's size or file count, and the life of a mount
//! on this machine. Bytes stream lazily through the memory tier (read-ahead), the
//! node-disk cache and the origin repository.
//!
//! - `tree`: the inode table, filled lazily from the version's listing;
//! - `fs`: the filesystem core (plain Rust, errno results), tested without a kernel;
//! - `open`: a version as a `VolumeFs`, with its tiers and saved read profile;
//! - `layout`: a file's chunk list, loaded once and shared;
//! - `memo`: the memory tier, under one bound on the memory it holds;
//! - `reading`: one read's chunks, as the read layer's proven read asks for them;
//! - `readahead`: what is fetched before readers ask (streams, and plans from a
//!   file's format, `safetensors`, and saved read profiles), over the core's read
//!   layer (node cache → origin, coalesced, verified, counted);
//! - `metrics`: a mount's metrics in Prometheus's text format;
//! - `profile`: the order readers first ask for chunks, recorded for
//!   `volume profile save`;
//! - `guard`: a child process that clears the mount point of a mount killed with -9;
//! - `session` and `fuse`: the kernel's session and the thin `fuser` adapter (the
//!   `fuse` feature: what lists or unmounts mounts, the node and the console, does not
//!   link `fuser`);
//! - `point`: mount points: checked before a mount, unmounted whoever serves them;
//! - `process`: a mount's life as a process: started in the background and waited
//!   on, served until stopped with its record kept current, unmounted;
//! - `records`: what each running mount writes of itself for `volume mounts`;
//! - `table`: which directories the kernel has mounted.
//!
//! What a mount promises (errors, sizes, times, links, tags, damage) is written down
//! once, in docs/SEMANTICS.md.

pub mod fs;
#[cfg(feature = "fuse")]
mod fuse;
#[cfg(feature = "fuse")]
mod guard;
pub mod layout;
pub mod memo;
pub mod metrics;
pub mod open;
pub mod point;
pub mod process;
pub mod profile;
pub mod readahead;
mod reading;
pub mod records;
#[cfg(feature = "fuse")]
pub mod session;
pub mod table;
pub mod tree;

pub use fs::{DEFAULT_READ_TIMEOUT, Limits, VolumeFs};
pub use open::{MountOptions, open_fs, open_fs_over};
pub use point::{
    MountPointClaim, check_mount_point, check_mount_point_free, is_mount_point, unmount_dir,
};
pub use sealvol_core::read::{Peer, TierStats, Tiers};
#[cfg(feature = "fuse")]
pub use session::{Mount, mount};

#[cfg(test)]
mod tests;
