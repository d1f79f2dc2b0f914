//! The cache servers a node reads through, as one ring: each segment of a pack (its
//! bytes in stretches of `SEGMENT`) belongs to one server, chosen by rendezvous
//! (highest-random-weight) hashing of the server's name, the pack and the segment. So
//! each server holds about 1/N of what the cluster reads, every node that lists the
//! same servers asks the same one for the same bytes (one origin read across the ring,
//! however many nodes), and a server that joins or leaves moves only the segments it
//! wins or held: every other segment keeps its owner.
//!
//! When the owner is down (passed over after a failure), the next server in that
//! segment's own order is asked, then the next; the origin only when none answers.
//! The list may change while a node runs (`PeerSource`: a file an operator or a
//! Kubernetes headless service rewrites); it is looked at again at most once a second.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::liveness::{Hedging, Liveness};
use super::peer::Peer;
use super::stats::{add, now_ms};
use crate::objects::PackId;

/// The stretch of a pack that one server owns: a chunk belongs to the segment its
/// first byte lies in. Small enough that a few hundred MiB spread evenly over a handful
/// of servers (within ±25% of a share at 3 servers from about 100 segments); large
/// enough that a run is a few requests, not one per chunk, and that what a server reads
/// beyond a run to prove it (part of a 64 KiB proof block at each end, `proof/`) stays
/// a few percent of it.
pub const SEGMENT: u64 = 4 << 20;

/// How often a changing peer list is looked at again.
pub const RECHECK: Duration = Duration::from_secs(1);

/// The segment of a pack that the byte at `offset` lies in.
pub fn segment_of(offset: u64) -> u64 {
    offset / SEGMENT
}

/// Server `name`'s weight for `segment` of `pack`: the highest weight owns it. BLAKE3
/// of the three, so that every node, whatever its platform, ranks them alike.
pub fn weight(name: &str, pack: &PackId, segment: u64) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(&(name.len() as u64).to_le_bytes());
    h.update(name.as_bytes());
    h.update(&pack.0);
    h.update(&segment.to_le_bytes());
    let b = h.finalize();
    u64::from_le_bytes(b.as_bytes()[..8].try_into().unwrap_or_default())
}

/// Indexes of `names` in the order they are asked for `segment` of `pack`: the owner
/// first. Ties (never seen in practice) fall to the name, so the order is total.
pub fn order(names: &[&str], pack: &PackId, segment: u64) -> Vec<usize> {
    let mut ranked: Vec<(u64, &str, usize)> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (weight(n, pack, segment), *n, i))
        .collect();
    ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    ranked.into_iter().map(|(_, _, i)| i).collect()
}

/// Where a node's peer list comes from when it may change while the node runs.
pub trait PeerSource: Send + Sync {
    /// The peers now, if the list changed since the last call; `None` if it did not
    /// (or cannot be read just now: the last list stays, and the source says why).
    fn changed(&self) -> Option<Vec<Arc<dyn Peer>>>;
}

/// What a node counts of one server of its ring.
#[derive(Default)]
pub struct MemberCounters {
    pub requests: AtomicU64,
    pub chunks: AtomicU64,
    pub bytes: AtomicU64,
    pub errors: AtomicU64,
    /// Runs this server was asked for as the owner of their segment.
    pub owned_runs: AtomicU64,
}

/// One server of the ring.
pub struct Member {
    pub peer: Arc<dyn Peer>,
    /// Asked or passed over, and how long it is waited for (`liveness.rs`).
    pub liveness: Arc<Liveness>,
    pub counters: MemberCounters,
}

impl Member {
    fn new(peer: Arc<dyn Peer>, hedging: Hedging) -> Member {
        Member {
            peer,
            liveness: Arc::new(Liveness::new(hedging)),
            counters: MemberCounters::default(),
        }
    }

    pub fn is_up(&self) -> bool {
        self.liveness.is_up()
    }

    /// Passes this server over until it answers a probe, said once per outage.
    pub fn pass_over(&self, why: &str) {
        add(&self.counters.errors, 1);
        let peer = Arc::clone(&self.peer);
        self.liveness.pass_over(self.peer.name(), why, move || {
            Arc::new(move || peer.probe())
        });
    }
}

/// One server of the ring as `sealvol peers`, a mount's stats and the console show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemberStats {
    pub url: String,
    /// Not passed over after a failure just now.
    pub up: bool,
    /// Its share of the key space, in millionths (1/N of a ring of N).
    pub share_ppm: u64,
    pub requests: u64,
    pub chunks: u64,
    pub bytes: u64,
    pub errors: u64,
}

/// The servers a node reads through.
#[derive(Default)]
pub struct Ring {
    members: Mutex<Arc<Vec<Arc<Member>>>>,
    source: Option<Box<dyn PeerSource>>,
    /// When the source was last looked at (milliseconds since the epoch).
    checked_ms: AtomicU64,
    /// Members that left the list keep their counters here, so a node's totals never
    /// go down when an operator edits the list.
    gone: Mutex<HashMap<String, Arc<Member>>>,
    /// How long each member is waited for before the next is asked too.
    hedging: Hedging,
}

impl Ring {
    /// A ring of `peers` that does not change.
    pub fn fixed(peers: Vec<Arc<dyn Peer>>) -> Ring {
        let ring = Ring::default();
        ring.replace(peers);
        ring
    }

    /// This ring with each member waited for as `hedging` says (before any read).
    pub fn hedged(mut self, hedging: Hedging) -> Ring {
        self.hedging = hedging;
        let members = Arc::clone(&crate::locks::lock(&self.members));
        *crate::locks::lock(&self.members) = Arc::new(
            members
                .iter()
                .map(|m| Arc::new(Member::new(Arc::clone(&m.peer), hedging)))
                .collect(),
        );
        self
    }

