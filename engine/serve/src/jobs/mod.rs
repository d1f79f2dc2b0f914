//! The server's jobs: syncs that run on the server, for the holders of its keys, so that
//! nothing a sync fetches passes through the caller's machine and the job outlives the
//! caller. The app hands the server an agent (`sealvol_node::agent`) of its own; this
//! module is what keys may ask of it, and how they follow it over HTTP.
//!
//! - `routes`: `/v1/jobs` (list, submit), `/v1/jobs/{id}` (the live view),
//!   `/v1/jobs/{id}/cancel`, `/retry`, `/logs`, `/events` (a stream, `feed.rs`);
//! - `feed`: numbered events per job, shared by every follower, resumed after a cut;
//! - `secrets`: `/v1/secrets`, the secrets of the server's jobs, one shelf per
//!   namespace, written and listed, never read back.
//!
//! What a key may do: see the jobs of the namespaces it sees (another namespace's job
//! is answered as no job at all), start, cancel and retry them only where it may write.
//! A job reads nothing of the server's own: a local folder is refused, endpoints are
//! the server's settings (a caller cannot aim the server at an address of its
//! choosing; an `oci://` registry must be one `serve --jobs-oci-registry` lists), and a job without a secret reaches its source without credentials unless
//! the operator lets jobs use the server's own (`serve --jobs-use-server-credentials`).

pub mod feed;
pub mod routes;
pub mod secrets;

use std::path::PathBuf;
use std::sync::Arc;

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::refs::{Name, VolumeName};
use sealvol_node::jobs::{Job, JobSpec, JobsApi};
use sealvol_source::SourceUrl;
use sealvol_source::endpoints::Endpoints;

use crate::keys::{Grant, Keys};
use sealvol_wire::jobs::Submit;

/// The most events streams one key may hold open at once: each is cheap, but not free.
pub const STREAMS_PER_KEY: usize = 32;

/// What the job routes share: the server's agent, where its sources are, and its
/// state folder (the secrets' shelves).
pub struct Desk {
    pub api: Arc<dyn JobsApi>,
    pub endpoints: Endpoints,
    pub state: PathBuf,
    pub feeds: feed::Feeds,
    /// The keys the server takes: a revoked key's jobs and event streams end.
    pub keys: std::sync::OnceLock<Arc<Keys>>,
    /// The registries (`HOST[:PORT]`) jobs may read `oci://` images from: the operator's
    /// choice (`serve --jobs-oci-registry`), since a key could name any host.
    pub oci_registries: Vec<String>,
}

impl Desk {
    pub fn new(api: Arc<dyn JobsApi>, endpoints: Endpoints, state: PathBuf) -> Desk {
        Desk {
            feeds: feed::Feeds::new(Arc::clone(&api)),
            api,
            endpoints,
            state,
            keys: std::sync::OnceLock::new(),
            oci_registries: Vec::new(),
        }
    }

    /// Whether key `name` is still taken (true while no key list is known).
    pub fn is_live(&self, name: &str) -> bool {
        self.keys.get().is_none_or(|k| k.is_live(name))
    }

    /// The job, if the key may see it: another namespace's job is no job at all, so a
    /// key learns nothing of what others sync.
    pub fn visible(&self, grant: &Grant, id: u64) -> Result<Job> {
        let job = self.api.show(id)?;
        match grant.sees(namespace_of(&job)) {
            true => Ok(job),
            false => Err(sealvol_node::jobs::not_found(id)),
        }
    }

    /// The job, if the key may also change it (cancel, retry).
    pub fn writable(&self, grant: &Grant, id: u64, what: &str) -> Result<Job> {
        let job = self.visible(grant, id)?;
        let ns = namespace_of(&job);
        match grant.writes(ns) {
            true => Ok(job),
            false => Err(may_not(grant, ns, what)),
        }
    }

