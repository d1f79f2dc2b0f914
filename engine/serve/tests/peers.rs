//! A node's read path through peers: `Tiers` with `HttpPeer`s in front of the origin,
//! against a real server on loopback, and against peers that fail in the ways a real
//! one does (gone, cut off mid-answer, returning damaged bytes). A real server cannot
//! be made to damage bytes or die halfway through one answer on cue, so those two are
//! a small proxy in front of the real server that does it: the only stand-ins here.

mod common;

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::routing::post;
use sealvol_client::peer::HttpPeer;
use sealvol_core::read::{Chunks, Peer, Tiers};

use common::{Server, server, want_run};

#[derive(Clone, Copy)]
enum Fault {
    /// One byte of the answer flipped.
    Flip,
    /// Half the answer, then the connection drops.
    Cut,
}

/// A peer that forwards to `s` and spoils every answer with `fault` (a server of this
/// build: it says this protocol version).
fn faulty(s: &Server, fault: Fault) -> String {
    let upstream = format!("{}/v1/runs", s.url);
    let key = s.key.clone();
    let handler = |State((upstream, key, fault)): State<(String, String, Fault)>, body: Bytes| async move {
        let r = reqwest::Client::new()
            .post(upstream)
            .bearer_auth(key)
            .body(body)
            .send()
            .await
            .unwrap();
        let mut bytes = r.bytes().await.unwrap().to_vec();
        let said = [(
            sealvol_wire::protocol::HEADER,
            sealvol_wire::protocol::PROTOCOL.to_string(),
        )];
        let body = match fault {
            Fault::Flip => {
                let mid = bytes.len() / 2;
                bytes[mid] ^= 1;
                Body::from(bytes)
            }
            Fault::Cut => {
                bytes.truncate(bytes.len() / 2);
                let parts: Vec<Result<Bytes, std::io::Error>> = vec![
                    Ok(Bytes::from(bytes)),
                    Err(std::io::Error::other("the peer died")),
                ];
                Body::from_stream(futures::stream::iter(parts))
            }
        };
        (said, body)
    };
    let app = axum::Router::new()
        .route("/v1/runs", post(handler))
        .with_state((upstream, key, fault));
    let listener =
        s.rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    s.rt.spawn(async move { axum::serve(listener, app).await });
    url
}

/// A node's tiers (no disk cache) reading through `peers`, in order.
fn node(s: &Server, peers: &[String]) -> Tiers {
    let peers = peers
        .iter()
        .map(|u| Arc::new(HttpPeer::new(u, Some(&s.key)).unwrap()) as Arc<dyn Peer>)
        .collect();
    Tiers::new(Arc::clone(&s.repo), None).with_peers(peers)
}

fn read_all(s: &Server, tiers: &Tiers) -> Vec<u8> {
    let n = s.file.chunks.len();
    let mut out = Vec::new();
    tiers
        .for_each(&s.file, 0..n, &mut |c| {
            out.extend_from_slice(c);
            Ok(())
        })
        .unwrap();
    out
}

#[test]
fn nodes_read_through_a_peer_and_the_origin_is_read_once() {
    let s = server();
    let n = s.file.chunks.len();
    let whole = want_run(&s, 0..n);
    let mut runs = 0;
    for round in 0..3 {
        let tiers = node(&s, std::slice::from_ref(&s.url));
        assert!(read_all(&s, &tiers) == whole);
        let c = tiers.counters.snapshot();
        runs += c.peer_requests;
        assert_eq!(c.peer_chunks, n as u64, "round {round}: {c:?}");
        assert_eq!(c.peer_bytes, 4 << 20);
        assert_eq!(
            (c.origin_chunks, c.peer_errors, c.peer_bad_chunks),
            (0, 0, 0)
        );
    }
    // Three nodes, one origin read: the first node's runs (one per segment of the
    // pack: `read::ring`), pulled through, and the parts of proof blocks that reach
    // past a run's ends, read to prove it (`ChunkService::edge_bytes`).
    let origin = s.metric("origin_bytes_total");
    assert!(
        (4 << 20..=(4 << 20) * 21 / 20).contains(&origin),
        "{origin} from the origin"
    );
    assert_eq!(s.metric("run_requests_total"), runs);
    assert!(
        runs >= 3 * (4 << 20) / sealvol_core::read::ring::SEGMENT,
        "{runs}"
    );
}

#[test]
fn a_peer_that_is_gone_cut_off_or_lying_is_passed_over_and_nothing_wrong_is_served() {
    let s = server();
    let n = s.file.chunks.len();
    let whole = want_run(&s, 0..n);
    // Nothing listens there: the port of a listener that was closed.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let peers = [gone, faulty(&s, Fault::Cut), faulty(&s, Fault::Flip)];
    let tiers = node(&s, &peers);
    assert!(read_all(&s, &tiers) == whole, "the origin's bytes, intact");
    let c = tiers.counters.snapshot();
    assert_eq!(c.peer_errors, 2, "gone and cut off: {c:?}");
    assert!(c.peer_bad_chunks >= 1, "the flipped byte was caught: {c:?}");
    // The chunks the lying peer sent intact were proven by their blocks; the one it
    // spoiled was read again from the origin.
    assert!(c.origin_chunks >= 1, "{c:?}");
    assert!(c.peer_chunks + c.origin_chunks >= n as u64, "{c:?}");
    // Passed over for a while: the next read does not ask them again.
    let asked = c.peer_requests;
    assert!(read_all(&s, &tiers) == whole);
    assert_eq!(tiers.counters.snapshot().peer_requests, asked);

    // A good peer beside a bad one: whichever owns a segment, every run is served by a
    // peer, never the origin: what the bad one sent intact is proven by its blocks, and
    // the chunk it spoiled is asked of the good one (at most once more per chunk).
    let tiers = node(&s, &[faulty(&s, Fault::Flip), s.url.clone()]);
    assert!(read_all(&s, &tiers) == whole);
    let c = tiers.counters.snapshot();
    assert_eq!(c.origin_chunks, 0, "{c:?}");
    assert_eq!(c.peer_chunks, n as u64 + c.peer_bad_chunks, "{c:?}");
}
