//! Every screen in every preset theme at the two terminal sizes a new user is likely to
//! have (80×24, and a 50×15 split pane), as insta snapshots of the buffer (text and
//! style spans), plus direct checks of the colours that carry meaning and of what a
//! narrow terminal must still show. The wide layout is in `screenshots/` (120×32).

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;
use sealvol_themes::{PRESETS, Role, Theme};
use sealvol_views::{FrameView, draw, fixtures};

fn render(frame: &FrameView, theme: &Theme, w: u16, h: u16) -> Buffer {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| draw(frame, theme, f.area(), f.buffer_mut()))
        .unwrap();
    t.backend().buffer().clone()
}

#[test]
fn snapshots_of_every_screen_theme_and_size() {
    for (name, frame) in fixtures::all() {
        for theme in PRESETS {
            let th = Theme::preset(theme).unwrap();
            for (w, h) in [(80, 24), (50, 15)] {
                let buf = render(&frame, &th, w, h);
                insta::assert_debug_snapshot!(format!("{name}-{theme}-{w}x{h}"), buf);
            }
        }
    }
}

fn text(buf: &Buffer) -> Vec<String> {
    (0..buf.area.height)
        .map(|y| {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect()
        })
        .collect()
}

/// At 50×15 the versions screen still shows which version is prod, and no header is
/// cut mid-word; the help window scrolls instead of losing keys.
#[test]
fn a_narrow_terminal_keeps_what_matters() {
    let th = Theme::preset("dark").unwrap();
    let lines = text(&render(&fixtures::versions(), &th, 50, 15));
    assert!(
        lines[1].contains("DIGEST") && lines[1].contains("TAGS"),
        "{lines:#?}"
    );
    assert!(lines.iter().any(|l| l.contains("prod")), "{lines:#?}");
    for (name, frame) in fixtures::all() {
        for (w, h) in [(80, 24), (50, 15)] {
            let lines = text(&render(&frame, &th, w, h));
            // The breadcrumbs and the repository path never run into each other.
            assert!(
                !lines[0].contains("versions~") && !lines[0].contains("tags~"),
                "{name}: {}",
                lines[0]
            );
            for word in lines[1].split_whitespace() {
                assert!(
                    word.len() > 1 || word == "=" || word.chars().all(|c| !c.is_ascii_uppercase()),
                    "{name} {w}x{h}: a header cut to {word:?}: {}",
                    lines[1]
                );
            }
        }
    }
    let mut help = fixtures::help();
    if let Some(sealvol_views::chrome::Overlay::Help { bindings, .. }) = &mut help.overlay {
        for i in 0..20 {
            bindings.push((format!("k{i}"), format!("key {i}")));
        }
    }
    let lines = text(&render(&help, &th, 50, 15));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("j/k scroll") && l.contains("more below")),
        "{lines:#?}"
    );
}

/// The first cell whose text starts `needle` on some line.
fn find(buf: &Buffer, needle: &str) -> (u16, u16) {
    let area = buf.area;
    for y in 0..area.height {
        let line: String = (0..area.width)
            .map(|x| buf[(x, y)].symbol().to_string())
            .collect();
        if let Some(i) = line.find(needle) {
            let x = line[..i].chars().count() as u16;
            return (x, y);
        }
    }
    panic!("{needle:?} not on screen");
}

fn fg(buf: &Buffer, at: (u16, u16)) -> Color {
    buf[at].fg
}

