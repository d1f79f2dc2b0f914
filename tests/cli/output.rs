//! What the CLI prints: a write error is one line and exit 1 (never a panic), and names
//! with control characters cannot forge rows or drive the terminal.

use std::process::Stdio;

use crate::common::{Env, write};

fn dev_full() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full")
}

fn to_dev_full(env: &Env, args: &[&str]) -> (Option<i32>, String) {
    let full = dev_full();
    let out = env
        .cmd()
        .args(args)
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[test]
fn a_full_disk_on_stdout_is_a_one_line_error_not_a_panic() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"a");
    let r = env.push(&src, "ns/vol", &[]);
    let src2 = env.path("src2");
    write(&src2.join("b.txt"), b"b");
    let s2 = src2.to_str().unwrap();
    for args in [
        vec!["volume", "ls"],
        vec!["volume", "ls", "--json"],
        vec!["volume", "files", &r],
        vec!["volume", "versions", "ns/vol"],
        vec!["volume", "push", s2, "ns/vol"],
        vec!["volume", "tag", &r, "prod"],
        vec!["info"],
        vec!["digest", s2],
        vec!["completions", "bash"],
    ] {
        let (code, err) = to_dev_full(&env, &args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let first = err.lines().find(|l| l.starts_with("error:")).unwrap_or("");
        assert!(
            first.contains("cannot write to standard output") && first.contains("No space left"),
            "{args:?}: {err}"
        );
    }
}

/// Standard error on a full disk: nothing can be said, so the exit code says it (1),
/// and nothing panics (`eprintln!` did, with exit 101); so also with both streams full,
/// for `--help`, and for a command that succeeds but has notes to write.
#[test]
fn a_full_disk_on_stderr_exits_1_without_a_panic() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"a");
    let s = src.to_str().unwrap();
    for (args, both) in [
        (vec!["volume", "versions", "no/such"], false),
        (vec!["volume", "versions", "no/such"], true),
        (vec!["volume", "push", s, "ns/vol"], false),
        (vec!["-vv", "volume", "ls"], false),
        (vec!["volume", "nosuch"], false),
        (vec!["--help"], true),
        (vec!["volume", "ls", "--json"], true),
    ] {
        let mut cmd = env.cmd();
        cmd.args(&args).stderr(Stdio::from(dev_full()));
        cmd.stdout(match both {
            true => Stdio::from(dev_full()),
            false => Stdio::null(),
        });
        let status = cmd.status().unwrap();
        assert_eq!(status.code(), Some(1), "{args:?} (stdout full too: {both})");
    }
    // The push went through: only what it had to say was lost.
    let versions = env.ok(&["volume", "versions", "ns/vol", "--json"]);
    assert!(versions.contains("b3:"), "{versions}");
}

#[test]
fn names_with_control_characters_are_escaped_in_text_and_exact_in_json() {
    let env = Env::new();
    let src = env.path("src");
    let forged = "model.bin\n1 B      b3:0000000000000000  innocent.txt";
    write(&src.join(forged), b"weights");
    write(&src.join("red\x1b[31m.txt"), b"colour");
    let r = env.push(&src, "ns/vol", &[]);

    let files = env.ok(&["volume", "files", &r]);
    assert_eq!(files.lines().count(), 3, "a header and two rows:\n{files}");
    assert!(!files.contains('\x1b'), "{files:?}");
    assert!(
        files.contains(r#""model.bin\n1 B      b3:0000000000000000  innocent.txt""#),
        "{files}"
    );
    assert!(files.contains(r#""red\x1b[31m.txt""#), "{files}");

    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "files", &r, "--json"])).unwrap();
    let paths: Vec<&str> = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert!(paths.contains(&forged), "{paths:?}");

    let empty = env.path("empty");
    std::fs::create_dir_all(&empty).unwrap();
    write(&empty.join("x"), b"x");
    let r0 = env.push(&empty, "ns/vol", &[]);
    let diff = env.ok(&["volume", "diff", &r0, &r]);
    assert!(!diff.contains('\x1b'), "{diff:?}");
    assert_eq!(
        diff.lines().filter(|l| l.starts_with("+ ")).count(),
        2,
        "{diff}"
    );
}

