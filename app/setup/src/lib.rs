//! What a command works on, the one place the CLI, the console and the Python package
//! decide it: settings from flags, the environment and config.toml (`settings`), and
//! the repository, mirrored origins and cache peers they name, opened (`open`).

pub mod open;
pub mod settings;

pub use open::{PeerTrust, created_repository, peers, ring};
pub use settings::{Flags, Peers, Settings, Setup};
