//! Keys stay where they were sent: the servers of a ring prove they are its servers with
//! the ring's key (kept in the repository), a node sends its API key only to a peer that
//! proved it, and a server asks a fellow with a pass of the ring (the caller's scope,
//! for that fellow, once, for a minute), never with the caller's key. A fake fellow and
//! a fake peer on loopback log every header they are sent: no key reaches them.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use common::{Server, server};
use sealvol_client::peer::{HttpPeer, Trust};
use sealvol_core::error::ErrorKind;
use sealvol_core::read::ring::Ring;
use sealvol_core::read::{Chunks, Peer, Tiers};
use sealvol_serve::ChunkService;
use sealvol_serve::credential::Credential;
use sealvol_serve::keys::Grant;
use sealvol_wire::membership::RingPublic;

/// A server that is not one of the ring: it answers every request 200 with `answer`
/// and keeps every request's head.
fn impostor(answer: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let heads = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&heads);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut head = String::new();
            let mut r = BufReader::new(c.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            kept.lock().unwrap().push(head);
            let _ = write!(
                c,
                "HTTP/1.1 200 OK\r\n{}: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                sealvol_wire::protocol::HEADER,
                sealvol_wire::protocol::PROTOCOL,
                answer.len()
            );
        }
    });
    (url, heads)
}

fn ring_public(s: &Server) -> Arc<RingPublic> {
    Arc::new(
        RingPublic::read(&s.repo)
            .unwrap()
            .expect("the server made the ring's key"),
    )
}

#[test]
fn a_server_proves_it_is_of_the_ring_and_an_impostor_gets_no_key() {
    let s = server();
    let public = ring_public(&s);
    // The real server proves itself, and is sent the key.
    let real =
        HttpPeer::with_trust(&s.url, Some(&s.key), Trust::Ring(Arc::clone(&public))).unwrap();
    real.check().unwrap();
    assert!(!real.member_id(&public).unwrap().is_empty());
    // An impostor in the peers list: said loudly (Denied), and sent nothing that works.
    for answer in [
        "{}",
        r#"{"id":"x","key":"y","signature":"AAAA"}"#,
        "not json",
    ] {
        let (url, heads) = impostor(answer);
        let fake =
            HttpPeer::with_trust(&url, Some(&s.key), Trust::Ring(Arc::clone(&public))).unwrap();
        let e = fake.check().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Denied, "{e}");
        assert!(e.message().contains("did not prove"), "{e}");
        let mut into = Vec::new();
        let f = &s.file;
        let e = fake
            .read_run(
                &f.hash,
                &f.packs[0],
                f.chunks[0].entry.offset,
                &[(f.chunks[0].entry.hash, f.chunks[0].entry.raw_len)],
                &mut into,
            )
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Denied);
        let heads = heads.lock().unwrap();
        assert!(!heads.is_empty());
        for h in heads.iter() {
            assert!(!h.to_lowercase().contains("authorization"), "{h}");
            assert!(!h.contains(&s.key), "{h}");
            assert!(h.starts_with("GET /v1/ring/id?challenge="), "{h}");
        }
    }
    // With no ring key known, no peer is sent the key, and none is even asked.
    let (url, heads) = impostor("{}");
    let blind = HttpPeer::with_trust(&url, Some(&s.key), Trust::Unknown).unwrap();
    assert_eq!(blind.check().unwrap_err().kind(), ErrorKind::Denied);
    assert!(heads.lock().unwrap().is_empty());
}

