//! Every `--json` command prints one object whose top-level keys are the ones
//! docs/JSON.md lists for it; digests carry `b3:`; histories are newest first.

use crate::common::{Env, write};

/// The top-level keys docs/JSON.md gives `command` (the first cell of its row).
const SIGNER_KEY: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../engine/sign/tests/fixtures/signer.key.pem"
);
const SIGNER_PUB: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../engine/sign/tests/fixtures/signer.pub.pem"
);

fn documented_keys(command: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/JSON.md"))
        .expect("docs/JSON.md");
    let row = doc
        .lines()
        // The command whole: `volume verify` is not `volume verify-signature`.
        .find(|l| {
            l.strip_prefix(&format!("| `{command}"))
                .is_some_and(|rest| rest.starts_with([' ', '`']))
        })
        .unwrap_or_else(|| panic!("docs/JSON.md has no row for {command}"));
    let keys = row.split('|').nth(2).expect("a keys cell");
    let mut keys: Vec<String> = keys
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, k)| k.to_string())
        .collect();
    keys.sort();
    keys
}

fn keys_of(v: &serde_json::Value) -> Vec<String> {
    let mut keys: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    keys.sort();
    keys
}

#[test]
fn every_json_output_is_one_object_with_the_documented_keys() {
    let env = Env::new();
    let a = env.path("a");
    write(&a.join("x"), b"1");
    let b = env.path("b");
    write(&b.join("x"), b"2");
    write(&b.join("y"), b"3");
    let ra = env.push(&a, "t/v", &["--tag", "prod"]);
    let restore = format!("t/v@{}", &ra["vol:t/v@b3:".len()..][..12]);
    let (sa, sb) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = env.path("out");
    let so = out.to_str().unwrap();
    env.set_secret("token", "value");
    let deploy = env.path("config.yaml");
    std::fs::write(
        &deploy,
        "sealvol:\n  mounts:\n    - ref: t/v:canary\n      path: /w\n",
    )
    .unwrap();
    let sd = deploy.to_str().unwrap();
    let layout = format!("oci:{}", env.path("layout").display());
    let cases: Vec<(&str, Vec<&str>)> = vec![
        (
            "volume push",
            vec!["volume", "push", sb, "t/v", "--tag", "canary"],
        ),
        ("volume ls", vec!["volume", "ls"]),
        ("volume versions", vec!["volume", "versions", "t/v"]),
        ("volume files", vec!["volume", "files", "t/v:prod"]),
        ("volume resolve", vec!["volume", "resolve", "t/v:prod"]),
        (
            "volume export",
            vec!["volume", "export", "t/v:prod", &layout],
        ),
        ("volume describe", vec!["volume", "describe", "t/v:prod"]),
        ("volume tag", vec!["volume", "tag", "t/v:canary", "stable"]),
        ("volume tags", vec!["volume", "tags", "t/v"]),
        ("volume diff", vec!["volume", "diff", "t/v:prod", "canary"]),
        ("volume pull", vec!["volume", "pull", "t/v:prod", so]),
        ("volume mounts", vec!["volume", "mounts"]),
        ("volume verify", vec!["volume", "verify"]),
        (
            "volume sign",
            vec!["volume", "sign", "t/v:prod", "--key", SIGNER_KEY],
        ),
        (
            "volume verify-signature",
            vec![
                "volume",
                "verify-signature",
                "t/v:prod",
                "--public-key",
                SIGNER_PUB,
            ],
        ),
        (
            "volume signatures",
            vec!["volume", "signatures", "t/v:prod"],
        ),
        ("repair", vec!["repair"]),
        ("jobs ls", vec!["jobs", "ls"]),
        ("secret ls", vec!["secret", "ls"]),
        ("info", vec!["info"]),
        // A server that is not there: a row that says so, not a failure.
        ("peers", vec!["peers", "--peer", "http://127.0.0.1:9"]),
        ("digest", vec!["digest", sa]),
        ("settings", vec!["settings"]),
        ("volume untag", vec!["volume", "untag", "t/v:stable"]),
        (
            "volume delete",
            vec!["volume", "delete", "t/v:prod", "--untag", "--yes"],
        ),
        ("volume trash", vec!["volume", "trash"]),
        ("volume restore", vec!["volume", "restore", &restore]),
        ("deploy check", vec!["deploy", "check", sd]),
        ("deploy drift", vec!["deploy", "drift", sd]),
        (
            "deploy pin",
            vec!["deploy", "pin", sd, "--all", "--dry-run"],
        ),
        (
            "deploy rollback",
            vec!["deploy", "rollback", sd, "t/v", "--to", &restore, "--yes"],
        ),
        (
            "cache save",
            vec!["cache", "save", sa, "t/cache", "--key", "k"],
        ),
        (
            "cache restore",
            vec!["cache", "restore", "t/cache", so, "--key", "other"],
        ),
        ("volume gc", vec!["volume", "gc", "--dry-run"]),
        (
            "volume label",
            vec!["volume", "label", "t/v:prod", "eval=passed"],
        ),
        (
            "volume watch",
            vec!["volume", "watch", sa, "t/w", "--detach", "--settle", "1s"],
        ),
        ("watch ls", vec!["watch", "ls"]),
        ("watch show", vec!["watch", "show", "1"]),
        ("watch logs", vec!["watch", "logs", "1"]),
        // Last: it lets the background agent go idle and end.
        ("watch stop", vec!["watch", "stop", "1"]),
    ];
    for (command, mut args) in cases {
        args.push("--json");
        let text = env.ok(&args);
        let v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{command}: not one JSON document ({e}): {text}"));
        assert_eq!(keys_of(&v), documented_keys(command), "{command}: {text}");
    }
    // `volume delete --untag` removed prod: point it back for what follows.
    env.ok(&["volume", "tag", &ra, "prod"]);

    // Hashes and digests carry b3:, as in the text output.
    let files: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "files", "t/v:prod", "--json"])).unwrap();
    assert!(
        files["files"][0]["hash"]
            .as_str()
            .unwrap()
            .starts_with("b3:")
    );
    // Histories are newest first, in JSON as in the text.
    let tags: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "tags", "t/v", "--json"])).unwrap();
    env.ok(&["volume", "tag", "t/v:canary", "prod"]);
    let tags2: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "tags", "t/v", "--json"])).unwrap();
    let prod = |t: &serde_json::Value| {
        t["tags"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["tag"] == "prod")
            .unwrap()["history"]
            .clone()
    };
    assert_eq!(prod(&tags2)[1], prod(&tags)[0], "the older move moved down");
    assert!(prod(&tags2)[0]["from"].is_string());
    let text = env.ok(&["volume", "tags", "t/v", "--history"]);
    let first_move = text
        .lines()
        .skip_while(|l| !l.starts_with("prod"))
        .nth(1)
        .unwrap();
    assert!(
        !first_move.contains("(new)"),
        "newest first in the text too: {text}"
    );
}

#[test]
fn every_json_flag_has_help_and_every_ref_argument_says_what_a_ref_is() {
    let env = Env::new();
    for sub in [
        "push", "pull", "ls", "versions", "files", "resolve", "describe", "tag", "tags", "diff",
        "mounts", "verify", "delete", "untag", "trash", "restore", "gc",
    ] {
        let help = env.ok(&["volume", sub, "--help"]);
        let json = help.lines().find(|l| l.trim_start().starts_with("--json"));
        assert!(
            json.is_some_and(|l| l.contains("JSON document")),
            "volume {sub} --help: {help}"
        );
    }
    for sub in [
        "mount", "tag", "pull", "verify", "files", "resolve", "describe", "delete", "restore",
    ] {
        let help = env.ok(&["volume", sub, "--help"]);
        let r = help
            .lines()
            .find(|l| l.trim_start().starts_with("[REF]") || l.trim_start().starts_with("<REF>"));
        assert!(
            r.is_some_and(|l| l.contains("NS/NAME")),
            "volume {sub} --help: {help}"
        );
    }
}
