//! The other servers of a ring (`serve --peer`), for a server that misses: a run whose
//! segment another server owns (`read::ring`) is asked of that server before the
//! origin, so a cold chunk costs one origin read across the ring even when a node's
//! list differs from the servers' (an edit not yet everywhere) or a node passed over
//! the owner for a moment.
//!
//! A fellow is asked only once it proved it is a server of the ring (it signed a
//! challenge with the ring's key, `credential.rs`), and never with the caller's key:
//! with a pass of the ring naming that fellow and the caller's scope, so it checks and
//! proves exactly what it would for the caller, and a server that is not one of the
//! ring (a peers list naming an impostor) gets nothing it can use anywhere. A run is
//! marked `FORWARDED`, so that the fellow answers from its cache or the origin and never
//! forwards again: a request crosses at most one hop, and two servers that disagree
//! about an owner cannot send a run back and forth.
//!
//! A server finds itself in the list by the same proof: the address whose proven id is
//! its own (a random id made at start) is this server, whatever name the list gives it.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use sealvol_core::digest::Hash;
use sealvol_core::objects::PackId;
use sealvol_core::read::add;
use sealvol_core::read::liveness::{self, Asked};
use sealvol_core::read::ring::Ring;

use sealvol_client::peer::HttpPeer;

/// How long a fellow's proven id stands; and how soon one that did not prove one is
/// asked again.
const ASK_AGAIN: std::time::Duration = std::time::Duration::from_secs(60);
const RETRY: std::time::Duration = std::time::Duration::from_secs(5);

pub use sealvol_wire::ring::FORWARDED;

/// Who asked for a run: what a server needs to forward it for the caller.
#[derive(Clone, Debug)]
pub struct Asker {
    /// The file whose chunk list names the chunks.
    pub file: Hash,
    /// What the caller's key may read: a fellow is passed this, never the key.
    pub grant: Arc<crate::keys::Grant>,
    /// The caller is a fellow server: answer, never forward.
    pub forwarded: bool,
}

/// The least a server waits for the owner of a run it forwards.
const FELLOW_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a server counts of its fellows, for `/metrics`.
#[derive(Default)]
pub struct FellowCounters {
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
    pub errors: AtomicU64,
    /// Runs asked of this server by a fellow.
    pub forwarded_in: AtomicU64,
}

pub struct Fellows {
    ring: Arc<Ring>,
    /// This server's instance id (`/v1/ring/id`).
    id: String,
    /// The instance id each address proved it has (`None`: it did not prove it is a
    /// server of the ring), and when it was asked.
    members: Mutex<HashMap<String, (Option<String>, std::time::Instant)>>,
    /// The ring's keys: what proves a fellow, and signs the passes it is sent.
    pub credential: std::sync::OnceLock<Arc<crate::credential::Credential>>,
    /// A client per fellow, asked with each caller's key.
    clients: Mutex<HashMap<String, Arc<HttpPeer>>>,
    pub counters: FellowCounters,
}

