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
