//! The user's story on realistic data: the checkpoint generator's v1 → v2 (last layers
//! fine-tuned) → v3 (a tensor inserted mid-shard), pushed, deduplicated, pulled back.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{Env, assert_same_tree};

fn shared_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("SEALVOL_SHARED") {
        return PathBuf::from(p);
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared")
}

#[test]
fn checkpoint_series_round_trips_and_deduplicates() {
    let env = Env::new();
    let out = env.path("ck");
    let gen_script = shared_dir().join("bench/gen_checkpoints.py");
    assert!(
        gen_script.exists(),
        "missing {} (set SEALVOL_SHARED)",
        gen_script.display()
    );
    let status = Command::new("python3")
        .arg(&gen_script)
        .arg(&out)
        .args(["--gib", "0.05"])
        .output()
        .expect("python3");
    assert!(
        status.status.success(),
        "gen_checkpoints.py failed (is numpy installed?): {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("expected.json")).unwrap()).unwrap();
    let changed_v2 = expected["changed_tensor_bytes"]["v2"].as_u64().unwrap();
    let bytes_v1 = expected["bytes"]["v1"].as_u64().unwrap();

    let mut growth = Vec::new();
    let mut refs = Vec::new();
    for v in ["v1", "v2", "v3"] {
        let before = env.stored_chunk_bytes();
        refs.push(env.push(&out.join(v), "weights/synthetic", &["--tag", v]));
        growth.push(env.stored_chunk_bytes() - before);
    }
    // v1 stores all of its bytes once.
    assert!(growth[0] >= bytes_v1 * 95 / 100, "v1 stored {}", growth[0]);
    // v2 stores about the tensors that changed, and v3 a little more than v2.
    assert!(
        growth[1] <= changed_v2 * 105 / 100 + (2 << 20),
        "v2 stored {} for {} changed bytes",
        growth[1],
        changed_v2
    );
    assert!(growth[2] <= 2_000_000, "v3 stored {} more", growth[2]);

    for (v, r) in ["v1", "v2", "v3"].iter().zip(&refs) {
        let pulled = env.path(&format!("pulled-{v}"));
        env.ok(&["volume", "pull", r, pulled.to_str().unwrap()]);
        assert_same_tree(&out.join(v), &pulled);
        let d = env.ok(&["digest", out.join(v).to_str().unwrap()]);
        assert_eq!(r.split('@').nth(1).unwrap(), d.trim());
    }
    env.ok(&["volume", "verify"]);

    // The diff names exactly the fine-tuned layers, then exactly the inserted tensor.
    let d: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "diff", &refs[0], &refs[1], "--json"])).unwrap();
    let tuned_from = expected["tuned_layers_from"].as_u64().unwrap();
    let mut changed_layers = std::collections::BTreeSet::new();
    for f in d["files"].as_array().unwrap() {
        for t in f["tensors"].as_array().into_iter().flatten() {
            if t["status"] != "unchanged" {
                let name = t["name"].as_str().unwrap();
                let layer: u64 = name.split('.').nth(2).unwrap().parse().unwrap();
                assert!(layer >= tuned_from, "{name} reported changed");
                changed_layers.insert(layer);
            }
        }
    }
    let layers = expected["layers"].as_u64().unwrap();
    assert_eq!(changed_layers.len() as u64, layers - tuned_from);
    let text = env.ok(&["volume", "diff", &refs[1], &refs[2]]);
    assert!(text.contains("+ model.lora_extra.weight"), "{text}");
    assert_eq!(
        text.matches("    ~ ").count() + text.matches("    - ").count(),
        0,
        "{text}"
    );
}
