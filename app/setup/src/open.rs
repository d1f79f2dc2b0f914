//! Opening the repository a command works on, the one place the CLI and the console
//! do it: by its address (a folder or a bucket, `sealvol_s3repo::open`), through a
//! server that owns its writes (`--remote`, `sealvol_client::remote::open`), and the
//! mirrored origins and cache peers a read goes to beside it.

use std::sync::Arc;

use sealvol_client::peer::Trust;
use sealvol_core::error::ErrorKind;
use sealvol_core::read::ring::Ring;
use sealvol_core::{Repository, Result};
use sealvol_s3repo::{Address, Mode, Options};
use sealvol_wire::membership::RingPublic;

use crate::settings::Peers;
use crate::settings::Setup;

/// To whom among cache servers this node sends its API key: the remote engine it was
/// told of (`--remote`), and servers that prove they are of the ring whose public keys
/// it knows (config.toml's `ring_key`, else the origin repository's).
pub struct PeerTrust {
    ring: Trust,
    remote: Option<String>,
}

impl PeerTrust {
    pub fn for_url(&self, url: &str) -> Trust {
        match self.remote.as_deref() {
            Some(r) if r.trim_end_matches('/') == url => Trust::Named,
            _ => self.ring.clone(),
        }
    }
}

impl Setup {
    /// How peers are trusted, reading the ring's public keys from config.toml's
    /// `ring_key` or from `origin` (read directly, or through the remote engine, which
    /// offers them to every key).
    pub fn peer_trust(&self, origin: Option<&Repository>) -> Result<PeerTrust> {
        let s = &self.settings;
        let remote = s
            .remote
            .as_deref()
            .map(|u| u.trim_end_matches('/').to_string());
        let ring = match (&s.ring_key, origin) {
            (Some(path), _) => {
                // Public keys of a ring: a few KiB.
                let bytes = sealvol_core::small_file::read(path, "ring_key", 1 << 20)?;
                let public = RingPublic::parse(&bytes).map_err(|why| {
                    sealvol_core::Error::invalid(format!("ring_key {}: {why}", path.display()))
                        .hint("give a copy of the repository's access/ring-public.json")
                })?;
                Trust::Ring(Arc::new(public))
            }
            // Read directly, or through the remote engine the user named.
            (None, Some(repo)) => match RingPublic::read(repo) {
                Ok(Some(p)) => Trust::Ring(Arc::new(p)),
                Ok(None) => Trust::Unknown,
                Err(e) => {
                    (self.note)(&format!(
                        "warning: {e}; peers cannot prove they are servers of the ring"
                    ));
                    Trust::Unknown
                }
            },
            _ => Trust::Unknown,
        };
        Ok(PeerTrust { ring, remote })
    }
}

/// The read path's clients for cache servers at `urls` (checked by `Settings::peers_or`).
pub fn peers(
    urls: &[String],
    key: Option<&str>,
    trust: &PeerTrust,
    note: fn(&str),
) -> Result<Vec<Arc<dyn sealvol_core::read::Peer>>> {
    urls.iter()
        .map(|u| {
            let p = sealvol_client::peer::HttpPeer::with_trust(u, key, trust.for_url(u))?;
            // A peer that refuses the key would send every read to the origin in
            // silence: refuse to start instead. One that is down may come up.
            match p.check() {
                Err(e) if e.kind() == sealvol_core::error::ErrorKind::Denied => return Err(e),
                Err(e) => note(&format!(
                    "warning: {e}; reads go to the origin until it answers"
                )),
                Ok(()) => {}
            }
            Ok(Arc::new(p) as Arc<dyn sealvol_core::read::Peer>)
        })
        .collect()
}

