//! `sealvol.Client`'s engine: the settings and repository the CLI would use with the
//! same flags and environment (`sealvol-setup`), opened on first use and again in a
//! child after `fork` (the parent's engine threads do not exist there; its handles are
//! left alone, never closed from the child).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use sealvol_core::digest::Entry;
use sealvol_core::read::{Fill, Tiers};
use sealvol_core::{Digest, Error, Name, Ref, VolumeName};
use sealvol_setup::{Flags, Setup};

use crate::errors::{invalid, raise};
use crate::file::{NativeFile, Opened as OpenFile, explained};
use crate::progress::{PyProgress, interruptible};
use sealvol_mount::fs::{Errno, Kind, ReadError};
use sealvol_mount::{Limits, VolumeFs};

/// What the caller gave `Client(...)`: kept to open again in a forked child.
#[derive(Clone, Default)]
struct Given {
    repo: Option<String>,
    remote: Option<String>,
    api_key: Option<String>,
    peers: Vec<String>,
    state: Option<PathBuf>,
    timeout: Option<std::time::Duration>,
}

/// The engine as opened by one process: its settings, and the read path once a call
/// needed it.
struct Engine {
    pid: u32,
    setup: Arc<Setup>,
    tiers: Option<Arc<Tiers>>,
    /// The filesystems of the versions files were opened in, newest use last (at most
    /// `KEPT_VERSIONS`; an open file keeps its own alive).
    versions: Vec<(String, Arc<VolumeFs>)>,
}

/// How many versions' filesystems (each with its memory tier and read-ahead threads)
/// a client keeps for the next `open`.
const KEPT_VERSIONS: usize = 2;

#[pyclass(module = "sealvol._native")]
pub struct Client {
    given: Given,
    opened: Mutex<Option<Engine>>,
}

/// A setting given as an argument, else its `SEALVOL_*` variable (as the CLI's flags).
fn given_or_env(given: Option<String>, var: &str) -> Option<String> {
    given.or_else(|| std::env::var(var).ok().filter(|v| !v.is_empty()))
}

impl Client {
    /// The read path for this process (and its settings): opened on first use, and
    /// again after a fork.
    fn engine(&self) -> sealvol_core::Result<(Arc<Tiers>, sealvol_setup::Settings)> {
        let mut opened = self.opened()?;
        let o = opened.as_mut().ok_or_else(|| Error::invalid("no engine"))?;
        if o.tiers.is_none() {
            let g = &self.given;
            // As a mount's: a large file read whole is kept whole in the node cache
            // (`VolumeFs::release`), then read from there, not chunk by chunk.
            let tiers = o.setup.read_tiers(&g.peers, None, &[], Fill::Background)?;
            let whole = Limits::default().passthrough_min;
            o.tiers = Some(Arc::new(tiers.keeping_whole_files_from(whole)));
        }
        let tiers = o
            .tiers
            .as_ref()
            .map(Arc::clone)
            .ok_or_else(|| Error::invalid("no engine"))?;
        Ok((tiers, o.setup.settings.clone()))
    }

    /// The settings for this process, resolved on first use and again after a fork.
    fn setup(&self) -> sealvol_core::Result<Arc<Setup>> {
        let opened = self.opened()?;
        opened
            .as_ref()
            .map(|o| Arc::clone(&o.setup))
            .ok_or_else(|| Error::invalid("no engine"))
    }

