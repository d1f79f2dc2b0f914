//! The remote engine with the real binary: a `sealvol serve` over a repository, and a
//! CLI elsewhere (its own state, no repository) that works on it with `--remote` and a
//! scoped API key: push, tag, diff, trash and restore, and pull through the server as
//! its read peer (syncs: server_jobs.rs); tags on a bucket's own versions; a namespace's
//! quota as `settings` shows it. Keys refused and small files through the server are
//! tested in process: `engine/serve/tests/remote.rs`.

mod common;

use common::servers::{Moto, key, serve};
use common::{Env, assert_same_tree, noise, write};
use serde_json::Value;

fn checkpoint(env: &Env, name: &str, seed: u64) -> std::path::PathBuf {
    let dir = env.path(name);
    write(&dir.join("model.safetensors"), &noise(6 << 20, seed));
    write(&dir.join("config.json"), b"{\"layers\": 2}\n");
    dir
}

#[test]
fn a_training_job_elsewhere_pushes_tags_diffs_deletes_and_restores_through_the_remote() {
    let server = Env::new();
    let other = checkpoint(&server, "other", 9);
    server.push(&other, "other/x", &[]);
    let served = serve(&server, &[]);
    let ci = served.client(&key(&server, &["ci", "--namespace", "weights"]));

    let v1 = checkpoint(&ci, "v1", 1);
    let pinned1 = ci.push(
        &v1,
        "weights/run-7",
        &["--tag", "prod", "--label", "step=100"],
    );
    // Labels travel with the seal; the server keeps them.
    assert!(
        server
            .ok(&["volume", "versions", "weights/run-7"])
            .contains("step=100")
    );
    // The same digest the files have anywhere, and there on the server.
    let digest = ci.ok(&["digest", v1.to_str().unwrap()]);
    assert!(pinned1.ends_with(digest.trim()), "{pinned1} vs {digest}");
    assert_eq!(
        server
            .ok(&["volume", "resolve", "weights/run-7:prod"])
            .trim(),
        pinned1
    );

    // A tag with an expiry, moved through the server, which checks it against its clock.
    ci.ok(&["volume", "tag", &pinned1, "preview", "--expires", "7d"]);
    let tags: Value =
        serde_json::from_str(&server.ok(&["volume", "tags", "weights/run-7", "--json"])).unwrap();
    let preview = tags["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "preview")
        .unwrap();
    assert!(preview["expires"].as_str().is_some(), "{tags}");
    ci.ok(&["volume", "untag", "weights/run-7:preview"]);

    // A fine-tune: only what changed goes up.
    let v2 = ci.path("v2");
    let mut w = std::fs::read(v1.join("model.safetensors")).unwrap();
    w[5 << 20..].copy_from_slice(&noise(1 << 20, 2));
    write(&v2.join("model.safetensors"), &w);
    write(&v2.join("config.json"), b"{\"layers\": 2}\n");
    let pushed: Value = serde_json::from_str(&ci.ok(&[
        "volume",
        "push",
        v2.to_str().unwrap(),
        "weights/run-7",
        "--json",
    ]))
    .unwrap();
    let pinned2 = pushed["ref"].as_str().unwrap().to_string();
    assert!(pushed["new_bytes"].as_u64().unwrap() < 3 << 20, "{pushed}");
    ci.ok(&["volume", "tag", &pinned2, "prod"]);
    let diff = ci.ok(&["volume", "diff", &pinned1, &pinned2]);
    assert!(diff.contains("model.safetensors"), "{diff}");
    let history = ci.ok(&["volume", "tags", "weights/run-7", "--history"]);
    assert!(history.contains("prod"), "{history}");

    // The key sees its namespace only.
    let ls = ci.ok(&["volume", "ls"]);
    assert!(ls.contains("run-7") && !ls.contains("other"), "{ls}");
    let e = ci.fails(1, &["volume", "versions", "other/x"]);
    assert!(e.contains("may not"), "{e}");

    // Delete and restore, through the remote.
    ci.ok(&["volume", "delete", &pinned1, "--yes"]);
    let trash = ci.ok(&["volume", "trash"]);
    assert!(
        trash.contains(&pinned1[pinned1.len() - 12..]) || trash.contains("weights/run-7"),
        "{trash}"
    );
    ci.ok(&["volume", "restore", &pinned1]);
    assert_eq!(server.ok(&["volume", "resolve", &pinned1]).trim(), pinned1);

    // Pulled back anywhere, byte for byte; and the server's repository is whole.
    let out = ci.path("out");
    let pulled: Value = serde_json::from_str(&ci.ok(&[
        "volume",
        "pull",
        &pinned2,
        out.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    assert_same_tree(&v2, &out);
    // Through the server's own cache tier: the remote engine is the pull's peer.
    assert!(pulled["tiers"]["peer_bytes"].as_u64() > Some(0), "{pulled}");
    assert_eq!(pulled["tiers"]["origin_chunks"], 0, "{pulled}");
    server.ok(&["volume", "verify", "--read-data"]);
}

#[test]
fn a_remote_engine_over_a_bucket_moves_tags_by_the_buckets_own_versions() {
    // Tags move by compare-and-swap on the bucket's own versions (ETags), which the
    // remote passes to the client and back as they are.
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let mut server = Env::new();
    server.vars = moto.repo_vars("s3://models/remote");
    server.ok(&["init"]);
    let served = serve(&server, &[]);
    let ci = served.client(&key(&server, &["ci", "--namespace", "weights"]));
    let v1 = checkpoint(&ci, "v1", 5);
    let pinned1 = ci.push(&v1, "weights/b", &["--tag", "prod"]);
    let v2 = checkpoint(&ci, "v2", 6);
    let pinned2 = ci.push(&v2, "weights/b", &["--tag", "prod"]);
    ci.ok(&["volume", "tag", &pinned1, "prod"]);
    assert_eq!(
        server.ok(&["volume", "resolve", "weights/b:prod"]).trim(),
        pinned1
    );
    let history = server.ok(&["volume", "tags", "weights/b", "--history", "--json"]);
    assert!(
        history.contains(&pinned2[pinned2.len() - 16..]),
        "{history}"
    );
}

/// A namespace's quota, set as the server starts: a push past it through `--remote` is
/// refused with the quota, the usage and what frees space, and nothing is sealed;
/// `settings` shows the usage against it; another namespace pushes on.
#[test]
fn a_push_past_its_namespaces_quota_is_refused_and_settings_show_the_usage() {
    let env = Env::new();
    env.ok(&["init"]);
    let served = serve(&env, &["--quota", "team-a=1M"]);
    let a = served.client(&key(&env, &["a", "--namespace", "team-a"]));
    let b = served.client(&key(&env, &["b", "--namespace", "team-b"]));
    let dir = env.path("m");
    write(&dir.join("model.bin"), &noise(3 << 20, 41));
    let e = a.fails(1, &["volume", "push", dir.to_str().unwrap(), "team-a/m"]);
    assert!(
        e.contains("namespace team-a would pass its quota of 1.0 MiB: it stores 0 B"),
        "{e}"
    );
    // Its hint as this remote session must paste it.
    assert!(
        e.contains(&format!("`sealvol --remote {} volume gc`", served.url())),
        "{e}"
    );
    assert!(!env.ok(&["volume", "ls"]).contains("team-a/m"));
    b.ok(&["volume", "push", dir.to_str().unwrap(), "team-b/m"]);
    let shown = env.ok(&["settings"]);
    assert!(
        shown.contains("quota      team-a: 0 B of 1.0 MiB (0%)"),
        "{shown}"
    );
    // Raised: the push goes through, and the usage shows it.
    env.ok(&["settings", "--quota", "team-a=10M"]);
    a.ok(&["volume", "push", dir.to_str().unwrap(), "team-a/m"]);
    let shown: Value = serde_json::from_str(&env.ok(&["settings", "--json"])).unwrap();
    let used = shown["quotas"][0]["used_bytes"].as_u64().unwrap();
    assert!((3 << 20..(3 << 20) + 65536).contains(&used), "{shown}");
    // Through the server, a key sees the quotas of its own namespaces.
    env.ok(&["settings", "--quota", "team-b=1G"]);
    let theirs = a.ok(&["settings"]);
    assert!(
        theirs.contains("quota      team-a: 3.0 MiB of 10.0 MiB"),
        "{theirs}"
    );
    assert!(!theirs.contains("team-b"), "{theirs}");
    // Not even the settings object names another namespace's quota to this key.
    let a_key = a
        .vars
        .iter()
        .find(|(k, _)| k == "SEALVOL_API_KEY")
        .map(|(_, v)| v.clone())
        .unwrap();
    let (status, body) =
        common::servers::get_as(&served.addr, Some(&a_key), "/v1/objects/sealvol.repo");
    assert_eq!(status, 200);
    let config = String::from_utf8_lossy(&body);
    assert!(
        config.contains("\"team-a\"") && !config.contains("team-b"),
        "{config}"
    );
    // And in the server's metrics.
    let (status, body) = common::servers::get_as(&served.addr, Some(&served.key), "/metrics");
    assert_eq!(status, 200);
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains(&format!(
            "sealvol_serve_quota_bytes{{namespace=\"team-a\"}} {}",
            10 << 20
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "sealvol_serve_quota_used_bytes{{namespace=\"team-a\"}} {used}"
        )),
        "{text}"
    );
    // Bad quotas: one line each, nothing changed.
    for (arg, says) in [
        ("team-a", "write NS=SIZE"),
        ("team-a=0", "a quota of 0 takes nothing"),
        ("team-a=lots", "lots"),
        ("Team A=1G", "namespace"),
    ] {
        let e = env.fails(2, &["settings", "--quota", arg]);
        assert!(e.contains(says), "{arg}: {e}");
    }
}
