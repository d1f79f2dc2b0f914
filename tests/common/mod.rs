//! Helpers shared by the workspace-level tests: a private repository and state
//! directory per test, and a way to run the real `sealvol` binary against them.

#![allow(dead_code)]

pub mod mounts;
pub mod servers;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct Env {
    pub tmp: tempfile::TempDir,
    pub repo: PathBuf,
    pub state: PathBuf,
    /// Set on every command after the defaults: a test of a bucket repository puts
    /// its `SEALVOL_REPO` and AWS settings here.
    pub vars: Vec<(String, String)>,
}

impl Env {
    pub fn new() -> Env {
        let tmp = tempfile::tempdir().expect("tempdir");
        let repo = tmp.path().join("repo");
        let state = tmp.path().join("state");
        Env {
            tmp,
            repo,
            state,
            vars: Vec::new(),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.tmp.path().join(rel)
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_sealvol"));
        c.env("SEALVOL_REPO", &self.repo)
            .env("SEALVOL_STATE", &self.state)
            .env("XDG_CONFIG_HOME", self.tmp.path().join("config"))
            .env("XDG_DATA_HOME", self.tmp.path().join("data"))
            .env("XDG_STATE_HOME", self.tmp.path().join("xstate"))
            .env("XDG_CACHE_HOME", self.tmp.path().join("cache"))
            .env_remove("RUST_LOG");
        for (k, v) in &self.vars {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run sealvol")
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "sealvol {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Runs and expects exit code `code`; returns stderr, checked to be a clear error.
    pub fn fails(&self, code: i32, args: &[&str]) -> String {
        let out = self.run(args);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(
            out.status.code(),
            Some(code),
            "sealvol {args:?}: wanted exit {code}, stderr: {err}"
        );
        let first = err.lines().find(|l| l.starts_with("error:"));
        assert!(first.is_some(), "no `error:` line in {err:?}");
        err
    }

    /// `sealvol secret set NAME` with `value` on stdin; returns the command's output.
    pub fn set_secret(&self, name: &str, value: &str) -> Output {
        use std::io::Write;
        let mut child = self
            .cmd()
            .args(["secret", "set", name])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run sealvol");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(value.as_bytes())
            .expect("write the secret");
        child.wait_with_output().expect("wait for sealvol")
    }

    /// Runs with the trash's clock set to `now` (`SEALVOL_NOW`) and expects success;
    /// returns stdout. Retention tests cross the window this way instead of sleeping.
    pub fn ok_at(&self, now: &str, args: &[&str]) -> String {
        let out = self
            .cmd()
            .env("SEALVOL_NOW", now)
            .args(args)
            .output()
            .expect("run sealvol");
        assert!(
            out.status.success(),
            "sealvol {args:?} at {now} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 stdout")
    }

    /// Pushes `dir` and returns the pinned ref (last line of stdout).
    pub fn push(&self, dir: &Path, volume: &str, extra: &[&str]) -> String {
        let d = dir.to_str().expect("utf-8 path");
        let mut args = vec!["volume", "push", d, volume];
        args.extend_from_slice(extra);
        let out = self.ok(&args);
        out.lines().last().expect("a ref line").to_string()
    }

    pub fn stored_chunk_count(&self) -> u64 {
        let mut total = 0;
        for e in walk_files(&self.repo.join("index")) {
            let bytes = std::fs::read(&e).expect("read index");
            let entries =
                sealvol_core::objects::decode_index("index", &bytes).expect("decode index");
            total += entries.len() as u64;
        }
        total
    }

    pub fn stored_chunk_bytes(&self) -> u64 {
        let mut total = 0;
        for e in walk_files(&self.repo.join("index")) {
            let bytes = std::fs::read(&e).expect("read index");
            let entries =
                sealvol_core::objects::decode_index("index", &bytes).expect("decode index");
            total += entries.iter().map(|e| e.stored_len as u64).sum::<u64>();
        }
        total
    }
}

pub fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// RFC 3339 for `days` from now: a clock for `Env::ok_at`.
pub fn days_ahead(days: u64) -> String {
    let t = std::time::SystemTime::now() + std::time::Duration::from_secs(days * 86_400);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Deterministic incompressible bytes.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(n);
    v
}

pub fn write(path: &Path, bytes: &[u8]) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).expect("mkdir");
    }
    std::fs::write(path, bytes).expect("write");
}

/// Asserts two directory trees hold the same files, bytes, links and modes.
pub fn assert_same_tree(a: &Path, b: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let list = |root: &Path| -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("list").flatten() {
                let p = e.path();
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
                let m = std::fs::symlink_metadata(&p).unwrap();
                if m.is_dir() {
                    out.push((rel, "dir".into()));
                    stack.push(p);
                } else if m.file_type().is_symlink() {
                    out.push((
                        rel,
                        format!("link:{}", std::fs::read_link(&p).unwrap().display()),
                    ));
                } else {
                    let h = blake3::hash(&std::fs::read(&p).unwrap());
                    let x = m.permissions().mode() & 0o111 != 0;
                    out.push((rel, format!("file:{h}:{x}")));
                }
            }
        }
        out.sort();
        out
    };
    assert_eq!(
        list(a),
        list(b),
        "trees differ: {} vs {}",
        a.display(),
        b.display()
    );
}

/// Two one-file contents whose versions' digests share their first 8 hex digits: found
/// by a birthday search, so an ambiguous prefix in a test is real, not staged.
pub fn colliding_contents() -> (String, String) {
    use sealvol_core::digest::{Entry, Hash, version_digest};
    let mut seen = std::collections::HashMap::new();
    for i in 0u64.. {
        let content = format!("candidate {i}\n");
        let d = version_digest(&[Entry::File {
            path: "f".into(),
            size: content.len() as u64,
            hash: Hash::of(content.as_bytes()),
            exec: false,
        }]);
        if let Some(prev) = seen.insert(d.short(8), content.clone()) {
            return (prev, content);
        }
    }
    unreachable!()
}

/// FUSE is here (`/dev/fuse` and `fusermount3`); without it a test skips loudly, and
/// fails when `SEALVOL_REQUIRE_FUSE` is set (CI).
pub fn fuse_available() -> bool {
    let ok = std::path::Path::new("/dev/fuse").exists()
        && std::process::Command::new("fusermount3")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("SEALVOL_REQUIRE_FUSE").is_none(),
            "SEALVOL_REQUIRE_FUSE is set but /dev/fuse or fusermount3 is missing"
        );
        eprintln!("SKIPPED: no /dev/fuse or fusermount3 here; the mount tests did not run");
    }
    ok
}

/// A tmpfs of `size` (like "1M") mounted on a directory of its own for a test,
/// unmounted when dropped (`sealvol_core::testutil::Tmpfs`).
pub struct Tmpfs {
    fs: sealvol_core::testutil::Tmpfs,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    pub fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = sealvol_core::testutil::Tmpfs::mount(dir.path(), size)?;
        Some(Tmpfs { fs, _dir: dir })
    }

    pub fn path(&self) -> &Path {
        self.fs.path()
    }

    pub fn fill(&self) {
        self.fs.fill()
    }
}
