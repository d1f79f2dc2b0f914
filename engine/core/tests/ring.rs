//! A node's read path over a ring of peers: each run goes to the server that owns its
//! segment, the shares come out even, a server that is down hands its segments to the
//! next in each one's order (and to no one else), and a list that changes while the node
//! runs moves only what the joining or leaving server wins or held. The peers here are
//! in-process servers over the real repository (the HTTP server's own tests are in
//! engine/serve); what they count is what they were asked.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind};
use sealvol_core::objects::{FileObject, PackId};
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::liveness::Hedging;
use sealvol_core::read::ring::{PeerSource, Ring, SEGMENT, segment_of};
use sealvol_core::read::{Chunks, Peer, Tiers};
use sealvol_core::refs::VolumeName;
use sealvol_core::testutil::noise;
use sealvol_core::{Repository, Result};

/// A server that answers runs from the repository and writes down which segments it
/// was asked for.
struct Server {
    name: String,
    repo: Arc<Repository>,
    down: AtomicBool,
    bytes: AtomicU64,
    segments: Mutex<BTreeSet<(PackId, u64)>>,
}

impl Server {
    fn new(i: usize, repo: &Arc<Repository>) -> Arc<Server> {
        Arc::new(Server {
            name: format!("http://10.0.0.{i}:7420"),
            repo: Arc::clone(repo),
            down: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
            segments: Mutex::default(),
        })
    }
}

impl Peer for Server {
    fn name(&self) -> &str {
        &self.name
    }

    fn read_run(
        &self,
        _file: &Hash,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        into: &mut Vec<u8>,
    ) -> Result<()> {
        if self.down.load(Ordering::Relaxed) {
            return Err(Error::new(ErrorKind::Unavailable, "connection refused"));
        }
        let len: u64 = chunks.iter().map(|c| c.1 as u64).sum();
        assert_eq!(
            segment_of(offset),
            segment_of(offset + len - chunks.last().unwrap().1 as u64),
            "a run never crosses a segment"
        );
        self.segments
            .lock()
            .unwrap()
            .insert((*pack, segment_of(offset)));
        self.bytes.fetch_add(len, Ordering::Relaxed);
        into.resize(len as usize, 0);
        let got = self.repo.pack_range(pack, offset, len)?;
        into.copy_from_slice(&got);
        Ok(())
    }

    fn probe(&self) -> Result<()> {
        match self.down.load(Ordering::Relaxed) {
            true => Err(Error::new(ErrorKind::Unavailable, "connection refused")),
            false => Ok(()),
        }
    }
}

fn pushed(dir: &Path, size: usize) -> (Arc<Repository>, FileObject, Vec<u8>) {
    let repo = Repository::open_local(&dir.join("repo"), true, false).unwrap();
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let want = noise(size, 11);
    std::fs::write(src.join("w.bin"), &want).unwrap();
    let vol = VolumeName::parse("weights/ring").unwrap();
    let sealed = push(&repo, &src, &vol, &[], &PushOptions::new(&Quiet)).unwrap();
    let m = repo.manifest(&vol, &sealed.digest).unwrap();
    let hash = m
        .entries
        .iter()
        .find_map(|e| match e {
            sealvol_core::digest::Entry::File { hash, .. } => Some(*hash),
            _ => None,
        })
        .unwrap();
    let obj = repo.file_object(&hash).unwrap();
    (Arc::new(repo), obj, want)
}

fn read(tiers: &Tiers, obj: &FileObject) -> Vec<u8> {
    let mut out = Vec::new();
    tiers
        .for_each(obj, 0..obj.chunks.len(), &mut |c| {
            out.extend_from_slice(c);
            Ok(())
        })
        .unwrap();
    out
}

/// A ring whose servers are always waited for: these tests count which server was
/// asked for what, and a busy machine must not make a read ask a second one.
fn exact(peers: Vec<Arc<dyn Peer>>) -> Arc<Ring> {
    Arc::new(Ring::fixed(peers).hedged(Hedging::never()))
}

fn as_peers(servers: &[Arc<Server>]) -> Vec<Arc<dyn Peer>> {
    servers
        .iter()
        .map(|s| Arc::clone(s) as Arc<dyn Peer>)
        .collect()
}

