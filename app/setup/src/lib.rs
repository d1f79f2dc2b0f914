//! What a command works on, the one place the CLI, the console and the Python package
//! decide it: settings from flags, the environment and config.toml (`settings`), and
//! the repository, mirrored origins and cache peers they name, opened (`open`).

pub mod open;
pub mod settings;

pub use open::{PeerTrust, created_repository, peers, ring};
pub use settings::{Flags, Peers, Settings};

/// Settings resolved, and how to say what a caller should know (a repository made on
/// first use, a peer that does not answer): the CLI prints it on standard error, the
/// Python package as a warning.
pub struct Setup {
    pub settings: Settings,
    /// Say nothing but warnings.
    pub quiet: bool,
    /// One line for the person running it.
    pub note: fn(&str),
}

impl Setup {
    /// `settings`, with notes printed on standard error.
    pub fn new(settings: Settings, quiet: bool) -> Setup {
        Setup {
            settings,
            quiet,
            note: |line| eprintln!("{line}"),
        }
    }
}
