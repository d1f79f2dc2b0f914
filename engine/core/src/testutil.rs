//! Test data shared by the engine crates' tests.

/// Deterministic, incompressible bytes (xorshift); `seed` must not be 0.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A folder `root/name` holding `files` (path, bytes), for a test to push.
pub fn folder(root: &std::path::Path, name: &str, files: &[(&str, Vec<u8>)]) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("a test folder");
    for (f, bytes) in files {
        std::fs::write(dir.join(f), bytes).expect("a test file");
    }
    dir
}

/// A tmpfs of `size` ("1M") mounted on an existing directory for a test, unmounted when
/// dropped: a disk that fills up, for the tests of what a full disk does. `None` where
/// this user cannot mount one; CI runs as root and sets `SEALVOL_REQUIRE_FUSE`, which
/// makes that a failure instead.
pub struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    pub fn mount(dir: &std::path::Path, size: &str) -> Option<Tmpfs> {
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok && std::env::var_os("SEALVOL_REQUIRE_FUSE").is_some() {
            panic!(
                "cannot mount a tmpfs on {} (CI runs as root)",
                dir.display()
            );
        }
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// Fills it to the last block with a file named `fill`.
    pub fn fill(&self) {
        use std::io::Write;
        if let Ok(mut f) = std::fs::File::create(self.0.join("fill")) {
            while f.write_all(&[0u8; 4096]).is_ok() {}
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// A `.safetensors` file holding `tensors` (name, bytes) in order, each a `U8` vector
/// of its bytes' length: what a trainer writes, small.
pub fn safetensors(tensors: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut header = String::from("{");
    let mut data = Vec::new();
    for (i, (name, bytes)) in tensors.iter().enumerate() {
        let (start, end) = (data.len(), data.len() + bytes.len());
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            r#""{name}":{{"dtype":"U8","shape":[{}],"data_offsets":[{start},{end}]}}"#,
            bytes.len()
        ));
        data.extend_from_slice(bytes);
    }
    header.push('}');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&data);
    out
}
