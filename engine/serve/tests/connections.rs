//! What one caller's connections may hold of a shared server, with real sockets on
//! loopback: idle and keyless connections are closed to make room, however many; a
//! key's requests under way are bounded and the rest of its requests answered 429 at
//! once; a reader below the floor is ended; and through all of it another key, and
//! the probes, are answered. Every wait here is for something that holds under any
//! load (a connection closed or left open), never for a clock.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::server_with_policy;
use sealvol_serve::conn::{Floor, Limits};

/// The default limits, but an hour for a request's head: a connection left idle is
/// closed to make room, or stays open for as long as the test runs, however slowly a
/// busy machine gets through it (`serve --header-timeout 1h`).
fn patient() -> Limits {
    Limits {
        header_timeout: Duration::from_secs(3600),
        ..Limits::DEFAULT
    }
}

fn policy(limits: Limits) -> sealvol_serve::Policy {
    sealvol_serve::Policy {
        connections: limits,
        ..Default::default()
    }
}

fn addr(s: &common::Server) -> String {
    s.url.trim_start_matches("http://").to_string()
}

/// Whether the server closed `c` (EOF or reset) by now rather than left it open.
fn closed(c: &mut TcpStream) -> bool {
    c.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    let closed = match c.peek(&mut b) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    };
    c.set_nonblocking(false).unwrap();
    closed
}

/// Reads `c` until it ends or more than `whole` bytes came; the body bytes received
/// (the head's 12 bytes already read: the rest of the head counts, a few hundred).
fn received(c: &mut TcpStream, whole: u64) -> u64 {
    c.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut sink = vec![0u8; 1 << 16];
    let mut got = 0u64;
    while got <= whole {
        match c.read(&mut sink) {
            Ok(0) => break,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("a slow reader's connection is still open after 120 s")
            }
            Err(_) => break,
            Ok(n) => got += n as u64,
        }
    }
    got.saturating_sub(400)
}

