//! A mount's life as a process on this machine: started in the background and waited
//! on until it is ready (`background`), the child's half of that handshake (`ready`),
//! served until it is stopped while it keeps its record current (`serving`), and
//! unmounted by whoever asks, whatever process serves it (`unmount`). The CLI, `deploy
//! mount` and any embedder go through these; only what a command prints is theirs.

pub mod background;
pub mod ready;
#[cfg(feature = "fuse")]
pub mod serving;
pub mod unmount;

pub use background::{Started, start};
pub use ready::ReadyPipe;
pub use unmount::{Unmounted, unmount};
