//! The repository in a bucket where only processes show it, against moto on loopback:
//! eight processes moving one tag, kill -9 during a push, gc in one process while
//! another pushes, a sync from another bucket, mounts that read lazily and through an
//! origin that cuts or stops answering, and every command within the timeout of a
//! bucket that stops answering. Opening, init, round trips, addresses and bucket
//! problems are tested in process: `engine/s3repo/tests/bucket.rs`.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::servers::{Moto, SlowProxy, bucket_vars};
use common::{Env, assert_same_tree, noise, walk_files, write};
use serde_json::Value;

/// An environment whose repository is `address` on the S3 server at `endpoint`, with
/// nothing from the host's own AWS configuration.
fn bucket_env(endpoint: &str, address: &str) -> Env {
    let mut env = Env::new();
    env.vars = bucket_vars(endpoint, address);
    env
}

fn checkpoint(dir: &Path, seed: u64) {
    // Over one multipart part (16 MiB), so that packs go up in parts.
    write(&dir.join("model.safetensors"), &noise(20 << 20, seed));
    write(&dir.join("config.json"), b"{\"layers\": 4}\n");
    write(&dir.join("tokenizer/vocab.txt"), &noise(3000, seed + 100));
}

#[test]
fn eight_processes_moving_one_tag_ten_times_each_keep_all_eighty_moves_in_order() {
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let env = bucket_env(&moto.endpoint(), "s3://models/repo");
    env.ok(&["init"]);
    // 80 distinct versions, pushed by 8 processes at once (overlapping data too).
    let digests: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|p| {
                let env = &env;
                s.spawn(move || {
                    (0..10)
                        .map(|i| {
                            let dir = env.path(&format!("v/{p}-{i}"));
                            write(&dir.join("shared.bin"), &noise(50_000, 7));
                            write(&dir.join("own.txt"), format!("{p}-{i}").as_bytes());
                            env.push(&dir, "w/many", &[])
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert_eq!(digests.iter().collect::<BTreeSet<_>>().len(), 80);
    std::thread::scope(|s| {
        for p in 0..8 {
            let (env, digests) = (&env, &digests);
            s.spawn(move || {
                for i in 0..10 {
                    env.ok(&["volume", "tag", &digests[p * 10 + i], "prod"]);
                }
            });
        }
    });
    let tags: Value =
        serde_json::from_str(&env.ok(&["volume", "tags", "w/many", "--json"])).unwrap();
    let history = tags["tags"][0]["history"].as_array().unwrap();
    assert_eq!(history.len(), 80, "no move was lost: {tags}");
    // Newest first, and a chain: each move starts where the one before it ended.
    for pair in history.windows(2) {
        assert_eq!(pair[0]["from"], pair[1]["to"], "{pair:?}");
    }
    let moved: BTreeSet<String> = history
        .iter()
        .map(|m| m["to"].as_str().unwrap().to_string())
        .collect();
    let pinned: BTreeSet<String> = digests
        .iter()
        .map(|d| d.rsplit('@').next().unwrap().to_string())
        .collect();
    assert_eq!(moved, pinned, "every version was tagged once");
    // Every one of the 80 versions pulls back to what was pushed.
    env.ok(&["volume", "verify", "--read-data"]);
}

#[test]
fn a_sync_from_one_bucket_into_a_repository_in_another() {
    let moto = Moto::start(&[]);
    let src = Env::new().path("src");
    checkpoint(&src, 3);
    moto.seed(&["ckpts", "run-1/step-10", src.to_str().unwrap()]);
    moto.seed(&["--bucket", "models"]);
    let env = bucket_env(&moto.endpoint(), "s3://models/repo");
    env.ok(&["init"]);
    let out = env.ok(&[
        "volume",
        "sync",
        "s3://ckpts/run-1/step-10",
        "w/run-1",
        "--tag",
        "latest",
    ]);
    let pinned = out.lines().last().unwrap().to_string();
    let local = Env::new();
    assert_eq!(pinned, local.push(&src, "w/run-1", &[]));
    let pulled = env.path("pulled");
    env.ok(&["volume", "pull", "w/run-1:latest", pulled.to_str().unwrap()]);
    assert_same_tree(&src, &pulled);
}

#[test]
fn kill_9_during_a_push_to_a_bucket_leaves_a_repository_that_verifies() {
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let env = bucket_env(&moto.endpoint(), "s3://models/repo");
    env.ok(&["init"]);
    let src = env.path("src");
    for i in 0..6 {
        write(
            &src.join(format!("shard-{i}.bin")),
            &noise(10 << 20, 40 + i),
        );
    }
    for delay_ms in [150, 600, 1500] {
        let mut child = env
            .cmd()
            .args(["volume", "push", src.to_str().unwrap(), "w/killed"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        env.ok(&["volume", "verify"]);
    }
    let pinned = env.push(&src, "w/killed", &[]);
    assert!(pinned.starts_with("vol:w/killed@b3:"), "{pinned}");
    env.ok(&["volume", "verify", "--read-data"]);
    let pulled = env.path("pulled");
    env.ok(&["volume", "pull", &pinned, pulled.to_str().unwrap()]);
    assert_same_tree(&src, &pulled);
}

#[test]
fn gc_on_a_bucket_while_another_process_pushes_keeps_every_version_whole() {
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let env = bucket_env(&moto.endpoint(), "s3://models/repo");
    env.ok(&["init"]);
    env.ok(&["settings", "--gc-grace", "1s", "--retention", "1s"]);
    let pool: Vec<Vec<u8>> = (0..6).map(|i| noise(400_000, 60 + i)).collect();
    let pushed: Vec<(String, Vec<usize>)> = std::thread::scope(|s| {
        let pusher = s.spawn(|| {
            let mut kept = Vec::new();
            for round in 0..12usize {
                let dir = env.path(&format!("p/{round}"));
                let files: Vec<usize> = (0..3).map(|k| (round + k) % pool.len()).collect();
                for &f in &files {
                    write(&dir.join(format!("f{f}.bin")), &pool[f]);
                }
                let pinned = env.push(&dir, "w/busy", &[]);
                if round % 2 == 1 {
                    env.ok(&["volume", "delete", &pinned, "--yes"]);
                } else {
                    kept.push((pinned, files));
                }
            }
            kept
        });
        let collector = s.spawn(|| {
            for _ in 0..6 {
                env.ok(&["volume", "gc"]);
                std::thread::sleep(Duration::from_millis(700));
            }
        });
        collector.join().unwrap();
        pusher.join().unwrap()
    });
    env.ok(&["volume", "gc"]);
    env.ok(&["volume", "verify", "--read-data"]);
    for (n, (pinned, files)) in pushed.into_iter().enumerate() {
        let out = env.path(&format!("out/{n}"));
        env.ok(&["volume", "pull", &pinned, out.to_str().unwrap()]);
        for f in files {
            assert_eq!(
                std::fs::read(out.join(format!("f{f}.bin"))).unwrap(),
                pool[f]
            );
        }
    }
}

#[test]
fn a_version_on_a_bucket_mounts_and_reads_lazily() {
    if !common::fuse_available() {
        return;
    }
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let env = bucket_env(&moto.endpoint(), "s3://models/repo");
    env.ok(&["init"]);
    let src = env.path("src");
    checkpoint(&src, 11);
    let pinned = env.push(&src, "w/mounted", &[]);
    let at = env.path("mnt");
    std::fs::create_dir_all(&at).unwrap();
    env.ok(&["volume", "mount", &pinned, at.to_str().unwrap()]);
    let same = std::panic::catch_unwind(|| assert_same_tree(&src, &at));
    let mounts = env.ok(&["volume", "mounts"]);
    let unmounted = env.run(&["volume", "unmount", at.to_str().unwrap()]);
    if !unmounted.status.success() {
        let _ = Command::new("fusermount3").arg("-u").arg(&at).status();
    }
    assert!(same.is_ok(), "the mounted version reads the pushed bytes");
    assert!(mounts.contains("w/mounted"), "{mounts}");
}

/// A version pushed straight to moto, and an environment that reaches the same bucket
/// through `endpoint` (a proxy making faults) to mount it.
fn pushed_for_mount(moto: &Moto, endpoint: &str, src: &Path) -> (Env, String) {
    moto.seed(&["--bucket", "models"]);
    let direct = bucket_env(&moto.endpoint(), "s3://models/repo");
    direct.ok(&["init"]);
    write(&src.join("small.txt"), b"small");
    write(&src.join("big.bin"), &noise(24 << 20, 21));
    let pinned = direct.push(src, "w/faults", &[]);
    (bucket_env(endpoint, "s3://models/repo"), pinned)
}

fn unmount(env: &Env, at: &Path) {
    if !env
        .run(&["volume", "unmount", "--lazy", at.to_str().unwrap()])
        .status
        .success()
    {
        let _ = Command::new("fusermount3").arg("-u").arg(at).status();
    }
}

fn mount_log(env: &Env) -> String {
    walk_files(&env.state.join("mounts"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect()
}

/// The mount's count of failed reads, once it satisfies `done` (counters are published
/// within 100 ms of a change) or after 2 s.
fn mount_errors(env: &Env, done: impl Fn(u64) -> bool) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let v: Value = serde_json::from_str(&env.ok(&["volume", "mounts", "--json"])).unwrap();
        let n = v["mounts"][0]["stats"]["errors"].as_u64().unwrap();
        if done(n) || Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_mount_reads_on_through_an_origin_that_keeps_cutting_connections() {
    if !common::fuse_available() {
        return;
    }
    let moto = Moto::start(&[]);
    // Every connection is cut after 1 MiB: each 64 MiB range read is cut many times.
    let proxy = SlowProxy::start_cutting(moto.port, 1 << 20);
    let env0 = Env::new();
    let src = env0.path("src");
    let (env, pinned) = pushed_for_mount(&moto, &format!("http://127.0.0.1:{}", proxy.port), &src);
    let at = env.path("mnt");
    std::fs::create_dir_all(&at).unwrap();
    env.ok(&["volume", "mount", &pinned, at.to_str().unwrap()]);
    let got = std::fs::read(at.join("big.bin"));
    let errors = mount_errors(&env, |_| false);
    unmount(&env, &at);
    assert!(
        got.is_ok_and(|b| b == std::fs::read(src.join("big.bin")).unwrap()),
        "every byte, read on across the cuts"
    );
    assert_eq!(errors, 0, "no read failed: {}", mount_log(&env));
}

#[test]
fn a_read_that_cannot_reach_the_origin_fails_with_eio_at_its_read_timeout() {
    if !common::fuse_available() {
        return;
    }
    let moto = Moto::start(&[]);
    let proxy = SlowProxy::start(moto.port, 0);
    let env0 = Env::new();
    let src = env0.path("src");
    let (env, pinned) = pushed_for_mount(&moto, &format!("http://127.0.0.1:{}", proxy.port), &src);
    let at = env.path("mnt");
    std::fs::create_dir_all(&at).unwrap();
    env.ok(&[
        "volume",
        "mount",
        &pinned,
        at.to_str().unwrap(),
        "--read-timeout",
        "3s",
    ]);
    let small = std::fs::read(at.join("small.txt"));
    // Opened (its chunk list loaded) while the origin answers; then the origin goes
    // away: connections are refused from now on.
    let mut open = std::fs::File::open(at.join("big.bin")).unwrap();
    drop(proxy);
    let started = Instant::now();
    let big = std::io::Read::read_to_end(&mut open, &mut Vec::new());
    let took = started.elapsed();
    let errors = mount_errors(&env, |n| n >= 1);
    let log = mount_log(&env);
    drop(open);
    unmount(&env, &at);
    assert_eq!(small.unwrap(), b"small");
    assert_eq!(big.unwrap_err().raw_os_error(), Some(libc::EIO));
    assert!(
        took >= Duration::from_millis(2500) && took < Duration::from_secs(20),
        "retried until the read timeout, then failed: {took:?}"
    );
    assert!(errors >= 1);
    assert!(
        log.contains("read of big.bin at offset 0") && log.contains("failed with EIO after"),
        "the log names the file, the offset and the reason: {log}"
    );
}

/// A bucket that accepts connections and never answers (moto stopped by SIGSTOP):
/// push, pull, gc, versions and mount each fail within `--timeout` (plus one try), with one
/// plain line that names the endpoint and since when, and a hint that says how to wait
/// longer; not after six tries of a minute for each request.
#[test]
fn a_bucket_that_stops_answering_fails_every_command_within_the_timeout() {
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let env = bucket_env(&moto.endpoint(), "s3://models/frozen");
    env.ok(&["init"]);
    let v1 = env.path("v1");
    checkpoint(&v1, 7);
    env.push(&v1, "weights/tiny", &["--tag", "prod"]);
    let v2 = env.path("v2");
    checkpoint(&v2, 8);
    let _frozen = moto.freeze();
    let out = env.path("out");
    let out = out.to_str().unwrap();
    let v2 = v2.to_str().unwrap();
    for args in [
        vec!["volume", "push", v2, "weights/tiny"],
        vec!["volume", "pull", "weights/tiny:prod", out],
        vec!["volume", "gc"],
        vec!["volume", "versions", "weights/tiny"],
        vec!["volume", "mount", "weights/tiny:prod", out],
    ] {
        let started = Instant::now();
        let mut all = vec!["--timeout", "5s"];
        all.extend(&args);
        let err = env.fails(1, &all);
        let took = started.elapsed();
        // 5 s of waiting for one try; the old clients waited 6 x 60 s per request.
        assert!(
            took < Duration::from_secs(90),
            "{args:?} took {took:?}: {err}"
        );
        let line = err.lines().find(|l| l.starts_with("error:")).unwrap();
        assert!(line.contains(&moto.endpoint()), "{args:?}: {err}");
        assert!(
            line.contains("did not answer within 5 s") && line.contains("failing since"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("DispatchFailure"), "{args:?}: {err}");
        assert!(err.contains("--timeout"), "{args:?}: {err}");
    }
}