#[test]
fn each_run_goes_to_its_owner_and_three_servers_share_the_bytes_evenly() {
    let t = tempfile::tempdir().unwrap();
    let (repo, obj, want) = pushed(t.path(), 192 << 20);
    let servers: Vec<_> = (0..3).map(|i| Server::new(i, &repo)).collect();
    // Eight nodes, each listing the servers in its own order.
    let mut seen: Option<Vec<BTreeSet<(PackId, u64)>>> = None;
    for node in 0..8 {
        let mut listed = servers.clone();
        listed.rotate_left(node % 3);
        let tiers = Tiers::new(Arc::clone(&repo), None).with_ring(exact(as_peers(&listed)));
        assert!(read(&tiers, &obj) == want, "node {node}");
        let c = tiers.counters.snapshot();
        assert_eq!((c.origin_chunks, c.peer_errors), (0, 0), "{c:?}");
        // At most 5% more from the peers than the file: with no node cache, only the
        // edges of proof blocks that straddle two read windows are asked twice.
        let stored: u64 = obj.chunks.iter().map(|c| c.entry.stored_len as u64).sum();
        assert!(
            (stored..=stored + stored / 20).contains(&c.peer_bytes),
            "{} from peers for {stored}",
            c.peer_bytes
        );
        let now: Vec<_> = servers
            .iter()
            .map(|s| s.segments.lock().unwrap().clone())
            .collect();
        // Every node asks the same server for the same segment.
        if let Some(before) = &seen {
            assert_eq!(before, &now, "node {node} asked other owners");
        }
        seen = Some(now);
    }
    let total: u64 = servers
        .iter()
        .map(|s| s.bytes.load(Ordering::Relaxed))
        .sum();
    for s in &servers {
        let share = s.bytes.load(Ordering::Relaxed) as f64 / total as f64;
        assert!(
            (0.25..=0.42).contains(&share),
            "{}: {share:.3} of the bytes (a third ±25%)",
            s.name
        );
    }
    // No segment was asked of two servers.
    let all: Vec<_> = seen.unwrap().into_iter().flatten().collect();
    let distinct: BTreeSet<_> = all.iter().collect();
    assert_eq!(all.len(), distinct.len());
    assert!(all.len() as u64 >= (192 << 20) / SEGMENT);
}

#[test]
fn a_server_that_is_down_hands_its_segments_to_the_next_in_their_order_only() {
    let t = tempfile::tempdir().unwrap();
    let (repo, obj, want) = pushed(t.path(), 64 << 20);
    let servers: Vec<_> = (0..3).map(|i| Server::new(i, &repo)).collect();
    let tiers = Tiers::new(Arc::clone(&repo), None).with_ring(exact(as_peers(&servers)));
    assert!(read(&tiers, &obj) == want);
    let owned: Vec<_> = servers
        .iter()
        .map(|s| s.segments.lock().unwrap().clone())
        .collect();
    for s in &servers {
        s.segments.lock().unwrap().clear();
    }
    // Server 0 goes down: a new node reads everything, through 1 and 2.
    servers[0].down.store(true, Ordering::Relaxed);
    let tiers = Tiers::new(Arc::clone(&repo), None).with_ring(exact(as_peers(&servers)));
    assert!(read(&tiers, &obj) == want);
    let c = tiers.counters.snapshot();
    assert_eq!(c.origin_chunks, 0, "{c:?}");
    // Asked once per run in flight when it failed (a read asks its segments at once),
    // then passed over.
    assert!(
        (1..=8).contains(&c.peer_errors),
        "asked a few times at most, then passed over: {c:?}"
    );
    for i in 1..3 {
        let now = servers[i].segments.lock().unwrap().clone();
        assert!(now.is_superset(&owned[i]), "server {i} kept its own");
        // What it gained was server 0's, and nothing of the other survivor's.
        assert!(now.difference(&owned[i]).all(|s| owned[0].contains(s)));
    }
    let gained: usize = (1..3)
        .map(|i| servers[i].segments.lock().unwrap().len() - owned[i].len())
        .sum();
    assert_eq!(gained, owned[0].len(), "all of server 0's went somewhere");
    // All down: the origin.
    for s in &servers {
        s.down.store(true, Ordering::Relaxed);
    }
    let tiers = Tiers::new(Arc::clone(&repo), None).with_ring(exact(as_peers(&servers)));
    assert!(read(&tiers, &obj) == want);
    assert_eq!(tiers.counters.snapshot().peer_chunks, 0);
}