/// The ring of cache servers `peers` names, each checked as `peers` checks them, and
/// their addresses as they stand now (a file's may change later).
pub fn ring(
    peers: &Peers,
    key: Option<&str>,
    trust: &PeerTrust,
    note: fn(&str),
) -> Result<(Arc<Ring>, Vec<String>)> {
    match peers {
        Peers::Urls(urls) => Ok((
            Arc::new(Ring::fixed(self::peers(urls, key, trust, note)?)),
            urls.clone(),
        )),
        Peers::File(path) => {
            // A file's later lines have no remote engine among them to trust by name.
            let (file, urls) =
                sealvol_client::peer::PeersFile::open(path, key, trust.ring.clone())?;
            // Checked now, as listed ones are; later changes are taken as they come.
            self::peers(&urls, key, trust, note)?;
            Ok((Arc::new(Ring::following(Box::new(file))), urls))
        }
    }
}

impl Setup {
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
            return sealvol_client::remote::open(
                url,
                s.api_key.as_ref().map(|k| k.expose()),
                &s.state.join("staging"),
            );
        }
        // A first push makes a local folder a repository: said, so that a mistyped
        // SEALVOL_REPO is seen at once rather than found later as a missing version.
        let fresh = match (&s.repo, mode) {
            (Address::Local(p), Mode::CreateLocal) => {
                !p.join(sealvol_core::repo::CONFIG_KEY).exists()
            }
            _ => false,
        };
        let repo = self.open_at(&s.repo, mode)?;
        if fresh {
            let _ = CREATED.set(repo.location().to_string());
            if !self.quiet {
                (self.note)(&format!("created a repository at {}", repo.location()));
            }
        }
        Ok(repo)
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
    ) -> Result<(Arc<Repository>, Vec<Arc<Repository>>)> {
        let mut mirrors = self.open_mirrors(flags)?;
        match self.open_repo(false) {
            Ok(r) => Ok((Arc::new(r), mirrors)),
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
    pub fn open_mirrors(&self, flags: &[String]) -> Result<Vec<Arc<Repository>>> {
        let mut out = Vec::new();
        for address in self.settings.mirrors_or(flags)? {
            if address.is_same_repository(&self.settings.repo) {
                return Err(sealvol_core::Error::invalid(format!(
                    "--origin {address} is the repository itself"
                ))
                .hint("give another repository that holds the same versions (`sealvol volume mirror`)"));
            }
            match self.open_at(&address, Mode::Existing) {
                Ok(r) => out.push(Arc::new(r)),
                Err(e) if matches!(e.kind(), ErrorKind::Unavailable | ErrorKind::Io) => {
                    tracing::warn!("mirror {address} left out: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

impl Setup {
    /// What a pull or an open reads through: the repository (or, when it cannot be
    /// reached, the first mirrored origin that can), the node-disk cache, the ring of
    /// cache servers (`peers`, `peers_file`, else config.toml's) and the mirrors
    /// (`origins`, else config.toml's). `fill`: how chunks read reach the cache; what a
    /// local repository gave is not kept there, since its packs can be read again.
    pub fn read_tiers(
        &self,
        peers: &[String],
        peers_file: Option<&std::path::Path>,
        origins: &[String],
        fill: sealvol_core::read::Fill,
    ) -> Result<sealvol_core::read::Tiers> {
        let s = &self.settings;
        let (repo, mirrors) = self.open_origins(origins)?;
        let (ring, _) = ring(
            &s.peers_or(peers, peers_file)?,
            s.api_key.as_ref().map(|k| k.expose()),
            &self.peer_trust(Some(&repo))?,
            self.note,
        )?;
        let cache = sealvol_core::cache::ChunkCache::open(&s.cache, s.cache_size)?;
        Ok(
            sealvol_core::read::Tiers::with_fill(repo, Some(Arc::new(cache)), fill)
                .keeping_only_what_the_origin_cannot_give_again()
                .with_ring(ring)
                .with_mirrors(mirrors),
        )
    }
}

/// Where this process made a new local repository, if it did (a first push): its
/// `--json` says so too.
static CREATED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

pub fn created_repository() -> Option<&'static str> {
    CREATED.get().map(String::as_str)
}
