//! One module per command group; `Ctx` carries what every command needs.

pub mod cache;
pub mod csi;
pub mod demo;
pub mod deploy;
pub mod info;
pub mod jobs;
pub mod key;
pub mod launch;
pub mod mount;
pub mod open;
pub mod peers;
pub mod repair;
pub mod secret;
pub mod serve;
pub mod volume;
pub mod watch;

use sealvol_core::progress::Progress;

use crate::config::Settings;

pub struct Ctx {
    pub settings: Settings,
    pub quiet: bool,
}

impl Ctx {
    /// The global options that make a child process use this repository.
    pub fn repo_args(&self) -> Vec<std::ffi::OsString> {
        let s = &self.settings;
        // A child (agent, mount) waits on backends as long as this process would.
        let timeout: [std::ffi::OsString; 2] = [
            "--timeout".into(),
            format!("{}ms", s.timeout.as_millis()).into(),
        ];
        if let Some(url) = &s.remote {
            // The key goes by the environment, which the child inherits.
            let mut args: Vec<std::ffi::OsString> = vec!["--remote".into(), url.into()];
            args.extend(timeout);
            return args;
        }
        let mut args: Vec<std::ffi::OsString> = vec!["--repo".into(), s.repo.to_string().into()];
        if let Some(name) = &s.repo_secret {
            args.extend(["--repo-secret".into(), name.into()]);
        }
        args.extend(timeout);
        args
    }

    pub fn progress(&self) -> Box<dyn Progress> {
        crate::progress::for_terminal(self.quiet)
    }
}
