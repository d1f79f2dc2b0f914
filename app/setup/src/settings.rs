//! Where things live: flags > SEALVOL_* environment > config.toml > XDG defaults.
//! (clap already applies flags over environment; this adds the file and the defaults.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use sealvol_core::{Error, Result};
use sealvol_s3repo::Address;

/// `config.toml` in the XDG config directory. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// A directory, or a bucket prefix: `s3://BUCKET/PREFIX`, `r2://…`, `cw://…`.
    pub repository: Option<String>,
    /// The stored secret (`sealvol secret set`) holding the repository bucket's keys.
    pub repository_secret: Option<String>,
    pub state: Option<PathBuf>,
    pub cache: Option<PathBuf>,
    /// Bound of the node-disk cache: "20G", "500M" or a byte count.
    pub cache_size: Option<String>,
    /// A mount's memory for read-ahead and recent chunks: "256M".
    pub prefetch_memory: Option<String>,
    pub theme: Option<String>,
    pub fsync: Option<bool>,
    /// Bytes a sync stores between resume points: "1G".
    pub sync_batch: Option<String>,
    /// Ranged reads a sync keeps in flight.
    pub sync_streams: Option<usize>,
    /// How long a backend may leave a request unanswered, retries included: "2m".
    pub timeout: Option<String>,
    /// Where sources are reached (`[endpoints]`: s3, r2, cw, gcs, azure, hf, s3_path_style).
    #[serde(default)]
    pub endpoints: sealvol_source::Endpoints,
    /// Deployment files, or folders of them, for the console's Deployments screen.
    #[serde(default)]
    pub deploy_dirs: Vec<PathBuf>,
    /// Cache servers (`sealvol serve`) that mounts and pulls read through, as a ring.
    #[serde(default)]
    pub peers: Vec<String>,
    /// A file listing them instead, looked at again while a mount runs.
    #[serde(default)]
    pub peers_file: Option<PathBuf>,
    /// The ring's public keys (a copy of the repository's `access/ring-public.json`),
    /// for a node that does not read the repository itself.
    #[serde(default)]
    pub ring_key: Option<PathBuf>,
    /// Repositories holding the same versions (`volume mirror`), read when the
    /// repository cannot give a chunk, in order.
    #[serde(default)]
    pub mirrors: Vec<String>,
    /// `[trust]`: namespace (or "*") → the public key files whose signature its
    /// versions need before they are mounted or pulled.
    #[serde(default)]
    pub trust: BTreeMap<String, Vec<PathBuf>>,
    /// `[jobs]`: what a server's agent runs at once and keeps queued (`serve --jobs`).
    #[serde(default)]
    pub jobs: JobLimits,
}

/// config.toml's `[jobs]`; `serve`'s flags go over each (`sealvol_node::agent::schedule`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobLimits {
    pub running: Option<usize>,
    pub per_namespace: Option<usize>,
    pub per_key: Option<usize>,
    pub queue_per_namespace: Option<usize>,
    pub queue_per_key: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub repo: Address,
    /// The stored secret with the repository bucket's keys (`--repo-secret`).
    pub repo_secret: Option<String>,
    pub state: PathBuf,
    /// Node-disk chunk cache, shared by every mount on the node.
    pub cache: PathBuf,
    pub cache_size: u64,
    /// A mount's memory bound (`--prefetch-memory`), if config.toml gives one.
    pub prefetch_memory: Option<u64>,
    /// Console theme: `--theme`, SEALVOL_THEME, config.toml, else dark.
    pub theme: String,
    /// fsync repository writes before they become visible (default on).
    pub fsync: bool,
    pub sync_batch: u64,
    pub sync_streams: usize,
    /// How long a backend may leave a request unanswered (`--timeout`).
    pub timeout: std::time::Duration,
    /// config.toml's `[endpoints]` under the standard environment variables.
    pub endpoints: sealvol_source::Endpoints,
    /// config.toml's `deploy_dirs`: deployment files or folders the console shows.
    pub deploy_dirs: Vec<PathBuf>,
    /// config.toml's `peers`: cache servers read before the origin.
    pub peers: Vec<String>,
    /// config.toml's `peers_file`: a file that lists them, re-read as it changes.
    pub peers_file: Option<PathBuf>,
    /// config.toml's `ring_key`: the ring's public keys, which peers prove themselves
    /// with before this node sends them its key.
    pub ring_key: Option<PathBuf>,
    /// config.toml's `mirrors`: repositories read when the origin fails.
    pub mirrors: Vec<String>,
    /// config.toml's `[trust]`, its key files relative to the config file's folder;
    /// loaded by the commands that enforce it (`Settings::policy`).
    pub trust: BTreeMap<String, Vec<PathBuf>>,
    pub trust_base: PathBuf,
    /// config.toml's `[jobs]`.
    pub jobs: JobLimits,
    /// A remote engine to work on instead of `repo` (`--remote`, SEALVOL_REMOTE).
    pub remote: Option<String>,
    /// The key for the remote engine and for peers (SEALVOL_API_KEY; never a flag, so
    /// that it stays out of the process list, and never printed).
    pub api_key: Option<Secret>,
    /// Where each setting came from (`sealvol info`).
    pub origins: Origins,
}

