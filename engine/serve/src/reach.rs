//! What a namespace's versions reach: the files their manifests name, and the chunks of
//! those files. A key scoped to namespaces reads a chunk list, or chunks, only of a file
//! one of its namespaces' versions holds (live or in the trash, which it may restore),
//! and names in a push without proof only chunks such a file holds; content is stored
//! once for all namespaces, so this is what keeps one team's key out of another's files.
//!
//! A namespace's chunks are read from its files' chunk lists the first time a push of
//! one of its keys asks about a chunk (a small file is its own chunk), and kept within
//! `CHUNK_BUDGET` entries over all namespaces: past it, a namespace's set stops growing
//! and the chunks it misses are proven by the push instead (`possession.rs`), which
//! costs hashing, never a wrong answer.
//!
//! Built from the manifests (each checked against its digest when read), kept per
//! namespace, and brought up to date when a file is asked for that it does not hold:
//! at most once a second per namespace, so a key probing made-up hashes costs one
//! listing a second. A version purged since stays counted until the namespace is read
//! again in full (every `REBUILD`); its data is gone by then or soon.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
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

/// The most chunk entries kept over all namespaces (16 bytes of each hash: about
/// 40 MiB, the chunks of some 256 GiB of distinct data at the default chunk size).
const CHUNK_BUDGET: usize = 2 << 20;

#[derive(Default)]
struct Namespace {
    versions: HashSet<(VolumeName, Digest)>,
    files: HashSet<Hash>,
    listed: Option<Instant>,
    built: Option<Instant>,
    /// The chunks of the files in `expanded`, by the first 16 bytes of their hashes (a
    /// second preimage of 128 bits is out of anyone's reach).
    chunks: HashSet<u128>,
    expanded: HashSet<Hash>,
}

pub struct Reach {
    repo: Arc<Repository>,
    namespaces: Mutex<HashMap<String, Namespace>>,
    /// Chunk entries held over all namespaces.
    chunk_entries: AtomicUsize,
}

/// The part of a chunk's hash a namespace's set keeps.
fn short(h: &Hash) -> u128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(&h.0[..16]);
    u128::from_le_bytes(b)
}

impl Reach {
    pub fn new(repo: Arc<Repository>) -> Reach {
        Reach {
            repo,
            namespaces: Mutex::default(),
            chunk_entries: AtomicUsize::new(0),
        }
    }

    /// Whether a version of a namespace `grant` sees holds a file that holds chunk
    /// `hash`; true for keys that see every namespace. Blocking.
    pub fn reaches_chunk(&self, grant: &Grant, hash: &Hash) -> Result<bool> {
        if grant.admin || grant.namespaces.is_empty() {
            return Ok(true);
        }
        for ns in &grant.namespaces {
            if self.holds_chunk(ns, hash)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn holds_chunk(&self, ns: &str, hash: &Hash) -> Result<bool> {
        let key = short(hash);
        let in_set = |all: &HashMap<String, Namespace>| {
            all.get(ns)
                .is_some_and(|n| n.chunks.contains(&key) || n.files.contains(hash))
        };
        if in_set(&sealvol_core::lock(&self.namespaces)) {
            return Ok(true);
        }
        // Lists the namespace again (at most every `RELIST`), then reads the chunk lists
        // of files not read yet, outside the lock.
        self.holds(ns, hash)?;
        let todo: Vec<Hash> = {
            let all = sealvol_core::lock(&self.namespaces);
            match all.get(ns) {
                Some(n) => n.files.difference(&n.expanded).copied().collect(),
                None => Vec::new(),
            }
        };
        for file in todo {
            if self.chunk_entries.load(Ordering::Relaxed) >= CHUNK_BUDGET {
                break;
            }
            // A small file has no list: it is its own chunk, and the file set has it.
            let chunks: Vec<u128> = match self.repo.file_object_if_stored(&file) {
                Ok(Some(obj)) => obj.chunks.iter().map(|c| short(&c.entry.hash)).collect(),
                Ok(None) => Vec::new(),
                Err(e) if e.kind() == ErrorKind::Corrupt => Vec::new(),
                Err(e) => return Err(e),
            };
            let mut all = sealvol_core::lock(&self.namespaces);
            let Some(n) = all.get_mut(ns) else { break };
            if !n.expanded.insert(file) {
                continue;
            }
            for c in chunks {
                if n.chunks.insert(c) {
                    self.chunk_entries.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Ok(in_set(&sealvol_core::lock(&self.namespaces)))
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
            self.chunk_entries
                .fetch_sub(n.chunks.len(), Ordering::Relaxed);
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
