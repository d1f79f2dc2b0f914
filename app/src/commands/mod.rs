//! One module per command group; `Ctx` carries what every command needs.

pub mod cache;
pub mod demo;
pub mod deploy;
pub mod info;
pub mod jobs;
pub mod mount;
pub mod repair;
pub mod secret;
pub mod serve;
pub mod volume;
pub mod watch;

use sealvol_core::progress::Progress;
use sealvol_core::{Repository, Result};
use sealvol_s3repo::{Mode, Options};

use crate::config::Settings;

/// The read path's clients for cache servers at `urls` (checked by `Settings::peers_or`).
pub fn peers(urls: &[String]) -> Result<Vec<std::sync::Arc<dyn sealvol_core::read::Peer>>> {
    urls.iter()
        .map(|u| {
            let p = sealvol_serve::peer::HttpPeer::new(u)?;
            Ok(std::sync::Arc::new(p) as std::sync::Arc<dyn sealvol_core::read::Peer>)
        })
        .collect()
}

pub struct Ctx {
    pub settings: Settings,
    pub quiet: bool,
}

impl Ctx {
    /// Opens the repository; `create` for commands that write (push) or seed it,
    /// which makes a local directory a repository (never a bucket: `sealvol init`).
    pub fn open_repo(&self, create: bool) -> Result<Repository> {
        let mode = if create {
            Mode::CreateLocal
        } else {
            Mode::Existing
        };
        self.open_repo_as(mode)
    }

    pub fn open_repo_as(&self, mode: Mode) -> Result<Repository> {
        let s = &self.settings;
        let secret = match &s.repo_secret {
            Some(name) => Some(sealvol_node::secrets::get(&s.state, name)?),
            None => None,
        };
        let staging = s.state.join("staging");
        let opts = Options {
            endpoints: &s.endpoints,
            secret: secret.as_ref(),
            staging: &staging,
            durable: s.fsync,
        };
        sealvol_s3repo::open(&s.repo, mode, &opts)
    }

    /// The global options that make a child process use this repository.
    pub fn repo_args(&self) -> Vec<std::ffi::OsString> {
        let s = &self.settings;
        let mut args: Vec<std::ffi::OsString> = vec!["--repo".into(), s.repo.to_string().into()];
        if let Some(name) = &s.repo_secret {
            args.extend(["--repo-secret".into(), name.into()]);
        }
        args
    }

    pub fn progress(&self) -> Box<dyn Progress> {
        crate::progress::for_terminal(self.quiet)
    }
}