/// A secret a process holds (an API key): printed, at any verbosity, as its name only.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: String) -> Secret {
        Secret(s)
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `sv1:NAME:…`: the key's name is no secret, and says which key it is.
        let name = self
            .0
            .strip_prefix("sv1:")
            .and_then(|r| r.rsplit_once(':'))
            .map(|(name, _)| name);
        match name {
            Some(n) => write!(f, "sv1:{n}:(hidden)"),
            None => f.write_str("(hidden)"),
        }
    }
}

impl Settings {
    /// The cache servers to read through: those a command names (`--peer`), else
    /// config.toml's, else the remote engine (whose cache then serves the chunks); each
    /// checked to be an address one can be reached at.
    pub fn peers_or(&self, flags: &[String], file: Option<&Path>) -> Result<Peers> {
        if let Some(f) = file.or(match flags.is_empty() && self.peers.is_empty() {
            true => self.peers_file.as_deref(),
            false => None,
        }) {
            // Absolute, so that a mount that goes to the background still finds it.
            let abs =
                std::path::absolute(f).map_err(|e| Error::io("cannot find peers file", f, e))?;
            return Ok(Peers::File(abs));
        }
        let remote: Vec<String> = self.remote.iter().cloned().collect();
        let named = match (flags.is_empty(), self.peers.is_empty()) {
            (false, _) => flags,
            (true, false) => &self.peers,
            (true, true) => &remote,
        };
        named
            .iter()
            .map(|p| sealvol_client::peer::check_url(p))
            .collect::<Result<_>>()
            .map(Peers::Urls)
    }

    /// The mirrored origins to fail over to: those a command names (`--origin`), else
    /// config.toml's `mirrors`; each a repository address.
    pub fn mirrors_or(&self, flags: &[String]) -> Result<Vec<Address>> {
        let named = if flags.is_empty() {
            &self.mirrors
        } else {
            flags
        };
        named.iter().map(|m| Address::parse(m)).collect()
    }

    /// config.toml's trust policy, its keys loaded: a key file that is missing or not a
    /// P-256 public key is an error here, never a rule that lets everything through.
    pub fn policy(&self) -> Result<sealvol_sign::Policy> {
        let rules = sealvol_sign::Rules::load("config.toml", &self.trust_base, &self.trust)?;
        Ok(sealvol_sign::Policy::default().with(rules))
    }
}

/// The cache servers a mount or pull reads through: listed (`--peer`, config.toml's
/// `peers`, the remote engine), or in a file that may change (`--peers-file`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peers {
    Urls(Vec<String>),
    File(PathBuf),
}

pub const DEFAULT_CACHE_SIZE: u64 = 20 << 30;

/// "20G", "500 MiB", "1e9" or a plain byte count.
pub fn parse_size(s: &str) -> Result<u64> {
    parse_size::Config::new()
        .with_binary()
        .parse_size(s)
        .map_err(|e| {
            Error::invalid(format!("{s:?} is not a size: {e}"))
                .hint("write a byte count with an optional unit, like 500M or 20G")
        })
}

