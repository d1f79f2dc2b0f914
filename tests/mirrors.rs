//! Mirrored origins with the real binary: mounts and pulls that fail over from a local
//! repository whose packs go away to the bucket mirror in the middle of a read, with
//! the right bytes; what a second mirror says; and the bad addresses. A mirror to a
//! bucket and back is tested in process: `engine/s3repo/tests/bucket.rs`.

mod common;

use std::fs;
use std::io::Read;

use common::mounts::{mount, wait_stats};
use common::servers::{Moto, bucket_vars};
use common::{Env, assert_same_tree, fuse_available, noise, write};
use serde_json::Value;

/// A local repository with the bucket's credentials beside it (not its address).
fn env_with_bucket(moto: &Moto) -> Env {
    let mut env = Env::new();
    env.vars = bucket_vars(&moto.endpoint(), "unused")
        .into_iter()
        .filter(|(k, _)| k != "SEALVOL_REPO")
        .collect();
    env
}

fn checkpoint(env: &Env, name: &str, seed: u64) -> std::path::PathBuf {
    let dir = env.path(name);
    write(&dir.join("model.bin"), &noise(24 << 20, seed));
    write(&dir.join("config.json"), b"{\"layers\": 2}\n");
    dir
}

#[test]
fn bad_mirror_and_origin_addresses_are_errors_that_change_nothing() {
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let env = env_with_bucket(&moto);
    let v1 = checkpoint(&env, "v1", 2);
    let pinned = env.push(&v1, "weights/m", &[]);
    let repo = env.repo.to_str().unwrap();

    let same = env.fails(
        1,
        &["volume", "mirror", &pinned, "--to", &format!("{repo}/.")],
    );
    assert!(
        same.contains("is the repository the version is read from"),
        "{same}"
    );
    let scheme = env.fails(1, &["volume", "mirror", &pinned, "--to", "ftp://host/x"]);
    assert!(scheme.contains("ftp"), "{scheme}");
    assert!(!env.path("ftp:").exists());
    let fresh = env.path("fresh");
    let unknown = env.fails(
        1,
        &[
            "volume",
            "mirror",
            "weights/nope:prod",
            "--to",
            fresh.to_str().unwrap(),
        ],
    );
    assert!(unknown.contains("weights/nope"), "{unknown}");
    assert!(!fresh.exists(), "an unknown ref created the destination");
    let uninit = env.fails(
        1,
        &["volume", "mirror", &pinned, "--to", "s3://models/none"],
    );
    assert!(uninit.contains("sealvol init"), "{uninit}");

    let out = env.path("out");
    for origin in ["ftp://host/x", repo] {
        let e = env.fails(
            1,
            &[
                "volume",
                "pull",
                &pinned,
                out.to_str().unwrap(),
                "--origin",
                origin,
            ],
        );
        assert!(
            e.contains("ftp") || e.contains("is the repository itself"),
            "{e}"
        );
    }
    let not_repo = env.path("not-a-repo");
    write(&not_repo.join("stray"), b"x");
    let e = env.fails(
        1,
        &[
            "volume",
            "pull",
            &pinned,
            out.to_str().unwrap(),
            "--origin",
            not_repo.to_str().unwrap(),
        ],
    );
    assert!(e.contains("no repository"), "{e}");
    assert!(!out.exists(), "a refused pull wrote its target");
    if fuse_available() {
        let dir = env.path("mnt");
        fs::create_dir_all(&dir).unwrap();
        let e = env.fails(
            1,
            &[
                "volume",
                "mount",
                &pinned,
                dir.to_str().unwrap(),
                "--origin",
                "ftp://host/x",
            ],
        );
        assert!(e.contains("ftp"), "{e}");
        assert!(!common::mounts::is_mounted(&dir));
    }
}

/// A local repository mirrored to the bucket, whose packs then go away.
fn mirrored(moto: &Moto) -> (Env, std::path::PathBuf, String) {
    moto.seed(&["--bucket", "models"]);
    let env = env_with_bucket(moto);
    env.ok(&["init", "--repo", "s3://models/eu"]);
    let v1 = checkpoint(&env, "v1", 3);
    let pinned = env.push(&v1, "weights/m", &[]);
    env.ok(&["volume", "mirror", &pinned, "--to", "s3://models/eu"]);
    (env, v1, pinned)
}

