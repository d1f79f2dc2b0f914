//! The seam between the sync runner and the remote sources. The runner (in this crate)
//! knows jobs, batches, the state database and sealing; a `Connector` (the
//! `sealvol-sources` crate, with the heavy S3, Hugging Face, GCS and Azure clients)
//! knows how to list a remote source and stream its bytes. The app plugs one into the
//! agent, so that nothing else that builds on the node links those clients. Local
//! folders need no connector: they are pushed.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use sealvol_core::error::{Error, Result};
use sealvol_core::push::Inputs;

use super::endpoints::Resolved;
use super::filter::Filter;
use super::listing::{Listing, Object};
use super::url::SourceUrl;
use crate::pace::{Pacer, Slot};
use crate::secrets::Secret;

/// What a job's requests tell it as they go: lines about retries and cut connections
/// (to the job's log, besides the process log), and, on an agent that bounds its
/// running jobs, the job's slot, given up while it only waits out retries (`pace`);
/// and who watches its files go by (`Tap`), if anyone does.
#[derive(Clone)]
pub struct Notes {
    lines: crossbeam_channel::Sender<String>,
    pacer: Option<Arc<Pacer>>,
    tap: Option<Arc<dyn Tap>>,
}

/// Who watches a job's files go by as the push pipeline takes them (a Hub mirror
/// streams them to its clients while the job fetches them: `sealvol-serve`'s `hub/`):
/// each file's bytes in order, then whether the source's own hashes held for it.
pub trait Tap: Send + Sync {
    /// File `key` (as the source lists it), of `size` bytes, starts; `None`: not
    /// watched.
    fn open(&self, key: &str, size: u64) -> Option<Box<dyn FileTap>>;
}

/// One file being watched. Exactly one of `verified` and `failed` ends it (a file
/// dropped unfinished has failed: the job stopped).
pub trait FileTap: Send {
    /// The next bytes of the file, as the pipeline took them: not yet checked.
    fn bytes(&mut self, bytes: &[u8]);
    /// Read whole, and the checks of the source's own hashes (`passed`) held.
    fn verified(self: Box<Self>, passed: &[&'static str]);
    /// The file will not be whole: why (a hash that did not hold, the source, a
    /// cancel).
    fn failed(self: Box<Self>, why: &str);
}

impl Notes {
    pub fn new(lines: crossbeam_channel::Sender<String>) -> Notes {
        Notes {
            lines,
            pacer: None,
            tap: None,
        }
    }

    /// The same, with `tap` watching the job's files.
    pub fn tapped(self, tap: Arc<dyn Tap>) -> Notes {
        Notes {
            tap: Some(tap),
            ..self
        }
    }

    /// Who watches the job's files, if anyone does.
    pub fn tap(&self) -> Option<&Arc<dyn Tap>> {
        self.tap.as_ref()
    }

    /// The same, with the job's slot to give up while every request waits.
    pub fn pacing(self, slot: Option<Arc<dyn Slot>>) -> Notes {
        Notes {
            pacer: slot.map(|s| Arc::new(Pacer::new(s))),
            ..self
        }
    }

    pub(crate) fn say(&self, line: String) {
        let _ = self.lines.send(line);
    }

    pub(crate) fn pacer(&self) -> Option<&Arc<Pacer>> {
        self.pacer.as_ref()
    }
}

/// What a connection to a source may authenticate with.
#[derive(Debug, Clone, Copy)]
pub enum Access<'a> {
    /// The stored secret the job names.
    Secret(&'a Secret),
    /// Whatever this process finds: the provider's environment variables, profile and
    /// token files, instance metadata, web identity. A machine's own jobs.
    Ambient,
    /// No credentials at all: public sources only. A server's jobs for the holders of
    /// its keys, unless its operator lets them use the server's own.
    Anonymous,
}

impl<'a> Access<'a> {
    pub fn secret(self) -> Option<&'a Secret> {
        match self {
            Access::Secret(s) => Some(s),
            _ => None,
        }
    }
}

pub trait Connector: Send + Sync {
    /// Connects to a remote source (never `SourceUrl::Local`) at `at`, with `access`. Once `cancel` is set, everything the connection does
    /// (connecting, listing, reading, waiting out a retry) ends within a moment with
    /// `ErrorKind::Cancelled`.
    fn connect(
        &self,
        url: &SourceUrl,
        at: &Resolved,
        access: Access<'_>,
        notes: Notes,
        cancel: Arc<AtomicBool>,
    ) -> Result<Box<dyn Remote>>;
}

/// A connected source.
pub trait Remote: Send + Sync {
    /// The objects to sync, filtered, mapped to paths, sorted and checked. A source
    /// with revisions (Hugging Face) is pinned to the commit it lists.
    fn list(&mut self, filter: &Filter) -> Result<Listing>;

    /// Starts streaming `objects`, in this order, with up to `streams` ranged reads in
    /// flight; each read fails if its object is no longer the listed version.
    fn fetch(&self, objects: Vec<Object>, streams: usize) -> Box<dyn Fetch + '_>;
}

/// A batch on its way in: the push pipeline reads it as `Inputs`, in listing order.
pub trait Fetch: Inputs {
    /// The source error that stopped the pipeline, if one did: the pipeline itself
    /// only sees an I/O error.
    fn take_failure(&self) -> Option<Error>;

    /// The checks of the source's own hashes file `i` passed (`checks.rs`), once it
    /// was read whole; none for a source that reads without them.
    fn checked(&self, _i: usize) -> Option<Vec<&'static str>> {
        None
    }
}