#[test]
fn colours_that_carry_meaning() {
    for theme in PRESETS {
        let th = Theme::preset(theme).unwrap();
        let want = |r: Role| th.style(r).fg.unwrap();

        let b = render(&fixtures::tags(), &th, 120, 40);
        assert_eq!(fg(&b, find(&b, "(created)")), want(Role::Dim), "{theme}");
        // In the history, where a tag came from is "removed", where it went "added".
        let from = find(&b, "WHEN");
        let row = from.1 + 1;
        let line: String = (0..120).map(|x| b[(x, row)].symbol().to_string()).collect();
        let from_x = line.find("b3:").unwrap() as u16;
        // The selected history row is highlighted; check the next one, unselected.
        let line2: String = (0..120)
            .map(|x| b[(x, row + 1)].symbol().to_string())
            .collect();
        assert!(line2.contains("(created)"), "{line2}");
        let to_x = line2.find("b3:").unwrap() as u16;
        assert_eq!(fg(&b, (to_x, row + 1)), want(Role::Added), "{theme}");
        assert_ne!(from_x, 0);

        let b = render(&fixtures::confirm(), &th, 80, 24);
        let y = find(&b, " y ");
        assert_eq!(
            b[y].bg,
            th.style(Role::Danger).bg.unwrap(),
            "{theme}: confirm key is danger"
        );
        assert_eq!(fg(&b, find(&b, "from b3:")), want(Role::Removed), "{theme}");
        assert_eq!(fg(&b, find(&b, "to   b3:")), want(Role::Added), "{theme}");

        let b = render(&fixtures::diff(), &th, 120, 40);
        assert_eq!(fg(&b, find(&b, "notes.md")), want(Role::Added), "{theme}");
        assert_eq!(
            fg(&b, find(&b, "tokenizer_config.json")),
            want(Role::Removed),
            "{theme}"
        );
        assert_eq!(
            fg(&b, find(&b, "model.lora_extra")),
            want(Role::Added),
            "{theme}"
        );
        assert_eq!(
            fg(&b, find(&b, "model.layers.230.old")),
            want(Role::Removed),
            "{theme}"
        );
        assert_eq!(
            fg(&b, find(&b, "config.json")),
            want(Role::Modified),
            "{theme}"
        );

        let b = render(&fixtures::versions(), &th, 120, 40);
        assert_eq!(fg(&b, find(&b, "+16.0 GiB")), want(Role::Added), "{theme}");
        assert_eq!(
            b[find(&b, "◆")].bg,
            th.style(Role::Mark).bg.unwrap(),
            "{theme}: mark"
        );
        let pinned = find(&b, "pinned only");
        assert_eq!(fg(&b, pinned), want(Role::Dim), "{theme}");

        let b = render(&fixtures::jobs(), &th, 120, 40);
        assert_eq!(fg(&b, find(&b, "FAILED")), want(Role::Danger), "{theme}");
        assert_eq!(fg(&b, find(&b, "1210 new")), want(Role::Added), "{theme}");
        assert_eq!(fg(&b, find(&b, "▸ reading")), want(Role::Gauge), "{theme}");
        let b = render(&fixtures::job_failed(), &th, 120, 40);
        assert_eq!(fg(&b, find(&b, " error: ")), want(Role::Danger), "{theme}");
        // The error is shown in full, wrapped, up to its last words.
        find(&b, "pass --secret NAME)");
    }
}

#[test]
fn ten_thousand_versions_draw_only_what_fits() {
    use sealvol_views::versions::VersionsView;
    let rows: Vec<_> = (0..10_000)
        .map(|i| {
            let mut r = fixtures::version_rows()[i % 3].clone();
            r.digest = format!("b3:{i:064x}");
            r
        })
        .collect();
    let mut frame = fixtures::versions();
    frame.body = sealvol_views::Body::Versions(VersionsView {
        volume: "weights/big".into(),
        rows,
        selected: 9_999,
        marked: None,
    });
    let b = render(&frame, &Theme::preset("dark").unwrap(), 120, 40);
    let text: String = (0..40)
        .flat_map(|y| (0..120).map(move |x| (x, y)))
        .map(|p| b[p].symbol().to_string())
        .collect();
    assert!(text.contains(&format!("b3:{}", &format!("{:064x}", 9_999)[..12])));
    assert!(text.contains("10000/10000"));
}

/// `screenshots/` must show what the code draws: regenerate with
/// `bash scripts/screenshots.sh` when a screen changes.
#[test]
fn screenshots_are_up_to_date() {
    use ratatui::layout::Rect;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../screenshots");
    for theme_name in PRESETS {
        let theme = Theme::preset(theme_name).unwrap();
        for (name, frame) in fixtures::all() {
            let mut buf = Buffer::empty(Rect::new(0, 0, 120, 32));
            draw(&frame, &theme, buf.area, &mut buf);
            let want =
                sealvol_views::svg::render(&buf, &theme, fixtures::page_background(theme_name));
            let path = dir.join(format!("{name}-{theme_name}.svg"));
            let have = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                have == want,
                "{} is stale: run `bash scripts/screenshots.sh`",
                path.display()
            );
        }
    }
}