#[test]
fn a_proof_answers_this_challenge_only_and_bad_challenges_are_refused() {
    let s = server();
    let public = ring_public(&s);
    let (status, _, plain) = s.get("/v1/ring/id", &[("authorization", "none")]);
    assert_eq!(status, 200);
    let id = String::from_utf8(plain).unwrap().trim().to_string();
    let challenge = [7u8; 32];
    let (status, _, body) = s.get(
        &format!("/v1/ring/id?challenge={}", hex(&challenge)),
        &[("authorization", "none")],
    );
    assert_eq!(status, 200);
    let proof: sealvol_wire::membership::Proof = serde_json::from_slice(&body).unwrap();
    assert_eq!(proof.id, id);
    assert!(public.proves(&challenge, &proof));
    assert!(
        !public.proves(&[8u8; 32], &proof),
        "a proof of another challenge"
    );
    for bad in ["zz", "ab", &"a".repeat(65), &"a".repeat(1000)] {
        let (status, _, _) = s.get(
            &format!("/v1/ring/id?challenge={bad}"),
            &[("authorization", "none")],
        );
        assert_eq!(status, 400, "{bad}");
    }
    // Rotated: the new key signs, and what the old one signed still checks for a node
    // that reads the public keys again.
    let before = proof;
    sealvol_serve::credential::rotate(&s.repo).unwrap();
    let public = RingPublic::read(&s.repo).unwrap().unwrap();
    assert!(public.proves(&challenge, &before));
    std::thread::sleep(sealvol_serve::credential::REFRESH + std::time::Duration::from_millis(200));
    let (_, _, body) = s.get(
        &format!("/v1/ring/id?challenge={}", hex(&challenge)),
        &[("authorization", "none")],
    );
    let after: sealvol_wire::membership::Proof = serde_json::from_slice(&body).unwrap();
    assert_ne!(after.key, before.key, "the new key signs");
    assert!(public.proves(&challenge, &after));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn a_pass_is_for_one_fellow_once_and_for_a_minute() {
    let s = server();
    let c = Credential::open(Arc::clone(&s.repo)).unwrap();
    let grant = Grant {
        name: "team-a".into(),
        admin: false,
        read_only: false,
        namespaces: vec!["a".into()],
    };
    let pass = c.pass(&grant, "fellow-1").unwrap();
    let taken = c.take(&pass, "fellow-1").unwrap();
    assert_eq!(taken.namespaces, vec!["a".to_string()]);
    assert!(taken.read_only, "a pass reads only");
    assert_eq!(
        c.take(&pass, "fellow-1").unwrap_err(),
        "a pass taken before"
    );
    let other = c.pass(&grant, "fellow-1").unwrap();
    assert_eq!(
        c.take(&other, "fellow-2").unwrap_err(),
        "a pass for another server"
    );
    // Signed by another ring (another repository's key): worth nothing here.
    let elsewhere = server();
    let theirs = Credential::open(Arc::clone(&elsewhere.repo)).unwrap();
    let foreign = theirs.pass(&grant, "fellow-1").unwrap();
    assert_eq!(
        c.take(&foreign, "fellow-1").unwrap_err(),
        "a pass no ring key signed"
    );
    // Altered: its scope widened after signing.
    let p = c.pass(&grant, "fellow-1").unwrap();
    let (body, sig) = p.split_once('.').unwrap();
    let mut text = String::from_utf8(base64_decode(body)).unwrap();
    text = text.replace("[\"a\"]", "[]");
    let forged = format!("{}.{sig}", base64_encode(text.as_bytes()));
    assert_eq!(
        c.take(&forged, "fellow-1").unwrap_err(),
        "a pass no ring key signed"
    );
    assert!(c.take("nonsense", "fellow-1").is_err());
}

fn base64_decode(s: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn base64_encode(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// A second server of `s`'s repository whose ring is `ring` (itself left out, so that
/// every run is theirs to answer first), and the node's read of the whole file through
/// it, chunk by chunk, with `s`'s key.
fn through_a_fellow(s: &Server, ring: &[&String]) -> Arc<ChunkService> {
    let listener =
        s.rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let members: Vec<Arc<dyn Peer>> = ring
        .iter()
        .map(|u| Arc::new(HttpPeer::new(u, None).unwrap()) as Arc<dyn Peer>)
        .collect();
    let b = Arc::new(
        ChunkService::new(Arc::clone(&s.repo), None).with_fellows(Arc::new(Ring::fixed(members))),
    );
    sealvol_serve::take_credential(&b);
    s.rt.spawn(sealvol_serve::run(
        listener,
        Arc::clone(&b),
        Arc::clone(&s.keys),
        None,
    ));
    let node = HttpPeer::with_trust(&url, Some(&s.key), Trust::Ring(ring_public(s))).unwrap();
    node.check().unwrap();
    let tiers =
        Tiers::new(Arc::clone(&s.repo), None).with_peers(vec![Arc::new(node) as Arc<dyn Peer>]);
    let mut out = Vec::new();
    for i in 0..s.file.chunks.len() {
        tiers
            .for_each(&s.file, i..i + 1, &mut |c| {
                out.extend_from_slice(c);
                Ok(())
            })
            .unwrap();
    }
    assert_eq!(out, sealvol_core::testutil::noise(4 << 20, 7));
    b
}

#[test]
fn fellows_ask_each_other_with_passes_and_never_send_a_callers_key() {
    let s = server();
    // B asks A, a server of the ring, with passes A takes.
    let b = through_a_fellow(&s, &[&s.url]);
    let fellows = b.fellows().unwrap();
    let asked = fellows
        .counters
        .requests
        .load(std::sync::atomic::Ordering::Relaxed);
    let failed = fellows
        .counters
        .errors
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(asked > 0, "B never asked A");
    assert_eq!(failed, 0, "a pass was refused");
    // C's list names an impostor: it is asked to prove itself and sent nothing else,
    // and the node reads all the same (from the origin, through C).
    let (fake, heads) = impostor("{}");
    through_a_fellow(&s, &[&fake]);
    let heads = heads.lock().unwrap();
    assert!(!heads.is_empty(), "the impostor was never asked");
    for h in heads.iter() {
        assert!(h.starts_with("GET /v1/ring/id?challenge="), "{h}");
        assert!(!h.to_lowercase().contains("authorization"), "{h}");
        assert!(!h.contains(&s.key), "{h}");
    }
}

#[test]
fn nodes_read_the_rings_public_keys_through_their_remote_engine_and_no_one_its_private_ones() {
    let s = server();
    let nodes = sealvol_serve::keys::create(&s.place(), "nodes", true, vec![]).unwrap();
    let team = sealvol_serve::keys::create(&s.place(), "team", false, vec!["t".into()]).unwrap();
    for key in [&nodes, &team, &s.key] {
        let staging = tempfile::tempdir().unwrap();
        let remote = sealvol_client::remote::open(&s.url, Some(key), staging.path()).unwrap();
        let through = RingPublic::read(&remote).unwrap().expect("the public keys");
        let challenge = [3u8; 32];
        let (_, _, body) = s.get(
            &format!("/v1/ring/id?challenge={}", hex(&challenge)),
            &[("authorization", "none")],
        );
        let proof: sealvol_wire::membership::Proof = serde_json::from_slice(&body).unwrap();
        assert!(through.proves(&challenge, &proof));
        // The private keys: no key reads them, the admin's neither; no key writes either.
        let store = remote.object_store();
        let e = store.get("access/ring.json").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Denied, "{e}");
        for object in ["access/ring.json", "access/ring-public.json"] {
            let e = store.put(object, b"{}").unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Denied, "{object}: {e}");
        }
    }
    assert!(RingPublic::read(&s.repo).unwrap().is_some());
}
