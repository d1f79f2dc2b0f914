//! The `sealvol` CLI as a user drives it: push, list, tag, pull, verify, and every bad
//! input from the foundation issue, each with a clear one-line error and nothing lost.
//! What the engine does underneath is tested in process where it lives: a second push,
//! empty folders, a manifest that climbs out and reads through the node cache in
//! `engine/core/tests/pull.rs`; what a push refuses of its folder, a newer format and a
//! missing chunk list in `engine/core/tests/push_input.rs`; the stat cache in
//! `engine/node/tests/stat_cache.rs` (docs/TESTS.md).

#[path = "../common/mod.rs"]
mod common;

mod codes;
mod consistency;
mod json;
mod labels;
mod output;
mod pull;
mod tags;
mod unknown;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::{Env, assert_same_tree, noise, walk_files, write};

fn sample_tree(root: &Path) {
    write(&root.join("config.json"), b"{\"hidden_size\": 1024}\n");
    write(&root.join("weights/model.bin"), &noise(3 << 20, 1));
    write(&root.join("weights/small.bin"), &noise(1000, 2));
    write(&root.join("empty.txt"), b"");
    write(&root.join("deep/a/b/c/d/e/leaf.txt"), b"leaf\n");
    std::fs::create_dir_all(root.join("nothing/here")).unwrap();
    write(&root.join("run.sh"), b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("weights/model.bin", root.join("model.link")).unwrap();
}

#[test]
fn push_pull_round_trip_is_byte_identical() {
    let env = Env::new();
    let src = env.path("src");
    sample_tree(&src);
    let r = env.push(&src, "weights/demo", &["--tag", "prod"]);
    assert!(
        r.starts_with("vol:weights/demo@b3:") && r.len() == "vol:weights/demo@b3:".len() + 64,
        "{r}"
    );

    let digest = env.ok(&["digest", src.to_str().unwrap()]);
    assert_eq!(
        digest.trim(),
        r.split('@').nth(1).unwrap(),
        "digest DIR agrees with push"
    );

    for reference in [
        r.as_str(),
        "weights/demo:prod",
        "weights/demo",
        &r[..r.len() - 50],
    ] {
        let out = env.path(&format!("out-{}", reference.len()));
        env.ok(&["volume", "pull", reference, out.to_str().unwrap()]);
        assert_same_tree(&src, &out);
    }
    assert!(env.ok(&["volume", "verify"]).contains("ok"));
    assert!(env.ok(&["volume", "verify", &r]).contains("ok"));
}

#[test]
fn second_push_writes_nothing_and_listings_show_the_volume() {
    let env = Env::new();
    let src = env.path("src");
    sample_tree(&src);
    let r1 = env.push(&src, "weights/demo", &[]);
    let stored = env.stored_chunk_bytes();
    let out = env.run(&["volume", "push", src.to_str().unwrap(), "weights/demo"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no new chunks"), "{err}");
    assert!(err.contains("already sealed"), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), r1);
    assert_eq!(env.stored_chunk_bytes(), stored);

    let ls: serde_json::Value = serde_json::from_str(&env.ok(&["volume", "ls", "--json"])).unwrap();
    assert_eq!(ls["volumes"][0]["namespace"], "weights");
    assert_eq!(ls["volumes"][0]["name"], "demo");
    assert_eq!(ls["volumes"][0]["versions"], 1);

    let v: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "versions", "weights/demo", "--json"])).unwrap();
    let v0 = &v["versions"][0];
    assert_eq!(
        format!("vol:weights/demo@{}", v0["digest"].as_str().unwrap()),
        r1
    );
    assert_eq!(v0["files"], 6);
    assert!(v0["new_bytes"].as_u64().unwrap() > 3 << 20);

    let files: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "files", &r1, "--json"])).unwrap();
    let paths: Vec<&str> = files["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&"weights/model.bin") && paths.contains(&"nothing/here"));
    let table = env.ok(&["volume", "files", &r1]);
    assert!(table.contains("model.link -> weights/model.bin"), "{table}");
}

