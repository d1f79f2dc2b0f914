//! What the plugin needs from whoever embeds it (`Mounter`), the mounts it asks for,
//! and the driver's name.

use std::path::PathBuf;

use sealvol_core::error::Result;

/// The driver's name, as the CSIDriver object and every PersistentVolume spell it.
pub const DRIVER_NAME: &str = "csi.sealvol.dev";

/// What the plugin needs from whoever embeds it: refs resolved against the repository
/// it was configured with, and mounts started the way `sealvol volume mount` starts
/// them. Both block; the plugin calls them off the gRPC threads.
pub trait Mounter: Send + Sync + 'static {
    /// The pinned ref (`vol:NAME@b3:HEX`) that `reference` names now; a version in the
    /// trash, a tag that does not resolve or a volume that does not exist is NotFound.
    fn resolve(&self, reference: &str) -> Result<String>;
    /// Mounts `m.pinned` at `m.target` (an empty directory) in a process of its own,
    /// and returns once the mount answers reads.
    fn mount(&self, m: &Mount) -> Result<()>;
    /// The cache servers this driver was configured with, as they stand now: the only
    /// ones a volume's `peers` attribute may name (the driver's key goes to them).
    fn peers(&self) -> Result<Vec<String>>;
}

/// One mount to start.
#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    pub pinned: String,
    /// The ref as the pod or PersistentVolume gave it, shown beside the pinned one.
    pub requested: String,
    pub target: PathBuf,
    /// The `peers` attribute: a subset of [`Mounter::peers`]; none: all of them.
    pub peers: Option<Vec<String>>,
    /// The `prefetchMemory` attribute, as given (the mount checks its range).
    pub prefetch_memory: Option<String>,
}
