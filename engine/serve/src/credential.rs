//! The ring's credential: how the servers of a repository prove they are its servers,
//! to its nodes and to each other, so that a caller's API key never leaves the server
//! it was sent to (docs/SEMANTICS.md, "Keys stay where they were sent").
//!
//! - The ring's keys are Ed25519 key pairs kept in the repository, like the shared key
//!   list: `access/ring.json` holds them whole (the servers'), `access/ring-public.json`
//!   their public halves (the nodes'); no HTTP route reads either. The first server to
//!   start makes one; `sealvol key rotate-ring` adds a new one, which signs from then
//!   on, and keeps the one before so that what it signed still checks; older ones go.
//!   Servers read the list again every `REFRESH`. The list's format, the proof and its
//!   check are the protocol's (`sealvol_wire::membership`); making and signing are here.
//! - A server proves itself by signing a challenge a node or a fellow sent
//!   (`GET /v1/ring/id?challenge=HEX`) with its instance id: only a holder of a ring key
//!   can. A node sends its key to a peer only once the peer proved itself so.
//! - A server asks a fellow for a run with a **pass** instead of the caller's key: the
//!   caller's scope (what its key may read), the fellow's instance id, the time and a
//!   nonce, signed with the ring key. The fellow takes it only if it names it, within
//!   `PASS_LIFE`, once. A pass is worth nothing anywhere else, and nothing after a minute.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::keys::Key;
use sealvol_core::repo::Repository;
use sealvol_wire::membership::{KeyList, Proof, RingPublic, StoredKey, proof_message, random};
use serde::{Deserialize, Serialize};

use crate::keys::Grant;

/// How often a server reads the ring's keys again (a rotation reaches it within this).
pub const REFRESH: Duration = Duration::from_secs(5);
/// How long a pass is taken after it was made (the two servers' clocks may differ by
/// some seconds).
pub const PASS_LIFE: Duration = Duration::from_secs(60);
/// What a pass signs: this, then the pass's JSON.
const PASS_CONTEXT: &[u8] = b"sealvol ring pass v1\0";
/// The ring keys kept: the one signing and the one before.
const KEPT: usize = 2;
/// Nonces of passes taken, kept until they expire, at most this many.
const MAX_SEEN: usize = 1 << 16;

/// What a pass carries: the caller's scope, for whom it is, when, and a nonce.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pass {
    key: String,
    name: String,
    admin: bool,
    read_only: bool,
    namespaces: Vec<String>,
    to: String,
    at_ms: u64,
    nonce: String,
}

/// The ring's keys as a server uses them: the newest that can sign, and the public ones.
#[derive(Clone, Default)]
struct Loaded {
    signer: Option<(String, Arc<Ed25519KeyPair>)>,
    public: Arc<RingPublic>,
}

impl Loaded {
    fn of(list: &KeyList) -> Loaded {
        let signer = list.keys.iter().rev().find_map(|k| {
            let pkcs8 = B64.decode(k.private.as_deref()?).ok()?;
            let pair = Ed25519KeyPair::from_pkcs8(&pkcs8).ok()?;
            Some((k.id.clone(), Arc::new(pair)))
        });
        Loaded {
            signer,
            public: Arc::new(RingPublic::from_list(list)),
        }
    }
}

/// A server's ring credential: the ring's keys whole, read from the repository.
pub struct Credential {
    repo: Arc<Repository>,
    /// The keys as read last (when), ready to sign and check with: read and parsed
    /// once per `REFRESH`, not per proof or pass.
    inner: Mutex<(Instant, Loaded)>,
    /// Nonces of passes taken, and when they stop mattering.
    seen: Mutex<HashMap<String, Instant>>,
}

fn read_list(repo: &Repository) -> Result<Option<KeyList>> {
    let Some(bytes) = repo.object_store().get(&Key::RingKeys.to_string())? else {
        return Ok(None);
    };
    let list: KeyList = serde_json::from_slice(&bytes)
        .map_err(|e| Error::corrupt(format!("{} is damaged: {e}", Key::RingKeys)))?;
    Ok(Some(list))
}

fn new_key() -> Result<StoredKey> {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)
        .map_err(|_| Error::new(ErrorKind::Io, "cannot make a ring key"))?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
        .map_err(|_| Error::new(ErrorKind::Io, "cannot make a ring key"))?;
    Ok(StoredKey {
        id: hex::encode(random::<8>()),
        public: B64.encode(pair.public_key().as_ref()),
        private: Some(B64.encode(pkcs8.as_ref())),
        created: sealvol_core::stamp::now_rfc3339(),
    })
}

/// Writes `list` (the whole keys, and their public halves for nodes): the public halves
/// first, so that whatever a new key signs already checks.
fn write(
    repo: &Repository,
    list: &KeyList,
    expect: Option<&sealvol_core::store::ETag>,
) -> Result<()> {
    let public = KeyList {
        format: 1,
        keys: list
            .keys
            .iter()
            .map(|k| StoredKey {
                private: None,
                ..k.clone()
            })
            .collect(),
    };
    let json = |l: &KeyList| {
        serde_json::to_vec_pretty(l)
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot write the ring's keys: {e}")))
    };
    let store = repo.object_store();
    store.put(&Key::RingPublic.to_string(), &json(&public)?)?;
    match expect {
        None => {
            if !store.put_if_absent(&Key::RingKeys.to_string(), &json(list)?)? {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    "another server made the ring's keys at the same moment",
                ));
            }
            Ok(())
        }
        Some(etag) => store.put_if_match(&Key::RingKeys.to_string(), &json(list)?, Some(etag)),
    }
}