#[test]
fn tags_move_with_history_and_refs_may_be_tags() {
    let env = Env::new();
    let a = env.path("a");
    let b = env.path("b");
    write(&a.join("x"), b"one");
    write(&b.join("x"), b"two");
    let ra = env.push(&a, "ns/vol", &["--tag", "prod"]);
    let rb = env.push(&b, "ns/vol", &["--tag", "canary"]);
    // Point prod at whatever canary names.
    let moved = env.ok(&["volume", "tag", "ns/vol:canary", "prod"]);
    assert_eq!(moved.trim(), rb);
    let tags: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "tags", "ns/vol", "--json"])).unwrap();
    let prod = tags["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "prod")
        .unwrap();
    assert_eq!(
        format!("vol:ns/vol@{}", prod["digest"].as_str().unwrap()),
        rb
    );
    let history = prod["history"].as_array().unwrap();
    assert_eq!(history.len(), 2);
    // Newest move first.
    assert_eq!(
        format!("vol:ns/vol@{}", history[0]["from"].as_str().unwrap()),
        ra
    );
    // Roll back by digest prefix.
    let prefix = &ra[..ra.find("b3:").unwrap() + 3 + 10];
    env.ok(&["volume", "tag", prefix, "prod"]);
    let text = env.ok(&["volume", "tags", "ns/vol", "--history"]);
    assert_eq!(text.matches("->").count(), 2 + 3 + 1, "{text}");
    let pulled = env.path("out");
    env.ok(&["volume", "pull", "ns/vol:prod", pulled.to_str().unwrap()]);
    assert_eq!(std::fs::read(pulled.join("x")).unwrap(), b"one");
}

