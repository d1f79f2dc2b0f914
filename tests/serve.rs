//! `sealvol serve` as an operator runs it: the real binary on loopback, asked over HTTP.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use common::Env;

struct Served {
    child: Child,
    addr: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(env: &Env, extra: &[&str]) -> Served {
    let cache = env.path("serve-cache");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sealvol"))
        .args([
            "--repo",
            env.repo.to_str().unwrap(),
            "--state",
            env.state.to_str().unwrap(),
        ])
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--cache",
            cache.to_str().unwrap(),
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("first line: {line:?}"))
        .to_string();
    Served { child, addr }
}

/// One HTTP/1.1 GET: status and body.
fn get(addr: &str, path: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&all[..at]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, all[at + 4..].to_vec())
}

#[test]
fn serve_answers_on_loopback_with_health_and_metrics() {
    let env = Env::new();
    let src = env.path("src");
    common::write(&src.join("w.bin"), &common::noise(1 << 20, 3));
    env.push(&src, "t/served", &[]);
    let s = serve(&env, &["--cache-size", "64M"]);
    assert_eq!(get(&s.addr, "/healthz").0, 200);
    let (status, body) = get(&s.addr, "/metrics");
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.contains("sealvol_serve_origin_fetches_total 0"),
        "{text}"
    );
    let (status, body) = get(&s.addr, &format!("/v1/chunks/{}", "ab".repeat(32)));
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
}

#[test]
fn bad_serve_input_gets_one_clear_line() {
    let env = Env::new();
    let src = env.path("src");
    common::write(&src.join("w.bin"), b"x");
    env.push(&src, "t/served", &[]);
    let e = env.fails(2, &["serve", "--listen", "0.0.0.0:0"]);
    assert!(
        e.contains("not a loopback address") && e.contains("--insecure-http"),
        "{e}"
    );
    let e = env.fails(2, &["serve", "--listen", "localhost"]);
    assert!(e.contains("is not an address"), "{e}");
    let e = env.fails(1, &["serve", "--cache-size", "lots"]);
    assert!(e.contains("lots"), "{e}");
    let missing = Env::new();
    let out = missing.run(&["--repo", missing.path("nowhere").to_str().unwrap(), "serve"]);
    assert!(!out.status.success());
    assert!(!missing.path("nowhere").exists(), "no repository made");
}
