//! What only the `sealvol serve` process shows of hostile clients: its resident memory
//! under partial headers, stalled and oversized bodies, slow readers and idle
//! connections, and that `-vv` never prints a key. After each, the server still
//! answers, `volume verify --read-data` passes and both teams pull their volumes byte
//! for byte. (What a key may send and reach is tested in process, in the crate that
//! answers it: `engine/serve/tests/hostile.rs`.)

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
    /// team-a's read-write key and team-b's.
    a: String,
    b: String,
    /// The hash of team-b's file.
    hb: String,
}

fn key(env: &Env, args: &[&str]) -> String {
    let mut all = vec!["key", "create"];
    all.extend_from_slice(args);
    env.ok(&all).trim().to_string()
}

fn teams() -> Teams {
    teams_serving(&[])
}

/// `teams`, the server started with `flags` too.
fn teams_serving(flags: &[&str]) -> Teams {
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
    env.push(&b_dir, "team-b/model", &["--tag", "prod"]);
    let served = serve(&env, flags);
    let hb = blake3::hash(&b).to_hex().to_string();
    Teams {
        a: key(&env, &["a", "--namespace", "team-a"]),
        b: key(&env, &["b", "--namespace", "team-b"]),
        env,
        served,
        a_dir,
        b_dir,
        hb,
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

/// One request over a fresh connection, spoken by hand: the status and the body.
fn http(
    s: &Served,
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
    // The idle ones stay open for as long as the test runs, however slowly a busy
    // machine opens the slow readers (by default they would close after 20 s idle).
    let t = teams_serving(&["--header-timeout", "1h"]);
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