#[test]
fn malformed_refs_and_names_are_refused_with_a_hint() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("f"), b"x");
    env.push(&src, "ok/vol", &[]);
    let long = "a".repeat(300);
    for bad in [
        "Upper/case",
        "has space/x",
        "../x",
        "ok/..",
        "",
        long.as_str(),
        "ok/vol:Tag",
        "ok/vol@b3:123",
        "ok/vol@b3:xyzxyzxyz",
    ] {
        let err = env.fails(1, &["volume", "files", bad]);
        assert!(err.contains("hint:"), "{bad:?}: {err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("error:")).count(), 1);
    }
    env.fails(1, &["volume", "push", src.to_str().unwrap(), "Bad/Name"]);
    env.fails(
        1,
        &[
            "volume",
            "push",
            src.to_str().unwrap(),
            "ok/vol",
            "--tag",
            "no way",
        ],
    );
    env.fails(1, &["volume", "tag", "ok/vol", "UPPER"]);
    // Nothing was written by the failed commands.
    let v: serde_json::Value = serde_json::from_str(&env.ok(&["volume", "ls", "--json"])).unwrap();
    assert_eq!(v["volumes"].as_array().unwrap().len(), 1);
    // Only clap's own usage errors are exit 2.
    let out = env.run(&["volume", "push"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn missing_digest_and_ambiguous_prefix() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("f"), b"x");
    env.push(&src, "ns/vol", &[]);
    let err = env.fails(
        1,
        &["volume", "files", &format!("ns/vol@b3:{}", "0".repeat(64))],
    );
    assert!(err.contains("no version"), "{err}");
    let err = env.fails(1, &["volume", "files", "ns/vol@deadbeef"]);
    assert!(err.contains("no version"), "{err}");
    env.fails(1, &["volume", "files", "ns/other:prod"]);
    env.fails(1, &["volume", "tags", "ns/other"]);
    env.fails(1, &["volume", "versions", "ns/other"]);
    env.fails(1, &["volume", "tag", "ns/vol:nope", "prod"]);

    // Two real versions whose digests share 8 hex digits: found by a birthday search
    // over one-file versions, so the ambiguity is real, not staged.
    let (a, b) = common::colliding_contents();
    let da = env.path("ca");
    let db = env.path("cb");
    write(&da.join("f"), a.as_bytes());
    write(&db.join("f"), b.as_bytes());
    let ra = env.push(&da, "ns/amb", &[]);
    let rb = env.push(&db, "ns/amb", &[]);
    let prefix = &ra[ra.find("b3:").unwrap() + 3..][..8];
    assert_eq!(prefix, &rb[rb.find("b3:").unwrap() + 3..][..8]);
    let err = env.fails(1, &["volume", "files", &format!("ns/amb@{prefix}")]);
    assert!(
        err.contains("matches 2 versions") && err.contains("more hex digits"),
        "{err}"
    );
}

#[test]
fn unreadable_files_fail_the_push_and_seal_nothing() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("ok"), b"fine");
    write(&src.join("secret"), b"hidden");
    std::fs::set_permissions(src.join("secret"), std::fs::Permissions::from_mode(0o000)).unwrap();
    for d in [env.tmp.path(), &src] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(src.join("ok"), std::fs::Permissions::from_mode(0o644)).unwrap();
    // Root reads anything, so run as an unprivileged user.
    let out = env
        .cmd()
        .env_remove("USER")
        .args(["volume", "push", src.to_str().unwrap(), "ns/vol"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("secret") && err.contains("ermission denied"),
        "{err}"
    );
    assert!(err.contains("hint:"), "{err}");
    let out = env.run(&["volume", "ls", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert!(
        v["volumes"]
            .as_array()
            .map(|a| a.is_empty())
            .unwrap_or(true)
    );
}

trait AsUser {
    fn uid(&mut self, uid: u32) -> &mut Self;
    fn gid(&mut self, gid: u32) -> &mut Self;
}

impl AsUser for std::process::Command {
    fn uid(&mut self, uid: u32) -> &mut Self {
        std::os::unix::process::CommandExt::uid(self, uid)
    }
    fn gid(&mut self, gid: u32) -> &mut Self {
        std::os::unix::process::CommandExt::gid(self, gid)
    }
}

#[test]
fn empty_directories_and_zero_byte_files_round_trip() {
    let env = Env::new();
    let src = env.path("src");
    std::fs::create_dir_all(src.join("a/b/empty")).unwrap();
    write(&src.join("zero"), b"");
    write(&src.join("a/zero2"), b"");
    let r = env.push(&src, "ns/empties", &[]);
    let out = env.path("out");
    env.ok(&["volume", "pull", &r, out.to_str().unwrap()]);
    assert_same_tree(&src, &out);
    // A folder with no file is most often a wrong path: refused, nothing sealed...
    let nothing = env.path("nothing");
    std::fs::create_dir_all(nothing.join("only/folders")).unwrap();
    let err = env.fails(
        1,
        &["volume", "push", nothing.to_str().unwrap(), "ns/empty"],
    );
    assert!(
        err.contains("holds no file: nothing to seal") && err.contains("--allow-empty"),
        "{err}"
    );
    env.fails(1, &["volume", "versions", "ns/empty"]);
    // ... unless asked for: a valid (empty) version.
    std::fs::remove_dir_all(nothing.join("only")).unwrap();
    let r = env.push(&nothing, "ns/empty", &["--allow-empty"]);
    let out = env.path("out2");
    env.ok(&["volume", "pull", &r, out.to_str().unwrap()]);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0);
}

#[test]
fn a_missing_repository_says_how_to_make_one() {
    let env = Env::new();
    let err = env.fails(1, &["volume", "ls"]);
    assert!(
        err.contains("no repository") && err.contains("--repo"),
        "{err}"
    );
    assert!(!env.repo.exists(), "listing must not create a repository");
    // A non-empty directory that is not a repository is never adopted.
    write(&env.repo.join("precious.txt"), b"mine");
    let src = env.path("src");
    write(&src.join("f"), b"x");
    let err = env.fails(1, &["volume", "push", src.to_str().unwrap(), "ns/vol"]);
    assert!(err.contains("not a sealvol repository"), "{err}");
}

#[test]
fn verify_names_each_damaged_object() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &noise(2 << 20, 3));
    write(&src.join("b.bin"), &noise(1 << 20, 4));
    let r = env.push(&src, "ns/vol", &[]);
    let pack = common::walk_files(&env.repo.join("packs"))
        .into_iter()
        .next()
        .unwrap();
    let pack_name = pack.file_name().unwrap().to_str().unwrap().to_string();
    let mut bytes = std::fs::read(&pack).unwrap();
    bytes[100_000] ^= 0x55;
    std::fs::write(&pack, &bytes).unwrap();

    let out = env.run(&["volume", "verify", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    let problems = v["problems"].as_array().unwrap();
    assert!(
        problems
            .iter()
            .any(|p| p["object"].as_str().unwrap().contains(&pack_name)
                && p["problem"]
                    .as_str()
                    .unwrap()
                    .contains("fails its hash check")),
        "{problems:?}"
    );
    assert_eq!(
        v["damaged_versions"][0]["version"], r,
        "{}",
        v["damaged_versions"]
    );

    let err = env.fails(
        1,
        &["volume", "pull", &r, env.path("out").to_str().unwrap()],
    );
    assert!(err.contains("fails its hash check"), "{err}");
    let err = env.fails(1, &["volume", "verify", &r]);
    assert!(err.contains("damaged object(s) found"), "{err}");
}

#[test]
fn push_succeeds_while_another_process_holds_the_state_database() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("f"), &noise(100_000, 1));
    let held = sealvol_node::state::StateDb::open(&env.state, std::time::Duration::ZERO)
        .unwrap()
        .expect("state db");
    let r = env.push(&src, "ns/vol", &[]);
    drop(held);
    assert!(r.starts_with("vol:ns/vol@b3:"));
}

