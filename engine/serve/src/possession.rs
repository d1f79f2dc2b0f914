//! A hash is not a key (docs/SEMANTICS.md): which chunks a key may name in a chunk list
//! it sends, and how it shows that it holds the bytes of the others.
//!
//! A key reaches a chunk when one of its namespaces holds a version that holds it
//! (`reach.rs`), when it uploaded the copy the server finds (its packs of the last
//! `UPLOADS_FOR`), or, chunk by chunk in the list it sends, when it names a copy it
//! uploaded or answers a challenge: a keyed BLAKE3 hash of the chunk's bytes under a
//! key derived from a nonce made for this key and hour (`sealvol_core::possession`).
//! Nonces are not stored: each is the hour it was made and a keyed hash of the key's
//! name and that hour under this server's secret, so only this server makes them,
//! each names the key it was made for, and one is taken for `NONCE_LIFE` after.
//!
//! A namespace set to private deduplication (`serve --private-dedup NS`) is never told
//! that a chunk is held where it does not reach it: its pushes upload those chunks, and
//! the server keeps its one copy (the upload's is left for garbage collection).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealvol_core::digest::Hash;
use sealvol_core::error::{ErrorKind, Result};
use sealvol_core::objects::{PackEntry, PackId};
use sealvol_core::possession::{Challenge, Evidence, NONCE_LEN, Named};
use sealvol_core::repo::Repository;

use crate::keys::Grant;
use crate::known::Known;
use crate::reach::Reach;

/// How long a challenge is taken after the hour it was made in.
const NONCE_LIFE_HOURS: u64 = 24;
/// How long a key's uploaded packs count as its copies.
const UPLOADS_FOR: Duration = Duration::from_secs(24 * 3600);
/// The most uploaded packs remembered per key (4 TiB of packs at 64 MiB), and keys.
const MAX_UPLOADS: usize = 1 << 16;
const MAX_UPLOADERS: usize = 1 << 12;

pub struct Possession {
    secret: [u8; 32],
    /// Packs each key uploaded, and when.
    uploads: Mutex<HashMap<String, HashMap<PackId, Instant>>>,
    /// Namespaces never told of chunks held outside their reach.
    private: HashSet<String>,
}

fn hour_now() -> u64 {
    sealvol_core::read::now_ms() / 3_600_000
}

impl Possession {
    pub fn new(private: impl IntoIterator<Item = String>) -> Possession {
        let mut secret = [0u8; 32];
        if getrandom::fill(&mut secret).is_err() {
            // No randomness: no challenge can be trusted, so none is answered right
            // (every proof fails; pushes upload what they would have proven).
            tracing::error!("no randomness for proof-of-possession challenges");
        }
        Possession {
            secret,
            uploads: Mutex::default(),
            private: private.into_iter().collect(),
        }
    }

    fn tag(&self, key: &str, hour: u64) -> [u8; 32] {
        let mut h = blake3::Hasher::new_keyed(&self.secret);
        h.update(b"sealvol challenge\0");
        h.update(&(key.len() as u64).to_le_bytes());
        h.update(key.as_bytes());
        h.update(&hour.to_le_bytes());
        *h.finalize().as_bytes()
    }

    /// The challenge for key `key` now.
    pub fn challenge(&self, key: &str) -> Challenge {
        let hour = hour_now();
        let mut b = [0u8; NONCE_LEN];
        b[..8].copy_from_slice(&hour.to_le_bytes());
        b[8..].copy_from_slice(&self.tag(key, hour));
        Challenge(b)
    }

    /// Whether `c` is a challenge this server made for key `key`, recently enough.
    pub fn made_for(&self, key: &str, c: &Challenge) -> bool {
        let hour = c.hour();
        let now = hour_now();
        if hour > now || now - hour > NONCE_LIFE_HOURS {
            return false;
        }
        let tag = blake3::Hash::from_bytes(self.tag(key, hour));
        let mut sent = [0u8; 32];
        sent.copy_from_slice(&c.0[8..]);
        // Compared in constant time.
        tag == blake3::Hash::from_bytes(sent)
    }

    /// Notes that key `key` uploaded pack `pack` (checked and indexed).
    pub fn uploaded(&self, key: &str, pack: &PackId) {
        let mut all = sealvol_core::lock(&self.uploads);
        if !all.contains_key(key) && all.len() >= MAX_UPLOADERS {
            all.retain(|_, packs| {
                packs.retain(|_, at| at.elapsed() < UPLOADS_FOR);
                !packs.is_empty()
            });
            if all.len() >= MAX_UPLOADERS {
                return;
            }
        }
        let packs = all.entry(key.to_string()).or_default();
        if packs.len() >= MAX_UPLOADS {
            packs.retain(|_, at| at.elapsed() < UPLOADS_FOR);
            if packs.len() >= MAX_UPLOADS {
                // The oldest goes: its chunks are proven, not named, if named again.
                if let Some(oldest) = packs.iter().min_by_key(|(_, at)| **at).map(|(p, _)| *p) {
                    packs.remove(&oldest);
                }
            }
        }
        packs.insert(*pack, Instant::now());
    }

    /// Whether key `key` uploaded pack `pack` lately.
    pub fn uploaded_by(&self, key: &str, pack: &PackId) -> bool {
        sealvol_core::lock(&self.uploads)
            .get(key)
            .and_then(|packs| packs.get(pack))
            .is_some_and(|at| at.elapsed() < UPLOADS_FOR)
    }