/// Waits (without a deadline that load could beat) until the server closed `c`.
fn until_closed(c: &mut TcpStream) {
    c.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut sink = vec![0u8; 1 << 16];
    loop {
        match c.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

#[test]
fn idle_and_keyless_connections_are_closed_oldest_first_to_make_room() {
    let s = server_with_policy(
        true,
        policy(Limits {
            connections: 32,
            ..patient()
        }),
    );
    let at = addr(&s);
    // 100 connections that send nothing, and 20 that send half a request head.
    let mut idle: Vec<TcpStream> = (0..100).map(|_| TcpStream::connect(&at).unwrap()).collect();
    for _ in 0..20 {
        let mut c = TcpStream::connect(&at).unwrap();
        c.write_all(b"GET /v1/key HTTP/1.1\r\nHost: x\r\n").unwrap();
        idle.push(c);
    }
    // A keyed caller and a probe are answered, with the newest idle ones still open:
    // nobody waited for the header timeout to clear them.
    let (status, _, _) = s.ask(&s.key, "GET", "/v1/key", vec![]);
    assert_eq!(status, 200);
    let (status, _, body) = s.get("/healthz", &[]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let n = idle.len();
    assert!(!closed(&mut idle[n - 1]), "the newest idle one stays open");
    // The oldest made room: closed (by now, or as soon as the server gets to it).
    until_closed(&mut idle[0]);
}

#[test]
fn a_thousand_idle_connections_without_a_key_keep_nobody_out() {
    let s = server_with_policy(true, policy(patient()));
    let at = addr(&s);
    let mut idle: Vec<TcpStream> = (0..1100)
        .map(|_| TcpStream::connect(&at).unwrap())
        .collect();
    let (status, _, _) = s.ask(&s.key, "GET", "/v1/key", vec![]);
    assert_eq!(status, 200);
    // Answered while every idle one is still open: not after their header timeout.
    assert!(idle.iter_mut().all(|c| !closed(c)));
}

/// `--header-timeout` is kept: a server given a second closes a connection that sent
/// nothing, and one that sent half a request head, while a server given an hour keeps
/// its idle one open (opened first: at a timeout both ignored, it would close first).
#[test]
fn a_head_that_does_not_arrive_within_the_header_timeout_closes_its_connection() {
    let hour = server_with_policy(false, policy(patient()));
    let second = server_with_policy(
        false,
        policy(Limits {
            header_timeout: Duration::from_secs(1),
            ..Limits::DEFAULT
        }),
    );
    let mut kept = TcpStream::connect(addr(&hour)).unwrap();
    let mut silent = TcpStream::connect(addr(&second)).unwrap();
    let mut half = TcpStream::connect(addr(&second)).unwrap();
    half.write_all(b"GET /v1/key HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    until_closed(&mut silent);
    until_closed(&mut half);
    assert!(
        !closed(&mut kept),
        "the patient server closed its idle connection"
    );
    // A whole request within the second is answered as ever.
    let (status, _, _) = second.ask(&second.key, "GET", "/v1/key", vec![]);
    assert_eq!(status, 200);
}

/// A pack of 24 MiB, more than the kernel's buffers on both ends hold (4 MiB each at
/// most), pushed into the server's repository: its key.
fn big_pack(s: &common::Server) -> String {
    use sealvol_core::progress::Quiet;
    use sealvol_core::push::{PushOptions, push};
    let src = s.dir.path().join("big");
    std::fs::create_dir_all(&src).unwrap();
    let bytes = sealvol_core::testutil::noise(24 << 20, 11);
    std::fs::write(src.join("big.bin"), &bytes).unwrap();
    let vol = sealvol_core::refs::VolumeName::parse("t/big").unwrap();
    push(&s.repo, &src, &vol, &[], &PushOptions::new(&Quiet)).unwrap();
    let file = s
        .repo
        .file_object(&sealvol_core::digest::Hash::of(&bytes))
        .unwrap();
    let id = file.packs[0].hex();
    format!("packs/{}/{id}", &id[..2])
}

/// A request for a pack of the repository over a connection that reads nothing
/// and has a 4 KiB receive window: the server's writes wait for it.
fn slow_reader(s: &common::Server, key: &str, pack: &str) -> TcpStream {
    let at: std::net::SocketAddr = addr(s).parse().unwrap();
    let socket = s.rt.block_on(async {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        sock.connect(at).await.unwrap().into_std().unwrap()
    });
    socket.set_nonblocking(false).unwrap();
    let mut c = socket;
    write!(
        c,
        "GET /v1/objects/{pack} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n"
    )
    .unwrap();
    c
}

#[test]
fn one_keys_slow_readers_hold_only_its_share_and_end_below_the_floor() {
    let s = server_with_policy(
        true,
        policy(Limits {
            per_key: 8,
            floor: Floor {
                rate: 64 << 10,
                window: Duration::from_secs(2),
            },
            ..Limits::DEFAULT
        }),
    );
    let team_b = sealvol_serve::keys::create(&s.place(), "team-b", true, vec![]).unwrap();
    let pack = big_pack(&s);
    let mut held: Vec<TcpStream> = (0..8).map(|_| slow_reader(&s, &s.key, &pack)).collect();
    // Each of the eight has its answer under way: its head came.
    for c in &mut held {
        c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut head = [0u8; 12];
        c.read_exact(&mut head).unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
    }
    // The ninth is past the key's share: 429 at once, with the count and the flag.
    let mut ninth = slow_reader(&s, &s.key, &pack);
    ninth
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut answer = String::new();
    let _ = ninth.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
    assert!(
        answer.contains(
            "has 8 requests under way, its share of this server (serve --requests-per-key 8)"
        ),
        "{answer}"
    );
    // Another key, and a probe, are answered meanwhile.
    let (status, _, _) = s.ask(&team_b, "GET", "/v1/key", vec![]);
    assert_eq!(status, 200);
    assert_eq!(s.get("/healthz", &[]).0, 200);
    // The slow readers took nothing for a window: they are ended mid-answer, and
    // their shares with them. (The kernel may take a whole answer into one client's
    // buffers regardless of its window: that one was served, not held.)
    let whole = s.repo.object_store().size(&pack).unwrap().unwrap();
    let cut = held
        .iter_mut()
        .map(|c| received(c, whole))
        .filter(|got| *got < whole)
        .count();
    assert!(cut >= 6, "only {cut} of 8 slow readers were ended");
    let mut again = slow_reader(&s, &s.key, &pack);
    again
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = [0u8; 12];
    again.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
}
