//! The palette as a new user types into it: wrong names are errors and the console
//! stays put, refs are relative to the volume shown, the list and Tab completion help.

use sealvol_views::Body;
use sealvol_views::chrome::Overlay as ViewOverlay;

use super::harness;

fn kind(h: &super::Harness) -> &'static str {
    match h.model.frame(&h.keys).body {
        Body::Volumes(_) => "volumes",
        Body::Versions(_) => "versions",
        Body::Tags(_) => "tags",
        Body::Files(_) => "files",
        Body::Diff(_) => "diff",
        Body::Mounts(_) => "mounts",
        Body::Jobs(_) => "jobs",
        Body::Trash(_) => "trash",
        Body::Watch(_) => "watch",
        Body::Deployments(_) => "deployments",
        Body::Rollback(_) => "rollback",
        Body::Empty(_) => "empty",
    }
}

fn command(h: &mut super::Harness, line: &str) {
    h.keys(":");
    h.typed(line);
    h.keys("enter");
}

#[test]
fn unknown_names_are_errors_and_the_screen_stays() {
    let mut h = harness(false);
    h.keys("enter");
    assert_eq!(kind(&h), "versions");
    for (line, says) in [
        ("tags weights/nothere", "no volume weights/nothere"),
        (
            "versions weights/tinny",
            "no volume weights/tinny; did you mean weights/tiny?",
        ),
        ("versions weights/nothere", "no volume weights/nothere"),
        ("files weights/tiny:nope", "no tag nope"),
        ("diff weights/tiny:prod weights/tiny:nope", "no tag nope"),
        ("diff weights/tiny:prod nope", "no tag nope"),
    ] {
        command(&mut h, line);
        assert_eq!(kind(&h), "versions", "{line} left the versions screen");
        assert!(h.status().contains(says), "{line}: {}", h.status());
        assert!(
            h.model.frame(&h.keys).status.kind == sealvol_views::chrome::StatusKind::Error,
            "{line}"
        );
    }
    // What exists opens.
    command(&mut h, "tags weights/tiny");
    assert_eq!(kind(&h), "tags");
}

#[test]
fn refs_on_a_volumes_screens_are_relative_to_it() {
    let mut h = harness(false);
    h.node
        .repo
        .move_tag(
            &sealvol_core::VolumeName::parse("weights/tiny").unwrap(),
            &sealvol_core::Name::parse("tag", "canary").unwrap(),
            &h.v1,
            None,
        )
        .unwrap();
    // adapters/lora sorts first; weights/tiny is the second row.
    h.keys("j enter");
    command(&mut h, "diff prod canary");
    let Body::Diff(d) = h.model.frame(&h.keys).body else {
        panic!("{}", h.status())
    };
    assert!(
        d.from.contains("weights/tiny@") && d.to.contains("weights/tiny@"),
        "{} {}",
        d.from,
        d.to
    );
    assert!(
        d.from.contains(&h.v2.to_string()[..15]),
        "prod is v2: {}",
        d.from
    );
    assert!(
        d.to.contains(&h.v1.to_string()[..15]),
        "canary is v1: {}",
        d.to
    );
}

#[test]
fn the_palette_lists_commands_as_you_type_and_tab_completes() {
    let mut h = harness(false);
    h.keys(":");
    let ViewOverlay::Prompt { suggestions, .. } = h.model.frame(&h.keys).overlay.unwrap() else {
        panic!()
    };
    assert!(
        suggestions.len() >= 7,
        "every command listed: {suggestions:?}"
    );
    h.typed("ve");
    let ViewOverlay::Prompt { suggestions, .. } = h.model.frame(&h.keys).overlay.unwrap() else {
        panic!()
    };
    assert_eq!(suggestions.len(), 1);
    assert!(suggestions[0].0.starts_with("versions"));
    h.keys("tab");
    h.typed("w");
    h.keys("tab");
    let ViewOverlay::Prompt { input, .. } = h.model.frame(&h.keys).overlay.unwrap() else {
        panic!()
    };
    assert_eq!(input, "versions weights/tiny ");
    h.keys("enter");
    assert_eq!(kind(&h), "versions");
    h.keys(":");
    h.typed("files weights/tiny:p");
    h.keys("tab");
    let ViewOverlay::Prompt { input, .. } = h.model.frame(&h.keys).overlay.unwrap() else {
        panic!()
    };
    assert_eq!(input, "files weights/tiny:prod ");
}

#[test]
fn the_point_tag_prompt_says_what_it_asks_and_offers_the_tags() {
    let mut h = harness(false);
    h.keys("j enter p");
    let ViewOverlay::Prompt { prefix, .. } = h.model.frame(&h.keys).overlay.unwrap() else {
        panic!()
    };
    assert!(prefix.starts_with("tag to point at b3:"), "{prefix}");
    assert!(prefix.contains("prod or a new name"), "{prefix}");
}
