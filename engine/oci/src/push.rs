//! An artifact pushed to a registry over the OCI distribution API (`docker://HOST/REPO:TAG`):
//! each blob the repository lacks (`HEAD` first) mounted from another repository of the
//! registry, or sent (`upload`: whole, or in resumable pieces), its bytes streamed from
//! the repository as they are proven (no local copy); the config, then the manifest
//! under the tag. The conversation and its credentials: `session`.

use std::io::Read;
use std::time::Duration;

use sealvol_core::{Error, Result};

use crate::artifact::{Artifact, Layer};
use crate::media;
use crate::memory::Memory;
use crate::session::{Session, expect};
use crate::upload::{Blob, Sent};

/// A registry destination, `docker://HOST[:PORT]/REPO[:TAG]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub host: String,
    pub repo: String,
    pub tag: Option<String>,
}

impl Destination {
    pub fn parse(s: &str) -> Result<Destination> {
        let bad = |why: &str| {
            Error::usage(format!("{s:.200}: {why}"))
                .hint("give docker://HOST[:PORT]/REPO[:TAG], e.g. docker://registry.example/models/qwen3-8b:prod")
        };
        let rest = s
            .strip_prefix("docker://")
            .ok_or_else(|| bad("not docker://"))?;
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no repository after the host"))?;
        let host_ok = !host.is_empty()
            && host.len() <= 255
            && host.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
            });
        if !host_ok {
            return Err(bad("not a host name"));
        }
        let (repo, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t)),
            _ => (path, None),
        };
        if !repository_name_ok(repo) {
            return Err(bad(
                "not a repository name: lowercase path components of a-z 0-9 . _ -",
            ));
        }
        if let Some(t) = tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && (t.as_bytes()[0].is_ascii_alphanumeric() || t.starts_with('_'))
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return Err(bad("not a tag: 1-128 of A-Z a-z 0-9 . _ -"));
            }
        }
        Ok(Destination {
            host: host.to_string(),
            repo: repo.to_string(),
            tag: tag.map(str::to_string),
        })
    }
}

/// The distribution spec's repository name: lowercase path components.
pub fn repository_name_ok(repo: &str) -> bool {
    !repo.is_empty()
        && repo.len() <= 255
        && repo.split('/').all(|c| {
            !c.is_empty()
                && c.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
                && c.as_bytes()[0].is_ascii_alphanumeric()
        })
}

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

/// The piece size when none is given: few requests, and little sent again on a resume.
pub const DEFAULT_PIECE: u64 = 64 << 20;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_is_read_strictly() {
        let d = Destination::parse("docker://localhost:5000/models/qwen:prod").unwrap();
        assert_eq!(
            (d.host.as_str(), d.repo.as_str(), d.tag.as_deref()),
            ("localhost:5000", "models/qwen", Some("prod"))
        );
        let d = Destination::parse("docker://r.example/m").unwrap();
        assert_eq!(d.tag, None);
        for bad in [
            "docker://",
            "docker://host",
            "docker://host/Upper",
            "docker://host/a//b",
            "docker://host/a:bad tag",
            "docker://ho st/a",
            "oci:x",
            "docker://host/../x",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
    }
}
