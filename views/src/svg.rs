//! A rendered buffer as an SVG picture, in the theme's colours, for `screenshots/`.
//! Each run of cells with one style becomes one `<text>` (and a `<rect>` if it has a
//! background), so the files stay small and the text stays selectable.

use std::fmt::Write as _;

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use sealvol_themes::{Role, Theme};

const CELL_W: f32 = 8.4;
const CELL_H: f32 = 18.0;

fn hex(c: Color, fallback: (u8, u8, u8)) -> String {
    let (r, g, b) = Theme::rgb(c).unwrap_or(fallback);
    format!("#{r:02x}{g:02x}{b:02x}")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub fn render(buf: &Buffer, theme: &Theme, background: (u8, u8, u8)) -> String {
    let area = buf.area;
    let (w, h) = (area.width as f32 * CELL_W, area.height as f32 * CELL_H);
    let text_fg = theme
        .style(Role::Text)
        .fg
        .and_then(Theme::rgb)
        .unwrap_or((220, 220, 220));
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="14">"#
    );
    let (br, bg, bb) = background;
    let _ = write!(
        out,
        r##"<rect width="100%" height="100%" fill="#{br:02x}{bg:02x}{bb:02x}"/>"##
    );
    for y in 0..area.height {
        let mut x = 0;
        while x < area.width {
            let cell = &buf[(x, y)];
            let style = (cell.fg, cell.bg, cell.modifier);
            let start = x;
            let mut text = String::new();
            while x < area.width {
                let c = &buf[(x, y)];
                if (c.fg, c.bg, c.modifier) != style {
                    break;
                }
                text.push_str(c.symbol());
                x += 1;
            }
            let (fg, bgc, m) = style;
            let (fg, bgc) = if m.contains(Modifier::REVERSED) {
                (bgc, fg)
            } else {
                (fg, bgc)
            };
            let px = start as f32 * CELL_W;
            let py = y as f32 * CELL_H;
            if bgc != Color::Reset {
                let _ = write!(
                    out,
                    r#"<rect x="{px}" y="{py}" width="{}" height="{CELL_H}" fill="{}"/>"#,
                    (x - start) as f32 * CELL_W,
                    hex(bgc, background)
                );
            }
            if text.trim().is_empty() {
                continue;
            }
            let weight = if m.contains(Modifier::BOLD) {
                r#" font-weight="bold""#
            } else {
                ""
            };
            let _ = write!(
                out,
                r#"<text x="{px}" y="{}" fill="{}"{weight} xml:space="preserve" textLength="{}" lengthAdjust="spacingAndGlyphs">{}</text>"#,
                py + CELL_H * 0.75,
                hex(fg, text_fg),
                text.chars().count() as f32 * CELL_W,
                escape(&text)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    use super::*;

    #[test]
    fn text_and_colours_reach_the_picture() {
        let theme = Theme::preset("dark").unwrap();
        let mut buf = Buffer::empty(Rect::new(0, 0, 20, 2));
        buf.set_string(0, 0, "a<b", theme.style(Role::Removed));
        buf.set_string(0, 1, "ok", Style::default().bg(Color::Rgb(1, 2, 3)));
        let svg = render(&buf, &theme, (0, 0, 0));
        assert!(svg.contains("a&lt;b"));
        let (r, g, b) = Theme::rgb(theme.style(Role::Removed).fg.unwrap()).unwrap();
        assert!(svg.contains(&format!("#{r:02x}{g:02x}{b:02x}")));
        assert!(svg.contains("#010203"));
    }
}
