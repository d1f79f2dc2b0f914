//! A shared server treats every key holder as hostile. Two teams' volumes share
//! deduplicated packs on one server; keys scoped to each try, over raw HTTP on loopback,
//! everything a hostile client can send: forged and planted chunk lists, objects that
//! do not match their names, folder squatting, forged records, the other team's
//! objects by every route, path tricks, bad ranges and an upload whose key is revoked.
//! After each, the server still answers, a verify that reads every byte passes and both
//! teams pull their volumes byte for byte. (What only the `sealvol serve` process shows,
//! its resident memory under stalled and slow clients and what it prints, is tested
//! on the binary: `tests/hostile.rs`.)

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{Listening, listen};
use sealvol_core::digest::Hash;
use sealvol_core::progress::Quiet;
use sealvol_core::pull::pull;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::{Name, Ref, VolumeName};
use sealvol_core::repo::Repository;
use sealvol_core::testutil::noise;
use sealvol_core::verify::{ReadData, survey_all};

struct Teams {
    /// The repository's folder, which the server serves.
    path: PathBuf,
    served: Listening,
    /// The server's address, `127.0.0.1:PORT`.
    addr: String,
    a_dir: PathBuf,
    b_dir: PathBuf,
    /// team-a's read-write key and its read-only key.
    a: String,
    a_ro: String,
    /// The hash of team-b's file, and the digest (hex) of its version.
    hb: String,
    b_digest: String,
    _dir: tempfile::TempDir,
}

fn teams() -> Teams {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("repo");
    let a_dir = dir.path().join("a");
    let b_dir = dir.path().join("b");
    let a = noise(3 << 20, 31);
    // team-b's model shares its first MiB with team-a's: one copy of it in the packs.
    let mut b = a[..1 << 20].to_vec();
    b.extend_from_slice(&noise(2 << 20, 32));
    for (d, bytes) in [(&a_dir, &a), (&b_dir, &b)] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("model.bin"), bytes).unwrap();
    }
    let repo = Arc::new(Repository::open_local(&path, true, false).unwrap());
    let prod = [Name::parse("tag", "prod").unwrap()];
    let opts = PushOptions::new(&Quiet);
    let vol = |v: &str| VolumeName::parse(v).unwrap();
    push(&repo, &a_dir, &vol("team-a/model"), &prod, &opts).unwrap();
    let b_digest = push(&repo, &b_dir, &vol("team-b/model"), &prod, &opts)
        .unwrap()
        .digest
        .hex();
    let served = listen(&repo, dir.path(), true, sealvol_serve::Policy::default());
    let addr = served.url.trim_start_matches("http://").to_string();
    let place = sealvol_serve::keys::Place::of(&served.keys_dir, Arc::clone(&repo)).unwrap();
    let key = |name: &str, ro: bool, ns: &str| {
        sealvol_serve::keys::create(&place, name, ro, vec![ns.to_string()]).unwrap()
    };
    Teams {
        a: key("a", false, "team-a"),
        a_ro: key("a-ro", true, "team-a"),
        hb: blake3::hash(&b).to_hex().to_string(),
        path,
        served,
        addr,
        a_dir,
        b_dir,
        b_digest,
        _dir: dir,
    }
}

impl Teams {
    fn repo(&self) -> Repository {
        Repository::open_local(&self.path, false, false).unwrap()
    }

    /// The key list `sealvol key` changes for this server.
    fn place(&self) -> sealvol_serve::keys::Place {
        sealvol_serve::keys::Place::of(&self.served.keys_dir, Arc::new(self.repo())).unwrap()
    }

    /// The repository is whole: a verify that reads every byte passes, both teams
    /// pull byte for byte, and the server answers.
    fn still_whole(&self) {
        let report = survey_all(&self.repo(), ReadData::All, None, false, &Quiet)
            .unwrap()
            .report();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let out = tempfile::tempdir().unwrap();
        for (vol, dir) in [("team-a/model", &self.a_dir), ("team-b/model", &self.b_dir)] {
            let into = out.path().join(vol.replace('/', "-"));
            let repo = Arc::new(self.repo());
            let r = Ref::parse(&format!("{vol}:prod")).unwrap();
            let digest = repo.resolve(&r).unwrap();
            pull(
                &Tiers::new(repo, None),
                &r.volume,
                &digest,
                &into,
                false,
                &Quiet,
            )
            .unwrap();
            assert_same_tree(dir, &into);
        }
        let (status, _) = http(self, "GET", "/healthz", Some(&self.served.key), &[], b"");
        assert_eq!(status, 200);
    }