/// A peer list an operator rewrites.
struct Listed(Mutex<Option<Vec<Arc<dyn Peer>>>>);

impl PeerSource for Listed {
    fn changed(&self) -> Option<Vec<Arc<dyn Peer>>> {
        self.0.lock().unwrap().take()
    }
}

#[test]
fn a_server_added_to_a_running_nodes_list_takes_only_its_share() {
    let t = tempfile::tempdir().unwrap();
    let (repo, obj, want) = pushed(t.path(), 64 << 20);
    let servers: Vec<_> = (0..4).map(|i| Server::new(i, &repo)).collect();
    let source = Arc::new(Listed(Mutex::new(Some(as_peers(&servers[..3])))));
    struct Shared(Arc<Listed>);
    impl PeerSource for Shared {
        fn changed(&self) -> Option<Vec<Arc<dyn Peer>>> {
            self.0.changed()
        }
    }
    let ring =
        Arc::new(Ring::following(Box::new(Shared(Arc::clone(&source)))).hedged(Hedging::never()));
    let tiers = Tiers::new(Arc::clone(&repo), None).with_ring(Arc::clone(&ring));
    assert!(read(&tiers, &obj) == want);
    let before: Vec<_> = servers
        .iter()
        .map(|s| std::mem::take(&mut *s.segments.lock().unwrap()))
        .collect();
    assert!(before[3].is_empty());

    *source.0.lock().unwrap() = Some(as_peers(&servers));
    // The list is looked at again at most once a second.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while ring.members().len() < 4 {
        assert!(std::time::Instant::now() < deadline, "never re-read");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let tiers = Tiers::new(Arc::clone(&repo), None).with_ring(Arc::clone(&ring));
    assert!(read(&tiers, &obj) == want);
    let after: Vec<_> = servers
        .iter()
        .map(|s| s.segments.lock().unwrap().clone())
        .collect();
    let all_before: BTreeSet<_> = before.iter().flatten().copied().collect();
    // The newcomer took about a quarter; each old server kept all it still owns and
    // lost only what the newcomer took.
    let share = after[3].len() as f64 / all_before.len() as f64;
    assert!((0.15..=0.35).contains(&share), "{share}");
    for i in 0..3 {
        assert!(after[i].is_subset(&before[i]), "server {i} gained nothing");
        let lost: BTreeSet<_> = before[i].difference(&after[i]).copied().collect();
        assert!(
            lost.is_subset(&after[3]),
            "server {i} lost only to the newcomer"
        );
    }
    let stats = ring.stats();
    assert_eq!(stats.len(), 4);
    assert!(
        stats.iter().all(|m| m.up && m.share_ppm == 250_000),
        "{stats:?}"
    );
}

/// Requests under way across a ring, and the most seen at once: each request waits
/// (10 s at most) until `want` are under way together, or that many ever were.
#[derive(Default)]
struct Inside {
    now: Mutex<usize>,
    changed: std::sync::Condvar,
    most: AtomicU64,
}

struct Counted {
    server: Arc<Server>,
    inside: Arc<Inside>,
    want: usize,
}

impl Peer for Counted {
    fn name(&self) -> &str {
        &self.server.name
    }

