//! sealvol's remote sync sources: where a sync's bytes come from.
//!
//! Its one job is talking to the stores a sync reads: S3 and its kin (R2, CoreWeave),
//! Hugging Face, GCS, Azure Blob, OCI registries, and OCI image layouts on this machine. Each is listed and read with ranged, streamed, conditional
//! requests (the bytes never land in a local copy), retried with backoff when the
//! failure may pass. `Sources` is the `sealvol_source::Connector` the app hands the
//! agent; the runner that turns a listing into a sealed version lives in the node.
//! The heavy clients (aws-sdk-s3, hf-hub, object_store) are linked here and nowhere
//! else.

mod azure;
mod body;
mod client;
mod fetch;
mod gcs;
mod hf;
mod http;
mod layout;
pub mod oci;

pub mod s3;
mod verify;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_source::endpoints::Resolved;
use sealvol_source::{Access, Connector, Fetch, Filter, Listing, Notes, Object, Remote, SourceUrl};

use client::Client;
use fetch::Prefetch;
use sealvol_source::retry;

/// Every kind of remote source, for the agent.
pub struct Sources;

impl Connector for Sources {
    fn connect(
        &self,
        url: &SourceUrl,
        at: &Resolved,
        access: Access<'_>,
        notes: Notes,
        cancel: Arc<AtomicBool>,
    ) -> Result<Box<dyn Remote>> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sealvol-sync")
            .enable_all()
            .build()
            .map_err(|e| {
                Error::new(ErrorKind::Io, format!("cannot start the sync runtime: {e}"))
            })?;
        let client = rt.block_on(retry::cancellable(
            &cancel,
            Client::connect(url, at, access),
        ))?;
        Ok(Box::new(Connected {
            client: Arc::new(client),
            shown: url.to_string(),
            notes,
            cancel,
            rt,
        }))
    }
}

/// A source being synced, with the runtime its requests run on.
struct Connected {
    client: Arc<Client>,
    /// The canonical address, which prefixes object names in errors.
    shown: String,
    notes: Notes,
    /// The job's cancel flag: every request races it.
    cancel: Arc<AtomicBool>,
    rt: tokio::runtime::Runtime,
}

impl Remote for Connected {
    fn list(&mut self, filter: &Filter) -> Result<Listing> {
        let client = Arc::get_mut(&mut self.client).ok_or_else(|| {
            Error::new(ErrorKind::Io, "a source cannot be listed while it is read")
        })?;
        self.rt.block_on(retry::logged(
            self.notes.clone(),
            retry::cancellable(&self.cancel, client.list(filter)),
        ))
    }

    fn fetch(&self, objects: Vec<Object>, streams: usize) -> Box<dyn Fetch + '_> {
        Box::new(Prefetch::start(
            self.rt.handle(),
            self.client.clone(),
            objects,
            self.shown.clone(),
            streams,
            self.cancel.clone(),
            self.notes.clone(),
        ))
    }
}
