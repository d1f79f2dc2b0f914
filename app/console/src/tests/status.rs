//! The status line belongs to the screen shown, an error lasts until the next key, and
//! `/` filters every list screen and opens the current filter for editing.

use sealvol_views::Body;
use sealvol_views::chrome::Overlay as ViewOverlay;

use super::harness;

#[test]
fn each_screen_owns_its_status_and_an_error_lasts_one_key() {
    let mut h = harness(false);
    assert!(h.status().contains("volume(s)"), "{}", h.status());
    h.keys("enter");
    assert!(h.status().contains("version(s) of"), "{}", h.status());
    h.keys("t");
    assert!(
        !h.status().contains("version(s) of"),
        "stale: {}",
        h.status()
    );
    assert!(h.status().contains("tag(s) on"), "{}", h.status());
    h.keys("J");
    assert!(
        !h.status().contains("tag(s) on"),
        "stale on jobs: {}",
        h.status()
    );

    h.keys(":");
    h.typed("frobnicate");
    h.keys("enter");
    assert!(h.status().contains("unknown command"));
    h.keys("j");
    assert!(!h.status().contains("unknown command"), "{}", h.status());
}

#[test]
fn a_second_slash_edits_the_filter_and_every_list_screen_filters() {
    let mut h = harness(false);
    h.keys("/");
    h.typed("lora");
    h.keys("enter /");
    let ViewOverlay::Prompt { input, fresh, .. } = h.model.frame(&h.keys).overlay.unwrap() else {
        panic!()
    };
    assert_eq!((input.as_str(), fresh), ("lora", true), "shown, to edit");
    h.typed("tiny");
    h.keys("enter");
    let Body::Volumes(v) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(v.rows.len(), 1, "typing replaced the old filter");
    assert!(v.rows[0].name.contains("tiny"));
    // The status line counts what the filter leaves, beside the screen's own count.
    assert!(
        h.status().starts_with("/tiny: 1 match · 2 volume(s) in 2 namespace(s)"),
        "{}",
        h.status()
    );
    h.keys("/ backspace");
    h.typed("x");
    let ViewOverlay::Prompt { input, .. } = h.model.frame(&h.keys).overlay.unwrap() else {
        panic!()
    };
    assert_eq!(input, "x", "backspace on a shown filter clears it");
    h.keys("esc");

    // The files screen filters too.
    h.keys("j enter enter");
    let Body::Files(f) = h.model.frame(&h.keys).body else {
        panic!("{}", h.status())
    };
    assert_eq!(f.rows.len(), 1);
    h.keys("/");
    h.typed("nothing-matches");
    let Body::Files(f) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(f.rows.len(), 0, "/ filters the files screen");
}