    fn read_run(
        &self,
        file: &Hash,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        into: &mut Vec<u8>,
    ) -> Result<()> {
        let i = &self.inside;
        {
            let mut now = i.now.lock().unwrap();
            *now += 1;
            i.most.fetch_max(*now as u64, Ordering::Relaxed);
            i.changed.notify_all();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while (i.most.load(Ordering::Relaxed) as usize) < self.want
                && std::time::Instant::now() < deadline
            {
                now = i
                    .changed
                    .wait_timeout(now, std::time::Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
        }
        let got = self.server.read_run(file, pack, offset, chunks, into);
        *i.now.lock().unwrap() -= 1;
        got
    }
}

#[test]
fn a_read_of_several_segments_asks_their_owners_at_once() {
    use sealvol_core::read::Chunks;
    let t = tempfile::tempdir().unwrap();
    let (repo, obj, want) = pushed(t.path(), 32 << 20);
    let inside = Arc::new(Inside::default());
    let peers: Vec<Arc<dyn Peer>> = (0..3)
        .map(|i| {
            Arc::new(Counted {
                server: Server::new(i, &repo),
                inside: Arc::clone(&inside),
                want: 4,
            }) as Arc<dyn Peer>
        })
        .collect();
    let tiers = Tiers::new(Arc::clone(&repo), None).with_ring(exact(peers));
    // One fetch of the whole file: eight segments, asked four at a time at least (one
    // after another, each would wait out its 10 s for company and the most would be 1).
    let got: Vec<u8> = tiers
        .fetch(&obj, 0..obj.chunks.len())
        .unwrap()
        .iter()
        .flat_map(|c| c.to_vec())
        .collect();
    assert!(got == want);
    assert!(
        inside.most.load(Ordering::Relaxed) >= 4,
        "at most {} runs were asked at once",
        inside.most.load(Ordering::Relaxed)
    );
    assert_eq!(tiers.counters.snapshot().origin_chunks, 0);
}

/// A server whose every answer has one byte flipped in the middle of the run.
struct Liar(Arc<Server>);

impl Peer for Liar {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn read_run(
        &self,
        file: &Hash,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        into: &mut Vec<u8>,
    ) -> Result<()> {
        self.0.read_run(file, pack, offset, chunks, into)?;
        let mid = into.len() / 2;
        into[mid] ^= 0x40;
        Ok(())
    }
}

#[test]
fn a_peer_answer_taken_on_its_blocks_that_fails_them_is_checked_and_passed_over() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, obj, want) = pushed(dir.path(), 6 << 20);
    let liars: Vec<Arc<dyn Peer>> = (1..=2)
        .map(|i| Arc::new(Liar(Server::new(i, &repo))) as Arc<dyn Peer>)
        .collect();
    let tiers = Tiers::new(Arc::clone(&repo), None).with_ring(exact(liars));
    let n = obj.chunks.len();
    let got = tiers.fetch_for_proof(&obj, 0..n).unwrap();
    let bytes: Vec<u8> = got.iter().flat_map(|c| c.to_vec()).collect();
    assert!(bytes == want, "a flipped byte from a peer was handed on");
    let c = tiers.counters.snapshot();
    assert!(c.peer_bad_chunks > 0, "{c:?}");
    assert!(c.origin_chunks > 0, "{c:?}");
    assert_eq!(
        tiers
            .counters
            .chunks_proven_by_blocks
            .load(Ordering::Relaxed),
        0
    );
}

/// A server that can be frozen as SIGSTOP freezes one: it takes requests and answers
/// none until the test thaws it (or a minute passes: a bug is a failing test, not a
/// hung one). Its probe fails while frozen, as a probe's timeout would.
struct Freezable {
    server: Arc<Server>,
    frozen: Mutex<bool>,
    thawed: std::sync::Condvar,
    /// Requests that arrived while it was frozen, and those of them answered so far.
    held: AtomicU64,
    released: AtomicU64,
}

impl Freezable {
    fn set(&self, frozen: bool) {
        *self.frozen.lock().unwrap() = frozen;
        self.thawed.notify_all();
    }
}

impl Peer for Freezable {
    fn name(&self) -> &str {
        &self.server.name
    }

    fn read_run(
        &self,
        file: &Hash,
        pack: &PackId,
        offset: u64,
        chunks: &[(Hash, u32)],
        into: &mut Vec<u8>,
    ) -> Result<()> {
        let mut frozen = self.frozen.lock().unwrap();
        if *frozen {
            self.held.fetch_add(1, Ordering::Relaxed);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while *frozen && std::time::Instant::now() < deadline {
                frozen = self
                    .thawed
                    .wait_timeout(frozen, std::time::Duration::from_millis(100))
                    .unwrap()
                    .0;
            }
            self.released.fetch_add(1, Ordering::Relaxed);
        }
        drop(frozen);
        self.server.read_run(file, pack, offset, chunks, into)
    }

    fn probe(&self) -> Result<()> {
        match *self.frozen.lock().unwrap() {
            true => Err(Error::new(ErrorKind::Unavailable, "timed out")),
            false => Ok(()),
        }
    }
}

