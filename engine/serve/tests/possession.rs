//! A hash is not a key: on a server shared by two teams, team-a knows the hashes (and
//! the chunk lists, captured from the wire) of team-b's files, but not their bytes. By
//! no route may it make the server count those files or chunks as its own, learn their
//! lengths, seal them into a version of its namespace, or read them; while a push of
//! bytes team-a really holds still deduplicates against team-b's copy, moving almost
//! nothing, by proving possession. Judged by outcome, against a real server on loopback.

mod common;

use std::sync::Arc;

use common::{Server, server_with};
use sealvol_core::digest::Hash;
use sealvol_core::possession::{Challenge, Evidence, NONCE_LEN, Named, Proof};
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::VolumeName;
use sealvol_core::repo::Repository;
use sealvol_core::testutil::noise;
use sealvol_wire::named::{encode_list, encode_small};

/// team-b is namespace `t` (the server's 4 MiB file, and a small file); team-a is
/// `team-a`.
struct Teams {
    s: Server,
    a: String,
    b: String,
    /// team-b's small file: its bytes and hash.
    small: Vec<u8>,
    small_hash: Hash,
}

fn teams(s: Server) -> Teams {
    let small = noise(10_000, 99);
    let dir = s.dir.path().join("b-small");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tokenizer.json"), &small).unwrap();
    push(
        &s.repo,
        &dir,
        &VolumeName::parse("t/small").unwrap(),
        &[],
        &PushOptions::new(&Quiet),
    )
    .unwrap();
    let place = s.place();
    let a = sealvol_serve::keys::create(&place, "a", false, vec!["team-a".into()]).unwrap();
    let b = sealvol_serve::keys::create(&place, "b", false, vec!["t".into()]).unwrap();
    Teams {
        a,
        b,
        small_hash: Hash::of(&small),
        small,
        s,
    }
}

