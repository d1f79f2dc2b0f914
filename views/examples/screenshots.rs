//! Regenerates `screenshots/`: every screen of the test fixtures, in every preset
//! theme, as SVG. Run from the repository root:
//!
//!     cargo run -p sealvol-views --example screenshots
//!
//! The pictures come from the same fixtures as the snapshot tests, so what the README
//! shows is what the tests check.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use sealvol_themes::{PRESETS, Theme};
use sealvol_views::{draw, fixtures, svg};

fn main() -> std::io::Result<()> {
    let dir = std::path::Path::new("screenshots");
    std::fs::create_dir_all(dir)?;
    for theme_name in PRESETS {
        let theme = Theme::preset(theme_name).map_err(std::io::Error::other)?;
        let background = fixtures::page_background(theme_name);
        for (name, frame) in fixtures::all() {
            let mut buf = Buffer::empty(Rect::new(0, 0, 120, 32));
            draw(&frame, &theme, buf.area, &mut buf);
            let path = dir.join(format!("{name}-{theme_name}.svg"));
            std::fs::write(&path, svg::render(&buf, &theme, background))?;
            println!("{}", path.display());
        }
    }
    Ok(())
}