#[test]
fn a_frozen_server_costs_reads_its_latency_bound_once_and_is_asked_again_when_it_thaws() {
    let t = tempfile::tempdir().unwrap();
    let (repo, obj, want) = pushed(t.path(), 64 << 20);
    let servers: Vec<Arc<Freezable>> = (0..3)
        .map(|i| {
            Arc::new(Freezable {
                server: Server::new(i, &repo),
                frozen: Mutex::new(false),
                thawed: std::sync::Condvar::new(),
                held: AtomicU64::new(0),
                released: AtomicU64::new(0),
            })
        })
        .collect();
    let peers: Vec<Arc<dyn Peer>> = servers.iter().map(|s| Arc::clone(s) as _).collect();
    // A bound no healthy in-process answer comes near, even on a busy machine: only
    // the frozen server is ever late.
    let hedging = Hedging {
        floor: std::time::Duration::from_secs(3),
        first: std::time::Duration::from_secs(3),
        ..Hedging::default()
    };
    let ring = Arc::new(Ring::fixed(peers).hedged(hedging));
    let tiers = Tiers::new(Arc::clone(&repo), None).with_ring(Arc::clone(&ring));
    assert!(read(&tiers, &obj) == want);
    let asked_before = servers[0].server.bytes.load(Ordering::Relaxed);
    assert!(asked_before > 0, "server 0 owns some segments");

    // Frozen: every read finishes while it still holds what it was asked, so no read
    // waited for it to answer; the rest of the ring served them, not the origin.
    servers[0].set(true);
    for _ in 0..3 {
        assert!(read(&tiers, &obj) == want);
    }
    let held = servers[0].held.load(Ordering::Relaxed);
    assert_eq!(servers[0].released.load(Ordering::Relaxed), 0);
    let c = tiers.counters.snapshot();
    assert_eq!(c.origin_chunks, 0, "{c:?}");
    // Asked once per run in flight when it froze (a read asks 8 segments at once),
    // then passed over: the next two reads did not ask it at all.
    assert!((1..=8).contains(&held), "asked {held} times while frozen");
    assert_eq!(c.peer_late, held, "{c:?}");
    let member = |ring: &Ring| {
        ring.stats()
            .into_iter()
            .find(|m| m.url == servers[0].server.name)
            .unwrap()
    };
    assert!(!member(&ring).up);

    // Thawed: what it held is answered, it answers again and reads ask it again.
    servers[0].set(false);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !member(&ring).up {
        assert!(std::time::Instant::now() < deadline, "never asked again");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let before = servers[0].server.bytes.load(Ordering::Relaxed);
    assert!(read(&tiers, &obj) == want);
    assert!(servers[0].server.bytes.load(Ordering::Relaxed) > before);
}

/// Chunks a node cache folder holds.
fn cached_chunks(dir: &Path) -> usize {
    sealvol_core::cache::ChunkCache::open(dir, 1 << 30)
        .unwrap()
        .chunks()
        .len()
}

#[test]
fn a_pull_over_a_local_origin_keeps_what_peers_sent_and_nothing_the_origin_gave() {
    use sealvol_core::cache::ChunkCache;
    use sealvol_core::read::Fill;
    let t = tempfile::tempdir().unwrap();
    let (repo, obj, want) = pushed(t.path(), 8 << 20);
    let cache = |name: &str| Arc::new(ChunkCache::open(&t.path().join(name), 1 << 30).unwrap());
    let pull = |c: &Arc<ChunkCache>| {
        Tiers::with_fill(Arc::clone(&repo), Some(Arc::clone(c)), Fill::Inline)
            .keeping_only_what_the_origin_cannot_give_again()
    };

    // From the local origin alone: read whole, nothing kept.
    let alone = cache("alone");
    let tiers = pull(&alone);
    assert!(read(&tiers, &obj) == want);
    assert!(tiers.counters.snapshot().origin_chunks > 0);
    assert_eq!(cached_chunks(&t.path().join("alone")), 0);

    // Through a ring: what its servers sent is kept, as before.
    let through = cache("through");
    let ring = [Server::new(1, &repo), Server::new(2, &repo)];
    let tiers = pull(&through).with_ring(exact(as_peers(&ring)));
    assert!(read(&tiers, &obj) == want);
    let c = tiers.counters.snapshot();
    assert_eq!(c.origin_chunks, 0, "{c:?}");
    assert_eq!(cached_chunks(&t.path().join("through")), obj.chunks.len());

    // Without the rule (a mount's tiers), the origin's chunks are kept too.
    let mount = cache("mount");
    let tiers = Tiers::with_fill(Arc::clone(&repo), Some(Arc::clone(&mount)), Fill::Inline);
    assert!(read(&tiers, &obj) == want);
    assert_eq!(cached_chunks(&t.path().join("mount")), obj.chunks.len());
}
