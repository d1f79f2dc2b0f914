//! Local folders, and inputs refused before any job exists.

use super::*;

#[test]
fn bad_inputs_are_refused_before_any_job_exists() {
    let env = Env::new();
    let ep = "http://127.0.0.1:9";
    for (args, code) in [
        (vec!["volume", "sync", "ftp://x/y", "a/b"], 1),
        (vec!["volume", "sync", "s3://bucket/p", "not-a-volume"], 1),
        (
            vec!["volume", "sync", "s3://bucket/p", "a/b", "--tag", "Bad Tag"],
            1,
        ),
        (
            vec![
                "volume",
                "sync",
                "s3://bucket/p",
                "a/b",
                "--include",
                "[oops",
            ],
            1,
        ),
        (
            vec![
                "volume",
                "sync",
                "s3://bucket/p",
                "a/b",
                "--secret",
                "nosuch",
            ],
            1,
        ),
        (vec!["jobs", "show", "42"], 1),
        (vec!["jobs", "retry", "42"], 1),
    ] {
        let (got, err) = fails(s3_cmd(&env, ep), &args);
        assert_eq!(got, code, "{args:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{err}"
        );
    }
    assert!(env.ok(&["jobs", "ls", "--json"]).contains("\"jobs\": []"));
}
