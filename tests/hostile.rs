//! A shared `sealvol serve` treats every key holder as hostile. Two teams' volumes share
//! deduplicated packs on one server; keys scoped to each try, over raw HTTP on loopback,
//! everything a hostile client can send: forged and planted chunk lists, objects that
//! do not match their names, folder squatting, forged records, the other team's
//! objects by every route, path tricks, bad ranges, partial headers, stalled and
//! oversized bodies, slow readers, idle connections, an upload whose key is revoked,
//! and `-vv`. After each, the server still answers, `volume verify --read-data` passes
//! and both teams pull their volumes byte for byte.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::servers::{Served, serve};
use common::{Env, assert_same_tree, noise, write};

struct Teams {
    env: Env,
    served: Served,
    a_dir: std::path::PathBuf,
    b_dir: std::path::PathBuf,
    /// team-a's read-write key, team-a's read-only key, team-b's read-write key.
    a: String,
    a_ro: String,
    b: String,
    /// Hashes of team-b's file and of one of its chunks, and its pinned ref.
    hb: String,
    b_pinned: String,
}

fn key(env: &Env, args: &[&str]) -> String {
    let mut all = vec!["key", "create"];
    all.extend_from_slice(args);
    env.ok(&all).trim().to_string()
}

fn teams() -> Teams {
    let env = Env::new();
    let a_dir = env.path("a");
    let b_dir = env.path("b");
    let a = noise(3 << 20, 31);
    // team-b's model shares its first MiB with team-a's: one copy of it in the packs.
    let mut b = a[..1 << 20].to_vec();
    b.extend_from_slice(&noise(2 << 20, 32));
    write(&a_dir.join("model.bin"), &a);
    write(&b_dir.join("model.bin"), &b);
    env.push(&a_dir, "team-a/model", &["--tag", "prod"]);
    let b_pinned = env.push(&b_dir, "team-b/model", &["--tag", "prod"]);
    let served = serve(&env, &[]);
    let hb = blake3::hash(&b).to_hex().to_string();
    Teams {
        a: key(&env, &["a", "--namespace", "team-a"]),
        a_ro: key(&env, &["a-ro", "--read-only", "--namespace", "team-a"]),
        b: key(&env, &["b", "--namespace", "team-b"]),
        env,
        served,
        a_dir,
        b_dir,
        hb,
        b_pinned,
    }
}

impl Teams {
    /// The repository is whole: verify with data passes, both teams pull byte for
    /// byte, and the server answers.
    fn still_whole(&self) {
        self.env.ok(&["volume", "verify", "--read-data"]);
        for (vol, dir) in [("team-a/model", &self.a_dir), ("team-b/model", &self.b_dir)] {
            let out = self.env.path(&format!("pulled-{}", vol.replace('/', "-")));
            let _ = std::fs::remove_dir_all(&out);
            self.env.ok(&[
                "volume",
                "pull",
                &format!("{vol}:prod"),
                out.to_str().unwrap(),
            ]);
            assert_same_tree(dir, &out);
        }
        let (status, _) = http(
            &self.served,
            "GET",
            "/healthz",
            Some(&self.served.key),
            &[],
            b"",
        );
        assert_eq!(status, 200);
    }

    /// team-b's file's chunk list (as the admin reads it).
    fn b_list(&self) -> sealvol_core::objects::FileObject {
        let repo = sealvol_core::Repository::open_local(&self.env.repo, false, false).unwrap();
        let h = sealvol_core::digest::Hash::parse_hex(&self.hb).unwrap();
        repo.file_object(&h).unwrap()
    }
}

/// One request over a fresh connection; the status and the body (read to the end).
fn http(
    s: &Served,
    method: &str,
    path: &str,
    key: Option<&str>,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
        s.addr,
        body.len()
    );
    if let Some(k) = key {
        head.push_str(&format!("Authorization: Bearer {k}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    c.write_all(head.as_bytes()).unwrap();
    let _ = c.write_all(body);
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    parse(&raw)
}

fn parse(raw: &[u8]) -> (u16, Vec<u8>) {
    let text = String::from_utf8_lossy(raw);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return (status, Vec::new());
    };
    let head = text[..at].to_ascii_lowercase();
    let mut body = raw[at + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        let mut out = Vec::new();
        let mut rest = &body[..];
        while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
            let n = usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16)
                .unwrap_or(0);
            if n == 0 || rest.len() < eol + 2 + n {
                break;
            }
            out.extend_from_slice(&rest[eol + 2..eol + 2 + n]);
            rest = &rest[eol + 4 + n..];
        }
        body = out;
    }
    (status, body)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