#[test]
fn concurrent_pushes_of_different_and_identical_folders() {
    let env = Env::new();
    let a = env.path("a");
    let b = env.path("b");
    write(&a.join("f"), &noise(6 << 20, 11));
    write(&b.join("f"), &noise(6 << 20, 12));
    let spawn = |dir: &Path, vol: &str| {
        env.cmd()
            .args(["volume", "push", dir.to_str().unwrap(), vol])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let children = vec![
        spawn(&a, "ns/a"),
        spawn(&b, "ns/b"),
        spawn(&a, "ns/same"),
        spawn(&a, "ns/same"),
    ];
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for o in &outs {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let same1 = String::from_utf8_lossy(&outs[2].stdout).trim().to_string();
    let same2 = String::from_utf8_lossy(&outs[3].stdout).trim().to_string();
    assert_eq!(same1, same2);
    let v: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "versions", "ns/same", "--json"])).unwrap();
    assert_eq!(v["versions"].as_array().unwrap().len(), 1);
    env.ok(&["volume", "verify"]);
}

#[test]
fn a_hundred_thousand_small_files_with_bounded_memory() {
    let env = Env::new();
    let src = env.path("src");
    for d in 0..100 {
        let dir = src.join(format!("d{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..1000 {
            std::fs::write(dir.join(format!("f{f:04}.txt")), format!("{d}/{f}\n")).unwrap();
        }
    }
    let child = env
        .cmd()
        .args(["-q", "volume", "push", src.to_str().unwrap(), "ns/many"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rss_kib = children_max_rss_kib();
    assert!(rss_kib < 512 * 1024, "peak RSS {rss_kib} KiB");
    let r = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let files: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "files", &r, "--json"])).unwrap();
    assert_eq!(files["files"].as_array().unwrap().len(), 100_000);
    let d = env.ok(&["digest", src.to_str().unwrap()]);
    assert_eq!(r.split('@').nth(1).unwrap(), d.trim());
}

