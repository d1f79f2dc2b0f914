//! Deployments through the real binary: check, pin and drift over deployment files
//! that disagree; rollback round trips that leave every other byte of a file as it
//! was (comments, anchors, flow style, quoting, CRLF); every bad input refused with
//! the file untouched; deploy mount of two volumes on real FUSE; and the startup cache
//! saved and restored, with and without one.

mod common;

use std::os::unix::fs::PermissionsExt;

use common::{Env, write};
use serde_json::Value;

/// `w/q` with three versions (v1 oldest), `x/lora` with one, and tags: `w/q:prod` on
/// v3, `x/lora:prod`. Returns the pinned refs of w/q's versions.
fn repo_with_history(env: &Env) -> Vec<String> {
    let mut refs = Vec::new();
    for i in 1..=3 {
        let src = env.path(&format!("w{i}"));
        write(&src.join("weights.bin"), format!("weights {i}").as_bytes());
        refs.push(env.push(&src, "w/q", &[]));
        // Sealed times are to the second or finer; keep the order unmistakable.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    env.ok(&["volume", "tag", &refs[2], "prod"]);
    let l = env.path("lora");
    write(&l.join("adapter.bin"), b"lora");
    env.push(&l, "x/lora", &["--tag", "prod"]);
    refs
}

fn digest_of(r: &str) -> &str {
    &r[r.find("@").unwrap() + 1..]
}

fn json_of(out: &str) -> Value {
    serde_json::from_str(out).expect("json")
}

#[test]
fn check_pin_and_drift_on_three_deployments_that_disagree() {
    let env = Env::new();
    let refs = repo_with_history(&env);
    let dir = env.path("deploy");
    std::fs::create_dir_all(dir.join("staging")).unwrap();
    std::fs::create_dir_all(dir.join("prod")).unwrap();
    std::fs::create_dir_all(dir.join("canary")).unwrap();
    let staging = dir.join("staging/config.yaml");
    let prod = dir.join("prod/config.yaml");
    let canary = dir.join("canary/config.yaml");
    std::fs::write(
        &staging,
        "sealvol:\n  mounts:\n    - ref: w/q:prod   # follows the tag\n      path: /app/w\n    - ref: x/lora:prod\n      path: /app/l\n",
    )
    .unwrap();
    std::fs::write(
        &prod,
        format!(
            "sealvol:\n  mounts:\n    - ref: {}\n      path: /app/w\n",
            refs[1]
        ),
    )
    .unwrap();
    std::fs::write(
        &canary,
        format!(
            "sealvol:\n  mounts:\n    - ref: {}\n      path: /app/w\n",
            refs[2]
        ),
    )
    .unwrap();
    let (s, p, c) = (
        staging.to_str().unwrap(),
        prod.to_str().unwrap(),
        canary.to_str().unwrap(),
    );
    // Check: warnings only, so it passes, unless --strict.
    let v = json_of(&env.ok(&["deploy", "check", s, p, c, "--json"]));
    assert_eq!(v["errors"], 0);
    assert_eq!(v["warnings"], 2, "{v}");
    assert_eq!(v["ok"], true);
    // The folder above them finds all three, a level down (it said it held none).
    let d = dir.to_str().unwrap();
    let folder = json_of(&env.ok(&["deploy", "check", d, "--json"]));
    assert_eq!(
        (&folder["warnings"], &folder["errors"]),
        (&v["warnings"], &v["errors"])
    );
    let files = |v: &Value| {
        let mut f: Vec<String> = v["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["file"].as_str().unwrap().to_string())
            .collect();
        f.sort();
        f
    };
    assert_eq!(files(&folder), files(&v));
    let drift = env.ok(&["deploy", "drift", d]);
    assert!(
        drift.contains("canary") && drift.contains("prod"),
        "{drift}"
    );
    let text = env.ok(&["deploy", "check", s]);
    assert!(
        text.contains(
            ":3:12: warning: unpinned: new replicas may serve a different version than running ones"
        ),
        "{text}"
    );
    assert!(
        text.contains(digest_of(&refs[2])),
        "the digest it resolves to now: {text}"
    );
    let err = env.fails(1, &["deploy", "check", s, "--strict"]);
    assert!(err.contains("--strict"), "{err}");
    // Drift: w/q disagrees three ways (v3 by tag, v2, v3 pinned); x/lora is only in staging.
    let v = json_of(&env.ok(&[
        "deploy",
        "drift",
        dir.join("staging").to_str().unwrap(),
        p,
        c,
        "--json",
    ]));
    let names: Vec<&str> = v["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "staging/config.yaml",
            "prod/config.yaml",
            "canary/config.yaml"
        ]
    );
    let w = v["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["volume"] == "w/q")
        .unwrap();
    assert_eq!(w["agree"], false);
    let served: Vec<&str> = w["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[0]["digest"].as_str().unwrap())
        .collect();
    assert_eq!(
        served,
        [
            digest_of(&refs[2]),
            digest_of(&refs[1]),
            digest_of(&refs[2])
        ]
    );
    let l = v["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["volume"] == "x/lora")
        .unwrap();
    assert_eq!(l["agree"], true);
    assert_eq!(l["cells"][1].as_array().unwrap().len(), 0);
    let table = env.ok(&["deploy", "drift", s, p, c]);
    let row = table.lines().find(|l| l.contains("w/q")).unwrap();
    assert!(row.starts_with('≠'), "{table}");
    assert!(
        row.contains(&format!("{}*", &digest_of(&refs[2])[3..15])),
        "{table}"
    );
    // --exit-code: 1 when they disagree.
    assert_eq!(
        env.run(&["deploy", "drift", s, p, c, "--exit-code"])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        env.run(&["deploy", "drift", c, "--exit-code"])
            .status
            .code(),
        Some(0)
    );
    // Pin: the tags become the digests they resolve to; then --strict passes.
    let before = std::fs::read_to_string(&staging).unwrap();
    env.ok(&["deploy", "pin", s, "--all"]);
    let after = std::fs::read_to_string(&staging).unwrap();
    assert!(
        after.contains(&format!(
            "ref: w/q@{}   # follows the tag",
            digest_of(&refs[2])
        )),
        "{after}"
    );
    assert_eq!(after.lines().count(), before.lines().count());
    env.ok(&["deploy", "check", s, "--strict"]);
    // A dry run writes nothing; nothing left to pin says so.
    let out = env.run(&["deploy", "pin", s, "--all"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to do"));
}

#[test]
fn bad_deployment_inputs_are_refused_and_change_nothing() {
    let env = Env::new();
    let refs = repo_with_history(&env);
    let write_yaml = |name: &str, text: &str| {
        let p = env.path(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "malformed.yaml",
            "sealvol:\n  mounts:\n    - ref: 'open\n".into(),
            "malformed.yaml:3:12: malformed YAML",
        ),
        (
            "tabs.yaml",
            "sealvol:\n\tmounts: []\n".into(),
            "tabs.yaml:2:",
        ),
        (
            "shape.yaml",
            "sealvol:\n  mounts: {ref: a/b}\n".into(),
            "`mounts:` must be a list, not a mapping",
        ),
        ("nokey.yaml", "app: 1\n".into(), "has no `sealvol:` block"),
        (
            "unknown.yaml",
            "sealvol:\n  mounts:\n    - {ref: 'nope/vol:prod', path: /w}\n".into(),
            "no volume nope/vol",
        ),
        (
            "digest.yaml",
            format!(
                "sealvol:\n  mounts:\n    - {{ref: 'w/q@b3:{}', path: /w}}\n",
                "0".repeat(64)
            ),
            "no version",
        ),
        (
            "badref.yaml",
            "sealvol:\n  mounts:\n    - {ref: 'W/Q:prod', path: /w}\n".into(),
            "invalid namespace",
        ),
    ];
    for (name, text, want) in &cases {
        let p = write_yaml(name, text);
        let err = env.fails(1, &["deploy", "check", p.to_str().unwrap()]);
        let out =
            String::from_utf8_lossy(&env.run(&["deploy", "check", p.to_str().unwrap()]).stdout)
                .to_string();
        assert!(
            out.contains(want) || err.contains(want),
            "{name}: {out}{err}"
        );
        // Rollback of the same file fails too, and leaves it as it was; except that
        // --to mends a pin of a digest that is not there (someone pinned a typo).
        let out = env.run(&[
            "deploy",
            "rollback",
            p.to_str().unwrap(),
            "w/q",
            "--to",
            &refs[0],
            "--yes",
        ]);
        if *name == "digest.yaml" {
            assert!(out.status.success(), "{name}");
            assert!(
                std::fs::read_to_string(&p)
                    .unwrap()
                    .contains(digest_of(&refs[0]))
            );
            continue;
        }
        assert!(!out.status.success(), "{name}");
        assert_eq!(
            &std::fs::read_to_string(&p).unwrap(),
            text,
            "{name} untouched"
        );
    }
    // An ambiguous prefix: two real versions sharing 8 hex digits.
    let (a, b) = common::colliding_contents();
    for (i, c) in [a, b].iter().enumerate() {
        let d = env.path(&format!("amb{i}"));
        write(&d.join("f"), c.as_bytes());
        env.push(&d, "w/amb", &[]);
    }
    let amb = env.ok(&["volume", "versions", "w/amb", "--json"]);
    let prefix = &json_of(&amb)["versions"][0]["digest"].as_str().unwrap()[3..11].to_string();
    let p = write_yaml(
        "amb.yaml",
        &format!("sealvol:\n  mounts:\n    - {{ref: 'w/amb@{prefix}', path: /w}}\n"),
    );
    let out = env.run(&["deploy", "check", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("matches 2 versions"));
    // A ref to a version in the trash.
    env.ok(&["volume", "delete", &refs[0], "--yes"]);
    let trashed = write_yaml(
        "trash.yaml",
        &format!(
            "sealvol:\n  mounts:\n    - {{ref: '{}', path: /w}}\n",
            refs[0]
        ),
    );
    let out = env.run(&["deploy", "check", trashed.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("is in the trash"),
        "{out:?}"
    );
    let good = write_yaml(
        "good.yaml",
        &format!(
            "sealvol:\n  mounts:\n    - {{ref: '{}', path: /w}}\n",
            refs[2]
        ),
    );
    let good_text = std::fs::read_to_string(&good).unwrap();
    let g = good.to_str().unwrap();
    let err = env.fails(
        1,
        &["deploy", "rollback", g, "w/q", "--to", &refs[0], "--yes"],
    );
    assert!(err.contains("is in the trash"), "{err}");
    // No choice given; a volume the file does not mount; an unsupported rollback target.
    let err = env.fails(2, &["deploy", "rollback", g, "w/q", "--yes"]);
    assert!(err.contains("--previous, or --to REF"), "{err}");
    let err = env.fails(
        1,
        &["deploy", "rollback", g, "x/lora", "--previous", "--yes"],
    );
    assert!(
        err.contains("mounts no volume x/lora") && err.contains("it mounts w/q"),
        "{err}"
    );
    let err = env.fails(
        1,
        &[
            "deploy",
            "rollback",
            g,
            "w/q",
            "--to",
            "x/lora:prod",
            "--yes",
        ],
    );
    assert!(err.contains("not of w/q"), "{err}");
    // Without a terminal and without --yes: refused, nothing written.
    let err = env.fails(2, &["deploy", "rollback", g, "w/q", "--to", &refs[1]]);
    assert!(err.contains("--yes"), "{err}");
    // --previous on the oldest live version.
    let oldest = write_yaml(
        "oldest.yaml",
        &format!(
            "sealvol:\n  mounts:\n    - {{ref: '{}', path: /w}}\n",
            refs[1]
        ),
    );
    let err = env.fails(
        1,
        &[
            "deploy",
            "rollback",
            oldest.to_str().unwrap(),
            "w/q",
            "--previous",
            "--yes",
        ],
    );
    assert!(err.contains("there is none before it"), "{err}");
    // A read-only file, and one that vanished.
    std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o444)).unwrap();
    let err = env.fails(
        1,
        &["deploy", "rollback", g, "w/q", "--to", &refs[1], "--yes"],
    );
    assert!(err.contains("is read-only"), "{err}");
    assert_eq!(std::fs::read_to_string(&good).unwrap(), good_text);
    let gone = env.path("gone.yaml");
    let err = env.fails(
        1,
        &[
            "deploy",
            "rollback",
            gone.to_str().unwrap(),
            "w/q",
            "--previous",
            "--yes",
        ],
    );
    assert!(err.contains("gone.yaml"), "{err}");
    let empty = env.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    std::fs::write(empty.join("other.yaml"), "app: 1\n").unwrap();
    let err = env.fails(1, &["deploy", "check", empty.to_str().unwrap()]);
    assert!(err.contains("holds no deployment files"), "{err}");
    // No stray temporary files anywhere.
    let strays: Vec<_> = std::fs::read_dir(env.path(""))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".sealvol-"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
}

#[test]
fn cache_save_and_restore_with_and_without_a_cache() {
    let env = Env::new();
    let key = "NVIDIA H100 80GB HBM3 / torch 2.5.1+cu124";
    let out_dir = env.path("restored");
    // No cache yet (not even the volume): a clean no-op, exit 0, one line.
    let out = env.run(&[
        "cache",
        "restore",
        "caches/qwen",
        out_dir.to_str().unwrap(),
        "--key",
        key,
    ]);
    // The repository must exist: create it by a push elsewhere first.
    assert!(
        !out.status.success(),
        "no repository is an error, not a missing cache"
    );
    let seed = env.path("seed");
    write(&seed.join("x"), b"x");
    env.push(&seed, "other/v", &[]);
    let out = env.run(&[
        "cache",
        "restore",
        "caches/qwen",
        out_dir.to_str().unwrap(),
        "--key",
        key,
    ]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no startup cache for this key"), "{stderr}");
    assert!(!out_dir.exists(), "nothing made");
    // Save, then restore into a fresh folder.
    let kernels = env.path("kernels");
    write(&kernels.join("triton/abc.cubin"), &common::noise(50_000, 1));
    write(&kernels.join("graphs/g.pt"), b"graph");
    let saved = json_of(&env.ok(&[
        "cache",
        "save",
        kernels.to_str().unwrap(),
        "caches/qwen",
        "--key",
        key,
        "--json",
    ]));
    assert_eq!(saved["sealed_new"], true);
    let tag = saved["tag"].as_str().unwrap().to_string();
    assert!(
        tag.starts_with("cache-nvidia-h100-80gb-hbm3-torch-2.5.1-cu-") && tag.len() <= 63,
        "{tag}"
    );
    let restored = json_of(&env.ok(&[
        "cache",
        "restore",
        "caches/qwen",
        out_dir.to_str().unwrap(),
        "--key",
        key,
        "--json",
    ]));
    assert_eq!(restored["restored"], true);
    common::assert_same_tree(&kernels, &out_dir);
    // Another key has no cache.
    let other = env.path("other");
    let out = env.run(&[
        "cache",
        "restore",
        "caches/qwen",
        other.to_str().unwrap(),
        "--key",
        "A100",
    ]);
    assert!(out.status.success());
    // Saving unchanged contents writes nothing to the repository.
    let before = common::walk_files(&env.repo);
    let again = json_of(&env.ok(&[
        "cache",
        "save",
        kernels.to_str().unwrap(),
        "caches/qwen",
        "--key",
        key,
        "--json",
    ]));
    assert_eq!(again["sealed_new"], false);
    assert_eq!(again["tag_moved"], false);
    assert_eq!(common::walk_files(&env.repo), before);
    // Bad keys and names.
    for bad in ["", "a\nb"] {
        let err = env.fails(
            1,
            &[
                "cache",
                "save",
                kernels.to_str().unwrap(),
                "caches/qwen",
                "--key",
                bad,
            ],
        );
        assert!(err.contains("cache key"), "{err}");
    }
    env.fails(
        1,
        &[
            "cache",
            "restore",
            "Caches/Qwen",
            out_dir.to_str().unwrap(),
            "--key",
            key,
        ],
    );
}

#[test]
fn deploy_mount_mounts_two_volumes_under_a_root() {
    if !common::fuse_available() {
        return;
    }
    let env = Env::new();
    let refs = repo_with_history(&env);
    let file = env.path("config.yaml");
    std::fs::write(
        &file,
        format!("sealvol:\n  mounts:\n    - ref: {}\n      path: /app/weights\n    - ref: x/lora:prod\n      path: /app/lora\n", refs[1]),
    )
    .unwrap();
    let root = env.path("root");
    let f = file.to_str().unwrap();
    let out = env.run(&["deploy", "mount", f, "--root", root.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("tag prod resolved now"),
        "the tag resolved once, and printed: {said}"
    );
    // One line per volume, then how to end them all.
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 3, "{said}");
    assert!(
        lines[..2].iter().all(|l| l.starts_with("mounted vol:")),
        "{said}"
    );
    assert_eq!(
        lines[2],
        format!(
            "`sealvol deploy unmount {f} --root {}` ends them",
            root.display()
        )
    );
    // `volume mounts` shows the pinned ref as given, its digest short.
    let mounts = env.ok(&["volume", "mounts"]);
    assert!(!mounts.contains(&refs[1][refs[1].len() - 40..]), "{mounts}");
    assert!(mounts.lines().all(|l| l.chars().count() < 150), "{mounts}");
    assert_eq!(
        std::fs::read(root.join("app/weights/weights.bin")).unwrap(),
        b"weights 2"
    );
    assert_eq!(
        std::fs::read(root.join("app/lora/adapter.bin")).unwrap(),
        b"lora"
    );
    env.ok(&["deploy", "unmount", f, "--root", root.to_str().unwrap()]);
    assert!(!root.join("app/weights/weights.bin").exists());
    // --json: the keys docs/JSON.md gives `deploy mount`.
    let v = json_of(&env.ok(&[
        "deploy",
        "mount",
        f,
        "--root",
        root.to_str().unwrap(),
        "--json",
    ]));
    let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["file", "mounts"]);
    assert_eq!(v["mounts"][1]["ref"], "x/lora:prod");
    assert!(
        v["mounts"][1]["resolved"]
            .as_str()
            .unwrap()
            .starts_with("vol:x/lora@b3:")
    );
    env.ok(&["deploy", "unmount", f, "--root", root.to_str().unwrap()]);
    // The startup cache, mounted instead of copied.
    let kernels = env.path("kernels");
    write(&kernels.join("k.cubin"), b"kernel");
    env.ok(&[
        "cache",
        "save",
        kernels.to_str().unwrap(),
        "caches/k",
        "--key",
        "H100",
    ]);
    let at = env.path("cachemount");
    env.ok(&[
        "cache",
        "restore",
        "caches/k",
        at.to_str().unwrap(),
        "--key",
        "H100",
        "--mount",
    ]);
    assert_eq!(std::fs::read(at.join("k.cubin")).unwrap(), b"kernel");
    env.ok(&["volume", "unmount", at.to_str().unwrap()]);
    // A file whose second ref does not resolve mounts nothing.
    std::fs::write(
        &file,
        format!("sealvol:\n  mounts:\n    - ref: {}\n      path: /app/weights\n    - ref: x/lora:gone\n      path: /app/lora\n", refs[1]),
    )
    .unwrap();
    let err = env.fails(1, &["deploy", "mount", f, "--root", root.to_str().unwrap()]);
    assert!(
        err.contains("no tag gone") && err.contains("nothing was mounted"),
        "{err}"
    );
    assert!(!root.join("app/weights/weights.bin").exists());
}

/// What `deploy check` and `deploy rollback` print. Every hint check prints is a
/// command that works as printed (`deploy pin FILE` alone failed: it needs the volume
/// or --all), and running them leaves nothing unpinned; a check of a pin in the trash
/// says so and exits 1. A rollback says what `--previous` means and that an anchor's
/// aliases change with it. (The rewrites themselves: `engine/deploy/tests/rollback.rs`.)
#[test]
fn what_deploy_check_and_rollback_print_works_as_printed() {
    let env = Env::new();
    repo_with_history(&env);
    let file = env.path("deploy/prod/config.yaml");
    write(
        &file,
        b"sealvol:\n  mounts:\n    - ref: w/q:prod\n      path: /app/w\n    - ref: x/lora\n      path: /app/l\n",
    );
    let f = file.to_str().unwrap();
    let v = json_of(&env.ok(&["deploy", "check", f, "--json"]));
    let hints: Vec<String> = v["files"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["hint"].as_str())
        .filter_map(|h| h.split('`').nth(1).map(str::to_string))
        .collect();
    assert_eq!(hints.len(), 2, "{v}");
    for h in &hints {
        let words: Vec<&str> = h.split_whitespace().collect();
        assert_eq!(words[0], "sealvol", "{h}");
        env.ok(&words[1..]);
    }
    let after = json_of(&env.ok(&["deploy", "check", f, "--json"]));
    assert_eq!(after["warnings"], 0, "{after}");

    let v3 = json_of(&env.ok(&["volume", "resolve", "w/q:prod", "--json"]));
    let v3 = v3["ref"].as_str().unwrap();
    let anchored = env.path("anchor.yaml");
    write(
        &anchored,
        format!(
            "defaults: &weights '{v3}'\nbase: &mount\n  path: /w\nsealvol:\n  mounts:\n    - <<: *mount\n      ref: *weights\n"
        )
        .as_bytes(),
    );
    let a = anchored.to_str().unwrap();
    let out = env.run(&["deploy", "rollback", a, "w/q", "--previous", "--yes"]);
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("anchor &weights"), "{said}");
    assert!(
        said.contains("--previous: the version of w/q sealed just before the one pinned now, by seal time, not the file's own history"),
        "{said}"
    );
    // Back to v3, which then goes to the trash: check says so, and exits 1.
    env.ok(&["deploy", "rollback", a, "w/q", "--to", v3, "--yes"]);
    env.ok(&["volume", "delete", v3, "--untag", "--yes"]);
    let out = env.run(&["deploy", "check", a]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("is in the trash"));
}

/// kubernetes-validate (strict) on one manifest; its objects and failures.
fn kube_validate(path: &std::path::Path) -> Value {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/csi/manifests.py");
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg("--validate")
        .arg(path)
        .output()
        .expect("python3 with kubernetes-validate: run scripts/test.sh, which installs it");
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("manifests.py: {}", String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn deploy_k8s_renders_pinned_inline_volumes_that_kubernetes_accepts() {
    let env = Env::new();
    let refs = repo_with_history(&env);
    let file = env.path("svc/config.yaml");
    write(
        &file,
        format!(
            "image: x\nsealvol:\n  mounts:\n    - ref: {}\n      path: /app/weights\n    - ref: vol:x/lora:prod\n      path: \"/app/lora: v2\"\n    - ref: vol:w/q:prod\n      path: /app/current\n",
            refs[0]
        )
        .as_bytes(),
    );
    let before = std::fs::read(&file).unwrap();
    let lora = env.ok(&["volume", "resolve", "vol:x/lora:prod"]);
    let lora = lora.trim();

    let j = json_of(&env.ok(&["deploy", "k8s", file.to_str().unwrap(), "--json"]));
    let vols = j["volumes"].as_array().unwrap();
    let mounts = j["volumeMounts"].as_array().unwrap();
    assert_eq!(vols.len(), 3);
    // Every ref pinned: the tag resolved now, the pin as written.
    let refs_out: Vec<&str> = vols
        .iter()
        .map(|v| v["csi"]["volumeAttributes"]["ref"].as_str().unwrap())
        .collect();
    assert_eq!(refs_out, [refs[0].as_str(), lora, refs[2].as_str()]);
    for v in vols {
        assert_eq!(v["csi"]["driver"], "csi.sealvol.dev");
        assert_eq!(v["csi"]["readOnly"], true);
    }
    // Two volumes of one name get two pod volume names, each mount its own.
    assert_eq!(vols[0]["name"], "sealvol-w-q");
    assert_eq!(vols[2]["name"], "sealvol-w-q-2");
    assert_eq!(mounts[1]["mountPath"], "/app/lora: v2");
    for (v, m) in vols.iter().zip(mounts) {
        assert_eq!(v["name"], m["name"]);
        assert_eq!(m["readOnly"], true);
        assert_eq!(m["mountPropagation"], "HostToContainer");
    }

    // The YAML, pasted into a Deployment, passes Kubernetes' own schemas (strict).
    let yaml = env.ok(&["deploy", "k8s", file.to_str().unwrap()]);
    assert!(
        yaml.contains("resolved now: vol:x/lora:prod (tag prod"),
        "{yaml}"
    );
    assert!(yaml.contains("vol:w/q:prod (tag prod"), "{yaml}");
    let indent = |s: &str, n: usize| {
        s.lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{}{l}\n", " ".repeat(n)))
            .collect::<String>()
    };
    let (volumes, mounts_yaml) = yaml.split_at(yaml.find("\nvolumeMounts:").unwrap() + 1);
    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: svc\nspec:\n  selector:\n    matchLabels: {{app: svc}}\n  template:\n    metadata:\n      labels: {{app: svc}}\n    spec:\n      containers:\n        - name: svc\n          image: x\n{}{}",
        indent(mounts_yaml, 10),
        indent(volumes, 6)
    );
    let manifest = env.path("deployment.yaml");
    write(&manifest, deployment.as_bytes());
    let v = kube_validate(&manifest);
    assert_eq!(v["failures"], serde_json::json!([]), "{deployment}");
    assert_eq!(v["objects"], serde_json::json!(["Deployment/svc"]));
    // The validator does fail a wrong field: the control.
    write(
        &manifest,
        deployment
            .replace("readOnly: true", "readonly: true")
            .as_bytes(),
    );
    assert_eq!(
        kube_validate(&manifest)["failures"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // The config file stays the one source of truth: not a byte changed.
    assert_eq!(std::fs::read(&file).unwrap(), before);

    // A mount inside another (read-only) one fails at pod start: refused with check's
    // words, rendered with --no-check, which the YAML says.
    write(
        &file,
        format!(
            "sealvol:\n  mounts:\n    - ref: {}\n      path: /app\n    - ref: {}\n      path: /app/lora\n",
            refs[0], refs[2]
        )
        .as_bytes(),
    );
    let out = env.run(&["deploy", "k8s", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("config.yaml:6:") && err.contains("/app/lora is inside the mount on /app"),
        "{err}"
    );
    let yaml = env.ok(&["deploy", "k8s", file.to_str().unwrap(), "--no-check"]);
    assert!(yaml.contains("# not checked (--no-check)"), "{yaml}");
    assert!(yaml.contains("mountPath: \"/app/lora\""), "{yaml}");

    // A ref that does not resolve: one line naming it, nothing rendered.
    write(
        &file,
        b"sealvol:\n  mounts:\n    - ref: vol:w/q:staging\n      path: /app/w\n",
    );
    let out = env.run(&["deploy", "k8s", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("staging") && err.contains("config.yaml:3"),
        "{err}"
    );
}