fn dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "sealvol")
}

pub fn config_path() -> Option<PathBuf> {
    dirs().map(|d| d.config_dir().join("config.toml"))
}

fn load_file(path: &Path) -> Result<ConfigFile> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).map_err(|e| {
            let first = e.to_string().lines().next().unwrap_or_default().to_string();
            // toml's first line says where, its message what.
            let at = first.trim_start_matches("TOML parse error ");
            Error::invalid(format!(
                "config file {} is invalid {at}: {}",
                path.display(),
                e.message().trim()
            ))
            .hint("keys: repository, repository_secret, state, cache, cache_size, prefetch_memory, theme, fsync, sync_batch, sync_streams, timeout, deploy_dirs, peers, peers_file, ring_key, mirrors, [endpoints], [trust], [jobs] (running, per_namespace, per_key, queue_per_namespace, queue_per_key)")
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
        Err(e) => Err(Error::io("cannot read", path, e)),
    }
}

/// What the command line (or the `SEALVOL_*` variables clap reads for it) gave, and
/// where each given value came from (`--theme`, `SEALVOL_THEME`), for `sealvol info`.
#[derive(Debug, Default)]
pub struct Flags {
    pub repo: Option<String>,
    pub remote: Option<String>,
    pub repo_secret: Option<String>,
    pub state: Option<PathBuf>,
    pub timeout: Option<std::time::Duration>,
    pub theme: Option<String>,
    pub from: BTreeMap<&'static str, String>,
}

/// Where each setting `sealvol info` shows came from: a flag, a variable, the config
/// file, or the default.
pub type Origins = BTreeMap<&'static str, String>;

const FROM_FILE: &str = "config.toml";
const FROM_DEFAULT: &str = "default";