/// Every confirmation says how to confirm at any size the console draws, and at 80×24
/// a long one (full digests in every line, more lines than fit) still shows its title,
/// its first lines cut with `…` rather than wrapped mid-digest, how many lines it left
/// out, and the `y`/`n` line; `f` (full) wraps them instead.
#[test]
fn a_confirmation_fits_any_size_and_always_says_how_to_confirm() {
    use sealvol_views::chrome::Overlay;
    let th = Theme::preset("dark").unwrap();
    let hex = "9f3c1a2b".repeat(8);
    let long = |sign: char, i: usize| {
        (
            format!("{sign}{i:>4}: - ref: vol:weights/qwen3-8b@b3:{hex}"),
            if sign == '-' {
                Role::Removed
            } else {
                Role::Added
            },
        )
    };
    let mut lines = vec![(
        "/srv/deployments/clusters/us-east-1/production/serving/config.yaml".to_string(),
        Role::Text,
    )];
    for i in 0..20 {
        lines.push(long('-', i));
        lines.push(long('+', i));
    }
    let mut frame = fixtures::confirm_rollback();
    for full in [false, true] {
        frame.overlay = Some(Overlay::Confirm {
            title: "roll back weights/qwen3-8b".into(),
            lines: lines.clone(),
            yes: "write /srv/deployments/clusters/us-east-1/production/serving/config.yaml".into(),
            full,
        });
        for (w, h) in [
            (80, 24),
            (120, 35),
            (60, 12),
            (40, 8),
            (30, 4),
            (20, 2),
            (12, 1),
        ] {
            let screen = text(&render(&frame, &th, w, h)).join("\n");
            assert!(
                (screen.contains(" y ") || screen.contains("y/n")) && screen.contains("cancel"),
                "full {full} at {w}x{h}: no way to confirm:\n{screen}"
            );
        }
        let screen = text(&render(&frame, &th, 80, 24));
        let all = screen.join("\n");
        assert!(all.contains("roll back weights/qwen3-8b"), "{all}");
        assert!(all.contains("more line(s)"), "{all}");
        assert!(all.contains("config.yaml"), "the file's name stays: {all}");
        if !full {
            assert!(all.contains("f shows the lines whole"), "{all}");
            // Cut, not wrapped: no row starts with the rest of a digest.
            assert!(
                !screen
                    .iter()
                    .any(|r| r.trim_start_matches([' ', '│']).starts_with("9f3c")),
                "{all}"
            );
        }
    }
    // Every fixture's confirmation too, at 80×24 and in a 50×15 pane.
    for (name, frame) in fixtures::all() {
        if matches!(frame.overlay, Some(Overlay::Confirm { .. })) {
            for (w, h) in [(80, 24), (50, 15)] {
                let screen = text(&render(&frame, &th, w, h)).join("\n");
                assert!(screen.contains("cancel"), "{name} at {w}x{h}:\n{screen}");
            }
        }
    }
}

/// At 80 columns (and in a 50-column pane) a long status message leaves room for the
/// key hints that find everything else (`? help`, `: command`): they never vanish with
/// the rest; and help lines too wide for the window end in `…`.
#[test]
fn the_status_line_keeps_help_and_the_command_line_at_any_width() {
    use sealvol_views::chrome::Overlay;
    let th = Theme::preset("dark").unwrap();
    let mut frame = fixtures::all().into_iter().next().unwrap().1;
    frame.overlay = None;
    frame.status.text =
        "3 version(s) of weights/qwen3-8b · enter: roll prod/config.yaml back to the selected one"
            .into();
    frame.status.hints = vec![
        ("enter".into(), "open".into()),
        ("t".into(), "tags".into()),
        ("d".into(), "diff".into()),
        (":".into(), "command".into()),
        ("?".into(), "help".into()),
    ];
    for w in [80u16, 50] {
        let screen = text(&render(&frame, &th, w, 24));
        let last = screen.last().unwrap();
        assert!(
            last.contains("? help") && last.contains(": command"),
            "{w}: {last:?}"
        );
        assert!(
            last.contains('…'),
            "the message is cut, and says so: {last:?}"
        );
    }
    frame.overlay = Some(Overlay::Help {
        bindings: vec![
            ("".into(), "on this screen".into()),
            ("enter".into(), "open the selected version's files, with how many of each file's bytes the version before already had".into()),
        ],
        offset: 0,
    });
    let screen = text(&render(&frame, &th, 60, 20)).join("\n");
    assert!(screen.contains("…"), "{screen}");
}
