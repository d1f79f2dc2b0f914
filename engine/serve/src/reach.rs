//! What a namespace's versions reach: the files their manifests name. A key scoped to
//! namespaces reads a chunk list, or chunks, only of a file one of its namespaces'
//! versions holds (live or in the trash, which it may restore); content is stored once
//! for all namespaces, so this is what keeps one team's key out of another's files.
//!
//! Built from the manifests (each checked against its digest when read), kept per
//! namespace, and brought up to date when a file is asked for that it does not hold:
//! at most once a second per namespace, so a key probing made-up hashes costs one
//! listing a second. A version purged since stays counted until the namespace is read
//! again in full (every `REBUILD`); its data is gone by then or soon.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealvol_core::digest::{Entry, Hash};
use sealvol_core::error::{ErrorKind, Result};
use sealvol_core::refs::{Digest, Name, VolumeName};
use sealvol_core::repo::Repository;

use crate::keys::Grant;

/// A namespace whose files miss a hash is listed again at most this often.
const RELIST: Duration = Duration::from_secs(1);
/// A namespace is read again whole this often, dropping purged versions.
const REBUILD: Duration = Duration::from_secs(300);

#[derive(Default)]
struct Namespace {
    versions: HashSet<(VolumeName, Digest)>,
    files: HashSet<Hash>,
    listed: Option<Instant>,
    built: Option<Instant>,
}

pub struct Reach {
    repo: Arc<Repository>,
    namespaces: Mutex<HashMap<String, Namespace>>,
}

impl Reach {
    pub fn new(repo: Arc<Repository>) -> Reach {
        Reach {
            repo,
            namespaces: Mutex::default(),
        }
    }

    /// Whether `grant` may read file `hash`: it sees every namespace, or a version of
    /// one it sees holds the file. Blocking: call it off the async threads.
    pub fn reaches(&self, grant: &Grant, hash: &Hash) -> Result<bool> {
        if grant.admin || grant.namespaces.is_empty() {
            return Ok(true);
        }
        for ns in &grant.namespaces {
            if self.holds(ns, hash)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// A version the server has just sealed reaches its files at once: a key that
    /// listed its namespace within `RELIST` would otherwise be refused them for that
    /// long after the push that made them.
    pub fn sealed(&self, vol: &VolumeName, digest: Digest, entries: &[Entry]) {
        let mut all = sealvol_core::lock(&self.namespaces);
        let Some(n) = all.get_mut(&vol.namespace.to_string()) else {
            // Not asked about yet: its first question lists it whole.
            return;
        };
        for e in entries {
            if let Entry::File { hash, .. } = e {
                n.files.insert(*hash);
            }
        }
        n.versions.insert((vol.clone(), digest));
    }

    fn holds(&self, ns: &str, hash: &Hash) -> Result<bool> {
        let mut all = sealvol_core::lock(&self.namespaces);
        let n = all.entry(ns.to_string()).or_default();
        if n.files.contains(hash) {
            return Ok(true);
        }
        if n.listed.is_some_and(|t| t.elapsed() < RELIST) {
            return Ok(false);
        }
        if n.built.is_none_or(|t| t.elapsed() > REBUILD) {
            *n = Namespace {
                built: Some(Instant::now()),
                ..Namespace::default()
            };
        }
        n.listed = Some(Instant::now());
        let Ok(name) = Name::parse("namespace", ns) else {
            return Ok(false);
        };
        for vol in self.repo.volumes(Some(&name))? {
            for d in self.repo.version_digests(&vol)? {
                if n.versions.contains(&(vol.clone(), d)) {
                    continue;
                }
                match self.repo.manifest(&vol, &d) {
                    Ok(m) => {
                        for e in &m.entries {
                            if let Entry::File { hash, .. } = e {
                                n.files.insert(*hash);
                            }
                        }
                        n.versions.insert((vol.clone(), d));
                    }
                    // Damaged or purged meanwhile: it reaches nothing.
                    Err(e) if matches!(e.kind(), ErrorKind::Corrupt | ErrorKind::NotFound) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(n.files.contains(hash))
    }
}