/// The server's resident memory, in bytes.
fn rss(s: &Served) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024
}

fn staging_files(env: &Env) -> Vec<String> {
    std::fs::read_dir(env.repo.join("tmp"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn no_key_writes_a_chunk_list_or_anything_derived() {
    let t = teams();
    let list = t.b_list();
    let hb = &t.hb;
    let aa = &hb[..2];
    // team-a's own file's list, copied over team-b's: no key writes lists.
    let theirs = std::fs::read(t.env.repo.join("files").join(aa).join(hb)).unwrap();
    for mode in ["put", "absent", "match"] {
        let (status, body) = http(
            &t.served,
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
    let a_repo = sealvol_core::Repository::open_local(&t.env.repo, false, false).unwrap();
    let ha = sealvol_core::digest::Hash::of(&std::fs::read(t.a_dir.join("model.bin")).unwrap());
    let a_list = a_repo.file_object(&ha).unwrap();
    forged.extend_from_slice(&(a_list.chunks.len() as u64).to_le_bytes());
    for c in &a_list.chunks {
        forged.extend_from_slice(&c.entry.hash.0);
        forged.extend_from_slice(&c.entry.raw_len.to_le_bytes());
    }
    let (status, body) = http(
        &t.served,
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
        &t.served,
        "PUT",
        &format!("/v1/ops/lists/{never}"),
        Some(&t.a),
        &[],
        &forged,
    );
    assert_eq!(status, 400);
    assert!(!t.env.repo.join("files/5e").join(&never).exists());
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
                &t.served,
                "PUT",
                &format!("/v1/objects/{key}?mode={mode}"),
                Some(&t.a),
                &[],
                b"{\"state\": \"condemned\", \"packs\": []}",
            );
            assert_eq!(status, 403, "{key} {mode}: {}", text(&body));
        }
        let (status, _) = http(
            &t.served,
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
        &t.served,
        "PUT",
        &format!("/v1/objects/packs/ab/{id}?mode=absent"),
        Some(&t.a),
        &[],
        b"SVPACK01 not a pack at all",
    );
    assert_eq!(status, 422);
    assert!(!t.env.repo.join("packs/ab").join(&id).exists());
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
            &t.served,
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
        &t.served,
        "POST",
        "/v1/ops/damage",
        Some(&t.a),
        &[],
        report.to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    assert!(
        !t.env.repo.join("damage").exists()
            || std::fs::read_dir(t.env.repo.join("damage"))
                .unwrap()
                .count()
                == 0
    );
    // Garbage collection is the admin's, run by the server.
    let (status, _) = http(&t.served, "POST", "/v1/ops/gc", Some(&t.a), &[], b"{}");
    assert_eq!(status, 403);
    t.still_whole();
    // A push by team-b after all of it stores team-b's file as its own.
    assert_eq!(t.b_list(), list);
}

#[test]
fn malformed_questions_of_a_push_are_refused_in_one_line_before_any_work() {
    let t = teams();
    let before = std::fs::read_dir(t.env.repo.join("files")).unwrap().count();
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
            let (status, answer) = http(
                &t.served,
                "POST",
                &format!("/v1/ops/{op}"),
                Some(&t.a),
                &[],
                &body,
            );
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
    body.extend_from_slice(&sealvol_core::digest::Hash::parse_hex(&t.hb).unwrap().0);
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    let (status, answer) = http(
        &t.served,
        "POST",
        "/v1/ops/small-files",
        Some(&t.a),
        &[],
        &body,
    );
    assert_eq!(status, 200, "{}", text(&answer));
    assert_eq!(answer, [0, 0]);
    assert_eq!(
        std::fs::read_dir(t.env.repo.join("files")).unwrap().count(),
        before
    );
    // A read-only key asks nothing of a push.
    let (status, _) = http(
        &t.served,
        "POST",
        "/v1/ops/small-files",
        Some(&t.a_ro),
        &[],
        &body,
    );
    assert_eq!(status, 403);
}

#[test]
fn a_key_reaches_nothing_of_another_namespace_by_any_route() {
    let t = teams();
    let list = t.b_list();
    let hb = &t.hb;
    let digest = t.b_pinned.rsplit("@b3:").next().unwrap().to_string();
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
            let (status, body) = http(&t.served, "GET", &path, Some(key), &[], b"");
            assert_eq!(status, 403, "{path}: {}", text(&body));
        }
        // A pack range for team-b's file, named as such: refused.
        let (status, _) = http(
            &t.served,
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
            &t.served,
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
        &t.served,
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
            &t.served,
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
        &t.served,
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
    assert!(!t.env.repo.join("manifests/team-a/stolen").exists());
    // Its own namespace reads as ever, through the CLI with the scoped key.
    let mut client = Env::new();
    client.repo = client.path("none");
    client.vars = vec![
        ("SEALVOL_REMOTE".into(), t.served.url()),
        ("SEALVOL_API_KEY".into(), t.a.clone()),
    ];
    let out = client.path("out");
    client.ok(&["volume", "pull", "team-a/model:prod", out.to_str().unwrap()]);
    assert_same_tree(&t.a_dir, &out);
    let e = client.fails(
        1,
        &[
            "volume",
            "pull",
            "team-b/model:prod",
            client.path("x").to_str().unwrap(),
        ],
    );
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
                &t.served,
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
                !text(&body).contains(t.env.repo.to_str().unwrap()),
                "a server path: {}",
                text(&body)
            );
        }
    }
    // The three ranges that took servers down: clamped, or refused, never a crash.
    let size = std::fs::metadata(t.env.repo.join("sealvol.repo"))
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
            &t.served,
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
        &t.served,
        "GET",
        "/v1/key",
        None,
        &[("Authorization", &format!("bearer {}", t.a))],
        b"",
    );
    assert_eq!(status, 200);
    t.still_whole();
}

