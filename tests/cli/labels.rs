//! Labels after a seal, through the binary: a push of content already sealed says its
//! labels were not applied and prints the command that applies them; `volume label`
//! sets and removes them (listed by `versions` and `describe`, with their history),
//! locally and through a server, where only a key that writes the namespace may. The
//! engine's side (compare-and-swap, damage, gc) is `engine/core/tests/labels.rs`.

use crate::common::servers::{key, serve};
use crate::common::{Env, write};

fn json_of(out: &str) -> serde_json::Value {
    serde_json::from_str(out).expect("json")
}

/// The command a "labels not applied" note offers, as words to run.
fn offered(stderr: &str) -> Vec<String> {
    let line = stderr
        .lines()
        .find(|l| l.contains("add them with"))
        .unwrap_or_else(|| panic!("no command offered: {stderr}"));
    let cmd = line.split('`').nth(1).unwrap();
    shlex::split(cmd).unwrap()
}

#[test]
fn a_label_a_push_could_not_apply_is_said_and_applied_by_the_command_offered() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), b"weights");
    let pinned = env.push(&src, "t/m", &["--label", "step=1000"]);

    // The same files with new labels: the version exists, its labels stay.
    let out = env.run(&[
        "volume",
        "push",
        src.to_str().unwrap(),
        "t/m",
        "--label",
        "step=1000",
        "--label",
        "note=a b",
    ]);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!("labels not applied: {pinned} was already sealed")),
        "{err}"
    );
    let words = offered(&err);
    assert_eq!(words[..4], ["sealvol", "volume", "label", pinned.as_str()]);
    assert_eq!(words[4..], ["note=a b"], "only the one it lacks, one word");
    let j = json_of(&env.ok(&[
        "volume",
        "push",
        src.to_str().unwrap(),
        "t/m",
        "--label",
        "note=a b",
        "--json",
    ]));
    assert_eq!(j["labels_not_applied"]["note"], "a b");

    // Run what was offered: the labels are there, the version the same.
    let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
    let said = env.run(&args);
    let err = String::from_utf8_lossy(&said.stderr);
    assert!(said.status.success(), "{err}");
    assert!(
        err.contains("note=a b, step=1000 (were: step=1000)"),
        "{err}"
    );
    assert_eq!(String::from_utf8_lossy(&said.stdout).trim(), pinned);
    let v = json_of(&env.ok(&["volume", "versions", "t/m", "--json"]));
    assert_eq!(v["versions"][0]["labels"]["note"], "a b");
    assert_eq!(v["versions"].as_array().unwrap().len(), 1);
    let d = json_of(&env.ok(&["volume", "describe", &pinned, "--json"]));
    assert_eq!(d["labels"]["note"], "a b");
    // Pushing once more now says nothing about labels.
    let out = env.run(&[
        "volume",
        "push",
        src.to_str().unwrap(),
        "t/m",
        "--label",
        "note=a b",
    ]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("not applied"));

    // Removed; the history says who did what.
    env.ok(&["volume", "label", "t/m", "--remove", "step"]);
    let shown = env.ok(&["volume", "label", "t/m"]);
    assert!(shown.contains("labels: note=a b"), "{shown}");
    assert!(shown.contains("sealed with: step=1000"), "{shown}");
    assert!(
        shown.contains("removed step") && shown.contains("set note=a b"),
        "{shown}"
    );
    let h = json_of(&env.ok(&["volume", "label", "t/m", "--json"]));
    assert_eq!(h["sealed"]["step"], "1000");
    assert_eq!(h["history"].as_array().unwrap().len(), 2);

    // Bad input: one line each, nothing changed.
    for (args, words) in [
        (
            vec!["volume", "label", "t/m", "--remove", "nope"],
            "has no label nope",
        ),
        (vec!["volume", "label", "t/m", "Bad=1"], "label key"),
        (vec!["volume", "label", "t/m", "novalue"], "has no `=`"),
        (vec!["volume", "label", "t/m", "k=1", "k=2"], "given twice"),
        (vec!["volume", "label", "t/nothing", "k=1"], "t/nothing"),
    ] {
        let e = env.fails(1, &args);
        assert!(e.contains(words), "{args:?}: {e}");
        assert_eq!(e.matches("error:").count(), 1, "{e}");
    }
    let h2 = json_of(&env.ok(&["volume", "label", "t/m", "--json"]));
    assert_eq!(h2, h);
}

#[test]
fn through_a_server_only_a_key_that_writes_the_namespace_changes_labels() {
    let server_env = Env::new();
    let src = server_env.path("src");
    write(&src.join("w.bin"), b"weights");
    let pinned = server_env.push(&src, "t/m", &[]);
    let served = serve(&server_env, &[]);
    let writer = served.client(&key(&server_env, &["w", "--namespace", "t"]));
    let reader = served.client(&key(&server_env, &["r", "--namespace", "t", "--read-only"]));
    let other = served.client(&key(&server_env, &["o", "--namespace", "x"]));

    let e = reader.fails(1, &["volume", "label", &pinned, "eval=passed"]);
    assert!(e.contains("may not") || e.contains("read-only"), "{e}");
    let e = other.fails(1, &["volume", "label", &pinned, "eval=passed"]);
    assert!(!e.contains("eval"), "says nothing of t/m's labels: {e}");
    writer.ok(&["volume", "label", &pinned, "eval=passed"]);
    // Everyone who reads t sees it; the label object is the server's write.
    let v = json_of(&reader.ok(&["volume", "versions", "t/m", "--json"]));
    assert_eq!(v["versions"][0]["labels"]["eval"], "passed");
    let h = json_of(&server_env.ok(&["volume", "label", &pinned, "--json"]));
    assert_eq!(h["labels"]["eval"], "passed");
}
