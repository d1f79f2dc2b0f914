//! A `sealvol serve` started by a test, and the servers of `sealvol-testkit` every
//! test of the binary may use.

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};

// Each test binary uses a few of them.
#[allow(unused_imports)]
pub use sealvol_testkit::servers::*;

/// A `sealvol serve` of `env`'s repository and state, on a free loopback port.
pub struct Served {
    child: Child,
    pub addr: String,
    /// The admin key the server made on its first start (or found).
    pub key: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 GET to a server, with `key` if given: status and body.
#[allow(dead_code)]
pub fn get_as(addr: &str, key: Option<&str>, path: &str) -> (u16, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let auth = key.map_or(String::new(), |k| format!("Authorization: Bearer {k}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&all[..at]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, all[at + 4..].to_vec())
}

/// `sealvol key create ARGS` on the server's side; the key it printed.
pub fn key(server: &super::Env, args: &[&str]) -> String {
    let mut all = vec!["key", "create"];
    all.extend_from_slice(args);
    server.ok(&all).trim().to_string()
}

pub fn serve(env: &super::Env, extra: &[&str]) -> Served {
    serve_named(env, "serve-cache", extra)
}

/// A server with its own cache directory, `name`.
pub fn serve_named(env: &super::Env, name: &str, extra: &[&str]) -> Served {
    let cache = env.path(name);
    spawn_serve(env, &["--cache", cache.to_str().unwrap()], extra)
}

/// A server as `sealvol serve` starts with no cache flag: over a local repository, it
/// keeps no chunk cache.
pub fn serve_as_started(env: &super::Env, extra: &[&str]) -> Served {
    spawn_serve(env, &[], extra)
}

fn spawn_serve(env: &super::Env, cache: &[&str], extra: &[&str]) -> Served {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sealvol"));
    // The default cache folder is the test's own, never this machine's.
    cmd.env("XDG_CACHE_HOME", env.path("cache"));
    // A bucket repository comes with its address and keys in `vars`.
    for (k, v) in &env.vars {
        cmd.env(k, v);
    }
    if !env.vars.iter().any(|(k, _)| k == "SEALVOL_REPO") {
        cmd.args(["--repo", env.repo.to_str().unwrap()]);
    }
    let mut child = cmd
        .args(["--state", env.state.to_str().unwrap()])
        .arg("serve")
        .args(cache)
        // A free loopback port, unless the test listens elsewhere.
        .args(match extra.contains(&"--listen") {
            true => &[][..],
            false => &["--listen", "127.0.0.1:0"][..],
        })
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .or_else(|| line.trim().strip_prefix("listening on https://"))
        .unwrap_or_else(|| panic!("first line: {line:?}"))
        .to_string();
    let key = std::fs::read_to_string(env.state.join("serve/admin.key"))
        .expect("serve writes an admin key on its first start")
        .trim()
        .to_string();
    Served { child, addr, key }
}

impl Served {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A CLI on another machine: its own state, no repository, this server's address
    /// and `key` in its environment.
    pub fn client(&self, key: &str) -> super::Env {
        let mut env = super::Env::new();
        env.repo = env.path("no-repository-here");
        env.vars = vec![
            ("SEALVOL_REMOTE".into(), self.url()),
            ("SEALVOL_API_KEY".into(), key.into()),
        ];
        env
    }

    /// The server process's id (its memory, in /proc, for tests of what it holds).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}