/// Sends a GET of pack `pack` (hex) with `key` on `c`, and reads nothing.
fn ask_for_pack(c: &mut TcpStream, addr: &str, pack: &str, key: &str) {
    write!(
        c,
        "GET /v1/objects/packs/{}/{pack} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\r\n",
        &pack[..2],
    )
    .unwrap();
}

#[test]
fn stalled_slow_and_idle_clients_pin_no_memory_and_stop_no_one() {
    let t = teams();
    let list = t.b_list();
    let before = rss(&t.served);
    let addr = t.served.addr.clone();
    let open = || {
        let c = TcpStream::connect(&addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        c
    };
    // 200 idle connections, and one that sends half its headers and stops.
    let idle: Vec<TcpStream> = (0..200).map(|_| open()).collect();
    let mut partial = open();
    partial
        .write_all(
            format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bea").as_bytes(),
        )
        .unwrap();
    // 20 uploads of 64 MiB packs that stop at half, and one announcing 10 GB.
    let mut stalled = Vec::new();
    for i in 0..20 {
        let mut c = open();
        let id = format!("{:02x}", i).repeat(32);
        write!(
            c,
            "PUT /v1/objects/packs/{}/{id}?mode=absent HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Length: {}\r\n\r\n",
            &id[..2],
            t.a,
            64 << 20
        )
        .unwrap();
        c.write_all(&vec![i as u8; 32 << 20]).unwrap();
        stalled.push(c);
    }
    let (status, _) = http(
        &t.served,
        "PUT",
        &format!("/v1/objects/packs/ab/{}?mode=absent", "ab".repeat(32)),
        Some(&t.a),
        &[("Content-Length", "10000000000")],
        b"",
    );
    assert!(status == 413 || status == 400, "{status}");
    // 100 slow readers of a whole pack (the admin's key), reading nothing.
    let pack = list.packs[0].hex();
    let mut slow = Vec::new();
    for _ in 0..100 {
        let mut c = open();
        ask_for_pack(&mut c, &addr, &pack, &t.served.key);
        slow.push(c);
    }
    std::thread::sleep(Duration::from_secs(2));
    // Meanwhile everyone else is served at once.
    let asked = Instant::now();
    let (status, _) = http(&t.served, "GET", "/v1/key", Some(&t.b), &[], b"");
    assert_eq!(status, 200);
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    let grown = rss(&t.served).saturating_sub(before);
    assert!(grown <= 256 << 20, "the server grew by {} MiB", grown >> 20);
    // The stalled uploads end on their own (bodies that stop coming) and leave
    // nothing; the partial headers are cut off.
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut buf = [0u8; 1];
    partial
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let cut = partial.read(&mut buf).map(|n| n == 0).unwrap_or(true)
        || String::from_utf8_lossy(&buf).starts_with('H');
    assert!(cut, "partial headers were not cut off");
    while !staging_files(&t.env).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        staging_files(&t.env).is_empty(),
        "{:?}",
        staging_files(&t.env)
    );
    drop(stalled);
    drop(slow);
    drop(idle);
    for i in 0..20u8 {
        let id = format!("{i:02x}").repeat(32);
        assert!(!t.env.repo.join("packs").join(&id[..2]).join(&id).exists());
    }
    t.still_whole();
}

