//! Mounts made by the real binary in tests: made in the background, unmounted on drop,
//! and their published counters read back.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{Env, noise, write};

/// Unmounts on drop, so a failing test never leaves a mount behind.
pub struct Mounted<'a> {
    pub env: &'a Env,
    pub dir: PathBuf,
}

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        if is_mounted(&self.dir) {
            let _ = self
                .env
                .run(&["volume", "unmount", "--lazy", self.dir.to_str().unwrap()]);
        }
    }
}

pub fn is_mounted(dir: &Path) -> bool {
    let d = dir.canonicalize().unwrap_or(dir.to_path_buf());
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(d.to_str().unwrap()))
}

pub fn mount<'a>(env: &'a Env, reference: &str, dir: &Path, extra: &[&str]) -> Mounted<'a> {
    fs::create_dir_all(dir).unwrap();
    let cache = env.path("cache");
    let mut args = vec!["volume", "mount", reference, dir.to_str().unwrap()];
    // The test's shared node cache, unless it names one of its own.
    if !extra.contains(&"--cache") {
        args.extend(["--cache", cache.to_str().unwrap()]);
    }
    args.extend_from_slice(extra);
    env.ok(&args);
    assert!(is_mounted(dir), "mount returned before the mount was ready");
    Mounted {
        env,
        dir: dir.to_path_buf(),
    }
}

pub fn mounts_json(env: &Env) -> Vec<serde_json::Value> {
    let v: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "mounts", "--json"])).unwrap();
    v["mounts"].as_array().expect("{\"mounts\": [...]}").clone()
}

/// Waits until `volume mounts` shows counters that satisfy `f` (published every second).
pub fn wait_stats(
    env: &Env,
    dir: &Path,
    f: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    wait_record(env, dir, |m| f(&m["stats"]))
}

/// Waits until the mount's whole record (`volume mounts --json`) satisfies `f`, for at
/// most 10 s; returns it either way, for the caller's assertion to show.
pub fn wait_record(
    env: &Env,
    dir: &Path,
    f: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let m = mounts_json(env)
            .into_iter()
            .find(|m| m["dir"] == dir.to_str().unwrap())
            .expect("the mount is listed");
        if f(&m) || Instant::now() > deadline {
            return m;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A `.safetensors` file of `n` tensors of 512 KiB each, as safetensors writes it.
pub fn write_safetensors(path: &Path, n: usize, seed: u64) -> Vec<u8> {
    let tensor = 512 << 10;
    let mut header = String::from(r#"{"__metadata__":{"format":"pt"}"#);
    for i in 0..n {
        header += &format!(
            r#","layers.{i}.weight":{{"dtype":"BF16","shape":[{}],"data_offsets":[{},{}]}}"#,
            tensor / 2,
            i * tensor,
            (i + 1) * tensor
        );
    }
    header.push('}');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&noise(n * tensor, seed));
    write(path, &out);
    out
}

/// Maps `path` and copies it out page by page, as a loader's page faults read it.
pub fn read_mapped(path: &Path) -> Vec<u8> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    // SAFETY: a read-only shared mapping of a file nobody changes, unmapped below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
    // SAFETY: the mapping is `len` readable bytes until munmap.
    let out = unsafe { std::slice::from_raw_parts(p as *const u8, len) }.to_vec();
    unsafe { libc::munmap(p, len) };
    out
}
