//! Exit codes (0 success, 1 any failure, 2 command-line usage only, as the README
//! says) and a state directory that is its user's alone.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::{Env, write};

#[test]
fn refused_input_exits_1_and_only_command_line_usage_exits_2() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a"), b"a");
    let r = env.push(&src, "ns/vol", &[]);
    let s = src.to_str().unwrap();
    for args in [
        vec!["volume", "files", "not a ref"],
        vec!["volume", "push", s, "Bad/Name"],
        vec!["volume", "tag", &r, "UPPER"],
        vec!["volume", "files", "ns/nothere"],
        vec!["volume", "pull", &r, "/proc/version"],
        vec!["volume", "sync", "ftp://x/y", "a/b"],
        vec!["digest", "/no/such/dir"],
        vec![
            "volume",
            "mount",
            &r,
            "/no/such/dir",
            "--cache-size",
            "lots",
        ],
    ] {
        let out = env.run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    }
    for args in [
        vec!["volume", "push"],
        vec!["volume", "nosuchcommand"],
        vec!["--no-such-flag"],
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    // No command and no terminal for the console is command-line usage too.
    let out = env.run(&[]);
    assert_eq!(out.status.code(), Some(2));
}

fn walk(dir: &Path, found: &mut Vec<(String, u32, bool)>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        found.push((
            e.path().display().to_string(),
            m.permissions().mode() & 0o777,
            m.is_dir(),
        ));
        if m.is_dir() {
            walk(&e.path(), found);
        }
    }
}

#[test]
fn the_state_directory_is_private_to_its_user() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a"), b"a");
    env.push(&src, "ns/vol", &[]);
    env.set_secret("token", "s3cr3t");
    env.ok(&["jobs", "ls"]);
    let out = env
        .cmd()
        .args(["volume", "sync", src.to_str().unwrap(), "ns/synced"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let top = std::fs::metadata(&env.state).unwrap().permissions().mode() & 0o777;
    assert_eq!(top, 0o700);
    let mut found = Vec::new();
    walk(&env.state, &mut found);
    assert!(
        found.iter().any(|(p, _, _)| p.ends_with("state.redb")),
        "{found:?}"
    );
    for (path, mode, is_dir) in &found {
        let want = if *is_dir { 0o700 } else { 0o600 };
        assert_eq!(mode & !want, 0, "{path} is {mode:o}");
    }
}