fn children_max_rss_kib() -> i64 {
    // SAFETY: getrusage only writes into the struct we pass.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    }
}

#[test]
fn every_command_has_help_with_an_example() {
    let env = Env::new();
    for args in [
        vec!["--help"],
        vec!["digest", "--help"],
        vec!["volume", "push", "--help"],
        vec!["volume", "ls", "--help"],
        vec!["volume", "versions", "--help"],
        vec!["volume", "files", "--help"],
        vec!["volume", "tag", "--help"],
        vec!["volume", "tags", "--help"],
        vec!["volume", "pull", "--help"],
        vec!["volume", "verify", "--help"],
        vec!["volume", "diff", "--help"],
        vec!["completions", "--help"],
        vec!["info", "--help"],
    ] {
        let out = env.ok(&args);
        assert!(out.contains("Example"), "{args:?}: {out}");
    }
    let bash = env.ok(&["completions", "bash"]);
    assert!(bash.contains("sealvol") && bash.contains("complete"));
}

#[test]
fn config_file_flags_and_environment_in_that_order() {
    let env = Env::new();
    let cfg_dir = env.path("config/sealvol");
    let from_file = env.path("repo-from-file");
    write(
        &cfg_dir.join("config.toml"),
        format!(
            "repository = {:?}\ntheme = \"light\"\n",
            from_file.to_str().unwrap()
        )
        .as_bytes(),
    );
    let info = |cmd: &mut std::process::Command| {
        String::from_utf8(cmd.arg("info").output().unwrap().stdout).unwrap()
    };
    let mut c = env.cmd();
    c.env_remove("SEALVOL_REPO");
    let text = info(&mut c);
    assert!(
        text.contains(from_file.to_str().unwrap()) && text.contains("light"),
        "{text}"
    );
    let mut c = env.cmd();
    assert!(
        info(&mut c).contains(env.repo.to_str().unwrap()),
        "environment beats the file"
    );
    let mut c = env.cmd();
    c.args(["--repo", "/flag/wins"]);
    assert!(info(&mut c).contains("/flag/wins"));

    write(&cfg_dir.join("config.toml"), b"repostory = 1\n");
    let err = env.fails(1, &["info"]);
    assert!(err.contains("config.toml is invalid"), "{err}");
}