/// One request with `key`: status, the challenge header if any, and the body.
fn ask(
    s: &Server,
    key: &str,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> (u16, Option<String>, Vec<u8>) {
    s.ask(key, method, path, body)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What `key` is told of `hashes` by have-chunks, and its challenge.
fn have(s: &Server, key: &str, hashes: &[Hash]) -> (Vec<u8>, Challenge) {
    let body: Vec<u8> = hashes.iter().flat_map(|h| h.0).collect();
    let (status, challenge, answer) = ask(s, key, "POST", "/v1/ops/have-chunks", body);
    assert_eq!(status, 200, "{}", text(&answer));
    (answer, Challenge::parse_hex(&challenge.unwrap()).unwrap())
}

/// A seal of `team-a/stolen` naming file `hash` of `size` bytes.
fn seal_naming(t: &Teams, hash: &Hash, size: u64) -> (u16, String) {
    let body = serde_json::json!({
        "volume": "team-a/stolen",
        "tags": [],
        "entries": [{"kind": "file", "path": "w.bin", "size": size, "hash": hash.hex()}],
        "stats": {"bytes": size, "files": 1, "chunks": 1, "new_bytes": 0, "new_chunks": 0},
        "provenance": {"source": "file:///x", "pushed_by": "a"},
    });
    let (status, _, body) = ask(
        &t.s,
        &t.a,
        "POST",
        "/v1/ops/seal",
        serde_json::to_vec(&body).unwrap(),
    );
    (status, text(&body))
}

/// team-b's bytes never reached team-a: no version of team-a names them, and every
/// read of them with team-a's key is refused.
fn nothing_reached_team_a(t: &Teams) {
    let vol = VolumeName::parse("team-a/stolen").unwrap();
    assert!(
        t.s.repo.version_digests(&vol).unwrap().is_empty(),
        "a version of team-a was sealed"
    );
    for (file, chunk) in [
        (t.s.file.hash, t.s.file.chunks[0].entry.hash),
        (t.small_hash, t.small_hash),
    ] {
        let path = format!("/v1/chunks/{}?file={}", chunk.hex(), file.hex());
        let (status, _, body) = ask(&t.s, &t.a, "GET", &path, Vec::new());
        assert_eq!(status, 403, "{}", text(&body));
        let path = format!("/v1/objects/files/{}/{}", &file.hex()[..2], file.hex());
        let (status, _, body) = ask(&t.s, &t.a, "GET", &path, Vec::new());
        assert_eq!(status, 403, "{}", text(&body));
    }
}

#[test]
fn small_files_tell_a_hash_nothing_not_even_its_size() {
    let t = teams(server_with(false));
    // Every size a small file can have, in one request, in both formats.
    let limit = sealvol_core::small::small_limit(t.s.repo.config().chunker.params.min) as u32;
    let named: Vec<Named> = (1..=limit).map(|n| Named::plain(t.small_hash, n)).collect();
    let mut v1 = Vec::new();
    for n in &named {
        v1.extend_from_slice(&n.hash.0);
        v1.extend_from_slice(&n.len.to_le_bytes());
    }
    for body in [v1, encode_small(&named)] {
        let (status, _, answer) = ask(&t.s, &t.a, "POST", "/v1/ops/small-files", body);
        assert_eq!(status, 200, "{}", text(&answer));
        assert_eq!(answer.len(), limit as usize);
        assert!(answer.iter().all(|b| *b == 0), "a size was told");
    }
    // With a made-up challenge, a forged copy, and a proof under team-b's challenge.
    let (_, b_challenge) = have(&t.s, &t.b, &[t.small_hash]);
    let size = t.small.len() as u32;
    let tries = [
        Evidence::Proof(Challenge([7; NONCE_LEN]), Proof([7; 32])),
        Evidence::Proof(b_challenge, b_challenge.prove(&t.small)),
        Evidence::Copy {
            pack: t.s.file.packs[0],
            offset: 0,
        },
    ];
    for evidence in tries {
        let named = [Named {
            hash: t.small_hash,
            len: size,
            evidence,
        }];
        let (status, _, answer) = ask(
            &t.s,
            &t.a,
            "POST",
            "/v1/ops/small-files",
            encode_small(&named),
        );
        assert_eq!(status, 200);
        assert_eq!(answer, vec![0], "{evidence:?} was taken");
    }
    let (status, body) = seal_naming(&t, &t.small_hash, t.small.len() as u64);
    assert_eq!(status, 409, "{body}");
    nothing_reached_team_a(&t);
}

#[test]
fn a_chunk_list_naming_chunks_the_key_never_held_is_refused_and_says_no_length() {
    let t = teams(server_with(false));
    let chunk = t.s.file.chunks[0].entry;
    let made_up = Hash([0x5a; 32]);
    let refusal = |h: Hash, len: u32| {
        let body = encode_list(len as u64, &[Named::plain(h, len)]);
        let (status, _, answer) = ask(
            &t.s,
            &t.a,
            "PUT",
            &format!("/v1/ops/lists/{}", h.hex()),
            body,
        );
        (status, text(&answer))
    };
    let (status, held_wrong) = refusal(chunk.hash, 40_000);
    assert_eq!(status, 409, "{held_wrong}");
    assert!(
        !held_wrong.contains(&chunk.raw_len.to_string()),
        "the length was told: {held_wrong}"
    );
    let (status, held_right) = refusal(chunk.hash, chunk.raw_len);
    assert_eq!(status, 409, "{held_right}");
    let (status, absent) = refusal(made_up, 40_000);
    assert_eq!(status, 409);
    // A chunk held elsewhere is answered as one that is not there.
    let same = |a: &str, h: &Hash| a.replace(&h.hex(), "H");
    assert_eq!(same(&held_wrong, &chunk.hash), same(&absent, &made_up));
    assert!(held_wrong.contains("not stored here"), "{held_wrong}");
    nothing_reached_team_a(&t);
}

#[test]
fn a_replayed_or_forged_chunk_list_is_refused() {
    let t = teams(server_with(false));
    let f = &t.s.file;
    let path = format!("/v1/ops/lists/{}", f.hash.hex());
    // team-b's own list, as captured from its traffic: hashes and lengths, plain, then
    // each chunk named with the copy team-b uploaded, then with proofs made under
    // team-b's challenge from the real bytes (the key does not make them team-a's).
    let bytes = noise(4 << 20, 7);
    let (_, b_challenge) = have(&t.s, &t.b, &[f.chunks[0].entry.hash]);
    let mut at = 0usize;
    let proofs: Vec<Named> = f
        .chunks
        .iter()
        .map(|c| {
            let chunk = &bytes[at..at + c.entry.raw_len as usize];
            at += c.entry.raw_len as usize;
            Named {
                hash: c.entry.hash,
                len: c.entry.raw_len,
                evidence: Evidence::Proof(b_challenge, b_challenge.prove(chunk)),
            }
        })
        .collect();
    let plain: Vec<Named> = f
        .chunks
        .iter()
        .map(|c| Named::plain(c.entry.hash, c.entry.raw_len))
        .collect();
    let copies: Vec<Named> = f
        .chunks
        .iter()
        .map(|c| Named {
            hash: c.entry.hash,
            len: c.entry.raw_len,
            evidence: Evidence::Copy {
                pack: f.packs[c.pack as usize],
                offset: c.entry.offset,
            },
        })
        .collect();
    // team-a's own challenge, with proofs that are not of the bytes.
    let (_, a_challenge) = have(&t.s, &t.a, &[f.chunks[0].entry.hash]);
    let guessed: Vec<Named> = f
        .chunks
        .iter()
        .map(|c| Named {
            hash: c.entry.hash,
            len: c.entry.raw_len,
            evidence: Evidence::Proof(a_challenge, a_challenge.prove(&c.entry.hash.0)),
        })
        .collect();
    for list in [plain, copies, proofs, guessed] {
        let (status, _, answer) = ask(&t.s, &t.a, "PUT", &path, encode_list(f.size, &list));
        assert_eq!(status, 409, "{}", text(&answer));
    }
    let (status, body) = seal_naming(&t, &f.hash, f.size);
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("not sent"), "{body}");
    nothing_reached_team_a(&t);
}

/// Pulls a version through the repository `repo` (a server's, as a key reaches it).
fn pull(
    repo: &Arc<Repository>,
    vol: &VolumeName,
    digest: &sealvol_core::refs::Digest,
    out: &std::path::Path,
) {
    let tiers = sealvol_core::read::Tiers::new(Arc::clone(repo), None);
    sealvol_core::pull::pull(&tiers, vol, digest, out, false, &Quiet).unwrap();
}

/// team-a's repository through the server, as its CLI opens it.
fn remote(t: &Teams, key: &str) -> Repository {
    let staging = t.s.dir.path().join(format!("staging-{}", &key[4..5]));
    std::fs::create_dir_all(&staging).unwrap();
    sealvol_client::remote::open(&t.s.url, Some(key), &staging).unwrap()
}

#[test]
fn bytes_the_pusher_holds_are_proven_not_uploaded_and_come_back_whole() {
    let t = teams(server_with(false));
    let dir = t.s.dir.path().join("a-src");
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = noise(4 << 20, 7);
    std::fs::write(dir.join("copy.bin"), &bytes).unwrap();
    std::fs::write(dir.join("tokenizer.json"), &t.small).unwrap();
    // Before: team-a is told team-b's chunks are held, and must prove them.
    let hashes: Vec<Hash> = t.s.file.chunks.iter().map(|c| c.entry.hash).collect();
    let (answer, _) = have(&t.s, &t.a, &hashes);
    assert!(answer.iter().all(|b| *b == 2), "{answer:?}");
    let (answer, _) = have(&t.s, &t.b, &hashes);
    assert!(
        answer.iter().all(|b| *b == 1),
        "team-b must prove its own: {answer:?}"
    );

    let repo = Arc::new(remote(&t, &t.a));
    let vol = VolumeName::parse("team-a/model").unwrap();
    let report = push(&repo, &dir, &vol, &[], &PushOptions::new(&Quiet)).unwrap();
    let sent = repo.requests().unwrap().bytes_sent;
    let size = bytes.len() + t.small.len();
    assert!(
        sent * 100 <= size as u64,
        "{sent} bytes moved for {size} bytes another namespace holds"
    );
    // Now team-a's own: named without proof, and read back whole through the server.
    let (answer, _) = have(&t.s, &t.a, &hashes);
    assert!(answer.iter().all(|b| *b == 1), "{answer:?}");
    let out = t.s.dir.path().join("a-pulled");
    pull(&repo, &vol, &report.digest, &out);
    assert_eq!(std::fs::read(out.join("copy.bin")).unwrap(), bytes);
    assert_eq!(std::fs::read(out.join("tokenizer.json")).unwrap(), t.small);
}

#[test]
fn a_private_namespace_is_told_nothing_and_uploads_what_it_pushes() {
    let t = teams(common::server_with_policy(
        false,
        sealvol_serve::Policy {
            private_dedup: vec!["team-a".into()],
            ..Default::default()
        },
    ));
    let hashes: Vec<Hash> = t.s.file.chunks.iter().map(|c| c.entry.hash).collect();
    let (answer, _) = have(&t.s, &t.a, &hashes);
    assert!(answer.iter().all(|b| *b == 0), "{answer:?}");
    // team-b, not private, still deduplicates against its own.
    let (answer, _) = have(&t.s, &t.b, &hashes);
    assert!(answer.iter().all(|b| *b == 1), "{answer:?}");

    let dir = t.s.dir.path().join("a-src");
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = noise(4 << 20, 7);
    std::fs::write(dir.join("copy.bin"), &bytes).unwrap();
    let repo = Arc::new(remote(&t, &t.a));
    let vol = VolumeName::parse("team-a/model").unwrap();
    let report = push(&repo, &dir, &vol, &[], &PushOptions::new(&Quiet)).unwrap();
    let sent = repo.requests().unwrap().bytes_sent;
    assert!(sent >= bytes.len() as u64, "only {sent} bytes moved");
    // The list the server wrote names the copies that were there first: one copy of
    // each chunk is kept, the upload's left to garbage collection.
    let list = t.s.repo.file_object(&Hash::of(&bytes)).unwrap();
    assert_eq!(list.packs, t.s.file.packs);
    let out = t.s.dir.path().join("a-pulled");
    pull(&repo, &vol, &report.digest, &out);
    assert_eq!(std::fs::read(out.join("copy.bin")).unwrap(), bytes);
}

#[test]
fn a_challenge_is_the_keys_own_and_this_servers() {
    let t = teams(server_with(false));
    let (_, a1) = have(&t.s, &t.a, &[t.small_hash]);
    let (_, a2) = have(&t.s, &t.a, &[t.small_hash]);
    let (_, b) = have(&t.s, &t.b, &[t.small_hash]);
    assert_ne!(a1, b);
    // Another server's challenge for the same key name is not this one's.
    let other = teams(server_with(false));
    let (_, elsewhere) = have(&other.s, &other.a, &[other.small_hash]);
    assert_ne!(a1, elsewhere);
    // Within the hour, the same (a push spans many questions).
    assert!(a1 == a2 || a1.hour() != a2.hour());
    let size = t.small.len() as u32;
    let named = [Named {
        hash: t.small_hash,
        len: size,
        evidence: Evidence::Proof(elsewhere, elsewhere.prove(&t.small)),
    }];
    let (_, _, answer) = ask(
        &t.s,
        &t.a,
        "POST",
        "/v1/ops/small-files",
        encode_small(&named),
    );
    assert_eq!(answer, vec![0]);
    // The key's own challenge, with the bytes: taken.
    let named = [Named {
        hash: t.small_hash,
        len: size,
        evidence: Evidence::Proof(a1, a1.prove(&t.small)),
    }];
    let (_, _, answer) = ask(
        &t.s,
        &t.a,
        "POST",
        "/v1/ops/small-files",
        encode_small(&named),
    );
    assert_eq!(answer, vec![1]);
}

/// A key of one namespace past its quota: its pack is refused before it is stored,
/// with the quota, the usage and what frees space; under the quota it is taken.
#[test]
fn a_pack_past_its_namespaces_quota_is_refused_before_it_is_stored() {
    let s = common::server();
    let used = s
        .repo
        .namespace_usage(&sealvol_core::Name::parse("namespace", "t").unwrap())
        .unwrap()
        .bytes;
    let mut repo =
        sealvol_core::Repository::open_local(&s.dir.path().join("repo"), false, false).unwrap();
    repo.change_settings(|c| {
        c.quotas.insert("t".into(), used + 1000);
    })
    .unwrap();
    let team = sealvol_serve::keys::create(&s.place(), "team-t", false, vec!["t".into()]).unwrap();
    let pack = vec![7u8; 4096];
    let id = Hash::of(&pack).hex();
    let path = format!("/v1/objects/packs/{}/{id}?mode=absent", &id[..2]);
    let (status, _, body) = s.ask(&team, "PUT", &path, pack);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 507, "{body}");
    assert!(
        body.contains("namespace t would pass its quota of"),
        "{body}"
    );
    assert!(body.contains("volume gc"), "{body}");
    assert!(
        !s.dir
            .path()
            .join("repo/packs")
            .join(&id[..2])
            .join(&id)
            .exists()
    );
    // Raised: the same upload gets past the quota (and on to the pack's own checks).
    repo.change_settings(|c| {
        c.quotas.insert("t".into(), used + (1 << 20));
    })
    .unwrap();
    let (status, _, body) = s.ask(&team, "PUT", &path, vec![7u8; 4096]);
    assert_ne!(status, 507, "{}", String::from_utf8_lossy(&body));
}
