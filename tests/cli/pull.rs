//! After `volume pull REF DIR`, DIR is exactly the version: its digest is the pulled
//! digest whatever was there before, and what a killed pull left behind is cleaned up.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{Env, noise, write};

fn digest(env: &Env, dir: &Path) -> String {
    env.ok(&["digest", dir.to_str().unwrap()])
        .trim()
        .to_string()
}

fn pinned_digest(r: &str) -> &str {
    r.split('@').nth(1).unwrap()
}

#[test]
fn pull_refuses_a_non_empty_directory_unless_forced_and_names_what_is_in_the_way() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("f"), b"new");
    let r = env.push(&src, "ns/vol", &[]);
    let out = env.path("out");
    write(&out.join("f"), b"old");
    write(&out.join("keep"), b"mine");
    let err = env.fails(1, &["volume", "pull", &r, out.to_str().unwrap()]);
    assert!(
        err.contains("not empty") && err.contains("f, keep in the way") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(out.join("f")).unwrap(), b"old");
    assert_eq!(std::fs::read(out.join("keep")).unwrap(), b"mine");

    let o = env.run(&["volume", "pull", &r, out.to_str().unwrap(), "--force"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("removed 1 path(s) the version does not hold:\n  - keep\n"),
        "{err}"
    );
    assert_eq!(std::fs::read(out.join("f")).unwrap(), b"new");
    assert!(!out.join("keep").exists());
    assert_eq!(digest(&env, &out), pinned_digest(&r));
}

#[test]
fn pull_force_over_another_version_leaves_exactly_the_pulled_version() {
    let env = Env::new();
    let canary = env.path("canary");
    write(&canary.join("config.json"), b"{\"v\": 2}\n");
    write(&canary.join("model.bin"), &noise(300_000, 1));
    write(&canary.join("adapter.safetensors"), &noise(5000, 2));
    write(&canary.join("extra/deep/notes.txt"), b"canary only\n");
    std::fs::create_dir_all(canary.join("empty-in-canary")).unwrap();
    std::os::unix::fs::symlink("model.bin", canary.join("link-in-canary")).unwrap();
    // Where prod has a file, canary has a directory, and the other way round.
    write(&canary.join("swap/inner"), b"a directory here\n");
    write(&canary.join("flip"), b"a file here\n");
    let prod = env.path("prod");
    write(&prod.join("config.json"), b"{\"v\": 1}\n");
    write(&prod.join("model.bin"), &noise(300_000, 3));
    write(&prod.join("swap"), b"a file here\n");
    write(&prod.join("flip/inner"), b"a directory here\n");
    std::fs::create_dir_all(prod.join("empty-in-prod")).unwrap();
    std::os::unix::fs::symlink("config.json", prod.join("link")).unwrap();
    let r_canary = env.push(&canary, "weights/tiny", &["--tag", "canary"]);
    let r_prod = env.push(&prod, "weights/tiny", &["--tag", "prod"]);

    let out = env.path("out");
    env.ok(&[
        "volume",
        "pull",
        "weights/tiny:canary",
        out.to_str().unwrap(),
    ]);
    assert_eq!(digest(&env, &out), pinned_digest(&r_canary));
    // Things of the user's own that no version holds: also removed, and listed.
    std::os::unix::fs::symlink("/etc/passwd", out.join("my-link")).unwrap();
    std::fs::create_dir_all(out.join("my-empty-dir")).unwrap();

    let o = env.run(&[
        "volume",
        "pull",
        "weights/tiny:prod",
        out.to_str().unwrap(),
        "--force",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(digest(&env, &out), pinned_digest(&r_prod), "{err}");
    for removed in [
        "  - adapter.safetensors\n",
        "  - extra/deep/notes.txt\n",
        "  - extra/deep/\n",
        "  - extra/\n",
        "  - empty-in-canary/\n",
        "  - link-in-canary\n",
        "  - my-link\n",
        "  - my-empty-dir/\n",
        "  - swap/inner\n",
        "  - swap/\n",
        "  - flip\n",
    ] {
        assert!(err.contains(removed), "{removed:?} not listed in {err}");
    }
    assert!(std::fs::metadata("/etc/passwd").is_ok());

    // And back: the same holds the other way.
    env.ok(&[
        "volume",
        "pull",
        "weights/tiny:canary",
        out.to_str().unwrap(),
        "--force",
    ]);
    assert_eq!(digest(&env, &out), pinned_digest(&r_canary));
}

fn part_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with(".sealvol-part-") {
            found.push(name);
        }
    }
    found
}