    fn opened(&self) -> sealvol_core::Result<std::sync::MutexGuard<'_, Option<Engine>>> {
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        let pid = std::process::id();
        match opened.take() {
            Some(o) if o.pid == pid => {
                *opened = Some(o);
                return Ok(opened);
            }
            // Opened by the parent: its threads are not here, and dropping it could
            // wait on them. Left as it is.
            Some(o) => std::mem::forget(o),
            None => {}
        }
        let g = self.given.clone();
        let mut from = BTreeMap::new();
        for (key, value) in [("repository", &g.repo), ("remote", &g.remote)] {
            if value.is_some() {
                from.insert(key, "Client()".to_string());
            }
        }
        let timeout = match g.timeout {
            Some(t) => Some(t),
            None => given_or_env(None, "SEALVOL_TIMEOUT")
                .map(|t| {
                    humantime::parse_duration(&t).map_err(|_| {
                        Error::invalid(format!("SEALVOL_TIMEOUT={t:?} is not a duration"))
                            .hint("write 30s or 2m")
                    })
                })
                .transpose()?,
        };
        let mut settings = sealvol_setup::settings::resolve(Flags {
            repo: given_or_env(g.repo, "SEALVOL_REPO"),
            remote: given_or_env(g.remote, "SEALVOL_REMOTE"),
            repo_secret: given_or_env(None, "SEALVOL_REPO_SECRET"),
            state: given_or_env(g.state.map(|s| s.display().to_string()), "SEALVOL_STATE")
                .map(PathBuf::from),
            timeout,
            theme: None,
            from,
        })?;
        if let Some(k) = g.api_key {
            settings.api_key = Some(sealvol_setup::settings::Secret::new(k));
        }
        let mut setup = Setup::new(settings, true);
        setup.note = |line| eprintln!("sealvol: {line}");
        *opened = Some(Engine {
            pid,
            setup: Arc::new(setup),
            tiers: None,
            versions: Vec::new(),
        });
        Ok(opened)
    }

    /// The filesystem of version `volume@digest` (a mount's core, with no kernel): kept
    /// for the next `open`, as a mount is.
    fn version_fs(
        &self,
        volume: &VolumeName,
        digest: &Digest,
    ) -> sealvol_core::Result<Arc<VolumeFs>> {
        let (tiers, settings) = self.engine()?;
        let key = format!("{volume}@{digest}");
        if let Some(o) = self.opened()?.as_mut()
            && let Some(i) = o.versions.iter().position(|(k, _)| *k == key)
        {
            let kept = o.versions.remove(i);
            let fs = Arc::clone(&kept.1);
            o.versions.push(kept);
            return Ok(fs);
        }
        // As a mount of this origin reads (its memory bound the mount's: config.toml's
        // `prefetch_memory`, else 1/32 of RAM), waiting out an origin's bad minute no
        // longer than the client's timeout.
        let memory = match settings.prefetch_memory {
            Some(bytes) => Limits::check_memory(bytes)?,
            None => Limits::default_memory() as usize,
        };
        let limits = Limits {
            memory,
            read_timeout: settings.timeout,
            ..Limits::for_origin(tiers.repo().concurrency())
        };
        let fs = Arc::new(sealvol_mount::open_fs_over(
            tiers, volume, digest, limits, true,
        )?);
        if let Some(o) = self.opened()?.as_mut() {
            o.versions.push((key, Arc::clone(&fs)));
            if o.versions.len() > KEPT_VERSIONS {
                o.versions.remove(0);
            }
        }
        Ok(fs)
    }

    /// File `path` of the version `r` names, the trust policy asked first: the pinned
    /// ref and the file, opened to stream through (`stream`) or to read ranges of.
    fn open_file(
        &self,
        r: &Ref,
        path: &str,
        stream: bool,
    ) -> sealvol_core::Result<(Ref, OpenFile)> {
        let (tiers, settings) = self.engine()?;
        let repo = tiers.repo();
        let digest = repo.resolve(r)?;
        settings.policy()?.admit(repo, &r.volume, &digest)?;
        let fs = self.version_fs(&r.volume, &digest)?;
        let pinned = Ref::pinned(r.volume.clone(), digest);
        let mut ino = sealvol_mount::tree::ROOT;
        let missing = || {
            Error::not_found(format!("{pinned} has no file {path}"))
                .hint("`client.resolve(ref).files` lists its files")
        };
        for part in path.split('/') {
            ino = match fs.lookup(ino, part.as_bytes()) {
                Ok(attr) => attr.ino,
                Err(e) if e == Errno::NOENT || e == Errno::NOTDIR => return Err(missing()),
                Err(e) => return Err(explained(path, ReadError::Errno(e))),
            };
        }
        let attr = fs
            .getattr(ino)
            .map_err(|e| explained(path, ReadError::Errno(e)))?;
        match attr.kind {
            Kind::File => {}
            Kind::Dir => return Err(folder(path, &pinned)),
            Kind::Symlink => {
                let target = fs.readlink(ino).unwrap_or_default();
                return Err(Error::invalid(format!(
                    "{path} in {pinned} is a link to {}",
                    String::from_utf8_lossy(target)
                ))
                .hint("open what it points to"));
            }
        }
        let layout = fs.file_layout(ino).map_err(|e| explained(path, e))?;
        let (fh, backing) = match stream {
            true => {
                let o = fs
                    .open_explained(ino, libc::O_RDONLY)
                    .map_err(|e| explained(path, e))?;
                if let Some(file) = &o.backing {
                    // Read from Python in order, as the kernel reads a passed-through
                    // file: a wider read-ahead window (advice only; nothing to report).
                    use std::os::fd::AsRawFd;
                    // SAFETY: the descriptor is open for as long as `file` lives.
                    unsafe {
                        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL)
                    };
                }
                (Some(o.fh), o.backing)
            }
            false => (None, None),
        };
        Ok((
            pinned,
            OpenFile {
                fs,
                layout,
                fh,
                backing,
            },
        ))
    }

    /// What `ask` answers of an existing volume, as JSON (an unknown volume is
    /// `NotFound`, with the nearest name).
    fn about_volume<T: serde::Serialize + Send>(
        &self,
        py: Python<'_>,
        volume: &str,
        ask: impl FnOnce(&sealvol_core::Repository, &VolumeName) -> sealvol_core::Result<T> + Send,
    ) -> PyResult<String> {
        let vol = VolumeName::parse(volume).map_err(invalid)?;
        let v = py
            .detach(|| {
                let (tiers, _) = self.engine()?;
                let repo = tiers.repo();
                repo.require_volume(&vol)?;
                ask(repo, &vol)
            })
            .map_err(raise)?;
        json(v)
    }

    fn parse_ref(r: &str) -> PyResult<Ref> {
        Ref::parse(r).map_err(invalid)
    }
}

