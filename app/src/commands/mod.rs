//! One module per command group; `Ctx` carries what every command needs.

pub mod cache;
pub mod demo;
pub mod deploy;
pub mod info;
pub mod jobs;
pub mod key;
pub mod mount;
pub mod repair;
pub mod secret;
pub mod serve;
pub mod volume;
pub mod watch;

use sealvol_core::error::ErrorKind;
use sealvol_core::progress::Progress;
use sealvol_core::{Repository, Result};
use sealvol_s3repo::{Address, Mode, Options};

use crate::config::Settings;

/// The read path's clients for cache servers at `urls` (checked by `Settings::peers_or`).
pub fn peers(
    urls: &[String],
    key: Option<&str>,
) -> Result<Vec<std::sync::Arc<dyn sealvol_core::read::Peer>>> {
    urls.iter()
        .map(|u| {
            let p = sealvol_serve::peer::HttpPeer::new(u, key)?;
            // A peer that refuses the key would send every read to the origin in
            // silence: refuse to start instead. One that is down may come up.
            match p.check() {
                Err(e) if e.kind() == sealvol_core::error::ErrorKind::Denied => return Err(e),
                Err(e) => errln!("warning: {e}; reads go to the origin until it answers"),
                Ok(()) => {}
            }
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
        if let Some(url) = &s.remote {
            if mode == Mode::Init {
                return Err(sealvol_core::Error::invalid(format!(
                    "--remote {url}: a remote engine's repository is made where it runs"
                ))
                .hint("run `sealvol init` on the server, beside `sealvol serve`"));
            }
            return sealvol_serve::remote::open(
                url,
                s.api_key.as_ref().map(|k| k.expose()),
                &s.state.join("staging"),
            );
        }
        self.open_at(&s.repo, mode)
    }

    /// Opens the repository at `address`: the `--repo-secret` keys are its own only
    /// when it is the repository, and other buckets use the standard credentials.
    pub fn open_at(&self, address: &Address, mode: Mode) -> Result<Repository> {
        let s = &self.settings;
        let secret = match &s.repo_secret {
            Some(name) if *address == s.repo => Some(sealvol_source::secrets::get(&s.state, name)?),
            _ => None,
        };
        let staging = s.state.join("staging");
        let opts = Options {
            endpoints: &s.endpoints,
            secret: secret.as_ref(),
            staging: &staging,
            durable: s.fsync,
        };
        sealvol_s3repo::open(address, mode, &opts)
    }

    /// The repository and its mirrored origins, for a read: when the repository cannot
    /// be reached now, the first mirror that can takes its place (warned), so a mount
    /// or pull still starts while one origin is down.
    pub fn open_origins(
        &self,
        flags: &[String],
    ) -> Result<(std::sync::Arc<Repository>, Vec<std::sync::Arc<Repository>>)> {
        let mut mirrors = self.open_mirrors(flags)?;
        match self.open_repo(false) {
            Ok(r) => Ok((std::sync::Arc::new(r), mirrors)),
            Err(e)
                if !mirrors.is_empty()
                    && matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Io) =>
            {
                let first = mirrors.remove(0);
                tracing::warn!("{e}; reading from mirror {} instead", first.location());
                Ok((first, mirrors))
            }
            Err(e) => Err(e),
        }
    }

    /// The mirrored origins (`--origin`, else config.toml's `mirrors`), opened. One that
    /// is not a repository is an error; one that cannot be reached now is left out with
    /// a warning, so that a mount still starts while a mirror is down.
    pub fn open_mirrors(&self, flags: &[String]) -> Result<Vec<std::sync::Arc<Repository>>> {
        let mut out = Vec::new();
        for address in self.settings.mirrors_or(flags)? {
            if same_repository(&address, &self.settings.repo) {
                return Err(sealvol_core::Error::invalid(format!(
                    "--origin {address} is the repository itself"
                ))
                .hint("give another repository that holds the same versions (`sealvol volume mirror`)"));
            }
            match self.open_at(&address, Mode::Existing) {
                Ok(r) => out.push(std::sync::Arc::new(r)),
                Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Io) => {
                    tracing::warn!("mirror {address} left out: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

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

/// Whether two addresses name one repository: the same bucket prefix, or directories
/// that are the same once resolved (a mirror into itself would copy nothing and a
/// failover to itself would read the same failing store).
pub fn same_repository(a: &Address, b: &Address) -> bool {
    match (a, b) {
        (Address::Local(x), Address::Local(y)) => {
            let real =
                |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            real(x) == real(y)
        }
        _ => a == b,
    }
}