/// A random instance id for a server, made at start.
pub fn instance_id() -> String {
    let mut b = [0u8; 16];
    // Uniqueness, not secrecy: a clock-made id would do if the system had no randomness.
    if getrandom::fill(&mut b).is_err() {
        let t = sealvol_core::read::now_ms();
        b[..8].copy_from_slice(&t.to_le_bytes());
        b[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl Fellows {
    /// The fellows of the ring `ring` (this server among them, found by `id`).
    pub fn new(ring: Arc<Ring>, id: String) -> Fellows {
        Fellows {
            ring,
            id,
            members: Mutex::default(),
            credential: std::sync::OnceLock::new(),
            clients: Mutex::default(),
            counters: FellowCounters::default(),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }

    /// The client for fellow `url`, made once.
    fn client(&self, url: &str) -> Option<Arc<HttpPeer>> {
        let mut clients = sealvol_core::lock(&self.clients);
        if let Some(c) = clients.get(url) {
            return Some(Arc::clone(c));
        }
        let c = Arc::new(HttpPeer::new(url, None).ok()?);
        clients.insert(url.to_string(), Arc::clone(&c));
        Some(c)
    }

    /// The instance id fellow `url` proved it has, asked again every `ASK_AGAIN` (and
    /// every few seconds while it has not proved one); `None` while it has not.
    fn member(&self, url: &str) -> Option<String> {
        if let Some((id, at)) = sealvol_core::lock(&self.members).get(url)
            && (at.elapsed() < ASK_AGAIN || (id.is_none() && at.elapsed() < RETRY))
        {
            return id.clone();
        }
        let credential = self.credential.get()?;
        let peer = self.client(url)?;
        let proven = match peer.member_id(&credential.public()) {
            Ok(id) => {
                if id == self.id {
                    tracing::info!("ring: this server is {url}");
                }
                Some(id)
            }
            Err(e) if e.kind() == sealvol_core::error::ErrorKind::Denied => {
                // Loud: a peers list that names an impostor is someone's mistake or
                // someone's attack.
                tracing::error!("ring: {e}; it is sent nothing");
                None
            }
            // Not up yet: asked again soon.
            Err(_) => None,
        };
        sealvol_core::lock(&self.members)
            .insert(url.to_string(), (proven.clone(), std::time::Instant::now()));
        proven
    }

    /// Puts in `into` chunks `chunks` of `pack` from `offset` (one segment's), from the
    /// fellow that owns them, unchecked (the caller checks every chunk); false when
    /// this server ranks first among those up (it reads the origin), when the asker is
    /// a fellow, or when the owner fails.
    pub fn run(
        &self,
        asker: &Asker,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        into: &mut Vec<u8>,
    ) -> bool {
        if asker.forwarded {
            return false;
        }
        let members = self.ring.members();
        let Some(owner) = Ring::order_for(&members, pack, offset)
            .into_iter()
            .find(|m| m.is_up())
        else {
            return false;
        };
        let url = owner.peer.name();
        let Some(id) = self.member(url) else {
            owner.pass_over("did not prove it is a server of this ring");
            return false;
        };
        if id == self.id {
            return false;
        }
        let (Some(peer), Some(pass)) = (
            self.client(url),
            self.credential
                .get()
                .and_then(|c| c.pass(&asker.grant, &id)),
        ) else {
            return false;
        };
        add(&self.counters.requests, 1);
        // Waited for within the owner's latency bound: a frozen owner costs this
        // server's caller that bound, then this server reads the origin itself.
        // At least a second: a fellow that gives up on a slow owner reads the origin
        // itself, a second read of those bytes; a frozen owner costs this once.
        let bound = || {
            owner
                .liveness
                .bound_beside(sealvol_core::read::slowest_of_others(&members, &owner))
                .max(FELLOW_PATIENCE)
        };
        let (file, pack, chunks) = (asker.file, *pack, chunks.to_vec());
        let member = Arc::clone(&owner);
        let asked = liveness::ask(bound, move || {
            let mut buf = Vec::new();
            let began = std::time::Instant::now();
            let answer = peer.read_run_forwarded(&pass, &file, &pack, offset, &chunks, &mut buf);
            match &answer {
                Ok(()) => member
                    .liveness
                    .answered(began.elapsed(), member.peer.name()),
                Err(e) => member.pass_over(&format!("as a fellow: {e}")),
            }
            (answer, buf)
        });
        match asked {
            Asked::Answer((Ok(()), buf)) => {
                *into = buf;
                add(&self.counters.bytes, into.len() as u64);
                true
            }
            Asked::Answer((Err(_), _)) => {
                add(&self.counters.errors, 1);
                false
            }
            Asked::Late(bound) => {
                add(&self.counters.errors, 1);
                owner.pass_over(&format!(
                    "as a fellow: {}",
                    owner.liveness.late_reason(bound)
                ));
                false
            }
        }
    }
}