#[test]
fn a_killed_pull_leaves_temporaries_the_next_pull_removes() {
    let env = Env::new();
    let src = env.path("big");
    for i in 0..8 {
        write(&src.join(format!("part{i}.bin")), &noise(6 << 20, 10 + i));
    }
    let r = env.push(&src, "t/big", &["--tag", "prod"]);
    let out = env.path("p/k9");
    // Kill -9 the pull once one of its temporaries exists: a real interrupted pull.
    let mut killed_mid_file = false;
    for _ in 0..20 {
        let _ = std::fs::remove_dir_all(&out);
        let mut child = env
            .cmd()
            .args([
                "volume",
                "pull",
                "t/big:prod",
                out.to_str().unwrap(),
                "--force",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if !part_files(&out).is_empty() {
                break;
            }
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        let _ = child.kill();
        let _ = child.wait();
        if !part_files(&out).is_empty() {
            killed_mid_file = true;
            break;
        }
    }
    assert!(
        killed_mid_file,
        "never caught the pull with a temporary on disk"
    );
    assert_ne!(digest(&env, &out), pinned_digest(&r));

    let o = env.run(&[
        "volume",
        "pull",
        "t/big:prod",
        out.to_str().unwrap(),
        "--force",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("temporary file(s) an interrupted pull left"),
        "{err}"
    );
    assert!(
        !err.contains("the version does not hold"),
        "temporaries are not the user's: {err}"
    );
    assert!(part_files(&out).is_empty());
    assert_eq!(digest(&env, &out), pinned_digest(&r));
}

#[test]
fn a_folder_holding_only_a_killed_pulls_temporaries_counts_as_empty() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a/f"), b"payload");
    let r = env.push(&src, "ns/vol", &[]);
    let out = env.path("out");
    // What a pull killed before its first rename leaves (the name is the pull's own).
    write(&out.join(".sealvol-part-4242-0"), b"half");
    write(&out.join("a/.sealvol-part-4242-1"), b"half");
    env.ok(&["volume", "pull", &r, out.to_str().unwrap()]);
    assert_eq!(digest(&env, &out), pinned_digest(&r));
}

#[test]
fn pull_never_writes_through_a_symlink_in_the_target() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("sub/f"), b"payload");
    let r = env.push(&src, "ns/vol", &[]);
    let out = env.path("out");
    let outside = env.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&outside, out.join("sub")).unwrap();
    let err = env.fails(1, &["volume", "pull", &r, out.to_str().unwrap()]);
    assert!(err.contains("sub in the way"), "{err}");
    // Forced, the link is removed (not followed) and a real directory takes its place.
    let o = env.run(&["volume", "pull", &r, out.to_str().unwrap(), "--force"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("  - sub\n"), "{err}");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert!(std::fs::symlink_metadata(out.join("sub")).unwrap().is_dir());
    assert_eq!(digest(&env, &out), pinned_digest(&r));
}

