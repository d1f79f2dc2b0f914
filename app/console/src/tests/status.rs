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
        h.status()
            .starts_with("/tiny: 1 match · 2 volume(s) in 2 namespace(s)"),
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

/// An error longer than the status line is cut there, and `L` shows it in full, with
/// the messages before it; the moving keys scroll that window (and the help) instead of
/// closing it, and any other key closes it.
#[test]
fn a_cut_error_is_read_in_full_with_l_and_g_scrolls_the_help() {
    let mut h = harness(false);
    h.keys(":");
    let long = format!("versions weights/{}", "x".repeat(50));
    h.typed(&long);
    h.keys("enter");
    let error = h.status();
    assert!(error.contains("no volume weights/xxx"), "{error}");
    // Drawn at 60 columns the line is cut, and says where the rest is.
    let frame = h.model.frame(&h.keys);
    let mut buf = ratatui::buffer::Buffer::empty(ratatui::layout::Rect::new(0, 0, 60, 10));
    let theme = sealvol_themes::Theme::preset("dark").unwrap();
    sealvol_views::draw(&frame, &theme, buf.area, &mut buf);
    let last: String = (0..60).map(|x| buf[(x, 9)].symbol().to_string()).collect();
    assert!(last.contains("… (L: in full)"), "{last:?}");
    // The keys that find everything else stay beside a cut message.
    assert!(
        last.contains("? help") && last.contains(": command"),
        "{last:?}"
    );

    h.keys("L");
    let Some(ViewOverlay::Messages { messages, offset }) = h.model.frame(&h.keys).overlay else {
        panic!("no messages window")
    };
    assert_eq!(offset, 0);
    assert_eq!(
        messages[0],
        (error.clone(), true),
        "newest first, whole, marked an error"
    );
    assert!(messages.iter().any(|(m, e)| m.contains("volume(s)") && !e));
    h.keys("j G");
    assert!(
        matches!(h.model.frame(&h.keys).overlay, Some(ViewOverlay::Messages { offset, .. }) if offset > 0),
        "j and G scroll"
    );
    h.keys("x");
    assert!(
        h.model.frame(&h.keys).overlay.is_none(),
        "another key closes it"
    );

    h.keys("?");
    h.keys("G");
    assert!(
        matches!(h.model.frame(&h.keys).overlay, Some(ViewOverlay::Help { offset, .. }) if offset > 0),
        "G scrolls the help to its end instead of closing it"
    );
    h.keys("g");
    assert!(matches!(
        h.model.frame(&h.keys).overlay,
        Some(ViewOverlay::Help { offset: 0, .. })
    ));
    h.keys("esc");
    assert!(h.model.frame(&h.keys).overlay.is_none());
}
