//! An artifact pushed to a registry over the OCI distribution API (`docker://HOST/REPO:TAG`):
//! each blob the repository lacks (`HEAD` first) mounted from another repository of the
//! registry, or sent (`upload`: whole, or in resumable pieces), its bytes streamed from
//! the repository as they are proven (no local copy); the config, then the manifest
//! under the tag. The conversation and its credentials: `session`.

use std::io::Read;
use std::time::Duration;

use sealvol_core::Result;

use crate::artifact::{Artifact, Layer};
use crate::destination::Destination;
use crate::media;
use crate::memory::Memory;
use crate::session::{Session, expect};
use crate::upload::{Blob, Sent};

/// How a push reaches its registry.
pub struct Options {
    /// `user:password`, if the registry asks for credentials.
    pub credentials: Option<String>,
    /// Plain HTTP (skopeo's `--tls-verify=false`, for a registry on loopback).
    pub plain_http: bool,
    pub timeout: Duration,
    /// A blob larger than this goes up in pieces of this size, each resumable.
    pub piece: u64,
    /// Repositories of the same registry a blob may be mounted from.
    pub mount_from: Vec<String>,
    /// Where unfinished uploads and the repositories pushed to are remembered
    /// (`memory`); none: nothing is.
    pub memory: Option<std::path::PathBuf>,
}

/// What a push did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pushed {
    pub blobs: u64,
    pub bytes: u64,
    /// Blobs the repository had already.
    pub present: u64,
    /// Blobs mounted from another repository of the registry (no byte sent).
    pub mounted: u64,
}

/// A layer's bytes from an offset, in order, as a reader of exactly what remains.
pub type OpenLayer<'a> = dyn FnMut(&Layer, u64) -> Result<Box<dyn Read + Send>> + 'a;

/// Pushes `art` to `dest` (tagged `tag`), its layers' bytes from `open`.
pub fn push(
    art: &Artifact,
    dest: &Destination,
    tag: &str,
    o: &Options,
    open: &mut OpenLayer<'_>,
) -> Result<Pushed> {
    let scheme = if o.plain_http { "http" } else { "https" };
    let memory = o.memory.as_deref().map(Memory::at);
    // Where blobs may already be: the repositories named, then those pushed to lately.
    let mut mount_from = o.mount_from.clone();
    if let Some(m) = &memory {
        m.sweep_uploads();
        mount_from.extend(m.pushed(&dest.host));
    }
    mount_from.retain(|r| r != &dest.repo);
    mount_from.dedup();
    let mut s = Session::new(
        format!("{scheme}://{}", dest.host),
        dest.repo.clone(),
        mount_from.clone(),
        o.credentials.clone(),
        o.timeout,
    )?;
    s.login()?;
    let mut done = Pushed::default();
    let blob = |digest, size| Blob {
        digest,
        size,
        piece: o.piece.max(1),
        mount_from: &mount_from,
        memory: memory.as_ref(),
        host: &dest.host,
    };
    for layer in art.distinct_layers() {
        if s.has_blob(&dest.repo, &layer.digest)? {
            done.present += 1;
            continue;
        }
        let sent = s.send_blob(&blob(&layer.digest, layer.size), &mut |at| open(layer, at))?;
        done.count(sent);
    }
    if s.has_blob(&dest.repo, &art.config_digest)? {
        done.present += 1;
    } else {
        let config = art.config.clone();
        let sent = s.send_blob(&blob(&art.config_digest, config.len() as u64), &mut |at| {
            Ok(Box::new(std::io::Cursor::new(
                config[at as usize..].to_vec(),
            )))
        })?;
        done.count(sent);
    }
    let url = format!("{}/v2/{}/manifests/{tag}", s.base, s.repo);
    let resp = s.send(|c| {
        c.put(&url)
            .header("content-type", media::OCI_MANIFEST)
            .body(art.manifest.clone())
    })?;
    expect(resp, &[201, 200], "the manifest")?;
    if let Some(m) = &memory {
        m.note_pushed(&dest.host, &dest.repo);
    }
    Ok(done)
}

impl Pushed {
    fn count(&mut self, sent: Sent) {
        match sent {
            Sent::Mounted => self.mounted += 1,
            Sent::Bytes(n) => {
                self.blobs += 1;
                self.bytes += n;
            }
        }
    }
}
