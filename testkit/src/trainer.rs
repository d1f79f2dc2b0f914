//! The scripted trainer, `../shared/bench/gen_training_run.py`: a training run written
//! file by file, as watch mode's tests and benches feed it.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `../shared` beside the repository, or `SEALVOL_SHARED`.
pub fn shared_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("SEALVOL_SHARED") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared")
}

/// Runs the trainer into `out` with `args` to the end: one JSON line per finished
/// checkpoint.
pub fn train(out: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    let script = shared_dir().join("bench/gen_training_run.py");
    assert!(
        script.exists(),
        "missing {} (set SEALVOL_SHARED)",
        script.display()
    );
    let o = Command::new("python3")
        .arg(&script)
        .arg(out)
        .args(args)
        .output()
        .expect("python3");
    assert!(
        o.status.success(),
        "gen_training_run.py failed (is numpy installed?): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}
