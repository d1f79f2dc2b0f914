//! The trash through the real binary: what delete, restore and the trash listing print,
//! and bad input refused with a clear error. The engine's behaviour (tags that protect
//! a version, ambiguous prefixes, the window, untag and its undo, a push that brings a
//! version back) is tested in `engine/core/tests/trash.rs`. The retention window is
//! crossed by setting the clock ahead (`SEALVOL_NOW`), never by sleeping.

mod common;

use std::path::PathBuf;

use common::{Env, assert_same_tree, noise, write};
use serde_json::Value;

/// Two versions of `t/v`: `old` (tag prod) and `new` (tag canary), and their folders.
struct Two {
    env: Env,
    old_src: PathBuf,
    old: String,
    new: String,
}

fn two() -> Two {
    let env = Env::new();
    let old_src = env.path("old");
    write(&old_src.join("w.bin"), &noise(2 << 20, 1));
    write(&old_src.join("c.json"), b"{}\n");
    let new_src = env.path("new");
    write(&new_src.join("w.bin"), &noise(2 << 20, 2));
    write(&new_src.join("c.json"), b"{}\n");
    let old = env.push(&old_src, "t/v", &["--tag", "prod"]);
    let new = env.push(&new_src, "t/v", &["--tag", "canary"]);
    Two {
        env,
        old_src,
        old,
        new,
    }
}

/// `vol:t/v@b3:<hex>` → `t/v@<first n hex>`.
fn prefix(pinned: &str, n: usize) -> String {
    let hex = pinned.split("@b3:").nth(1).unwrap();
    format!("t/v@{}", &hex[..n])
}

fn json(env: &Env, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.push("--json");
    serde_json::from_str(&env.ok(&a)).unwrap()
}

fn repo_files(env: &Env) -> Vec<(PathBuf, Vec<u8>)> {
    common::walk_files(&env.repo)
        .into_iter()
        .filter(|p| !p.starts_with(env.repo.join("tmp")))
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect()
}

