//! One module per command group; `Ctx` carries what every command needs.

pub mod cache;
pub mod demo;
pub mod deploy;
pub mod info;
pub mod jobs;
pub mod mount;
pub mod repair;
pub mod secret;
pub mod volume;
pub mod watch;

use sealvol_core::progress::Progress;
use sealvol_core::{Repository, Result};

use crate::config::Settings;

pub struct Ctx {
    pub settings: Settings,
    pub quiet: bool,
}

impl Ctx {
    /// Opens the repository; `create` for commands that write (push) or seed it.
    pub fn open_repo(&self, create: bool) -> Result<Repository> {
        Repository::open_local(&self.settings.repo, create, self.settings.fsync)
    }

    pub fn progress(&self) -> Box<dyn Progress> {
        crate::progress::for_terminal(self.quiet)
    }
}