/// The probe that found one tenant could keep another out, with the server's defaults:
/// 1,100 connections that send nothing and 1,030 slow readers on team-a's key. Team-b
/// is answered while they are all still held, the probes too, and the slow readers
/// past team-a's share are answered 429 at once instead of taking connections.
#[test]
fn a_thousand_idle_connections_and_slow_readers_keep_no_other_team_out() {
    let t = teams();
    let list = t.b_list();
    let before = rss(&t.served);
    let addr = t.served.addr.clone();
    let idle: Vec<TcpStream> = (0..1100)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let pack = list.packs[0].hex();
    // Readers with an 8 KiB receive window: a pack (5 MiB) is more than the kernel
    // holds for them, so the server's writes wait.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap();
    let at: std::net::SocketAddr = addr.parse().unwrap();
    let mut slow = Vec::new();
    for _ in 0..1030 {
        let mut c = rt.block_on(async {
            let s = tokio::net::TcpSocket::new_v4().unwrap();
            s.set_recv_buffer_size(4096).unwrap();
            s.connect(at).await.unwrap().into_std().unwrap()
        });
        c.set_nonblocking(false).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        ask_for_pack(&mut c, &addr, &pack, &t.served.key);
        slow.push(c);
    }
    // Each slow reader has its head: 200 (under way, and not read) or 429 (past the
    // key's share, closed at once).
    let mut refused = 0;
    for c in &mut slow {
        let mut head = [0u8; 12];
        c.read_exact(&mut head).unwrap();
        match &head {
            b"HTTP/1.1 200" => {}
            b"HTTP/1.1 429" => refused += 1,
            other => panic!("{}", String::from_utf8_lossy(other)),
        }
    }
    // The key's whole share was used before any was refused. (How many of the 256
    // the kernel let finish, taking a whole pack into its buffers, is its business.)
    assert!(refused > 0, "none past the key's share of 256");
    assert!(1030 - refused >= 256, "{refused} refused");
    let (status, body) = http(&t.served, "GET", "/v1/key", Some(&t.b), &[], b"");
    assert_eq!(status, 200, "{}", text(&body));
    let (status, _) = http(&t.served, "GET", "/healthz", None, &[], b"");
    assert_eq!(status, 200);
    // Answered while the idle ones are still open: nobody waited out their timeout.
    let open = idle
        .iter()
        .filter(|c| {
            c.set_nonblocking(true).unwrap();
            let mut b = [0u8; 1];
            matches!(c.peek(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        })
        .count();
    assert_eq!(open, 1100);
    let grown = rss(&t.served).saturating_sub(before);
    eprintln!("the server grew by {} MiB", grown >> 20);
    assert!(grown <= 512 << 20, "the server grew by {} MiB", grown >> 20);
    drop(slow);
    drop(idle);
    t.still_whole();
}

#[test]
fn an_upload_ends_when_its_key_is_revoked() {
    let t = teams();
    let addr = t.served.addr.clone();
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
    t.env.ok(&["key", "revoke", "a"]);
    std::thread::sleep(Duration::from_millis(500));
    // The rest goes (or fails to: the server may have closed its end already).
    let _ = c.write_all(&vec![1u8; 24 << 20]);
    let mut raw = Vec::new();
    let _ = c.read_to_end(&mut raw);
    let (status, body) = parse(&raw);
    assert_eq!(status, 403, "{}", text(&body));
    assert!(text(&body).contains("revoked"), "{}", text(&body));
    assert!(!t.env.repo.join("packs/7a").join(&id).exists());
    t.still_whole();
}

#[test]
fn the_api_key_is_never_printed_at_any_verbosity() {
    let t = teams();
    let mut client = Env::new();
    client.repo = client.path("none");
    client.vars = vec![
        ("SEALVOL_REMOTE".into(), t.served.url()),
        ("SEALVOL_API_KEY".into(), t.a.clone()),
    ];
    let secret = t.a.rsplit(':').next().unwrap().to_string();
    for args in [
        &["-vv", "volume", "ls"][..],
        &["-vv", "volume", "versions", "team-a/model"][..],
    ] {
        let out = client.run(args);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{all}");
        assert!(!all.contains(&secret), "the key was printed: {all}");
    }
}
