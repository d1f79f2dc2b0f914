//! Garbage collection through the real binary, on a real repository: a second
//! collection refuses while one runs; a `kill -9` anywhere in a collection leaves a
//! repository that verifies; and pushes of overlapping data from separate processes
//! survive 50 collection rounds. A dry run, the window and what a purge frees are the
//! engine's, tested on the in-memory store (`engine/gc/tests/gc.rs`); an unreadable
//! manifest and a young chunk list left by a purge on a local repository
//! (`engine/gc/tests/refusals.rs`).
//!
//! Grace periods: tests set the shortest the command allows (`sealvol settings
//! --gc-grace 1s`) and wait it out with real sleeps where objects must age; the
//! retention window is crossed with `SEALVOL_NOW`, except in the stress test, which
//! sets a 1 s retention so that versions are purged while pushes run.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Env, assert_same_tree, noise, write};
use serde_json::Value;

fn later(days: u64) -> String {
    common::days_ahead(days)
}

/// RFC 3339 for `days` (fractions too) from now: a clock for `Env::ok_at`.
fn at_day(days: f64) -> String {
    let t = std::time::SystemTime::now() + Duration::from_secs_f64(days * 86_400.0);
    humantime::format_rfc3339_seconds(t).to_string()
}

fn gc_at(env: &Env, now: &str, extra: &[&str]) -> Value {
    let mut args = vec!["volume", "gc", "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str::<Value>(&env.ok_at(now, &args)).unwrap()["report"].clone()
}

/// Three versions of `t/v` with 3 MiB of their own data each and one shared file; the
/// middle one deleted. Objects are then older than the 1 s grace period.
fn three_one_deleted(env: &Env) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for i in 0..3u64 {
        let src = env.path(&format!("src{i}"));
        write(&src.join("own.bin"), &noise(3 << 20, 10 + i));
        write(&src.join("shared.bin"), &noise(1 << 20, 99));
        let r = env.push(&src, "t/v", &[]);
        out.push((src, r));
    }
    env.ok(&["volume", "delete", &out[1].1, "--yes"]);
    env.ok(&["settings", "--gc-grace", "1s"]);
    std::thread::sleep(Duration::from_millis(1100));
    out
}

