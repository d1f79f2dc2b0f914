//! The rough edges a new user hit in the CLI: unknown names are errors, hints are
//! about the command at hand, `diff --exit-code`, refs relative to a volume, `resolve`,
//! and summaries without rates of nothing.

use crate::common::{Env, write};

#[test]
fn an_unknown_namespace_is_an_error_that_lists_the_known_ones() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a"), b"a");
    env.push(&src, "weights/tiny", &[]);
    let err = env.fails(1, &["volume", "ls", "nothere"]);
    assert!(err.contains("no namespace nothere"), "{err}");
    assert!(err.contains("namespaces here: weights"), "{err}");
    let err = env.fails(1, &["volume", "ls", "nothere", "--json"]);
    assert!(err.contains("no namespace nothere"), "{err}");
    assert!(env.ok(&["volume", "ls", "weights"]).contains("tiny"));
}

#[test]
fn hints_are_about_the_command_at_hand() {
    let env = Env::new();
    let src = env.path("model");
    write(&src.join("config.json"), b"{}");
    let f = src.join("config.json");
    let err = env.fails(1, &["digest", f.to_str().unwrap()]);
    assert!(err.contains("is a file, not a directory"), "{err}");
    assert!(
        !err.contains("push"),
        "a hint about digest, not push: {err}"
    );

    let err = env.fails(1, &["--theme", "nope", "info"]);
    let hint = err.lines().find(|l| l.starts_with("hint:")).unwrap_or("");
    assert!(hint.contains("dark, light, high-contrast"), "{err}");
    assert!(
        !hint.contains("unknown theme"),
        "the hint does not repeat the error: {err}"
    );
    let themes = env.tmp.path().join("config/sealvol/themes");
    write(&themes.join("mine.toml"), b"extends = \"dark\"\n");
    let err = env.fails(1, &["--theme", "nope", "info"]);
    assert!(
        err.contains("high-contrast, mine"),
        "user themes are listed too: {err}"
    );
    env.ok(&["--theme", "mine", "info"]);
}