/// `info` shows the theme in effect and where it came from, for each of its sources,
/// and says when the config file it names is not there.
#[test]
fn info_shows_each_setting_and_where_it_came_from() {
    let env = Env::new();
    let row = |out: &str, name: &str| -> Vec<String> {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} row:\n{out}"));
        line.split_whitespace().map(String::from).collect()
    };
    let info = |c: &mut std::process::Command| {
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let mut c = env.cmd();
    c.env_remove("SEALVOL_THEME").arg("info");
    let out = info(&mut c);
    assert!(
        out.lines()
            .next()
            .unwrap()
            .ends_with("config.toml (not there: nothing is read from it)"),
        "{out}"
    );
    assert_eq!(row(&out, "theme"), ["theme", "dark", "default"]);
    assert_eq!(row(&out, "repository")[2], "SEALVOL_REPO");

    let cfg = env.path("config/sealvol/config.toml");
    write(&cfg, b"theme = \"high-contrast\"\n");
    let mut c = env.cmd();
    c.env_remove("SEALVOL_THEME").arg("info");
    let out = info(&mut c);
    assert_eq!(
        out.lines().next().unwrap(),
        format!("config file  {}", cfg.display())
    );
    assert_eq!(
        row(&out, "theme"),
        ["theme", "high-contrast", "config.toml"]
    );

    let mut c = env.cmd();
    c.env("SEALVOL_THEME", "light").arg("info");
    assert_eq!(
        row(&info(&mut c), "theme"),
        ["theme", "light", "SEALVOL_THEME"]
    );

    // The flag wins, before or after the subcommand (it is the console's, given first).
    let mut c = env.cmd();
    c.env("SEALVOL_THEME", "light")
        .args(["--theme", "dark", "info"]);
    assert_eq!(row(&info(&mut c), "theme"), ["theme", "dark", "--theme"]);
    let mut c = env.cmd();
    c.args(["info", "--timeout", "30s", "--repo", "/flag/wins"]);
    let out = info(&mut c);
    assert_eq!(
        row(&out, "timeout"),
        ["timeout", "30", "seconds", "--timeout"]
    );
    assert_eq!(
        row(&out, "repository"),
        ["repository", "/flag/wins", "--repo"]
    );

    let mut c = env.cmd();
    c.env("SEALVOL_THEME", "light").args(["info", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&info(&mut c)).unwrap();
    assert_eq!(v["theme"], "light");
    assert_eq!(v["sources"]["theme"], "SEALVOL_THEME");
    assert_eq!(v["config_file_exists"], true);
}

#[test]
fn a_closed_pipe_ends_the_listing_quietly() {
    let env = Env::new();
    let src = env.path("src");
    for i in 0..3000 {
        write(&src.join(format!("f{i:05}")), b"x");
    }
    let r = env.push(&src, "ns/vol", &[]);
    // `sealvol volume files REF | head -1`, with the reader gone after one line.
    let mut child = env
        .cmd()
        .args(["volume", "files", &r])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{err}");
}

#[test]
fn processes_racing_to_create_a_repository_all_succeed() {
    for round in 0..6 {
        let env = Env::new();
        let dirs: Vec<_> = (0..4)
            .map(|i| {
                let d = env.path(&format!("d{i}"));
                write(&d.join("f"), format!("{round}/{i}").as_bytes());
                d
            })
            .collect();
        let children: Vec<_> = dirs
            .iter()
            .enumerate()
            .map(|(i, d)| {
                env.cmd()
                    .args([
                        "-q",
                        "volume",
                        "push",
                        d.to_str().unwrap(),
                        &format!("ns/v{i}"),
                    ])
                    .stderr(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "round {round}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

#[test]
fn secrets_come_from_stdin_and_are_never_printed() {
    let env = Env::new();
    let value = "hf_Zq8sEcReTvAlUe42";
    let set = |name: &str, input: &str| env.set_secret(name, input);
    let mut seen = String::new();
    let out = set("hf-token", &format!("{value}\n"));
    assert!(out.status.success());
    seen += &String::from_utf8_lossy(&out.stdout);
    seen += &String::from_utf8_lossy(&out.stderr);
    for args in [
        vec!["secret", "ls"],
        vec!["secret", "ls", "--json"],
        vec!["info"],
    ] {
        let out = env.run(&args);
        assert!(out.status.success(), "{args:?}");
        seen += &String::from_utf8_lossy(&out.stdout);
        seen += &String::from_utf8_lossy(&out.stderr);
    }
    assert!(seen.contains("hf-token"), "{seen}");
    let listed: serde_json::Value =
        serde_json::from_str(&env.ok(&["secret", "ls", "--json"])).unwrap();
    assert_eq!(listed["secrets"][0]["bytes"], value.len());

    // The value is refused on the command line, and that refusal does not echo it.
    let out = env.run(&["secret", "set", "other", value]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !err.contains(value),
        "the refusal must not repeat the value: {err}"
    );
    assert!(err.contains("stdin"), "{err}");

    let out = set("Bad/Name", value);
    assert_eq!(out.status.code(), Some(1));
    seen += &String::from_utf8_lossy(&out.stderr);
    let out = set("empty", "");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("printf"));

    env.ok(&["secret", "rm", "hf-token"]);
    let e = env.fails(1, &["secret", "rm", "hf-token"]);
    assert!(e.contains("secret ls"), "{e}");
    assert!(!seen.contains(value), "a secret value was printed: {seen}");
    // Nothing else in the state directory holds it either.
    for f in walk_files(&env.state) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(value),
            "{} holds the value",
            f.display()
        );
    }
}
