//! `volume tag` under concurrent movers: each process says what its compare-and-swap
//! actually replaced, and the lines together are the tag's history.

use std::process::Stdio;

use crate::common::{Env, write};

#[test]
fn concurrent_tag_moves_each_print_what_they_replaced() {
    let env = Env::new();
    let mut refs = Vec::new();
    for i in 0..6 {
        let src = env.path(&format!("v{i}"));
        write(&src.join("f"), format!("version {i}").as_bytes());
        refs.push(env.push(&src, "t/race", &[]));
    }
    let children: Vec<_> = refs
        .iter()
        .map(|r| {
            env.cmd()
                .args(["volume", "tag", r, "race"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut lines: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
            assert!(out.status.success(), "{err}");
            err
        })
        .collect();
    lines.sort();
    let new: Vec<&String> = lines.iter().filter(|l| l.ends_with("(new)")).collect();
    assert_eq!(
        new.len(),
        1,
        "exactly one process created the tag: {lines:#?}"
    );

    // Every `from -> to` printed is one move of the recorded history, and the other way.
    let tags: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "tags", "t/race", "--json"])).unwrap();
    let history = tags["tags"][0]["history"].as_array().unwrap();
    assert_eq!(history.len(), 6, "{tags}");
    let short = |d: &serde_json::Value| d.as_str().unwrap().chars().take(15).collect::<String>();
    let mut recorded: Vec<String> = history
        .iter()
        .map(|m| match m["from"].is_null() {
            true => format!("tag race -> {} (new)", short(&m["to"])),
            false => format!("tag race: {} -> {}", short(&m["from"]), short(&m["to"])),
        })
        .collect();
    recorded.sort();
    assert_eq!(lines, recorded);
}

/// `volume tag --expires`: the time left is shown, the tag stops resolving once it is
/// over (the clock moved by `SEALVOL_NOW`) and keeps its history; a time that has
/// passed or that cannot be read is refused with the tag as it was.
#[test]
fn a_tag_with_an_expiry_shows_its_time_left_and_stops_resolving() {
    let env = Env::new();
    let src = env.path("v");
    write(&src.join("f"), b"one");
    let pinned = env.push(&src, "t/exp", &[]);
    let out = env.run(&["volume", "tag", &pinned, "preview", "--expires", "30d"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("tag preview expires at"),
        "{err}"
    );
    let tags = env.ok(&["volume", "tags", "t/exp"]);
    assert!(
        tags.contains("EXPIRES") && tags.contains("29d 23h"),
        "{tags}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "tags", "t/exp", "--json"])).unwrap();
    assert!(json["tags"][0]["expires"].as_str().is_some(), "{json}");

    let later = crate::common::days_ahead(31);
    let out = env
        .cmd()
        .env("SEALVOL_NOW", &later)
        .args(["volume", "resolve", "t/exp:preview"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("tag preview of vol:t/exp expired at"), "{err}");
    let history = env.ok_at(&later, &["volume", "tags", "t/exp", "--history"]);
    assert!(history.contains("preview"), "{history}");

    for (when, why) in [
        ("2020-01-01T00:00:00Z", "has passed"),
        ("0s", "has passed"),
        ("soonish", "neither a duration nor a time"),
        ("9000y", "past the year 9999"),
        ("10000-01-01T00:00:00Z", "neither a duration nor a time"),
    ] {
        let e = env.fails(1, &["volume", "tag", &pinned, "other", "--expires", when]);
        assert!(e.contains(why), "{when}: {e}");
    }
    assert!(!env.ok(&["volume", "tags", "t/exp"]).contains("other"));
}

/// `push --label`: labels show in `volume versions` (text and JSON) and leave the
/// digest alone; a label without `=` or a key given twice is refused, nothing sealed.
#[test]
fn labels_on_a_version_are_shown_and_are_not_part_of_its_digest() {
    let env = Env::new();
    let src = env.path("v");
    write(&src.join("f"), b"weights");
    let plain = env.ok(&["digest", src.to_str().unwrap()]);
    let pinned = env.push(
        &src,
        "t/lab",
        &["--label", "step=4000", "--label", "git=abc123"],
    );
    assert!(pinned.ends_with(plain.trim()), "{pinned} vs {plain}");
    let text = env.ok(&["volume", "versions", "t/lab"]);
    assert!(
        text.contains("LABELS") && text.contains("git=abc123, step=4000"),
        "{text}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "versions", "t/lab", "--json"])).unwrap();
    assert_eq!(json["versions"][0]["labels"]["step"], "4000", "{json}");

    let other = env.path("w");
    write(&other.join("f"), b"other weights");
    for (labels, why) in [
        (&["--label", "step"][..], "has no `=`"),
        (&["--label", "k=1", "--label", "k=2"][..], "given twice"),
        (&["--label", "Bad=1"][..], "invalid label key"),
    ] {
        let mut args = vec!["volume", "push", other.to_str().unwrap(), "t/lab"];
        args.extend_from_slice(labels);
        let e = env.fails(1, &args);
        assert!(e.contains(why), "{labels:?}: {e}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "versions", "t/lab", "--json"])).unwrap();
    assert_eq!(
        json["versions"].as_array().unwrap().len(),
        1,
        "nothing sealed"
    );
}

/// `volume describe`: one version in full, from any ref; an unknown one is one line.
#[test]
fn describe_says_everything_known_about_one_version() {
    let env = Env::new();
    let src = env.path("v");
    write(&src.join("w.bin"), b"weights");
    write(&src.join("cfg/c.json"), b"{}");
    let pinned = env.push(&src, "t/desc", &["--tag", "prod", "--label", "step=7"]);
    env.ok(&["volume", "tag", &pinned, "preview", "--expires", "2d"]);
    let text = env.ok(&["volume", "describe", "t/desc:prod"]);
    for want in [
        pinned.as_str(),
        "label      step=7",
        "2 file(s)",
        "tag        prod",
        "tag        preview (expires",
        "file://",
    ] {
        assert!(text.contains(want), "no {want:?} in\n{text}");
    }
    let e = env.fails(1, &["volume", "describe", "t/desc:nope"]);
    assert!(e.contains("nope"), "{e}");
    let e = env.fails(1, &["volume", "describe", "not a ref"]);
    assert!(e.contains("not a ref") || e.contains("invalid"), "{e}");
}