#[test]
fn a_second_gc_refuses_while_one_runs_and_neither_breaks_anything() {
    let env = Env::new();
    let versions = three_one_deleted(&env);
    env.ok(&["settings", "--gc-grace", "4s"]);
    std::thread::sleep(Duration::from_millis(3000));
    let first = env
        .cmd()
        .env("SEALVOL_NOW", later(8))
        .args(["volume", "gc"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lease = env.repo.join("gc/lease");
    for _ in 0..200 {
        if lease.exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(lease.exists(), "the first gc took no lease");
    let err = env.fails(1, &["volume", "gc"]);
    assert!(
        err.contains("another garbage collection is running") && err.contains("pid"),
        "{err}"
    );
    let out = first.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!lease.exists(), "the lease was not given back");
    env.ok(&["volume", "verify", "--read-data"]);
    let o = env.path("o");
    env.ok(&["volume", "pull", &versions[2].1, o.to_str().unwrap()]);
    assert_same_tree(&versions[2].0, &o);
}

#[test]
fn kill_9_anywhere_in_gc_leaves_a_repository_that_verifies() {
    let env = Env::new();
    // Sixteen versions of 1.5 MiB each; the even ones deleted on days 0 to 7, so that
    // each of the eight collections below (on days 7.5 to 14.5) purges one more version
    // and so has work of its own to be killed in: the purge, the mark, the repack, the
    // wait (1 s of grace) and the sweep of what the collection before it condemned. A
    // schedule of kills alone is not enough: on a loaded machine a collection that
    // found everything condemned already ends at once.
    let mut versions = Vec::new();
    for i in 0..16u64 {
        let src = env.path(&format!("src{i}"));
        write(&src.join("a.bin"), &noise(1 << 20, 200 + i));
        write(&src.join("b.bin"), &noise(1 << 19, 300 + i / 2));
        let r = env.push(&src, "t/k", &[]);
        versions.push((src, r));
    }
    for (day, (_, r)) in versions.iter().step_by(2).enumerate() {
        env.ok_at(&at_day(day as f64), &["volume", "delete", r, "--yes"]);
    }
    env.ok(&["settings", "--gc-grace", "1s"]);
    std::thread::sleep(Duration::from_millis(1100));
    let mut killed = 0;
    for (day, delay_ms) in [5u64, 30, 80, 200, 600, 1050, 1150, 1300]
        .into_iter()
        .enumerate()
    {
        let mut child = env
            .cmd()
            .env("SEALVOL_NOW", at_day(day as f64 + 7.5))
            .args(["-q", "volume", "gc"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            killed += 1;
        }
        // SAFETY: sending SIGKILL to our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        let out = env.run(&["volume", "verify", "--read-data"]);
        assert!(
            out.status.success(),
            "verify after a kill at {delay_ms} ms: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let late = later(20);
    assert!(killed >= 6, "only {killed} kills landed during a gc");
    // The next gc takes the dead one's lease at once and finishes the work.
    let report = gc_at(&env, &late, &[]);
    let rest = gc_at(&env, &late, &[]);
    assert_eq!(rest["condemned_packs"], 0, "{report}\n{rest}");
    env.ok(&["volume", "verify", "--read-data"]);
    for (i, (src, r)) in versions.iter().enumerate().filter(|(i, _)| i % 2 == 1) {
        let out = env.path(&format!("out{i}"));
        env.ok(&["volume", "pull", r, out.to_str().unwrap()]);
        assert_same_tree(src, &out);
    }
    assert!(!env.repo.join("gc/lease").exists());
}

/// The files of one version: a subset of a shared pool (so versions overlap, and data
/// of deleted versions comes back), and maybe a file of its own (which becomes garbage).
fn fill(dir: &Path, pool: &[Vec<u8>], pick: &(Vec<usize>, Option<u64>)) {
    let _ = std::fs::remove_dir_all(dir);
    for &i in &pick.0 {
        write(&dir.join(format!("f{i}.bin")), &pool[i]);
    }
    if let Some(seed) = pick.1 {
        write(&dir.join("own.bin"), &noise(64 << 10, seed));
    }
}

#[test]
fn pushes_from_separate_processes_survive_fifty_gc_rounds() {
    let env = Arc::new(Env::new());
    let pool: Arc<Vec<Vec<u8>>> = Arc::new((0..20).map(|i| noise(128 << 10, 500 + i)).collect());
    // The repository, then a short grace and retention made for the test.
    let seed = env.path("seed");
    fill(&seed, &pool, &(vec![0], None));
    env.push(&seed, "s/seed", &[]);
    // The shortest grace the command allows: the argument needs a push's check-to-
    // manifest window under half of it, even on a loaded machine.
    env.ok(&["settings", "--retention", "1s", "--gc-grace", "1s"]);

    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Every digest any pusher sealed, with the pool files it holds.
    #[allow(clippy::type_complexity)]
    let sealed: Arc<Mutex<HashMap<String, (Vec<usize>, Option<u64>)>>> = Default::default();
    let mut pushers = Vec::new();
    for p in 0..3usize {
        let (env, pool, done, sealed) = (env.clone(), pool.clone(), done.clone(), sealed.clone());
        pushers.push(std::thread::spawn(move || {
            let dir = env.path(&format!("push{p}"));
            let vol = format!("s/p{p}");
            let mut previous: Option<String> = None;
            let mut n = 0usize;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                // Overlapping subsets that repeat: versions are deleted, purged and
                // pushed again while their data is condemned and swept.
                let mut files: Vec<usize> = (0..3)
                    .map(|k| (p * 7 + n * (k + 1) * 3 + k * 5) % 20)
                    .collect();
                files.sort();
                files.dedup();
                let own = n
                    .is_multiple_of(2)
                    .then_some(10_000 + (p * 1000 + n) as u64);
                let pick = (files, own);
                fill(&dir, &pool, &pick);
                let out = env.run(&["-q", "volume", "push", dir.to_str().unwrap(), &vol]);
                assert!(
                    out.status.success(),
                    "push {p}/{n}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let r = String::from_utf8_lossy(&out.stdout).trim().to_string();
                sealed.lock().unwrap().insert(r.clone(), pick);
                if let Some(prev) = previous.take()
                    && prev != r
                {
                    let out = env.run(&["-q", "volume", "delete", &prev, "--yes"]);
                    assert!(
                        out.status.success(),
                        "delete {prev}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                previous = Some(r);
                n += 1;
                // Subsets come back: paced so that some deleted
                // versions outlive the 1 s retention and are purged, and others are
                // pushed again (restored) first.
                std::thread::sleep(Duration::from_millis(100));
            }
            n
        }));
    }
    let (mut swept, mut deleted, mut purged) = (0, 0, 0);
    for round in 0..50 {
        let out = env.run(&["-q", "volume", "gc", "--json"]);
        assert!(
            out.status.success(),
            "gc round {round}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        swept += v["report"]["rounds_swept"].as_u64().unwrap();
        deleted += v["report"]["deleted_packs"].as_u64().unwrap()
            + v["report"]["deleted_files"].as_u64().unwrap();
        purged += v["report"]["purged"].as_array().unwrap().len();
        // Rounds spread over the pushes, so deletions age past the 1 s retention.
        std::thread::sleep(Duration::from_millis(100));
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let pushes: usize = pushers.into_iter().map(|h| h.join().unwrap()).sum();
    eprintln!(
        "{pushes} pushes beside 50 gc rounds: {purged} versions purged, {swept} rounds swept, {deleted} objects deleted"
    );
    assert!(
        pushes >= 20,
        "only {pushes} pushes ran beside the collections"
    );
    assert!(
        purged > 0 && swept > 0 && deleted > 0,
        "gc never deleted anything: {purged} {swept} {deleted}"
    );

    // Every version still there reads back byte for byte.
    env.ok(&["volume", "verify", "--read-data"]);
    let sealed = sealed.lock().unwrap();
    let mut checked = 0;
    for p in 0..3 {
        let v: Value =
            serde_json::from_str(&env.ok(&["volume", "versions", &format!("s/p{p}"), "--json"]))
                .unwrap();
        for version in v["versions"].as_array().unwrap() {
            let r = format!("vol:s/p{p}@{}", version["digest"].as_str().unwrap());
            let pick = sealed
                .get(&r)
                .unwrap_or_else(|| panic!("{r} was never pushed"));
            let want = env.path(&format!("want-{checked}"));
            fill(&want, &pool, pick);
            let got = env.path(&format!("got-{checked}"));
            env.ok(&["volume", "pull", &r, got.to_str().unwrap()]);
            assert_same_tree(&want, &got);
            checked += 1;
        }
    }
    assert!(checked >= 3, "{checked}");
    eprintln!("{checked} surviving versions read back byte for byte");
}