    /// team-b's file's chunk list (as the admin reads it).
    fn b_list(&self) -> sealvol_core::objects::FileObject {
        self.repo()
            .file_object(&Hash::parse_hex(&self.hb).unwrap())
            .unwrap()
    }
}

/// `volume pull REF OUT` through the server with `key`, as a CLI elsewhere does it.
fn pull_remote(t: &Teams, key: &str, r: &str, out: &Path) -> sealvol_core::error::Result<()> {
    let staging = tempfile::tempdir().unwrap();
    let repo = Arc::new(sealvol_client::remote::open(
        &t.served.url,
        Some(key),
        staging.path(),
    )?);
    let r = Ref::parse(r)?;
    let digest = repo.resolve(&r)?;
    pull(
        &Tiers::new(repo, None),
        &r.volume,
        &digest,
        out,
        false,
        &Quiet,
    )
    .map(|_| ())
}

/// Every file under `a` is under `b` with the same bytes, and nothing more.
fn assert_same_tree(a: &Path, b: &Path) {
    let names = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(a), names(b));
    for n in names(a) {
        assert_eq!(
            std::fs::read(a.join(&n)).unwrap(),
            std::fs::read(b.join(&n)).unwrap()
        );
    }
}

/// One request over a fresh connection, spoken by hand: the status and the body.
fn http(
    s: &Teams,
    method: &str,
    path: &str,
    key: Option<&str>,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    sealvol_testkit::http::request(&s.addr, method, path, key, headers, body)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

#[test]
fn no_key_writes_a_chunk_list_or_anything_derived() {
    let t = teams();
    let list = t.b_list();
    let hb = &t.hb;
    let aa = &hb[..2];
    // team-a's own file's list, copied over team-b's: no key writes lists.
    let theirs = std::fs::read(t.path.join("files").join(aa).join(hb)).unwrap();
    for mode in ["put", "absent", "match"] {
        let (status, body) = http(
            &t,
            "PUT",
            &format!("/v1/objects/files/{aa}/{hb}?mode={mode}"),
            Some(&t.a),
            &[],
            &theirs,
        );
        assert_eq!(status, 403, "{}", text(&body));
    }
    // Asked as an operation: team-a's chunks named as team-b's file fail its proof.
    let mut forged = b"SVLIST01".to_vec();
    forged.extend_from_slice(&list.size.to_le_bytes());
    let a_repo = t.repo();
    let ha = Hash::of(&std::fs::read(t.a_dir.join("model.bin")).unwrap());
    let a_list = a_repo.file_object(&ha).unwrap();
    forged.extend_from_slice(&(a_list.chunks.len() as u64).to_le_bytes());
    for c in &a_list.chunks {
        forged.extend_from_slice(&c.entry.hash.0);
        forged.extend_from_slice(&c.entry.raw_len.to_le_bytes());
    }
    let (status, body) = http(
        &t,
        "PUT",
        &format!("/v1/ops/lists/{hb}"),
        Some(&t.a),
        &[],
        &forged,
    );
    assert_eq!(status, 400, "{}", text(&body));
    assert!(text(&body).contains("do not hash to it"), "{}", text(&body));
    // Planted for a file never pushed: the same.
    let never = "5e".repeat(32);
    let (status, _) = http(
        &t,
        "PUT",
        &format!("/v1/ops/lists/{never}"),
        Some(&t.a),
        &[],
        &forged,
    );
    assert_eq!(status, 400);
    assert!(!t.path.join("files/5e").join(&never).exists());
    // Derived objects and records, by a key: refused, whatever their bytes.
    let id = "ab".repeat(32);
    for key in [
        format!("index/{id}"),
        format!("manifests/team-a/model/{id}"),
        format!("listings/team-a/model/{id}"),
        format!("summaries/team-a/model/{id}"),
        "tags/team-a/model/prod".to_string(),
        format!("trash/team-a/model/{id}"),
        format!("trash/team-b/model/{id}"),
        format!("damage/{id}/{id}"),
        format!("damage/files/{id}"),
        "gc/rounds/29991231T000000000Z-1".to_string(),
        "gc/lease".to_string(),
        "sealvol.repo".to_string(),
    ] {
        for mode in ["absent", "put", "match"] {
            let (status, body) = http(
                &t,
                "PUT",
                &format!("/v1/objects/{key}?mode={mode}"),
                Some(&t.a),
                &[],
                b"{\"state\": \"condemned\", \"packs\": []}",
            );
            assert_eq!(status, 403, "{key} {mode}: {}", text(&body));
        }
        let (status, _) = http(
            &t,
            "DELETE",
            &format!("/v1/objects/{key}"),
            Some(&t.a),
            &[],
            b"",
        );
        assert_eq!(status, 403, "{key}");
    }
    // A pack that does not match its name: refused, nothing stored.
    let (status, _) = http(
        &t,
        "PUT",
        &format!("/v1/objects/packs/ab/{id}?mode=absent"),
        Some(&t.a),
        &[],
        b"SVPACK01 not a pack at all",
    );
    assert_eq!(status, 422);
    assert!(!t.path.join("packs/ab").join(&id).exists());
    // Folders squatted: names that are no object.
    for squat in [
        "packs/ab",
        "files/ab",
        "index",
        "manifests/team-a",
        "tmp/x",
        "quarantine/x/y",
    ] {
        let (status, _) = http(
            &t,
            "PUT",
            &format!("/v1/objects/{squat}?mode=absent"),
            Some(&t.a),
            &[],
            b"x",
        );
        assert!(status == 400 || status == 403, "{squat}: {status}");
    }
    // A damage report of a healthy chunk is checked, and not recorded.
    let c = &list.chunks[0];
    let report = serde_json::json!({
        "pack": list.packs[c.pack as usize].hex(),
        "chunk": c.entry.hash.hex(),
        "offset": c.entry.offset,
        "len": c.entry.stored_len,
    });
    let (status, _) = http(
        &t,
        "POST",
        "/v1/ops/damage",
        Some(&t.a),
        &[],
        report.to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    assert!(
        !t.path.join("damage").exists()
            || std::fs::read_dir(t.path.join("damage")).unwrap().count() == 0
    );
    // Garbage collection is the admin's, run by the server.
    let (status, _) = http(&t, "POST", "/v1/ops/gc", Some(&t.a), &[], b"{}");
    assert_eq!(status, 403);
    t.still_whole();
    // A push by team-b after all of it stores team-b's file as its own.
    assert_eq!(t.b_list(), list);
}

#[test]
fn malformed_questions_of_a_push_are_refused_in_one_line_before_any_work() {
    let t = teams();
    let before = std::fs::read_dir(t.path.join("files")).unwrap().count();
    // Records cut short, a record too long, and one record more than a question holds.
    for (op, record) in [
        ("have-chunks", 32),
        ("stored-files", 32),
        ("small-files", 36),
    ] {
        for body in [
            vec![7u8; record - 1],
            vec![7u8; record + 1],
            vec![0u8; record * (65536 + 1)],
        ] {
            let (status, answer) =
                http(&t, "POST", &format!("/v1/ops/{op}"), Some(&t.a), &[], &body);
            let why = text(&answer);
            assert_eq!(status, 400, "{op} of {} bytes: {why}", body.len());
            assert!(why.contains("back to back"), "{op}: {why}");
            assert_eq!(why.trim().lines().count(), 1, "{op}: {why}");
        }
    }
    // Well formed: a small file the server never held is not held, and nothing is
    // written for it; a size over the small bound is not a small file at all.
    let never = [0x5eu8; 32];
    let mut body = never.to_vec();
    body.extend_from_slice(&10u32.to_le_bytes());
    body.extend_from_slice(&Hash::parse_hex(&t.hb).unwrap().0);
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    let (status, answer) = http(&t, "POST", "/v1/ops/small-files", Some(&t.a), &[], &body);
    assert_eq!(status, 200, "{}", text(&answer));
    assert_eq!(answer, [0, 0]);
    assert_eq!(
        std::fs::read_dir(t.path.join("files")).unwrap().count(),
        before
    );
    // A read-only key asks nothing of a push.
    let (status, _) = http(&t, "POST", "/v1/ops/small-files", Some(&t.a_ro), &[], &body);
    assert_eq!(status, 403);
}

#[test]
fn a_key_reaches_nothing_of_another_namespace_by_any_route() {
    let t = teams();
    let list = t.b_list();
    let hb = &t.hb;
    let digest = t.b_digest.clone();
    let pack = list.packs[0].hex();
    let c = &list.chunks[list.chunks.len() - 1];
    let tail = list.packs[c.pack as usize].hex();
    let range = format!("bytes={}-{}", c.entry.offset, c.entry.offset + 10);
    for key in [&t.a, &t.a_ro] {
        for path in [
            format!("/v1/objects/manifests/team-b/model/{digest}"),
            format!("/v1/objects/listings/team-b/model/{digest}"),
            format!("/v1/objects/summaries/team-b/model/{digest}"),
            "/v1/objects/tags/team-b/model/prod".to_string(),
            format!("/v1/objects/files/{}/{hb}", &hb[..2]),
            format!("/v1/objects/packs/{}/{pack}", &pack[..2]),
            format!("/v1/objects/index/{pack}"),
            "/v1/list?prefix=manifests/team-b/".to_string(),
            "/v1/list?prefix=files/".to_string(),
            "/v1/list?prefix=packs/".to_string(),
            "/v1/list?prefix=index/".to_string(),
            "/v1/list?prefix=damage/".to_string(),
            "/v1/list?prefix=gc/".to_string(),
            "/v1/list?prefix=".to_string(),
            format!("/v1/chunks/{}?file={hb}", c.entry.hash.hex()),
        ] {
            let (status, body) = http(&t, "GET", &path, Some(key), &[], b"");
            assert_eq!(status, 403, "{path}: {}", text(&body));
        }
        // A pack range for team-b's file, named as such: refused.
        let (status, _) = http(
            &t,
            "GET",
            &format!("/v1/objects/packs/{}/{tail}?file={hb}", &tail[..2]),
            Some(key),
            &[("Range", &range)],
            b"",
        );
        assert_eq!(status, 403);
        // A run of team-b's chunks.
        let run = serde_json::json!({
            "file": hb, "pack": tail, "offset": c.entry.offset,
            "chunks": [[c.entry.hash.hex(), c.entry.stored_len]],
        });
        let (status, _) = http(
            &t,
            "POST",
            "/v1/runs",
            Some(key),
            &[],
            run.to_string().as_bytes(),
        );
        assert_eq!(status, 403);
    }
    // Listing its own kind leaves the other namespace out.
    let (status, body) = http(
        &t,
        "GET",
        "/v1/list?prefix=manifests/",
        Some(&t.a),
        &[],
        b"",
    );
    assert_eq!(status, 200);
    assert!(text(&body).contains("team-a") && !text(&body).contains("team-b"));
    // Writes into team-b: every operation refused.
    let b_ref = format!("team-b/model@b3:{digest}");
    for (op, body) in [
        (
            "tag",
            serde_json::json!({"volume": "team-b/model", "tag": "prod", "to": null, "expected": null}),
        ),
        ("delete", serde_json::json!({"ref": b_ref, "untag": true})),
        ("restore", serde_json::json!({"ref": b_ref})),
        (
            "seal",
            serde_json::json!({"volume": "team-b/model", "tags": [], "entries": [],
            "stats": {"bytes": 0, "files": 0, "chunks": 0, "new_bytes": 0, "new_chunks": 0},
            "provenance": {"source": "x", "pushed_by": "x"}}),
        ),
    ] {
        let (status, text_) = http(
            &t,
            "POST",
            &format!("/v1/ops/{op}"),
            Some(&t.a),
            &[],
            body.to_string().as_bytes(),
        );
        assert_eq!(status, 403, "{op}: {}", text(&text_));
    }
    // A version of team-a's own that names team-b's file by its hash: a hash is no
    // capability, and the seal is refused.
    let seal = serde_json::json!({"volume": "team-a/stolen", "tags": [],
        "entries": [{"kind": "file", "path": "model.bin", "size": list.size, "hash": hb, "exec": false}],
        "stats": {"bytes": list.size, "files": 1, "chunks": 1, "new_bytes": 0, "new_chunks": 0},
        "provenance": {"source": "x", "pushed_by": "x"}});
    let (status, body) = http(
        &t,
        "POST",
        "/v1/ops/seal",
        Some(&t.a),
        &[],
        seal.to_string().as_bytes(),
    );
    assert_eq!(status, 409, "{}", text(&body));
    assert!(
        text(&body).contains("not sent with this push"),
        "{}",
        text(&body)
    );
    assert!(!t.path.join("manifests/team-a/stolen").exists());
    // Its own namespace reads as ever, through a remote engine with the scoped key.
    let client = tempfile::tempdir().unwrap();
    let out = client.path().join("out");
    pull_remote(&t, &t.a, "team-a/model:prod", &out).unwrap();
    assert_same_tree(&t.a_dir, &out);
    let e = pull_remote(&t, &t.a, "team-b/model:prod", &client.path().join("x")).unwrap_err();
    let e = format!("{e} {}", e.hint_text().unwrap_or(""));
    assert!(e.contains("may not"), "{e}");
    assert!(!e.contains("sealvol repair"), "{e}");
    t.still_whole();
}

#[test]
fn paths_and_ranges_a_client_makes_up_are_refused_and_hurt_nothing() {
    let t = teams();
    let long = "a".repeat(100_000);
    for path in [
        "/v1/objects/%2e%2e/%2e%2e/etc/passwd".to_string(),
        "/v1/objects/packs/%2e%2e/x".to_string(),
        "/v1/objects/manifests%2Fteam-b%2Fmodel".to_string(),
        "/v1/objects/packs/ab/x%00y".to_string(),
        "/v1/objects/..%2F..%2Fsealvol.repo".to_string(),
        format!("/v1/objects/packs/ab/{long}"),
        format!("/v1/list?prefix={long}/"),
    ] {
        for method in ["GET", "PUT"] {
            let (status, body) = http(
                &t,
                method,
                &format!("{path}?mode=absent"),
                Some(&t.a),
                &[],
                b"x",
            );
            assert!(
                (400..500).contains(&status),
                "{method} {:.80}: {status} {}",
                path,
                text(&body)
            );
            assert!(
                !text(&body).contains(t.path.to_str().unwrap()),
                "a server path: {}",
                text(&body)
            );
        }
    }
    // The three ranges that took servers down: clamped, or refused, never a crash.
    let size = std::fs::metadata(t.path.join("sealvol.repo"))
        .unwrap()
        .len() as usize;
    for (range, status, len) in [
        ("bytes=0-99999999999", 206, size),
        ("bytes=1-18446744073709551615", 206, size - 1),
        ("bytes=0-18446744073709551615", 206, size),
        ("bytes=18446744073709551615-", 416, 0),
        ("bytes=5-1", 400, usize::MAX),
        ("bytes=0-1,5-9", 400, usize::MAX),
    ] {
        let (got, body) = http(
            &t,
            "GET",
            "/v1/objects/sealvol.repo",
            Some(&t.a_ro),
            &[("Range", range)],
            b"",
        );
        assert_eq!(got, status, "{range}: {}", text(&body));
        if len != usize::MAX {
            assert_eq!(body.len(), len, "{range}");
        }
    }
    // A lowercase scheme is a scheme.
    let (status, _) = http(
        &t,
        "GET",
        "/v1/key",
        None,
        &[("Authorization", &format!("bearer {}", t.a))],
        b"",
    );
    assert_eq!(status, 200);
    t.still_whole();
}

#[test]
fn an_upload_ends_when_its_key_is_revoked() {
    let t = teams();
    let addr = t.addr.clone();
    let mut c = TcpStream::connect(&addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let id = "7a".repeat(32);
    write!(
        c,
        "PUT /v1/objects/packs/7a/{id}?mode=absent HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        t.a,
        32 << 20
    )
    .unwrap();
    c.write_all(&vec![1u8; 8 << 20]).unwrap();
    sealvol_serve::keys::revoke(&t.place(), "a").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // The rest goes (or fails to: the server may have closed its end already).
    let _ = c.write_all(&vec![1u8; 24 << 20]);
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let (status, body) = sealvol_testkit::http::parse(&raw);
    assert_eq!(status, 403, "{}", text(&body));
    assert!(text(&body).contains("revoked"), "{}", text(&body));
    assert!(!t.path.join("packs/7a").join(&id).exists());
    t.still_whole();
}