/// The settings in effect: the command line or its `SEALVOL_*` variables (clap reads
/// both), then config.toml, then the XDG defaults.
pub fn resolve(flags: Flags) -> Result<Settings> {
    let Flags {
        repo,
        remote,
        repo_secret,
        state,
        timeout,
        theme,
        from,
    } = flags;
    let config = config_path();
    let file = match &config {
        Some(p) => load_file(p)?,
        None => ConfigFile::default(),
    };
    let mut origins = Origins::new();
    // `key`'s origin: the flag or variable that gave it, else the file if it has it.
    let mut origin = |key: &'static str, in_file: bool| {
        let o = match from.get(key) {
            Some(f) => f.clone(),
            None if in_file => FROM_FILE.into(),
            None => FROM_DEFAULT.into(),
        };
        origins.insert(key, o);
    };
    origin("repository", file.repository.is_some());
    origin("remote", false);
    origin("state", file.state.is_some());
    origin("theme", file.theme.is_some());
    origin("timeout", file.timeout.is_some());
    origin("cache_size", file.cache_size.is_some());
    let mut from_env = |key: &'static str, var: &'static str, in_file: bool| {
        let o = match std::env::var_os(var) {
            Some(_) => var.to_string(),
            None if in_file => FROM_FILE.into(),
            None => FROM_DEFAULT.into(),
        };
        origins.insert(key, o);
    };
    from_env("cache", "SEALVOL_CACHE", file.cache.is_some());
    from_env("fsync", "SEALVOL_FSYNC", file.fsync.is_some());
    from_env(
        "sync_batch",
        "SEALVOL_SYNC_BATCH",
        file.sync_batch.is_some(),
    );
    from_env(
        "sync_streams",
        "SEALVOL_SYNC_STREAMS",
        file.sync_streams.is_some(),
    );
    let dirs = dirs();
    let repo = match repo.or(file.repository) {
        Some(text) => Address::parse(&text)?,
        None => Address::Local(
            dirs.as_ref()
                .map(|d| d.data_dir().join("repo"))
                .ok_or_else(|| {
                    Error::invalid("cannot find a home directory for the default repository")
                        .hint("pass --repo PATH or set SEALVOL_REPO")
                })?,
        ),
    };
    let repo_secret = repo_secret.or(file.repository_secret);
    let state = state
        .or(file.state)
        .or_else(|| {
            dirs.as_ref().map(|d| {
                d.state_dir()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| d.data_local_dir().join("state"))
            })
        })
        .ok_or_else(|| {
            Error::invalid("cannot find a home directory for local state")
                .hint("pass --state DIR or set SEALVOL_STATE")
        })?;
    let cache = std::env::var_os("SEALVOL_CACHE")
        .map(PathBuf::from)
        .or(file.cache)
        .or_else(|| dirs.as_ref().map(|d| d.cache_dir().to_path_buf()))
        .unwrap_or_else(|| state.join("cache"));
    let cache_size = match &file.cache_size {
        Some(s) => parse_size(s)?,
        None => DEFAULT_CACHE_SIZE,
    };
    let prefetch_memory = file
        .prefetch_memory
        .as_deref()
        .map(parse_size)
        .transpose()?;
    let theme = theme.or(file.theme).unwrap_or_else(|| "dark".into());
    let fsync = match std::env::var("SEALVOL_FSYNC") {
        Ok(v) => !matches!(v.as_str(), "0" | "off" | "false" | "no"),
        Err(_) => file.fsync.unwrap_or(true),
    };
    let sync_batch = match std::env::var("SEALVOL_SYNC_BATCH").ok().or(file.sync_batch) {
        Some(s) => parse_size(&s)?.max(1),
        None => sealvol_node::sync::DEFAULT_BATCH,
    };
    let sync_streams = match std::env::var("SEALVOL_SYNC_STREAMS") {
        Ok(v) => v.parse().map_err(|_| {
            Error::invalid(format!("SEALVOL_SYNC_STREAMS={v:?} is not a count"))
                .hint("use a number of parallel reads, like 8")
        })?,
        Err(_) => file
            .sync_streams
            .unwrap_or(sealvol_node::sync::DEFAULT_STREAMS),
    }
    .clamp(1, 64);
    let timeout = match (timeout, &file.timeout) {
        (Some(t), _) => t,
        (None, Some(text)) => humantime::parse_duration(text).map_err(|e| {
            Error::invalid(format!("config.toml: timeout = {text:?}: {e}"))
                .hint("write a duration, like \"2m\" or \"90s\"")
        })?,
        (None, None) => sealvol_core::patience::DEFAULT,
    };
    if timeout < std::time::Duration::from_secs(1) {
        return Err(Error::usage(format!(
            "a timeout of {} is too short to hear any answer",
            humantime::format_duration(timeout)
        ))
        .hint("give at least 1s (the default is 2m)"));
    }
    // Set once, before any client is made: every backend reads it (`patience`).
    sealvol_core::patience::set(timeout);
    let settings = Settings {
        repo,
        repo_secret,
        state,
        cache,
        cache_size,
        prefetch_memory,
        theme,
        fsync,
        sync_batch,
        sync_streams,
        timeout,
        endpoints: file.endpoints.with_env(),
        deploy_dirs: file.deploy_dirs,
        peers: file.peers,
        peers_file: file.peers_file,
        ring_key: file.ring_key,
        mirrors: file.mirrors,
        trust: file.trust,
        jobs: file.jobs,
        trust_base: config
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default(),
        remote: remote
            .filter(|r| !r.is_empty())
            .map(|r| sealvol_client::remote::check_remote(&r))
            .transpose()?,
        api_key: std::env::var("SEALVOL_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty())
            .map(Secret::new),
        origins,
    };
    tracing::debug!("settings: {settings:?}");
    Ok(settings)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_bounds_are_read_and_a_misspelt_one_is_refused() {
        let file: ConfigFile = toml::from_str("[jobs]\nrunning = 3\nqueue_per_key = 5\n").unwrap();
        assert_eq!(file.jobs.running, Some(3));
        assert_eq!(file.jobs.queue_per_key, Some(5));
        assert_eq!(file.jobs.per_key, None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[jobs]\nrunnin = 3\n").unwrap();
        let e = load_file(&path).err().unwrap();
        assert!(e.message().contains("runnin"), "{e}");
    }
}