#[test]
fn delete_then_restore_gives_back_the_same_version_and_bytes() {
    let t = two();
    let env = &t.env;
    let before = json(env, &["volume", "files", &t.old]);
    let out = env.ok(&["volume", "delete", &t.old, "--untag", "--yes"]);
    assert_eq!(out.trim(), t.old);
    // Gone from listings; a pull names the trash and the restore command.
    let versions = env.ok(&["volume", "versions", "t/v"]);
    assert!(!versions.contains(&t.old[8..23]), "{versions}");
    let err = env.fails(
        1,
        &["volume", "pull", &t.old, env.path("p1").to_str().unwrap()],
    );
    assert!(
        err.contains("in the trash") && err.contains("sealvol volume restore"),
        "{err}"
    );
    let ls = json(env, &["volume", "ls"]);
    assert_eq!(ls["volumes"][0]["versions"], 1);
    assert_eq!(ls["volumes"][0]["trashed"], 1);

    // The trash says who, when, how long, how big, and the tags it had.
    let trash = json(env, &["volume", "trash", "t/v"]);
    let item = &trash["trash"][0];
    assert_eq!(item["digest"].as_str().unwrap(), &t.old[8..]);
    assert_eq!(item["tags"], serde_json::json!(["prod"]));
    assert_eq!(item["bytes"], (2 << 20) + 3);
    assert!(item["deleted_by"].as_str().unwrap().contains('@'));
    assert_eq!(item["expired"], false);
    let text = env.ok(&["volume", "trash"]);
    assert!(text.contains("6d 23h") && text.contains("prod"), "{text}");

    let out = env.run(&["volume", "restore", &prefix(&t.old, 12)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), t.old);
    // The undo the delete offered is whole: the tag it removed points back.
    assert!(err.contains("tag(s) prod point at it again"), "{err}");
    assert_eq!(env.ok(&["volume", "resolve", "t/v:prod"]).trim(), t.old);
    assert_eq!(json(env, &["volume", "files", &t.old]), before);
    let pulled = env.path("pulled");
    env.ok(&["volume", "pull", &t.old, pulled.to_str().unwrap()]);
    assert_same_tree(&t.old_src, &pulled);
    env.ok(&["volume", "verify"]);
    assert!(
        json(env, &["volume", "trash"])["trash"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn bad_deletes_and_restores_are_clear_errors_that_change_nothing() {
    let t = two();
    let env = &t.env;
    let before = repo_files(env);
    // A version that does not exist.
    let missing = format!("t/v@{}", "0".repeat(12));
    let err = env.fails(1, &["volume", "delete", &missing, "--yes"]);
    assert!(err.contains("no version"), "{err}");
    env.fails(1, &["volume", "delete", "t/nothing@deadbeef00", "--yes"]);
    // Without a terminal and without --yes there is no one to ask.
    let out = env
        .cmd()
        .args(["volume", "delete", &t.new, "--untag"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--yes"));
    // Restoring one that was never deleted, or that does not exist.
    let err = env.fails(1, &["volume", "restore", &prefix(&t.old, 10)]);
    assert!(
        err.contains("not in the trash: it is a live version"),
        "{err}"
    );
    let err = env.fails(1, &["volume", "restore", &missing]);
    assert!(err.contains("no version") && err.contains("trash"), "{err}");
    // A tag is not something to restore.
    env.fails(1, &["volume", "restore", "t/v:prod"]);
    // The trash of a volume that does not exist is an error, not an empty list.
    let err = env.fails(1, &["volume", "trash", "t/nothing"]);
    assert!(err.contains("no volume t/nothing"), "{err}");
    assert_eq!(
        repo_files(env),
        before,
        "a refused command changed the repository"
    );

    // Deleting one that is already deleted.
    env.ok(&["volume", "delete", &t.new, "--untag", "--yes"]);
    let err = env.fails(1, &["volume", "delete", &t.new, "--yes"]);
    assert!(err.contains("in the trash"), "{err}");
    let err = env.fails(1, &["volume", "restore", "t/v:canary"]);
    assert!(
        err.contains("names a live version") || err.contains("removed"),
        "{err}"
    );
}

/// Two one-file trees whose digests share their first 8 hex digits (the shortest
/// prefix a person may type), found by the birthday bound: about 2^16 tries.
#[test]
fn restore_after_the_window_fails_and_gc_then_purges() {
    let t = two();
    let env = &t.env;
    env.ok(&["volume", "delete", &t.old, "--untag", "--yes"]);
    // Six days on: still restorable. Eight days on: not.
    let soon = later(6);
    let late = later(8);
    let trash: Value =
        serde_json::from_str(&run_at(env, &soon, &["volume", "trash", "--json"])).unwrap();
    assert_eq!(trash["trash"][0]["expired"], false);
    let out = env
        .cmd()
        .env("SEALVOL_NOW", &late)
        .args(["volume", "restore", &prefix(&t.old, 12)])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("restore window") && err.contains("ended"),
        "{err}"
    );
    let text = run_at(env, &late, &["volume", "trash"]);
    assert!(text.contains("expired"), "{text}");
    // A gc at that time purges it; the other version is untouched.
    let report: Value = serde_json::from_str(&run_at(
        env,
        &late,
        &["volume", "gc", "--no-wait", "--json"],
    ))
    .unwrap();
    assert_eq!(
        report["report"]["purged"][0]["digest"].as_str().unwrap(),
        &t.old[8..]
    );
    let err = env.fails(1, &["volume", "restore", &prefix(&t.old, 12)]);
    assert!(err.contains("no version"), "{err}");
    env.ok(&["volume", "pull", &t.new, env.path("p").to_str().unwrap()]);
    env.ok(&["volume", "verify"]);
}

fn later(days: u64) -> String {
    common::days_ahead(days)
}

fn run_at(env: &Env, now: &str, args: &[&str]) -> String {
    env.ok_at(now, args)
}

#[test]
fn settings_show_in_info_and_bad_values_are_refused() {
    let t = two();
    let env = &t.env;
    let info: Value = serde_json::from_str(&env.ok(&["info", "--json"])).unwrap();
    assert_eq!(info["retention_secs"], 7 * 86_400);
    assert_eq!(info["gc_grace_secs"], 15 * 60);
    let before = std::fs::read(env.repo.join("sealvol.repo")).unwrap();
    let err = env.fails(1, &["settings", "--gc-grace", "0s"]);
    assert!(err.contains("at least 1s"), "{err}");
    let err = env.fails(1, &["settings", "--retention", "0s"]);
    assert!(err.contains("longer than 0s"), "{err}");
    env.fails(2, &["settings", "--retention", "a week"]);
    assert_eq!(
        std::fs::read(env.repo.join("sealvol.repo")).unwrap(),
        before
    );
    env.ok(&["settings", "--retention", "14d"]);
    let text = env.ok(&["info"]);
    let row = text.lines().find(|l| l.starts_with("retention")).unwrap();
    assert!(row.contains(" 14 days "), "{text}");
    // The window follows the setting: 10 days on, a version deleted now is restorable.
    env.ok(&["volume", "delete", &t.new, "--untag", "--yes"]);
    run_at(env, &later(10), &["volume", "restore", &prefix(&t.new, 12)]);
}