/// `sealvol key rotate-ring`: a new ring key signs from now on; the one before is kept
/// (what it signed still checks), older ones go. Returns the new key's id.
pub fn rotate(repo: &Repository) -> Result<String> {
    let store = repo.object_store();
    let (mut list, etag) = match store.get_versioned(&Key::RingKeys.to_string())? {
        Some((bytes, etag)) => {
            let list: KeyList = serde_json::from_slice(&bytes)
                .map_err(|e| Error::corrupt(format!("{} is damaged: {e}", Key::RingKeys)))?;
            (list, Some(etag))
        }
        None => (KeyList::default(), None),
    };
    let key = new_key()?;
    let id = key.id.clone();
    list.format = 1;
    list.keys.push(key);
    let drop = list.keys.len().saturating_sub(KEPT);
    list.keys.drain(..drop);
    write(repo, &list, etag.as_ref())?;
    Ok(id)
}

impl Credential {
    /// The ring's credential of `repo`, made there if it has none yet.
    pub fn open(repo: Arc<Repository>) -> Result<Credential> {
        let list = match read_list(&repo)? {
            Some(l) => l,
            None => {
                let list = KeyList {
                    format: 1,
                    keys: vec![new_key()?],
                };
                match write(&repo, &list, None) {
                    Ok(()) => {
                        tracing::info!("made the ring's key ({})", Key::RingKeys);
                        list
                    }
                    // Another server made one meanwhile: that one is the ring's.
                    Err(e) if e.kind() == ErrorKind::Conflict => read_list(&repo)?
                        .ok_or_else(|| Error::new(ErrorKind::Io, "the ring's keys went away"))?,
                    Err(e) => return Err(e),
                }
            }
        };
        Ok(Credential {
            repo,
            inner: Mutex::new((Instant::now(), Loaded::of(&list))),
            seen: Mutex::default(),
        })
    }

    /// The keys, read again when older than `REFRESH` (kept as they were when the
    /// repository cannot be read).
    fn keys(&self) -> Loaded {
        let mut i = sealvol_core::lock(&self.inner);
        if i.0.elapsed() > REFRESH {
            match read_list(&self.repo) {
                Ok(Some(list)) => *i = (Instant::now(), Loaded::of(&list)),
                Ok(None) => i.0 = Instant::now(),
                Err(e) => {
                    tracing::warn!("cannot read the ring's keys again: {e}");
                    i.0 = Instant::now();
                }
            }
        }
        i.1.clone()
    }

    pub fn public(&self) -> Arc<RingPublic> {
        self.keys().public
    }

    /// This server's answer to `challenge`, as `id`.
    pub fn prove(&self, challenge: &[u8; 32], id: &str) -> Option<Proof> {
        let (key, pair) = self.keys().signer?;
        let sig = pair.sign(&proof_message(challenge, id)).as_ref().to_vec();
        Some(Proof {
            id: id.to_string(),
            key,
            signature: B64.encode(sig),
        })
    }

    /// A pass for fellow `to` (its instance id) to answer a run as `grant` may read.
    pub fn pass(&self, grant: &Grant, to: &str) -> Option<String> {
        let mut pass = Pass {
            key: String::new(),
            name: grant.name.clone(),
            admin: grant.admin,
            read_only: true,
            namespaces: grant.namespaces.clone(),
            to: to.to_string(),
            at_ms: sealvol_core::read::now_ms(),
            nonce: hex::encode(random::<16>()),
        };
        // One key names the pass and signs it, whatever a rotation does meanwhile.
        let (key, pair) = self.keys().signer?;
        pass.key = key;
        let body = serde_json::to_vec(&pass).ok()?;
        let mut message = PASS_CONTEXT.to_vec();
        message.extend_from_slice(&body);
        let sig = pair.sign(&message);
        Some(format!(
            "{}.{}",
            B64.encode(&body),
            B64.encode(sig.as_ref())
        ))
    }

    /// The grant a fellow's pass carries, if it is a pass of this ring, for this server
    /// (`me`), fresh, and not taken before. The grant reads only.
    pub fn take(&self, token: &str, me: &str) -> std::result::Result<Grant, &'static str> {
        let (body, sig) = token.split_once('.').ok_or("not a pass")?;
        let body = B64.decode(body).map_err(|_| "not a pass")?;
        let sig = B64.decode(sig).map_err(|_| "not a pass")?;
        if body.len() > 64 << 10 {
            return Err("not a pass");
        }
        let pass: Pass = serde_json::from_slice(&body).map_err(|_| "not a pass")?;
        let mut message = PASS_CONTEXT.to_vec();
        message.extend_from_slice(&body);
        if !self.public().verify(&pass.key, &message, &sig) {
            return Err("a pass no ring key signed");
        }
        if pass.to != me {
            return Err("a pass for another server");
        }
        let now = sealvol_core::read::now_ms();
        if pass.at_ms.abs_diff(now) > PASS_LIFE.as_millis() as u64 {
            return Err("a pass out of date");
        }
        let mut seen = sealvol_core::lock(&self.seen);
        if seen.len() >= MAX_SEEN {
            seen.retain(|_, until| *until > Instant::now());
            if seen.len() >= MAX_SEEN {
                return Err("too many passes at once");
            }
        }
        let until = Instant::now() + 2 * PASS_LIFE;
        if seen.insert(pass.nonce.clone(), until).is_some() {
            return Err("a pass taken before");
        }
        Ok(Grant {
            name: format!("{} (through a fellow)", pass.name),
            admin: pass.admin,
            read_only: true,
            namespaces: pass.namespaces,
        })
    }
}