    /// The job a submission asks for, checked as the server must: the key writes in the
    /// volume's namespace, the source is one the server may reach for others, and where
    /// it is reached is the server's own setting.
    pub fn spec(&self, grant: &Grant, sub: Submit) -> Result<JobSpec> {
        let volume = VolumeName::parse(&sub.volume)?;
        if !grant.writes(volume.namespace.as_str()) {
            return Err(may_not(grant, volume.namespace.as_str(), "start jobs"));
        }
        if let Some(to) = sub.mirror_to {
            // A mirror job: the version a ref names, to a destination of the server's
            // (the agent checks the name and that the ref resolves).
            let r = sealvol_core::refs::Ref::parse(&sub.source)?;
            if r.volume != volume {
                return Err(Error::invalid(format!(
                    "{} is not a version of {volume}",
                    sub.source
                )));
            }
            Name::parse("mirror destination", &to)?;
            return Ok(JobSpec {
                source: r.to_string(),
                volume: volume.to_string(),
                tags: Vec::new(),
                secret: None,
                include: Vec::new(),
                exclude: Vec::new(),
                endpoint: Default::default(),
                mirror_to: Some(to),
                started_by: Some(grant.name.clone()),
            });
        }
        let url = SourceUrl::parse(&sub.source)?;
        if matches!(url, SourceUrl::Local(_) | SourceUrl::OciLayout { .. }) {
            return Err(Error::invalid(format!(
                "{} is a local path: a job on the server never reads the server's own files",
                sub.source
            ))
            .hint(
                "push a folder from your machine: sealvol --remote URL volume push DIR NS/NAME",
            ));
        }
        if let SourceUrl::Oci { host, .. } = &url
            && !self.oci_registries.iter().any(|r| r == host)
        {
            // A registry is named by the caller, host and port: the server would reach
            // any address a key wrote, its own network's included, were it not one the
            // operator listed.
            return Err(Error::invalid(format!(
                "{}: the server's jobs read only the registries it was started with, and {host:.100} is not one",
                sub.source
            ))
            .hint(match self.oci_registries.is_empty() {
                true => "sync it on your machine (sealvol volume sync oci://… NS/NAME), or ask the operator to start serve with --jobs-oci-registry HOST".to_string(),
                false => format!("the registries it reads: {}", self.oci_registries.join(", ")),
            }));
        }
        if sub.tags.len() > MAX_LIST || sub.include.len() > MAX_LIST || sub.exclude.len() > MAX_LIST
        {
            return Err(Error::invalid(format!(
                "a job takes at most {MAX_LIST} tags, includes and excludes each"
            )));
        }
        for t in &sub.tags {
            Name::parse("tag", t)?;
        }
        Ok(JobSpec {
            source: url.to_string(),
            volume: volume.to_string(),
            tags: sub.tags,
            secret: sub.secret,
            include: sub.include,
            exclude: sub.exclude,
            endpoint: self.endpoints.resolve(&url),
            mirror_to: None,
            started_by: Some(grant.name.clone()),
        })
    }

    /// Cancels every job not ended yet whose key is revoked (or gone from the list),
    /// queued or running: a job acts for the key that started it, and a revocation
    /// ends what that key does. Returns the jobs cancelled.
    pub fn cancel_revoked(&self, keys: &Keys) -> Result<Vec<u64>> {
        let mut out = Vec::new();
        for job in self.api.list()? {
            let Some(by) = &job.spec.started_by else {
                continue;
            };
            // The server's own (its Hub mirror's) act for no key.
            if job.state.is_final() || keys.is_live(by) || by == crate::hub::mirror::STARTED_BY {
                continue;
            }
            match self.api.cancel(job.id) {
                Ok(_) => {
                    tracing::warn!("job {}: cancelled: key {by} was revoked", job.id);
                    out.push(job.id);
                }
                // Ended meanwhile.
                Err(e) => tracing::debug!("job {}: {e}", job.id),
            }
        }
        Ok(out)
    }
}

/// How often a server looks for jobs whose key was revoked.
pub const REVOKED_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Cancels revoked keys' jobs (`Desk::cancel_revoked`) until the task is dropped.
pub async fn cancel_revoked(desk: Arc<Desk>, keys: Arc<Keys>) {
    loop {
        tokio::time::sleep(REVOKED_EVERY).await;
        let (d, k) = (Arc::clone(&desk), Arc::clone(&keys));
        match tokio::task::spawn_blocking(move || d.cancel_revoked(&k)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("cannot look for revoked keys' jobs: {e}"),
            Err(_) => {}
        }
    }
}

/// The most tags, includes or excludes one job names.
const MAX_LIST: usize = 256;

/// The namespace a job writes in (a record whose volume does not parse is nobody's).
pub fn namespace_of(job: &Job) -> &str {
    job.spec
        .volume
        .split_once('/')
        .map(|(ns, _)| ns)
        .unwrap_or("")
}

pub fn may_not(grant: &Grant, ns: &str, what: &str) -> Error {
    Error::new(
        ErrorKind::Denied,
        format!(
            "key {} ({}) may not {what} in namespace {ns}",
            grant.name,
            grant.scope()
        ),
    )
    .hint("ask the server's operator for a key that may write there (`sealvol key create`)")
}
