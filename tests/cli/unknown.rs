//! A misspelt volume or tag gets one answer from every command that takes a ref:
//! `no volume weights/tinny; did you mean weights/tiny?` (never a missing tag or version
//! of a volume that does not exist), and a misspelt tag its own suggestion.

use crate::common::{Env, write};

fn two_volumes(env: &Env) -> String {
    let src = env.path("src");
    write(&src.join("config.json"), b"{}");
    let r = env.push(&src, "weights/tiny", &["--tag", "prod"]);
    write(&src.join("config.json"), b"{\"a\": 1}");
    env.push(&src, "tokenizers/bpe-32k", &[]);
    r
}

#[test]
fn every_command_that_takes_a_ref_says_the_same_about_an_unknown_volume() {
    let env = Env::new();
    let pinned = two_volumes(&env);
    let digest = pinned.split('@').nth(1).unwrap().to_string();
    let short = &digest[..11]; // b3:+8 hex
    let out = env.path("out");
    let mnt = env.path("mnt");
    let other = env.path("other-repo");
    let at = format!("weights/tinny@{short}");
    let full = format!("weights/tinny@{digest}");
    let (out, mnt, other) = (
        out.to_str().unwrap(),
        mnt.to_str().unwrap(),
        other.to_str().unwrap(),
    );
    let commands: Vec<Vec<&str>> = vec![
        vec!["volume", "versions", "weights/tinny"],
        vec!["volume", "tags", "weights/tinny"],
        vec!["volume", "files", "weights/tinny"],
        vec!["volume", "files", "weights/tinny:prod"],
        vec!["volume", "resolve", &at],
        vec!["volume", "resolve", &full],
        vec!["volume", "resolve", "weights/tinny:prod"],
        vec!["volume", "pull", "weights/tinny", out],
        vec!["volume", "pull", "weights/tinny:prod", out],
        vec!["volume", "mount", "weights/tinny:prod", mnt],
        vec!["volume", "tag", &at, "canary"],
        vec!["volume", "tag", "weights/tinny:prod", "canary"],
        vec!["volume", "untag", "weights/tinny:prod"],
        vec!["volume", "diff", "weights/tinny:prod", "weights/tiny:prod"],
        vec!["volume", "diff", "weights/tiny:prod", "weights/tinny:prod"],
        vec!["volume", "mirror", "weights/tinny:prod", "--to", other],
        vec!["volume", "delete", &at, "--yes"],
        vec!["volume", "trash", "weights/tinny"],
        vec!["volume", "restore", &at],
        vec!["volume", "verify", "weights/tinny:prod"],
        vec!["volume", "profile", "save", "weights/tinny:prod"],
    ];
    for args in &commands {
        let err = env.fails(1, args);
        let first = err.lines().find(|l| l.starts_with("error:")).unwrap();
        assert_eq!(
            first, "error: no volume weights/tinny; did you mean weights/tiny?",
            "sealvol {args:?}:\n{err}"
        );
        assert!(
            err.contains("hint: list volumes with `sealvol volume ls`"),
            "sealvol {args:?}:\n{err}"
        );
    }
    // Nothing near: no suggestion, the same error.
    let err = env.fails(1, &["volume", "pull", "datasets/evals", out]);
    assert!(
        err.starts_with("error: no volume datasets/evals\n"),
        "{err}"
    );
    // A prefix of a name, and a namespace typo.
    let err = env.fails(1, &["volume", "versions", "tokenizers/bpe"]);
    assert!(err.contains("did you mean tokenizers/bpe-32k?"), "{err}");
    let err = env.fails(1, &["volume", "versions", "weight/tiny"]);
    assert!(err.contains("did you mean weights/tiny?"), "{err}");
}

#[test]
fn a_misspelt_tag_is_answered_with_the_nearest_tag() {
    let env = Env::new();
    two_volumes(&env);
    let out = env.path("out");
    for args in [
        vec!["volume", "pull", "weights/tiny:prdo", out.to_str().unwrap()],
        vec!["volume", "resolve", "weights/tiny:prdo"],
        vec!["volume", "untag", "weights/tiny:prdo"],
    ] {
        let err = env.fails(1, &args);
        assert!(
            err.starts_with("error: no tag prdo on vol:weights/tiny; did you mean prod?\n"),
            "sealvol {args:?}:\n{err}"
        );
        assert!(err.contains("sealvol volume tags weights/tiny"), "{err}");
    }
    let err = env.fails(1, &["volume", "resolve", "weights/tiny:staging"]);
    assert!(
        err.starts_with("error: no tag staging on vol:weights/tiny\n"),
        "{err}"
    );
}