#[test]
fn a_mount_fails_over_to_the_bucket_mirror_in_the_middle_of_a_read() {
    if !fuse_available() {
        eprintln!("skipped: no FUSE here");
        return;
    }
    let moto = Moto::start(&[]);
    let (env, v1, pinned) = mirrored(&moto);
    let dir = env.path("mnt");
    let _m = mount(
        &env,
        &pinned,
        &dir,
        &["--origin", "s3://models/eu", "--prefetch-memory", "64M"],
    );
    let mut f = fs::File::open(dir.join("model.bin")).unwrap();
    let mut got = vec![0u8; 2 << 20];
    f.read_exact(&mut got).unwrap();
    // The local repository loses its packs mid-read.
    fs::rename(env.repo.join("packs"), env.repo.join("packs.gone")).unwrap();
    f.read_to_end(&mut got).unwrap();
    assert!(
        got == fs::read(v1.join("model.bin")).unwrap(),
        "the bytes read across the failover differ"
    );
    let m = wait_stats(&env, &dir, |s| s["mirror_chunks"].as_u64() > Some(0));
    let s = &m["stats"];
    assert!(s["mirror_chunks"].as_u64() > Some(0), "{m}");
    assert!(s["failovers"].as_u64() > Some(0), "{m}");
    assert_eq!(s["errors"], 0, "{m}");
}

#[test]
fn a_pull_reads_from_the_mirror_what_the_repository_lost() {
    let moto = Moto::start(&[]);
    let (env, v1, pinned) = mirrored(&moto);
    fs::rename(env.repo.join("packs"), env.repo.join("packs.gone")).unwrap();
    let out = env.path("out");
    let without = env.fails(1, &["volume", "pull", &pinned, out.to_str().unwrap()]);
    assert!(without.contains("missing"), "{without}");
    let pulled: Value = serde_json::from_str(&env.ok(&[
        "volume",
        "pull",
        &pinned,
        out.to_str().unwrap(),
        "--origin",
        "s3://models/eu",
        "--force",
        "--json",
    ]))
    .unwrap();
    assert!(pulled["tiers"]["failovers"].as_u64() > Some(0), "{pulled}");
    assert_eq!(pulled["tiers"]["origin_chunks"], 0, "{pulled}");
    assert_same_tree(&v1, &out);
}

/// Between folders: the mirrored version keeps its creation time, the tag REF named is
/// pointed there too (said as a tag move), and a second mirror copies nothing and says
/// that plainly, the tag already pointing there.
#[test]
fn a_mirror_keeps_the_versions_time_and_says_what_a_second_one_did() {
    let env = Env::new();
    let v1 = checkpoint(&env, "v1", 3);
    let made = "2026-01-02T03:04:05Z";
    env.ok_at(
        made,
        &[
            "volume",
            "push",
            v1.to_str().unwrap(),
            "weights/m",
            "--tag",
            "prod",
        ],
    );
    let other = env.path("other");
    let to = other.to_str().unwrap();
    let first = env.run(&["volume", "mirror", "weights/m:prod", "--to", to]);
    let err = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{err}");
    assert!(err.contains("mirrored vol:weights/m@b3:"), "{err}");
    assert!(
        err.contains("tag prod -> b3:") && err.contains("(new) (in "),
        "{err}"
    );

    let second = env.run(&["volume", "mirror", "weights/m:prod", "--to", to]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(second.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].ends_with(": nothing copied")
            && lines[0].contains("already holds vol:weights/m@b3:"),
        "{err}"
    );
    assert!(
        lines[1].starts_with("tag prod already points at b3:"),
        "{err}"
    );

    let mut there = Env::new();
    there.vars = vec![("SEALVOL_REPO".into(), to.to_string())];
    let versions: Value =
        serde_json::from_str(&there.ok(&["volume", "versions", "weights/m", "--json"])).unwrap();
    let here: Value =
        serde_json::from_str(&env.ok(&["volume", "versions", "weights/m", "--json"])).unwrap();
    assert_eq!(
        versions["versions"][0]["created"],
        here["versions"][0]["created"]
    );
    assert!(
        versions["versions"][0]["created"]
            .as_str()
            .unwrap()
            .starts_with("2026-01-02T03:04:05"),
        "{versions}"
    );
}