fn json(v: impl serde::Serialize) -> PyResult<String> {
    serde_json::to_string(&v).map_err(|e| raise(Error::invalid(format!("cannot write JSON: {e}"))))
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (repo=None, remote=None, api_key=None, peers=None, state=None, timeout=None))]
    fn new(
        repo: Option<String>,
        remote: Option<String>,
        api_key: Option<String>,
        peers: Option<Vec<String>>,
        state: Option<PathBuf>,
        timeout: Option<f64>,
    ) -> PyResult<Client> {
        let timeout = timeout
            .map(|t| {
                std::time::Duration::try_from_secs_f64(t).map_err(|_| {
                    invalid(Error::invalid(format!(
                        "timeout={t} is not a number of seconds"
                    )))
                })
            })
            .transpose()?;
        Ok(Client {
            given: Given {
                repo,
                remote,
                api_key,
                peers: peers.unwrap_or_default(),
                state,
                timeout,
            },
            opened: Mutex::new(None),
        })
    }

    /// The version `reference` names now, with its files, labels and tags (JSON).
    fn resolve(&self, py: Python<'_>, reference: &str) -> PyResult<String> {
        let r = Self::parse_ref(reference)?;
        let out = py
            .detach(|| -> sealvol_core::Result<serde_json::Value> {
                let (tiers, _) = self.engine()?;
                let repo = tiers.repo();
                let digest = repo.resolve(&r)?;
                let m = repo.manifest(&r.volume, &digest)?;
                let labels = repo.labels_now(&r.volume, &digest, &m.provenance.labels)?;
                let d = digest.to_string();
                let tags: Vec<String> = repo
                    .tags(&r.volume)?
                    .into_iter()
                    .filter(|t| t.digest == d && t.damaged.is_none())
                    .map(|t| t.tag)
                    .collect();
                let files: Vec<serde_json::Value> = m
                    .entries
                    .iter()
                    .map(|e| match e {
                        Entry::File {
                            path, size, hash, ..
                        } => serde_json::json!({"path": path, "kind": "file", "size": size, "hash": hash.hex()}),
                        Entry::Symlink { path, target } => {
                            serde_json::json!({"path": path, "kind": "link", "target": target})
                        }
                        Entry::Dir { path } => serde_json::json!({"path": path, "kind": "dir"}),
                    })
                    .collect();
                Ok(serde_json::json!({
                    "ref": Ref::pinned(r.volume.clone(), digest).to_string(),
                    "volume": r.volume.to_string(),
                    "digest": d,
                    "created": m.created,
                    "labels": labels,
                    "tags": tags,
                    "files": files,
                }))
            })
            .map_err(raise)?;
        json(out)
    }

    /// Every volume (JSON, as `volume ls --json`'s `volumes`).
    fn volumes(&self, py: Python<'_>) -> PyResult<String> {
        let v = py
            .detach(|| self.engine()?.0.repo().volume_infos(None))
            .map_err(raise)?;
        json(v)
    }

    /// A volume's versions, newest first (JSON, as `volume versions --json`'s).
    fn versions(&self, py: Python<'_>, volume: &str) -> PyResult<String> {
        self.about_volume(py, volume, |repo, vol| repo.versions(vol))
    }

    /// A volume's tags (JSON, as `volume tags --json`'s).
    fn tags(&self, py: Python<'_>, volume: &str) -> PyResult<String> {
        self.about_volume(py, volume, |repo, vol| repo.tags(vol))
    }

    /// A file of the version `reference` names, to read by offset; the trust policy
    /// is asked first. `stream`: reads follow one another and are read ahead, as a
    /// mount's reader's are; else only the ranges asked for are read (`tensors()`).
    #[pyo3(signature = (reference, path, stream=true))]
    fn open(
        slf: &Bound<'_, Self>,
        reference: &str,
        path: &str,
        stream: bool,
    ) -> PyResult<NativeFile> {
        let r = Self::parse_ref(reference)?;
        // The check every path read from a manifest passes (an empty part, as in a
        // leading `/`, is no path of a version either).
        if !sealvol_core::paths::is_clean_relative(path) {
            return Err(invalid(
                Error::invalid(format!("{path:?} is not a path in a version")).hint(
                    "give it relative, without . or .. (`client.resolve(ref).files` lists them)",
                ),
            ));
        }
        let this = slf.borrow();
        let client: &Client = &this;
        let (pinned, opened) = slf
            .py()
            .detach(|| client.open_file(&r, path, stream))
            .map_err(raise)?;
        let (owner, at) = (slf.clone().unbind(), path.to_string());
        let reopen: crate::file::Reopen = Box::new(move |py| {
            let this = owner.bind(py).borrow();
            let client: &Client = &this;
            py.detach(|| client.open_file(&pinned, &at, stream))
                .map(|(_, opened)| opened)
                .map_err(raise)
        });
        Ok(NativeFile::new(path, opened, reopen))
    }

    /// Pulls the version into `dir` (JSON: the pinned ref and the report).
    #[pyo3(signature = (reference, dir, include=None, exclude=None, force=false, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn pull(
        &self,
        py: Python<'_>,
        reference: &str,
        dir: PathBuf,
        include: Option<Vec<String>>,
        exclude: Option<Vec<String>>,
        force: bool,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        let r = Self::parse_ref(reference)?;
        let (include, exclude) = (include.unwrap_or_default(), exclude.unwrap_or_default());
        let progress = PyProgress::new(progress);
        let follow = &progress;
        let out = interruptible(
            py,
            &progress,
            || -> sealvol_core::Result<serde_json::Value> {
                let filter = match include.is_empty() && exclude.is_empty() {
                    true => None,
                    false => Some(sealvol_source::Filter::new(&include, &exclude)?),
                };
                let takes = |p: &str| filter.as_ref().is_none_or(|f| f.takes(p));
                let (tiers, settings) = self.engine()?;
                let repo = tiers.repo();
                let digest = repo.resolve(&r)?;
                settings.policy()?.admit(repo, &r.volume, &digest)?;
                let report = sealvol_core::pull::pull_selected(
                    &tiers,
                    &r.volume,
                    &digest,
                    &dir,
                    force,
                    filter
                        .is_some()
                        .then_some(&takes as sealvol_core::pull::Select),
                    follow,
                )?;
                Ok(serde_json::json!({
                    "ref": Ref::pinned(r.volume.clone(), digest).to_string(),
                    "report": report,
                }))
            },
        )?;
        json(out)
    }

    /// Seals `dir` as a version of `volume` (JSON: the pinned ref and what it stored).
    #[pyo3(signature = (dir, volume, tags=None, labels=None, progress=None))]
    fn push(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        volume: &str,
        tags: Option<Vec<String>>,
        labels: Option<BTreeMap<String, String>>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<String> {
        let vol = VolumeName::parse(volume).map_err(invalid)?;
        let tags = tags
            .unwrap_or_default()
            .iter()
            .map(|t| Name::parse("tag", t))
            .collect::<sealvol_core::Result<Vec<_>>>()
            .map_err(invalid)?;
        let labels = labels.unwrap_or_default();
        sealvol_core::labels::check(&labels).map_err(invalid)?;
        let progress = PyProgress::new(progress);
        let (follow, cancel) = (&progress, Arc::clone(&progress.cancel));
        let out = interruptible(
            py,
            &progress,
            || -> sealvol_core::Result<serde_json::Value> {
                // As the CLI's push: a local folder is made a repository on first use.
                let setup = self.setup()?;
                let repo = setup.open_repo(true)?;
                let mut opts = sealvol_core::push::PushOptions::new(follow);
                opts.cancel = Some(&cancel);
                opts.labels = labels;
                let cache = sealvol_node::state::StatCacheDir(&setup.settings.state);
                opts.stat_cache = Some(&cache);
                let report = sealvol_core::push::push(&repo, &dir, &vol, &tags, &opts)?;
                Ok(serde_json::json!({
                    "ref": report.pinned_ref(),
                    "sealed_new": report.sealed_new,
                    "new_bytes": report.stats.new_bytes,
                    "bytes": report.stats.bytes,
                }))
            },
        )?;
        json(out)
    }

    /// What changed from version `a` to `b` (`b` may be relative to `a`'s volume:
    /// `canary`, `@9f3c`): JSON, as `volume diff --json`.
    fn diff(&self, py: Python<'_>, a: &str, b: &str) -> PyResult<String> {
        let ra = Self::parse_ref(a)?;
        let rb = Ref::parse_in(b, &ra.volume).map_err(invalid)?;
        let d = py
            .detach(|| {
                let (tiers, _) = self.engine()?;
                let repo = tiers.repo();
                let (da, db) = (repo.resolve(&ra)?, repo.resolve(&rb)?);
                sealvol_core::diff::diff(repo, (&ra.volume, &da), (&rb.volume, &db))
            })
            .map_err(raise)?;
        json(d)
    }

    /// Checks the version's stored signatures against the public keys (PEM files):
    /// JSON `{ref, valid, signatures}`, as `volume verify-signature --json`.
    fn verify_signature(
        &self,
        py: Python<'_>,
        reference: &str,
        public_keys: Vec<PathBuf>,
    ) -> PyResult<String> {
        let r = Self::parse_ref(reference)?;
        let out = py
            .detach(|| -> sealvol_core::Result<serde_json::Value> {
                let keys = public_keys
                    .iter()
                    .map(|k| sealvol_sign::keys::PublicKey::load(k))
                    .collect::<sealvol_core::Result<Vec<_>>>()?;
                let setup = self.setup()?;
                let repo = Arc::new(setup.open_repo(false)?);
                let digest = repo.resolve(&r)?;
                let m = repo.manifest(&r.volume, &digest)?;
                let sha256 = || {
                    sealvol_sign::version::sha256s_kept_or_read(&repo, &r.volume, &digest, &m)
                        .map(Some)
                };
                let checked = sealvol_sign::verdict::check_all(
                    &repo, &r.volume, &digest, &m, &keys, &sha256,
                )?;
                Ok(serde_json::json!({
                    "ref": Ref::pinned(r.volume.clone(), digest).to_string(),
                    "valid": checked.iter().any(|c| c.valid),
                    "why": (!checked.iter().any(|c| c.valid))
                        .then(|| sealvol_sign::verdict::why_none(&keys, &checked)),
                    "signatures": checked,
                }))
            })
            .map_err(raise)?;
        json(out)
    }

    /// Points `tag` at the version `reference` names, to stop resolving at `expires`
    /// (a duration from now, `30d`, or an RFC 3339 time); returns the pinned ref.
    #[pyo3(signature = (reference, tag, expires=None))]
    fn tag(
        &self,
        py: Python<'_>,
        reference: &str,
        tag: &str,
        expires: Option<&str>,
    ) -> PyResult<String> {
        let r = Self::parse_ref(reference)?;
        let tag = Name::parse("tag", tag).map_err(invalid)?;
        let expires = expires
            .map(|w| sealvol_core::stamp::expiry("expires=", w, sealvol_core::stamp::now()))
            .transpose()
            .map_err(invalid)?;
        py.detach(|| -> sealvol_core::Result<String> {
            let (tiers, _) = self.engine()?;
            let repo = tiers.repo();
            let to = repo.resolve(&r)?;
            repo.move_tag_until(&r.volume, &tag, &to, None, expires)?;
            Ok(Ref::pinned(r.volume.clone(), to).to_string())
        })
        .map_err(raise)
    }
}

fn folder(path: &str, pinned: &Ref) -> Error {
    Error::invalid(format!("{path} in {pinned} is a folder, not a file"))
        .hint("open a file in it (`client.resolve(ref).files` lists them)")
}
