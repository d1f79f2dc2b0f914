//! The remote engine with the real binary: a `sealvol serve` over a repository, and a
//! CLI elsewhere (its own state, no repository) that works on it with `--remote` and a
//! scoped API key: push, tag, diff, trash and restore, and pull (syncs: server_jobs.rs); and every key
//! that must be refused (none, wrong, revoked, read-only pushing, another namespace)
//! refused with one clear line, leaving the repository as it was.

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
fn keys_that_must_be_refused_are_refused_and_nothing_is_written() {
    let server = Env::new();
    let seed = checkpoint(&server, "seed", 3);
    let pinned = server.push(&seed, "weights/base", &["--tag", "prod"]);
    let served = serve(&server, &[]);
    let v1 = checkpoint(&server, "v1", 4);
    let dir = v1.to_str().unwrap();
    let before = server.ok(&["volume", "versions", "weights/base", "--json"]);

    let none = served.client("");
    let e = none.fails(1, &["volume", "push", dir, "weights/base"]);
    assert!(
        e.contains("needs an API key") && e.contains("SEALVOL_API_KEY"),
        "{e}"
    );
    let wrong = served.client(&format!("sv1:ci:{}", "0".repeat(64)));
    let e = wrong.fails(1, &["volume", "ls"]);
    assert!(e.contains("not known to this server"), "{e}");
    let malformed = served.client("hunter2");
    let e = malformed.fails(1, &["volume", "ls"]);
    assert!(e.contains("malformed"), "{e}");

    let ro = served.client(&key(&server, &["reader", "--read-only"]));
    assert!(ro.ok(&["volume", "ls"]).contains("base"));
    let e = ro.fails(1, &["volume", "push", dir, "weights/base"]);
    assert!(
        e.contains("read-only") && e.contains("may not write"),
        "{e}"
    );
    let e = ro.fails(1, &["volume", "tag", &pinned, "stable"]);
    assert!(e.contains("may not write"), "{e}");

    let elsewhere = served.client(&key(&server, &["elsewhere", "--namespace", "evals"]));
    let e = elsewhere.fails(1, &["volume", "push", dir, "weights/base"]);
    assert!(e.contains("may not"), "{e}");
    assert!(!elsewhere.ok(&["volume", "ls"]).contains("base"));

    let ci_key = key(&server, &["ci", "--namespace", "weights"]);
    let ci = served.client(&ci_key);
    ci.ok(&["volume", "ls"]);
    server.ok(&["key", "revoke", "ci"]);
    let e = ci.fails(1, &["volume", "push", dir, "weights/base"]);
    assert!(e.contains("revoked"), "{e}");
    let listed = server.ok(&["key", "ls"]);
    assert!(
        listed.contains("ci") && listed.contains("read-write in weights"),
        "{listed}"
    );
    assert!(
        !listed.contains(&ci_key[ci_key.len() - 64..]),
        "a key is never shown again"
    );

    // None of it sealed anything, and no key writes the repository's settings or
    // collects garbage but the admin's.
    assert_eq!(
        server.ok(&["volume", "versions", "weights/base", "--json"]),
        before
    );
    let admin = std::fs::read_to_string(server.state.join("serve/admin.key")).unwrap();
    let e = served
        .client(&key(&server, &["gc-try", "--namespace", "weights"]))
        .fails(1, &["volume", "gc"]);
    assert!(e.contains("may not"), "{e}");
    served
        .client(admin.trim())
        .ok(&["volume", "gc", "--no-wait"]);

    let e = ci.fails(1, &["--remote", "ftp://host", "volume", "ls"]);
    assert!(e.contains("--remote") && e.contains("http://"), "{e}");
    let e = server.fails(1, &["key", "create", "Bad Name"]);
    assert!(e.contains("Bad Name"), "{e}");
    let e = server.fails(1, &["key", "create", "reader"]);
    assert!(e.contains("already a key named reader"), "{e}");
    let e = server.fails(1, &["key", "revoke", "nobody"]);
    assert!(e.contains("no key named nobody"), "{e}");
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

/// Small files have no chunk lists (docs/FORMAT.md, "Small files"): a version of many
/// of them pushed on the server pulls back whole through it for a key scoped to its
/// namespace, which may not read the pack indexes that hold them; the server answers
/// for their lists. A key of another namespace gets none of them.
#[test]
fn small_files_pushed_beside_the_server_pull_through_it_for_a_scoped_key() {
    let server = Env::new();
    let src = server.path("evalset");
    for i in 0..300 {
        write(
            &src.join(format!("part-{}/row-{i:03}.txt", i / 100)),
            format!("{i}\n").as_bytes(),
        );
    }
    write(&src.join("embeddings.bin"), &noise(2 << 20, 5));
    let pinned = server.push(&src, "evals/tiny", &[]);
    let lists = common::walk_files(&server.repo.join("files")).len();
    assert_eq!(lists, 1, "only the large file has a chunk list");
    let served = serve(&server, &[]);

    let reader = served.client(&key(
        &server,
        &["reader", "--namespace", "evals", "--read-only"],
    ));
    let out = reader.path("out");
    reader.ok(&["volume", "pull", &pinned, out.to_str().unwrap()]);
    assert_same_tree(&src, &out);

    // Pushed through the server by a key of the namespace: still no list per file.
    let writer = served.client(&key(&server, &["writer", "--namespace", "evals"]));
    let more = writer.path("more");
    for i in 0..200 {
        write(
            &more.join(format!("rows/{i:03}.txt")),
            format!("more {i}\n").as_bytes(),
        );
    }
    let pinned2 = writer.push(&more, "evals/more", &[]);
    assert_eq!(
        common::walk_files(&server.repo.join("files")).len(),
        1,
        "a push through the server stored lists for small files"
    );
    let out2 = reader.path("out2");
    reader.ok(&["volume", "pull", &pinned2, out2.to_str().unwrap()]);
    assert_same_tree(&more, &out2);
    server.ok(&["volume", "verify", "--read-data"]);

    let elsewhere = served.client(&key(&server, &["elsewhere", "--namespace", "weights"]));
    let e = elsewhere.fails(
        1,
        &[
            "volume",
            "pull",
            &pinned,
            elsewhere.path("o").to_str().unwrap(),
        ],
    );
    assert!(e.contains("out of scope") || e.contains("may not"), "{e}");
    // Asked by name, a small file's list is refused to it too.
    let small = blake3_hex(b"7\n");
    let path = format!("/v1/objects/files/{}/{small}", &small[..2]);
    let other_key = key(&server, &["elsewhere2", "--namespace", "weights"]);
    let (status, _) = common::servers::get_as(&served.addr, Some(&other_key), &path);
    assert_eq!(status, 403);
    // Its own namespace's key gets the list the server makes for it.
    let own_key = key(&server, &["reader2", "--namespace", "evals", "--read-only"]);
    let (status, body) = common::servers::get_as(&served.addr, Some(&own_key), &path);
    assert_eq!(status, 200);
    assert!(body.starts_with(b"SVFILE02"), "{body:?}");
}

fn blake3_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
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