    /// A ring that follows `source` (looked at now, then at most once per `RECHECK`).
    pub fn following(source: Box<dyn PeerSource>) -> Ring {
        let first = source.changed().unwrap_or_default();
        let ring = Ring {
            source: Some(source),
            checked_ms: AtomicU64::new(now_ms()),
            ..Ring::default()
        };
        ring.replace(first);
        ring
    }

    /// The members now, after looking at the source if it is due.
    pub fn members(&self) -> Arc<Vec<Arc<Member>>> {
        if let Some(source) = &self.source {
            let now = now_ms();
            let last = self.checked_ms.load(Ordering::Relaxed);
            let due = now.saturating_sub(last) >= RECHECK.as_millis() as u64;
            // One caller looks; the others read the list as it is.
            if due
                && self
                    .checked_ms
                    .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                && let Some(peers) = source.changed()
            {
                self.replace(peers);
            }
        }
        Arc::clone(&crate::locks::lock(&self.members))
    }

    /// Makes `peers` the ring. A server still listed keeps its state (passed over or
    /// not, and its counters), so a rewritten file costs nothing to those unchanged.
    fn replace(&self, peers: Vec<Arc<dyn Peer>>) {
        let old = Arc::clone(&crate::locks::lock(&self.members));
        let mut gone = crate::locks::lock(&self.gone);
        let mut next: Vec<Arc<Member>> = Vec::with_capacity(peers.len());
        for p in peers {
            if next.iter().any(|m| m.peer.name() == p.name()) {
                continue;
            }
            let kept = old
                .iter()
                .find(|m| m.peer.name() == p.name())
                .cloned()
                .or_else(|| gone.remove(p.name()));
            next.push(kept.unwrap_or_else(|| Arc::new(Member::new(p, self.hedging))));
        }
        for m in old.iter() {
            if !next.iter().any(|n| n.peer.name() == m.peer.name()) {
                tracing::info!("peer {} left the ring", m.peer.name());
                gone.insert(m.peer.name().to_string(), Arc::clone(m));
            }
        }
        for m in &next {
            if !old.iter().any(|o| o.peer.name() == m.peer.name()) && !old.is_empty() {
                tracing::info!("peer {} joined the ring", m.peer.name());
            }
        }
        *crate::locks::lock(&self.members) = Arc::new(next);
    }

    pub fn is_empty(&self) -> bool {
        self.members().is_empty()
    }

    /// The servers in the order they are asked for the segment `offset` lies in.
    pub fn order_for(members: &[Arc<Member>], pack: &PackId, offset: u64) -> Vec<Arc<Member>> {
        let names: Vec<&str> = members.iter().map(|m| m.peer.name()).collect();
        order(&names, pack, segment_of(offset))
            .into_iter()
            .map(|i| Arc::clone(&members[i]))
            .collect()
    }

    /// Each server listed now, with what this node counted of it.
    pub fn stats(&self) -> Vec<MemberStats> {
        let members = self.members();
        let n = members.len() as u64;
        members
            .iter()
            .map(|m| {
                let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
                MemberStats {
                    url: m.peer.name().to_string(),
                    up: m.is_up(),
                    share_ppm: 1_000_000 / n.max(1),
                    requests: g(&m.counters.requests),
                    chunks: g(&m.counters.chunks),
                    bytes: g(&m.counters.bytes),
                    errors: g(&m.counters.errors),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Hash;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("http://10.0.0.{i}:7420")).collect()
    }

    /// Owners of `segments` segments of one pack among `servers`.
    fn owners(servers: &[String], segments: u64) -> Vec<String> {
        let pack = Hash::of(b"pack");
        let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
        (0..segments)
            .map(|s| servers[order(&refs, &pack, s)[0]].clone())
            .collect()
    }

    #[test]
    fn each_server_owns_about_a_third_and_every_node_agrees() {
        let three = names(3);
        let a = owners(&three, 3000);
        // Listed in another order on another node: the same owners.
        let mut shuffled = three.clone();
        shuffled.reverse();
        assert_eq!(a, owners(&shuffled, 3000));
        for s in &three {
            let share = a.iter().filter(|o| *o == s).count();
            assert!((800..=1200).contains(&share), "{s}: {share} of 3000");
        }
    }

    #[test]
    fn a_server_that_joins_takes_only_its_share_and_one_that_leaves_gives_only_its_own() {
        let three = names(3);
        let four = names(4);
        let (before, after) = (owners(&three, 4000), owners(&four, 4000));
        let moved: Vec<usize> = (0..4000).filter(|&i| before[i] != after[i]).collect();
        // Every segment that moved went to the newcomer, and about a quarter moved.
        assert!(moved.iter().all(|&i| after[i] == four[3]));
        assert!((800..=1200).contains(&moved.len()), "{}", moved.len());
        // The other way round: the segments of the one that left, and no others.
        let back: Vec<usize> = (0..4000).filter(|&i| after[i] != before[i]).collect();
        assert_eq!(moved, back);
    }

    #[test]
    fn the_order_is_every_server_once_owner_first() {
        let four = names(4);
        let refs: Vec<&str> = four.iter().map(String::as_str).collect();
        let pack = Hash::of(b"p");
        for seg in 0..50 {
            let mut o = order(&refs, &pack, seg);
            assert_eq!(o[0], order(&refs, &pack, seg)[0]);
            o.sort_unstable();
            assert_eq!(o, vec![0, 1, 2, 3]);
        }
        assert_eq!(segment_of(SEGMENT - 1), 0);
        assert_eq!(segment_of(SEGMENT), 1);
    }
}