/// A file name that is not UTF-8 is named with C escapes, not U+FFFD, so that the one
/// meant can be found (and told from a name that differs only there).
#[test]
fn a_name_that_is_not_utf8_is_shown_with_c_escapes() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("ok.txt"), b"y");
    let bad = src.join(std::ffi::OsStr::from_bytes(b"bad\xffname.bin"));
    std::fs::write(&bad, b"x").unwrap();
    let err = env.fails(1, &["volume", "push", src.to_str().unwrap(), "ns/vol"]);
    assert!(err.contains("bad\\xFFname.bin"), "{err}");
    assert!(!err.contains('\u{FFFD}'), "{err}");
}

/// What a writer sent (where its folder was, who it says it is) is shown escaped by
/// every printer, never as it is: a folder named with an OSC 52 clipboard write and a
/// screen clear, and a user name holding them, drive no terminal.
#[test]
fn strings_a_writer_sent_are_shown_escaped_wherever_printed() {
    let mut env = Env::new();
    let evil = "\x1b]52;c;ZWNobyBvd25lZA==\x07\x1b[2J";
    let src = env.path(&format!("src{evil}"));
    write(&src.join("a.txt"), b"a");
    env.vars.push(("USER".into(), format!("ana{evil}")));
    let r = env.push(&src, "ns/vol", &["--tag", "prod"]);
    let other = env.path("other");
    write(&other.join("b.txt"), b"b");
    env.push(&other, "ns/vol", &["--tag", "prod"]);
    let described = env.ok(&["volume", "describe", &r]);
    assert!(described.contains(r"\x1b]52"), "{described}");
    for args in [
        vec!["volume", "describe", r.as_str()],
        vec!["volume", "versions", "ns/vol"],
        vec!["volume", "tags", "ns/vol", "--history"],
        vec!["volume", "delete", r.as_str(), "--yes"],
        vec!["volume", "trash"],
    ] {
        let out = env.run(&args);
        assert!(out.status.success(), "{args:?}");
        for stream in [&out.stdout, &out.stderr] {
            let text = String::from_utf8_lossy(stream);
            assert!(
                !text.contains('\x1b') && !text.contains('\x07'),
                "{args:?} printed a control character: {text:?}"
            );
        }
    }
}

/// A first push to a folder that is not a repository yet makes it one and says so in
/// one line, so a mistyped SEALVOL_REPO is seen at once; later pushes say nothing of it.
#[test]
fn a_first_push_says_it_created_the_repository() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"a");
    let typo = env.path("repo-typo");
    let first = env
        .cmd()
        .args(["--repo", typo.to_str().unwrap(), "volume", "push"])
        .args([src.to_str().unwrap(), "t/a"])
        .output()
        .unwrap();
    assert!(first.status.success());
    let said = String::from_utf8_lossy(&first.stderr);
    assert!(
        said.contains(&format!("created a repository at {}", typo.display())),
        "{said}"
    );
    let again = env
        .cmd()
        .args(["--repo", typo.to_str().unwrap(), "volume", "push"])
        .args([src.to_str().unwrap(), "t/a"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&again.stderr).contains("created a repository"));

    // --json says so too (and only the first time).
    let other = env.path("other-typo");
    let push_json = |repo: &std::path::Path| -> serde_json::Value {
        let out = env
            .cmd()
            .args(["--repo", repo.to_str().unwrap(), "volume", "push"])
            .args([src.to_str().unwrap(), "t/a", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(
        push_json(&other)["created_repository"],
        other.display().to_string()
    );
    assert!(push_json(&other).get("created_repository").is_none());
}
