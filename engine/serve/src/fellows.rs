//! The other servers of a ring (`serve --peer`), for a server that misses: a run whose
//! segment another server owns (`read::ring`) is asked of that server before the
//! origin, so a cold chunk costs one origin read across the ring even when a node's
//! list differs from the servers' (an edit not yet everywhere) or a node passed over
//! the owner for a moment.
//!
//! A fellow is asked with the caller's own key (every server of a ring takes the same
//! keys), for the caller's file, so it checks and proves exactly what it would for the
//! caller; and with `FORWARDED` set, so that it answers from its cache or the origin
//! and never forwards again: a request crosses at most one hop, and two servers that
//! disagree about an owner cannot send a run back and forth.
//!
//! A server finds itself in the list by asking each address for its instance id
//! (`GET /v1/ring/id`, a random id made at start): the address that answers with its
//! own is this server, whatever name the list gives it.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use sealvol_core::digest::Hash;
use sealvol_core::objects::PackId;
use sealvol_core::read::add;
use sealvol_core::read::ring::{Member, Ring};

use crate::peer::HttpPeer;

/// The header a server sets on a run it forwards to a fellow.
pub const FORWARDED: &str = "x-sealvol-forwarded";

/// Who asked for a run: what a server needs to forward it as the caller.
#[derive(Clone, Debug)]
pub struct Asker {
    /// The file whose chunk list names the chunks.
    pub file: Hash,
    /// The caller's `Authorization` header, passed on as it came.
    pub authorization: Option<String>,
    /// The caller is a fellow server: answer, never forward.
    pub forwarded: bool,
}

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
    /// Which addresses are this server, as learned by asking them.
    me: Mutex<HashMap<String, bool>>,
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
            me: Mutex::default(),
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

    /// Whether `m` is this server: asked once, and again after an answer that failed.
    fn is_me(&self, m: &Member) -> bool {
        let url = m.peer.name();
        if let Some(&known) = sealvol_core::lock(&self.me).get(url) {
            return known;
        }
        let Some(peer) = self.client(url) else {
            return false;
        };
        match peer.instance_id() {
            Ok(id) => {
                let me = id == self.id;
                if me {
                    tracing::info!("ring: this server is {url}");
                }
                sealvol_core::lock(&self.me).insert(url.to_string(), me);
                me
            }
            Err(_) => false,
        }
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
        if self.is_me(&owner) {
            return false;
        }
        let Some(peer) = self.client(owner.peer.name()) else {
            return false;
        };
        add(&self.counters.requests, 1);
        let token = asker
            .authorization
            .as_deref()
            .and_then(|a| a.strip_prefix("Bearer "));
        match peer.read_run_forwarded(token, &asker.file, pack, offset, chunks, into) {
            Ok(()) => {
                add(&self.counters.bytes, into.len() as u64);
                true
            }
            Err(e) => {
                add(&self.counters.errors, 1);
                owner.pass_over(&format!("as a fellow: {e}"));
                false
            }
        }
    }
}
