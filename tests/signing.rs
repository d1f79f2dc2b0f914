//! Signed versions against the OpenSSF model-signing tool itself (the PyPI package,
//! installed by scripts/test.sh): sealvol signs, the tool verifies what `volume pull`
//! wrote (and refuses it after a flipped byte); the tool signs the folder, sealvol
//! imports and verifies; every bad input the issue lists is refused by name.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Env, write};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../engine/sign/tests/fixtures")
        .join(name)
}

/// model-signing's verification of `folder` against `sig`: the CLI (`verify key`, which
/// hashes with SHA-256) or the Python API (which takes the hash the signature names).
fn tool_verifies(sig: &Path, folder: &Path, api: bool) -> Result<(), String> {
    let public = fixture("signer.pub.pem");
    let out = if api {
        Command::new("python3")
            .arg("-c")
            .arg("import sys, model_signing\nmodel_signing.verifying.Config().use_elliptic_key_verifier(public_key=sys.argv[1]).verify(sys.argv[2], sys.argv[3])")
            .arg(&public)
            .arg(folder)
            .arg(sig)
            .output()
    } else {
        Command::new("model_signing")
            .args(["verify", "key", "--public_key"])
            .arg(&public)
            .arg("--signature")
            .arg(sig)
            .arg(folder)
            .output()
    }
    .expect("model-signing: run scripts/test.sh, which installs it");
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

/// A small model: a few files, one empty, one in a folder.
fn model(env: &Env, name: &str) -> PathBuf {
    let dir = env.path(name);
    write(&dir.join("config.json"), br#"{"layers": 2}"#);
    write(&dir.join("model.safetensors"), &common::noise(3 << 20, 7));
    write(&dir.join("tok/vocab.txt"), b"a\nb\n");
    write(&dir.join("empty"), b"");
    dir
}

/// The one signature `volume signatures --out` writes of `reference` whose hash is
/// `algorithm`.
fn written(env: &Env, reference: &str, algorithm: &str) -> PathBuf {
    let out = env.path(&format!("sigs-{algorithm}"));
    let j: serde_json::Value = serde_json::from_str(&env.ok(&[
        "volume",
        "signatures",
        reference,
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    let s = j["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["algorithm"] == algorithm)
        .unwrap_or_else(|| panic!("no {algorithm} signature: {j}"));
    PathBuf::from(s["file"].as_str().unwrap())
}

#[test]
fn sealvols_signatures_verify_with_the_tool_on_the_pulled_folder_and_fail_on_a_flipped_byte() {
    let env = Env::new();
    let src = model(&env, "src");
    let pinned = env.push(&src, "t/m", &["--tag", "prod"]);
    let key = fixture("signer.key.pem");
    env.ok(&["volume", "sign", "t/m:prod", "--key", key.to_str().unwrap()]);
    env.ok(&[
        "volume",
        "sign",
        &pinned,
        "--key",
        key.to_str().unwrap(),
        "--sha256",
    ]);
    let pulled = env.path("pulled");
    env.ok(&["volume", "pull", &pinned, pulled.to_str().unwrap()]);

    let b3 = written(&env, &pinned, "blake3");
    let sha = written(&env, &pinned, "sha256");
    tool_verifies(&b3, &pulled, true).unwrap();
    tool_verifies(&sha, &pulled, false).unwrap();
    tool_verifies(&sha, &pulled, true).unwrap();
    // The tool's CLI hashes with SHA-256 whatever the signature says: a BLAKE3
    // signature is for its API (and for sealvol).
    assert!(tool_verifies(&b3, &pulled, false).is_err());
    // And against the version mounted, read through FUSE.
    if common::fuse_available() {
        let mnt = env.path("mnt");
        let m = common::mounts::mount(&env, &pinned, &mnt, &[]);
        tool_verifies(&b3, &m.dir, true).unwrap();
        tool_verifies(&sha, &m.dir, false).unwrap();
    }

    let f = pulled.join("model.safetensors");
    let mut bytes = std::fs::read(&f).unwrap();
    bytes[1 << 20] ^= 1;
    std::fs::write(&f, bytes).unwrap();
    for (sig, api) in [(&b3, true), (&sha, false)] {
        let e = tool_verifies(sig, &pulled, api).unwrap_err();
        assert!(e.contains("model.safetensors"), "{e}");
    }
    let ok = env.ok(&[
        "volume",
        "verify-signature",
        "t/m:prod",
        "--public-key",
        fixture("signer.pub.pem").to_str().unwrap(),
    ]);
    assert!(
        ok.contains("signed by") && ok.contains("signer.pub.pem"),
        "{ok}"
    );
}

#[test]
fn a_signature_the_tool_made_over_the_folder_is_imported_and_verified() {
    let env = Env::new();
    let src = model(&env, "src");
    let pinned = env.push(&src, "t/m", &[]);
    let sig = env.path("model.sig");
    let out = Command::new("model_signing")
        .args(["sign", "key", "--private_key"])
        .arg(fixture("signer.key.pem"))
        .arg("--signature")
        .arg(&sig)
        .arg(&src)
        .output()
        .expect("model-signing: run scripts/test.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.ok(&["volume", "sign", &pinned, "--import", sig.to_str().unwrap()]);
    let j: serde_json::Value = serde_json::from_str(&env.ok(&[
        "volume",
        "verify-signature",
        &pinned,
        "--public-key",
        fixture("other.pub.pem").to_str().unwrap(),
        "--public-key",
        fixture("signer.pub.pem").to_str().unwrap(),
        "--json",
    ]))
    .unwrap();
    assert_eq!(j["valid"], true, "{j}");
    assert_eq!(j["signatures"][0]["hash"], "sha256");
}

#[test]
fn wrong_keys_corrupt_foreign_and_incomplete_signatures_and_bad_key_files_are_refused() {
    let env = Env::new();
    let src = model(&env, "src");
    let pinned = env.push(&src, "t/m", &[]);
    let key = fixture("signer.key.pem");
    let public = fixture("signer.pub.pem");
    let other = fixture("other.pub.pem");
    // Unsigned: refused, saying so and how to sign.
    let e = env.fails(
        1,
        &[
            "volume",
            "verify-signature",
            &pinned,
            "--public-key",
            public.to_str().unwrap(),
        ],
    );
    assert!(
        e.contains("has no signature") && e.contains("volume sign"),
        "{e}"
    );
    env.ok(&["volume", "sign", &pinned, "--key", key.to_str().unwrap()]);
    // A wrong key.
    let e = env.fails(
        1,
        &[
            "volume",
            "verify-signature",
            &pinned,
            "--public-key",
            other.to_str().unwrap(),
        ],
    );
    assert!(
        e.contains("another key") && e.contains("other.pub.pem"),
        "{e}"
    );
    // Key files that are not P-256 PEM: refused with how to make one.
    for bad in [
        fixture("p384.key.pem"),
        public.clone(),
        env.path("missing.pem"),
    ] {
        let e = env.fails(
            1,
            &["volume", "sign", &pinned, "--key", bad.to_str().unwrap()],
        );
        assert!(e.contains(bad.to_str().unwrap()), "{e}");
    }
    let e = env.fails(
        1,
        &[
            "volume",
            "verify-signature",
            &pinned,
            "--public-key",
            fixture("p384.pub.pem").to_str().unwrap(),
        ],
    );
    assert!(e.contains("not an EC P-256 public key"), "{e}");

    // A signature of another version (the tool's, over the fixture model), one whose
    // file list misses a file or has one more: not stored.
    let foreign = fixture("model.sha256.sig");
    let e = env.fails(
        1,
        &[
            "volume",
            "sign",
            &pinned,
            "--import",
            foreign.to_str().unwrap(),
        ],
    );
    assert!(e.contains("is not of") && e.contains("not signed"), "{e}");
    let fewer = model(&env, "fewer");
    std::fs::remove_file(fewer.join("empty")).unwrap();
    let more = model(&env, "more");
    write(&more.join("extra.bin"), b"x");
    for (folder, says) in [
        (&fewer, "not signed: empty"),
        (&more, "not in the version: extra.bin"),
    ] {
        let sig = env.path("tool.sig");
        let _ = std::fs::remove_file(&sig);
        let out = Command::new("model_signing")
            .args(["sign", "key", "--private_key"])
            .arg(&key)
            .arg("--signature")
            .arg(&sig)
            .arg(folder)
            .output()
            .unwrap();
        assert!(out.status.success());
        let e = env.fails(
            1,
            &["volume", "sign", &pinned, "--import", sig.to_str().unwrap()],
        );
        assert!(e.contains(says), "{e}");
    }
    // A corrupted or cut signature file.
    let good = std::fs::read(foreign).unwrap();
    let cut = env.path("cut.sig");
    std::fs::write(&cut, &good[..good.len() / 2]).unwrap();
    let e = env.fails(
        1,
        &["volume", "sign", &pinned, "--import", cut.to_str().unwrap()],
    );
    assert!(e.contains("signature file"), "{e}");
    // Stored signatures damaged in the repository never pass.
    let stored = env.repo.join("signatures/t/m");
    for entry in walk(&stored) {
        let mut b = std::fs::read(&entry).unwrap();
        let i = b.len() / 2;
        b[i] ^= 1;
        std::fs::write(&entry, b).unwrap();
    }
    env.fails(
        1,
        &[
            "volume",
            "verify-signature",
            &pinned,
            "--public-key",
            public.to_str().unwrap(),
        ],
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    common::walk_files(dir)
        .into_iter()
        .map(|p| dir.join(p))
        .collect()
}

/// config.toml with `[trust]` naming `keys` for namespace `ns`.
fn trust(env: &Env, ns: &str, keys: &[&str]) {
    let list: Vec<String> = keys
        .iter()
        .map(|k| format!("{:?}", fixture(k).to_str().unwrap()))
        .collect();
    write(
        &env.path("config/sealvol/config.toml"),
        format!("[trust]\n{ns} = [{}]\n", list.join(", ")).as_bytes(),
    );
}

#[test]
fn the_policy_refuses_what_a_trusted_key_did_not_sign_at_pull_mount_deploy_mount_rollback_and_cache_restore()
 {
    let env = Env::new();
    let signed = env.push(&model(&env, "a"), "t/m", &["--tag", "prod"]);
    write(&env.path("b/config.json"), b"{}");
    let unsigned = env.push(&env.path("b"), "t/m", &["--tag", "canary"]);
    let key = fixture("signer.key.pem");
    env.ok(&["volume", "sign", &signed, "--key", key.to_str().unwrap()]);
    let before = env.ok(&["info"]);
    assert!(
        before.contains("none: mounts and pulls need no signature"),
        "{before}"
    );
    trust(&env, "t", &["signer.pub.pem"]);
    // `info` shows the policy in force, and where it comes from.
    let info = env.ok(&["info"]);
    assert!(
        info.contains("trust t")
            && info.contains("need a signature by")
            && info.contains("signer.pub.pem"),
        "{info}"
    );
    let j: serde_json::Value = serde_json::from_str(&env.ok(&["info", "--json"])).unwrap();
    assert!(
        j["trust"]["t"][0]
            .as_str()
            .unwrap()
            .ends_with("signer.pub.pem")
    );
    assert!(j["trust_error"].is_null());

    // pull: refused in one line naming the version, the key tried and why; nothing written.
    let into = env.path("pulled-unsigned");
    let e = env.fails(1, &["volume", "pull", "t/m:canary", into.to_str().unwrap()]);
    assert!(e.contains(&unsigned), "{e}");
    assert!(
        e.contains("not signed by a key config.toml trusts for t"),
        "{e}"
    );
    assert!(
        e.contains("signer.pub.pem") && e.contains("it has no signature"),
        "{e}"
    );
    assert_eq!(
        e.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{e}"
    );
    assert!(!into.exists(), "nothing written");
    env.ok(&[
        "volume",
        "pull",
        "t/m:prod",
        env.path("pulled").to_str().unwrap(),
    ]);

    // cache restore pulls (or mounts) through the same check: a saved startup cache
    // no trusted key signed is not restored.
    write(&env.path("compiled/engine.plan"), b"plan");
    env.ok(&[
        "cache",
        "save",
        env.path("compiled").to_str().unwrap(),
        "t/cache",
        "--key",
        "gpu-a",
    ]);
    let restored = env.path("restored");
    let e = env.fails(
        1,
        &[
            "cache",
            "restore",
            "t/cache",
            restored.to_str().unwrap(),
            "--key",
            "gpu-a",
        ],
    );
    assert!(
        e.contains("vol:t/cache@") && e.contains("it has no signature"),
        "{e}"
    );
    assert!(!restored.join("engine.plan").exists());

    // deploy mount: one unsigned volume and nothing mounts; deploy rollback to it is
    // refused before anything is asked or written.
    let deploy = env.path("deploy.yaml");
    let text = format!(
        "sealvol:\n  mounts:\n    - ref: {signed}\n      path: /w\n    - ref: vol:t/m:canary\n      path: /x\n"
    );
    write(&deploy, text.as_bytes());
    let root = env.path("root");
    // deploy check says so before a deploy: an error where the ref is written.
    let out = env.run(&["deploy", "check", deploy.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("deploy.yaml:5:") && said.contains("it has no signature"),
        "{said}"
    );
    assert!(
        !said.contains("deploy.yaml:3:"),
        "the signed one passes: {said}"
    );
    // deploy k8s makes the same check: no manifest for a version a node would refuse,
    // unless --no-check, which the output says.
    let out = env.run(&["deploy", "k8s", deploy.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(out.stdout.is_empty(), "nothing rendered");
    assert!(
        e.contains("deploy.yaml:5:")
            && e.contains("it has no signature")
            && e.contains("--no-check"),
        "{e}"
    );
    let yaml = env.ok(&["deploy", "k8s", deploy.to_str().unwrap(), "--no-check"]);
    assert!(
        yaml.contains("# not checked (--no-check): 1 problem(s)") && yaml.contains("volumeMounts:"),
        "{yaml}"
    );
    if common::fuse_available() {
        let e = env.fails(
            1,
            &[
                "deploy",
                "mount",
                deploy.to_str().unwrap(),
                "--root",
                root.to_str().unwrap(),
            ],
        );
        assert!(
            e.contains("deploy.yaml:5:") && e.contains("config.toml trusts for t"),
            "{e}"
        );
        assert!(
            common::mounts::mounts_json(&env).is_empty(),
            "nothing mounted"
        );

        // volume mount: refused, then the signed one mounts.
        let dir = env.path("mnt");
        std::fs::create_dir_all(&dir).unwrap();
        let e = env.fails(1, &["volume", "mount", &unsigned, dir.to_str().unwrap()]);
        assert!(e.contains("it has no signature"), "{e}");
        assert!(!common::mounts::is_mounted(&dir));
        let m = common::mounts::mount(&env, "t/m:prod", &dir, &[]);
        assert_eq!(
            std::fs::read(m.dir.join("config.json")).unwrap(),
            br#"{"layers": 2}"#
        );
        drop(m);
    }
    let single = env.path("single.yaml");
    write(
        &single,
        format!("sealvol:\n  mounts:\n    - ref: {signed}\n      path: /w\n").as_bytes(),
    );
    let e = env.fails(
        1,
        &[
            "deploy",
            "rollback",
            single.to_str().unwrap(),
            "t/m",
            "--to",
            "canary",
            "--yes",
        ],
    );
    assert!(e.contains("it has no signature"), "{e}");
    assert!(
        std::fs::read_to_string(&single).unwrap().contains(&signed),
        "file unchanged"
    );

    // A deployment file's own trust adds to config.toml's: it wants other's signature too.
    write(
        &single,
        format!(
            "sealvol:\n  trust:\n    t: [{:?}]\n  mounts:\n    - ref: {signed}\n      path: /w\n",
            fixture("other.pub.pem").to_str().unwrap()
        )
        .as_bytes(),
    );
    if common::fuse_available() {
        let e = env.fails(
            1,
            &[
                "deploy",
                "mount",
                single.to_str().unwrap(),
                "--root",
                root.to_str().unwrap(),
            ],
        );
        assert!(
            e.contains("single.yaml trusts for t") && e.contains("another key"),
            "{e}"
        );
    }

    // A key the policy no longer trusts; a policy naming a missing key file.
    trust(&env, "t", &["other.pub.pem"]);
    let e = env.fails(
        1,
        &["volume", "pull", &signed, env.path("p2").to_str().unwrap()],
    );
    assert!(e.contains("made by another key"), "{e}");
    trust(&env, "t", &["missing.pub.pem"]);
    let e = env.fails(
        1,
        &["volume", "pull", &signed, env.path("p3").to_str().unwrap()],
    );
    assert!(
        e.contains("config.toml: trust for t") && e.contains("missing.pub.pem"),
        "{e}"
    );
    // `info` still answers, and says the policy does not load.
    let out = env.run(&["info"]);
    assert!(out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("trust policy does not load") && said.contains("missing.pub.pem"),
        "{said}"
    );
    // Another namespace is not policed.
    trust(&env, "other", &["signer.pub.pem"]);
    env.ok(&[
        "volume",
        "pull",
        &unsigned,
        env.path("p4").to_str().unwrap(),
    ]);
}

#[test]
fn a_trusted_key_path_that_is_a_fifo_or_a_device_fails_a_pull_at_once_with_a_line() {
    let env = Env::new();
    let signed = env.push(&model(&env, "a"), "t/m", &["--tag", "prod"]);
    let fifo = env.path("key.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a path the test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for key in [fifo.to_str().unwrap(), "/dev/zero"] {
        write(
            &env.path("config/sealvol/config.toml"),
            format!("[trust]\nt = [{key:?}]\n").as_bytes(),
        );
        // Nobody writes to the FIFO: a reader of it would wait forever. Killed after
        // 60 s if it does, so a hang is a failure, not a stuck suite.
        let out = env.path(&format!("pulled-{}", key.len()));
        let child = env
            .cmd()
            .args(["volume", "pull", &signed, out.to_str().unwrap()])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        let (ended, wait) = std::sync::mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if wait
                .recv_timeout(std::time::Duration::from_secs(60))
                .is_err()
            {
                // SAFETY: signals our own child, which has not been waited for yet.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            }
        });
        let done = child.wait_with_output().unwrap();
        let _ = ended.send(());
        watchdog.join().unwrap();
        assert_eq!(done.status.code(), Some(1), "it hung or crashed: {done:?}");
        let e = String::from_utf8_lossy(&done.stderr).to_string();
        assert!(e.contains("not a regular file") && e.contains(key), "{e}");
        assert_eq!(
            e.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{e}"
        );
    }
}
