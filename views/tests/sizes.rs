//! Every screen and overlay draws at any terminal size, down to 1×1, without panicking:
//! a console that dies when its pane is resized loses what the user was doing. Each
//! fixture, alone and with each overlay and status over it, is drawn at every size up
//! to 30×20 (where layouts run out of room and panics live) and over a grid across
//! 1..=200 × 1..=60 (every 7th width, every 4th height, the edges included).

use std::panic::{AssertUnwindSafe, catch_unwind};

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use sealvol_themes::Theme;
use sealvol_views::chrome::{Overlay, StatusKind};
use sealvol_views::{FrameView, draw, fixtures};

/// Each fixture, and each with every overlay and status it could carry.
fn frames() -> Vec<(String, FrameView)> {
    let overlays = [
        (
            "prompt",
            Overlay::Prompt {
                prefix: ":".into(),
                input: "diff weights/tiny-llama@8292a56d weights/tiny-llama@9c8e565f".into(),
                fresh: false,
                suggestions: vec![
                    ("diff".into(), "compare two versions".into()),
                    ("deployments".into(), "deployment files".into()),
                ],
            },
        ),
        (
            "prompt-fresh",
            Overlay::Prompt {
                prefix: "tag name: ".into(),
                input: "prod".into(),
                fresh: true,
                suggestions: Vec::new(),
            },
        ),
    ];
    let mut out = Vec::new();
    for (name, frame) in fixtures::all() {
        for (o, overlay) in &overlays {
            let mut f = frame.clone();
            f.overlay = Some(overlay.clone());
            out.push((format!("{name}+{o}"), f));
        }
        for (s, kind) in [("busy", StatusKind::Busy(3)), ("error", StatusKind::Error)] {
            let mut f = frame.clone();
            f.status.kind = kind;
            f.status.text = "a long status line that will not fit a narrow terminal at all".into();
            out.push((format!("{name}+{s}"), f));
        }
        out.push((name.to_string(), frame));
    }
    out
}

fn sizes() -> Vec<(u16, u16)> {
    let small = (1..=30u16).flat_map(|w| (1..=20u16).map(move |h| (w, h)));
    let wide = (1..=200u16).filter(|w| *w > 30 && (w % 7 == 0 || *w == 200));
    let tall = (1..=60u16).filter(|h| h % 4 == 1 || *h == 60);
    let grid = wide.flat_map(|w| tall.clone().map(move |h| (w, h)));
    let edges = (1..=60u16)
        .map(|h| (200, h))
        .chain((1..=200u16).map(|w| (w, 60)));
    let mut all: Vec<(u16, u16)> = small.chain(grid).chain(edges).collect();
    all.sort();
    all.dedup();
    all
}

#[test]
fn every_screen_and_overlay_draws_at_every_size() {
    let theme = Theme::preset("dark").unwrap();
    let frames = frames();
    let mut failed = Vec::new();
    // The panic hook would print thousands of lines; failures are collected instead.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // Sizes outside, frames inside: the frames share their chrome's layouts, which
    // ratatui caches by area, so each size's are solved once rather than per frame
    // (the solver was half of this test's time the other way round).
    let mut broken = vec![false; frames.len()];
    for (w, h) in sizes() {
        for (i, (name, frame)) in frames.iter().enumerate() {
            // One size per frame is enough to find it.
            if broken[i] {
                continue;
            }
            let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
            let drawn = catch_unwind(AssertUnwindSafe(|| {
                draw(frame, &theme, buf.area, &mut buf);
            }));
            if let Err(e) = drawn {
                let why = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.push(format!("{name} at {w}x{h}: {why}"));
                broken[i] = true;
            }
        }
    }
    std::panic::set_hook(hook);
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
