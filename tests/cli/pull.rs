//! What `volume pull` prints of what it did to the target, and a pull killed by a
//! signal, whose temporaries the next pull removes. That the target is exactly the
//! version after any pull (refused unless empty or forced, symlinks never followed,
//! files already right kept, subsets) is tested in process: `engine/core/tests/pull_target.rs`.

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
fn a_pull_says_what_is_in_the_way_what_it_removed_kept_and_took() {
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
    write(&out.join("keep"), b"mine");
    let err = env.fails(1, &["volume", "pull", &rb, out.to_str().unwrap()]);
    assert!(
        err.contains("not empty")
            && err.contains("big.bin, config.json, keep in the way")
            && err.contains("--force"),
        "{err}"
    );
    let o = env.run(&["volume", "pull", &rb, out.to_str().unwrap(), "--force"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("removed 1 path(s) the version does not hold:\n  - keep\n"),
        "{err}"
    );
    assert!(err.contains("kept 1 file(s) already there"), "{err}");
    assert_eq!(digest(&env, &out), pinned_digest(&rb));
    // A subset says it is one.
    let configs = env.path("configs");
    let o = env.run(&[
        "volume",
        "pull",
        &rb,
        configs.to_str().unwrap(),
        "--include",
        "*.json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("1 file(s)") && err.contains("--include"),
        "{err}"
    );
    let e = env.fails(
        1,
        &[
            "volume",
            "pull",
            &rb,
            env.path("x").to_str().unwrap(),
            "--include",
            "[oops",
        ],
    );
    assert!(e.contains("bad pattern"), "{e}");
}