/// Pulling over a close version writes only what differs: a file already there with
/// the version's bytes keeps its inode; a changed one is replaced; the result is the
/// version exactly, modes included.
#[test]
fn pull_force_over_a_close_version_keeps_what_is_already_right() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let env = Env::new();
    let a = env.path("a");
    write(&a.join("big.bin"), &noise(2 << 20, 1));
    write(&a.join("config.json"), b"{\"v\": 1}");
    let b = env.path("b");
    write(&b.join("big.bin"), &noise(2 << 20, 1));
    write(&b.join("config.json"), b"{\"v\": 2}");
    let ra = env.push(&a, "w/close", &[]);
    let rb = env.push(&b, "w/close", &[]);
    let out = env.path("out");
    env.ok(&["volume", "pull", &ra, out.to_str().unwrap()]);
    let ino = |p: &str| std::fs::metadata(out.join(p)).unwrap().ino();
    let (big, config) = (ino("big.bin"), ino("config.json"));
    // A mode the version does not have is put right even on a kept file.
    std::fs::set_permissions(out.join("big.bin"), std::fs::Permissions::from_mode(0o600)).unwrap();

    let o = env.run(&["volume", "pull", &rb, out.to_str().unwrap(), "--force"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("kept 1 file(s) already there"), "{err}");
    assert_eq!(ino("big.bin"), big, "the identical file was not rewritten");
    assert_ne!(ino("config.json"), config, "the changed file was");
    let mode = std::fs::metadata(out.join("big.bin"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o644);
    assert_eq!(digest(&env, &out), pinned_digest(&rb));

    // A file of the right size but other bytes is not mistaken for the version's.
    write(&out.join("big.bin"), &noise(2 << 20, 9));
    env.ok(&["volume", "pull", &rb, out.to_str().unwrap(), "--force"]);
    assert_eq!(digest(&env, &out), pinned_digest(&rb));
}

/// `pull --include/--exclude`: only the paths taken are written, each verified, and
/// the rest of the version is not read; patterns that take nothing are an error with
/// nothing written, and a bad pattern is refused before anything is read.
#[test]
fn pull_takes_a_subset_of_a_version_when_asked() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("model.safetensors"), &noise(3 << 20, 4));
    write(&src.join("config.json"), b"{}\n");
    write(&src.join("tokenizer/vocab.json"), b"{\"a\": 1}\n");
    write(&src.join("onnx/model.onnx"), &noise(1 << 20, 5));
    let r = env.push(&src, "ns/sub", &[]);

    let out = env.path("configs");
    let o = env.run(&[
        "volume",
        "pull",
        &r,
        out.to_str().unwrap(),
        "--include",
        "*.json",
        "--exclude",
        "tokenizer/*",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("1 file(s)") && err.contains("--include"),
        "{err}"
    );
    let got: Vec<String> = crate::common::walk_files(&out)
        .iter()
        .map(|p| p.strip_prefix(&out).unwrap().display().to_string())
        .collect();
    assert_eq!(got, ["config.json"]);
    assert_eq!(std::fs::read(out.join("config.json")).unwrap(), b"{}\n");
    // The weights were not read: only the small file's chunks left the repository.
    let small = env.path("small");
    let json: serde_json::Value = serde_json::from_str(&env.ok(&[
        "volume",
        "pull",
        &r,
        small.to_str().unwrap(),
        "--include",
        "config.json",
        "--json",
    ]))
    .unwrap();
    let read = json["tiers"]["origin_bytes"].as_u64().unwrap();
    assert!(read < 64 << 10, "{json}");
    assert_eq!(json["report"]["files"], 1, "{json}");

    let none = env.path("none");
    let e = env.fails(
        1,
        &[
            "volume",
            "pull",
            &r,
            none.to_str().unwrap(),
            "--include",
            "*.bin",
        ],
    );
    assert!(e.contains("take none of the 4 file(s)"), "{e}");
    assert!(!none.exists(), "nothing written");
    let e = env.fails(
        1,
        &[
            "volume",
            "pull",
            &r,
            none.to_str().unwrap(),
            "--include",
            "[oops",
        ],
    );
    assert!(e.contains("bad pattern"), "{e}");
    assert!(!none.exists());
}
