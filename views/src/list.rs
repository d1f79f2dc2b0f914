//! A scrolling table that draws only the rows on screen: a list of 10,000 versions
//! costs what a screenful costs.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use sealvol_themes::{Role, Theme};

/// One column: header text and width (the last column takes what is left).
pub struct Column {
    pub title: &'static str,
    pub width: u16,
}

/// A cell: text spans, each with a role.
pub type Cell = Vec<(String, Role)>;

pub fn cell(text: impl Into<String>, role: Role) -> Cell {
    vec![(text.into(), role)]
}

/// The first row to show so that `selected` is visible in `height` rows, keeping the
/// selection away from the edges when it can (like a pager).
pub fn scroll_offset(selected: usize, len: usize, height: usize) -> usize {
    if height == 0 || len <= height {
        return 0;
    }
    let margin = (height / 4).min(3);
    let max_offset = len - height;
    selected
        .saturating_sub(height.saturating_sub(margin + 1))
        .min(max_offset)
}

/// Draws a header and the visible rows; `row` builds the cells of row `i` on demand.
/// `mark` highlights one more row (the first side of a diff).
#[allow(clippy::too_many_arguments)]
pub fn draw_table(
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
    columns: &[Column],
    len: usize,
    selected: Option<usize>,
    mark: Option<usize>,
    row: impl Fn(usize) -> Vec<Cell>,
) {
    if area.height == 0 {
        return;
    }
    let header: Vec<Cell> = columns
        .iter()
        .map(|c| cell(c.title, Role::Header))
        .collect();
    draw_row(
        theme,
        Rect { height: 1, ..area },
        buf,
        columns,
        &header,
        None,
    );
    let body = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    let height = body.height as usize;
    let offset = scroll_offset(selected.unwrap_or(0), len, height);
    for (line, i) in (offset..len.min(offset + height)).enumerate() {
        let highlight = if Some(i) == selected {
            Some(theme.style(Role::Selection))
        } else if Some(i) == mark {
            Some(theme.style(Role::Mark))
        } else {
            None
        };
        let r = Rect {
            y: body.y + line as u16,
            height: 1,
            ..body
        };
        draw_row(theme, r, buf, columns, &row(i), highlight);
    }
    if len > height && height > 0 {
        let pos = format!(" {}/{} ", selected.map_or(0, |s| s + 1), len);
        let x = area.right().saturating_sub(pos.len() as u16 + 1);
        buf.set_string(x, area.bottom() - 1, pos, theme.style(Role::Dim));
    }
}

fn draw_row(
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
    columns: &[Column],
    cells: &[Cell],
    highlight: Option<Style>,
) {
    if let Some(h) = highlight {
        buf.set_style(area, h);
    }
    let mut x = area.x;
    for (i, (col, cell)) in columns.iter().zip(cells).enumerate() {
        let last = i + 1 == columns.len();
        let width = if last {
            area.right().saturating_sub(x)
        } else {
            col.width.min(area.right().saturating_sub(x))
        };
        if width == 0 {
            break;
        }
        let spans: Vec<Span> = cell
            .iter()
            .map(|(t, role)| {
                let s = theme.style(*role);
                Span::styled(t.clone(), highlight.map_or(s, |h| s.patch(h)))
            })
            .collect();
        buf.set_line(
            x,
            area.y,
            &Line::from(spans),
            width.saturating_sub(1).max(1),
        );
        x += width;
    }
}

#[cfg(test)]
mod tests {
    use super::scroll_offset;

    #[test]
    fn selection_stays_visible() {
        assert_eq!(scroll_offset(0, 100, 10), 0);
        for s in 0..100 {
            let o = scroll_offset(s, 100, 10);
            assert!(s >= o && s < o + 10, "{s} {o}");
        }
        assert_eq!(scroll_offset(99, 100, 10), 90);
        assert_eq!(scroll_offset(5, 3, 10), 0);
    }
}
