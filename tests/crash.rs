//! `kill -9` at any moment of a push: the repository still verifies, no new version is
//! visible, and the next push of the same directory writes only what is still missing.

mod common;

use std::time::Duration;

use common::{Env, noise, write};

/// `volume push SRC ns/vol`, quiet, started and not waited for.
fn quiet_push(env: &Env, src: &std::path::Path) -> std::process::Child {
    env.cmd()
        .args(["-q", "volume", "push", src.to_str().unwrap(), "ns/vol"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn kill_9(child: &std::process::Child) {
    // SAFETY: sending SIGKILL to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
}

#[test]
fn kill_9_during_push_loses_nothing_and_wastes_nothing() {
    let env = Env::new();
    let src = env.path("src");
    // Enough data for several packs, so kills land between pack publications too.
    for i in 0..6 {
        write(
            &src.join(format!("shard-{i}.bin")),
            &noise(40 << 20, 100 + i),
        );
    }
    let total: u64 = 6 * (40 << 20);
    // Create the repository with an unrelated version first.
    let other = env.path("other");
    write(&other.join("x"), b"unrelated");
    env.push(&other, "ns/other", &[]);

    let mut killed_mid_push = 0;
    for delay_ms in [30u64, 120, 250, 400, 700, 1000] {
        let mut child = quiet_push(&env, &src);
        std::thread::sleep(Duration::from_millis(delay_ms));
        if child.try_wait().unwrap().is_none() {
            killed_mid_push += 1;
        }
        kill_9(&child);
        let status = child.wait().unwrap();
        if status.success() {
            break; // It finished before the kill: later delays prove nothing new.
        }
        let out = env.run(&["volume", "verify"]);
        assert!(
            out.status.success(),
            "verify after kill at {delay_ms} ms: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // Before the manifest is published, a killed push leaves no version. After it
        // (the push's commit point; only the stat-cache update follows), the version is
        // complete: it verified above and must be exactly the source's digest.
        let ls = env.ok(&["volume", "ls", "--json"]);
        if ls.contains("\"vol\"") {
            let sealed = env.ok(&["volume", "files", "ns/vol", "--json"]);
            let digest = env.ok(&["digest", src.to_str().unwrap()]);
            assert!(
                sealed.contains(digest.trim()),
                "a killed push left a wrong version"
            );
            break;
        }
    }
    assert!(killed_mid_push >= 2, "no kill landed during a push");
    // On a busy machine every kill above may land before the first pack is published.
    // One more, killed once the index shows a pack of its own: a kill after a
    // publication, whatever the machine's speed.
    let unrelated = 9;
    if env.stored_chunk_bytes() <= unrelated {
        let packs = |env: &Env| common::walk_files(&env.repo.join("index")).len();
        let before = packs(&env);
        let mut child = quiet_push(&env, &src);
        while packs(&env) == before && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(2));
        }
        kill_9(&child);
        child.wait().unwrap();
        let out = env.run(&["volume", "verify"]);
        assert!(
            out.status.success(),
            "verify after a kill past a publication"
        );
    }

    // Whatever made it into published packs is reused: the final push writes exactly
    // the bytes still missing (orphaned packs are re-indexed, not rewritten).
    let before = env.stored_chunk_bytes();
    let out = env.run(&["volume", "push", src.to_str().unwrap(), "ns/vol"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = env.stored_chunk_bytes();
    // The killed pushes' staging files are gone: their owners are dead.
    let staging: Vec<_> = common::walk_files(&env.repo.join("tmp"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "tmp"))
        .collect();
    assert!(staging.is_empty(), "left behind: {staging:?}");
    assert_eq!(after, total + unrelated, "every byte stored once");
    assert!(
        before > unrelated,
        "the killed pushes had published something"
    );
    env.ok(&["volume", "verify"]);
    let out_dir = env.path("out");
    let r = String::from_utf8_lossy(&out.stdout).trim().to_string();
    env.ok(&["volume", "pull", &r, out_dir.to_str().unwrap()]);
    common::assert_same_tree(&src, &out_dir);
}