#[test]
fn diff_exit_code_and_refs_relative_to_the_first_volume() {
    let env = Env::new();
    let a = env.path("a");
    write(&a.join("x"), b"1");
    let b = env.path("b");
    write(&b.join("x"), b"2");
    let ra = env.push(&a, "weights/tiny", &["--tag", "prod"]);
    let rb = env.push(&b, "weights/tiny", &["--tag", "canary"]);
    // Relative: a tag, `:tag`, or `@digest` in FROM's volume.
    let whole = env.ok(&["volume", "diff", "weights/tiny:prod", "weights/tiny:canary"]);
    for to in [
        "canary",
        ":canary",
        &format!("@{}", &rb.split('@').nth(1).unwrap()[3..15]),
    ] {
        assert_eq!(
            env.ok(&["volume", "diff", "weights/tiny:prod", to]),
            whole,
            "{to}"
        );
    }
    let err = env.fails(1, &["volume", "diff", "weights/tiny:prod", "nope"]);
    assert!(err.contains("nope"), "{err}");

    // Without --exit-code a diff is a success either way; with it, 1 means "differ".
    assert!(env.run(&["volume", "diff", &ra, &rb]).status.success());
    let out = env.run(&["volume", "diff", &ra, &rb, "--exit-code"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("error:"));
    let out = env.run(&["volume", "diff", &ra, "prod", "--exit-code"]);
    assert_eq!(out.status.code(), Some(0));
    let out = env.run(&["volume", "diff", &ra, &rb, "--exit-code", "--json"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn resolve_prints_the_pinned_ref_for_scripts() {
    let env = Env::new();
    let a = env.path("a");
    write(&a.join("x"), b"1");
    let r = env.push(&a, "weights/tiny", &["--tag", "prod"]);
    for given in [
        "weights/tiny:prod",
        "weights/tiny",
        "vol:weights/tiny:prod",
        &r,
    ] {
        assert_eq!(env.ok(&["volume", "resolve", given]).trim(), r, "{given}");
    }
    let err = env.fails(1, &["volume", "resolve", "weights/tiny:nope"]);
    assert!(err.contains("no tag nope"), "{err}");
    env.fails(1, &["volume", "resolve", "weights/nothere"]);
}

#[test]
fn a_push_that_read_nothing_says_what_it_skipped_not_a_rate() {
    let env = Env::new();
    let a = env.path("a");
    write(&a.join("x"), b"12");
    // The stat cache trusts only files whose mtime and ctime are over a second older
    // than the push (a file changed in the last moment is hashed again, as git does).
    std::thread::sleep(std::time::Duration::from_millis(1100));
    env.push(&a, "t/v", &[]);
    let out = env.run(&["volume", "push", a.to_str().unwrap(), "t/v"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("B/s"), "{err}");
    assert!(err.contains("read nothing"), "{err}");
    assert!(err.contains("1 unchanged file(s) skipped"), "{err}");
    assert!(err.contains("already sealed"), "{err}");
}

/// The shell asks the binary for candidates (`COMPLETE=fish sealvol -- …`, as the
/// script `sealvol completions fish` installs does): refs complete to the volumes,
/// tags and digests of the repository in effect.
#[test]
fn completions_offer_volume_tag_and_digest_names() {
    let env = Env::new();
    let a = env.path("a");
    write(&a.join("x"), b"1");
    let r = env.push(&a, "weights/tiny", &["--tag", "prod"]);
    env.push(&a, "other/vol", &[]);
    let complete = |line: &[&str]| {
        let out = env
            .cmd()
            .env("COMPLETE", "fish")
            .arg("--")
            .args(line)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let got = complete(&["sealvol", "volume", "files", "weights/"]);
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        ["weights/tiny", "weights/tiny:prod"]
    );
    let got = complete(&["sealvol", "volume", "pull", "weights/tiny@"]);
    assert_eq!(
        got.trim(),
        format!("weights/tiny@{}", r.split('@').nth(1).unwrap())
    );
    let got = complete(&["sealvol", "volume", "versions", ""]);
    let names: Vec<&str> = got.lines().filter(|l| !l.starts_with('-')).collect();
    assert_eq!(names, ["other/vol", "weights/tiny"]);
    for shell in ["bash", "zsh", "fish", "elvish", "powershell", "nushell"] {
        let script = env.ok(&["completions", shell]);
        assert!(script.contains("sealvol"), "{shell}: {script}");
    }
    assert!(env.ok(&["completions", "bash"]).contains("COMPLETE"));
    assert!(
        env.ok(&["completions", "nushell"])
            .contains("export extern sealvol")
    );
}

/// A version's tags read the same in every table, the console's included (both use
/// `sealvol_views::format::tags`): `canary,prod`.
#[test]
fn tags_are_written_alike_in_every_table() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a"), b"a");
    env.push(&src, "weights/tiny", &["--tag", "prod", "--tag", "canary"]);
    let want = sealvol_views::format::tags(&["canary".to_string(), "prod".to_string()]);
    assert_eq!(want, "canary,prod");
    for args in [
        vec!["volume", "ls"],
        vec!["volume", "versions", "weights/tiny"],
    ] {
        let out = env.ok(&args);
        assert!(out.contains(&want), "{args:?}:\n{out}");
    }
}

/// Plain verify samples, but reads a small repository whole: its summary says which it
/// did and why, so it does not read as `--read-data` under another name.
#[test]
fn verify_says_what_it_read_and_why() {
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a"), b"some bytes");
    env.push(&src, "weights/tiny", &[]);
    let summary = |args: &[&str]| {
        let out = env.run(args);
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let plain = summary(&["volume", "verify"]);
    assert!(
        plain.contains(
            "(every pack: a repository under 256 MiB is read whole, a larger one sampled)"
        ),
        "{plain}"
    );
    let all = summary(&["volume", "verify", "--read-data"]);
    assert!(
        all.trim_end().ends_with("of chunk data (every pack)"),
        "{all}"
    );
    let one = summary(&["volume", "verify", "weights/tiny"]);
    assert!(one.trim_end().ends_with("(the version's)"), "{one}");
}