    /// Whether `grant` is never to be told of chunks held outside its reach: one of its
    /// namespaces is private.
    pub fn is_private(&self, grant: &Grant) -> bool {
        grant.namespaces.iter().any(|ns| self.private.contains(ns))
    }
}

/// Pack tables read while one request is checked.
#[derive(Default)]
pub struct Copies {
    tables: HashMap<PackId, Option<Vec<PackEntry>>>,
}

impl Copies {
    /// Whether pack `pack`'s own table holds chunk `hash` at `offset`.
    fn holds(
        &mut self,
        repo: &Repository,
        pack: &PackId,
        hash: &Hash,
        offset: u64,
    ) -> Result<bool> {
        if !self.tables.contains_key(pack) {
            let table = match repo.index(pack) {
                Ok(t) => t,
                Err(e) if e.kind() == ErrorKind::Corrupt => None,
                Err(e) => return Err(e),
            };
            self.tables.insert(*pack, table);
        }
        Ok(self
            .tables
            .get(pack)
            .and_then(|t| t.as_ref())
            .is_some_and(|t| t.iter().any(|e| e.hash == *hash && e.offset == offset)))
    }
}

/// Which chunks a key may name: what the server holds (`Known`), what its namespaces
/// reach (`Reach`), and what it uploaded or proves (`Possession`).
pub struct Naming {
    pub possession: Possession,
    known: Arc<Known>,
    reach: Arc<Reach>,
    repo: Arc<Repository>,
}

impl Naming {
    pub fn new(
        possession: Possession,
        known: Arc<Known>,
        reach: Arc<Reach>,
        repo: Arc<Repository>,
    ) -> Naming {
        Naming {
            possession,
            known,
            reach,
            repo,
        }
    }

    /// Whether `grant` may name chunk `hash` without evidence: it sees every namespace,
    /// it uploaded the copy the server finds, or a version of its namespaces holds the
    /// chunk. Blocking.
    pub fn reaches_chunk(&self, grant: &Grant, hash: &Hash) -> Result<bool> {
        if grant.admin || grant.namespaces.is_empty() {
            return Ok(true);
        }
        if let Some((pack, _)) = self.known.locate(hash)?
            && self.possession.uploaded_by(&grant.name, &pack)
        {
            return Ok(true);
        }
        self.reach.reaches_chunk(grant, hash)
    }

    /// Whether `grant` may name chunk `n` in a list or a small file: the server holds it
    /// and the key reaches it or shows evidence. Blocking.
    pub fn may_name(&self, grant: &Grant, n: &Named, copies: &mut Copies) -> Result<bool> {
        match self.known.locate(&n.hash)? {
            Some(at) => self.may_name_at(grant, n, &at, copies),
            None => Ok(false),
        }
    }

    /// `may_name` of a chunk the server holds at `at`.
    pub fn may_name_at(
        &self,
        grant: &Grant,
        n: &Named,
        at: &(PackId, PackEntry),
        copies: &mut Copies,
    ) -> Result<bool> {
        let (pack, entry) = at;
        if grant.admin || grant.namespaces.is_empty() {
            return Ok(true);
        }
        if self.possession.uploaded_by(&grant.name, pack) {
            return Ok(true);
        }
        match n.evidence {
            Evidence::Copy {
                pack: theirs,
                offset,
            } => {
                if self.possession.uploaded_by(&grant.name, &theirs)
                    && copies.holds(&self.repo, &theirs, &n.hash, offset)?
                {
                    return Ok(true);
                }
            }
            Evidence::Proof(challenge, proof) => {
                if self.possession.made_for(&grant.name, &challenge)
                    && entry.flags == sealvol_core::objects::FLAG_RAW
                {
                    let bytes =
                        self.repo
                            .pack_range(pack, entry.offset, entry.stored_len as u64)?;
                    // The server's copy must be the chunk: a damaged one proves nothing.
                    if Hash::of(&bytes) == n.hash && challenge.prove(&bytes).matches(&proof) {
                        return Ok(true);
                    }
                }
            }
            Evidence::None => {}
        }
        self.reach.reaches_chunk(grant, &n.hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_this_servers_for_one_key_and_for_a_day() {
        let p = Possession::new([]);
        let c = p.challenge("team-a");
        assert!(p.made_for("team-a", &c));
        assert!(!p.made_for("team-b", &c));
        assert!(!Possession::new([]).made_for("team-a", &c));
        let mut old = c;
        old.0[..8].copy_from_slice(&(c.hour() - NONCE_LIFE_HOURS - 1).to_le_bytes());
        assert!(!p.made_for("team-a", &old));
        let mut forged = c;
        forged.0[39] ^= 1;
        assert!(!p.made_for("team-a", &forged));
    }

    #[test]
    fn uploads_are_the_uploaders_own() {
        let p = Possession::new(["secret".to_string()]);
        let pack = sealvol_core::digest::Hash([7; 32]);
        p.uploaded("a", &pack);
        assert!(p.uploaded_by("a", &pack));
        assert!(!p.uploaded_by("b", &pack));
        let g = |ns: &[&str]| Grant {
            name: "k".into(),
            admin: false,
            read_only: false,
            namespaces: ns.iter().map(|s| s.to_string()).collect(),
        };
        assert!(p.is_private(&g(&["x", "secret"])));
        assert!(!p.is_private(&g(&["x"])));
        assert!(!p.is_private(&g(&[])));
    }
}
