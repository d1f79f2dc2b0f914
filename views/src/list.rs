//! A scrolling table that draws only the rows on screen: a list of 10,000 versions
//! costs what a screenful costs. On a narrow terminal, columns go in the order of their
//! `keep` (lowest first) rather than be cut mid-word, and a cell too long for its
//! column ends in `…`.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

use sealvol_themes::{Role, Theme};

/// One column: header text, width (the last column shown takes what is left), and
/// how long it stays when the terminal is too narrow for all (higher stays longer).
#[derive(Clone, Copy)]
pub struct Column {
    pub title: &'static str,
    pub width: u16,
    pub keep: u8,
}

/// The columns shown in `width` cells, in order: drops the lowest `keep` (the rightmost
/// of equals) until the fixed columns leave the last one room for its title.
pub fn fit(columns: &[Column], width: u16) -> Vec<usize> {
    let mut shown: Vec<usize> = (0..columns.len()).collect();
    // The last column takes the rest: enough for its title, and half its own width.
    let room_for_last = |c: &Column| (c.title.chars().count() as u16 + 2).max(c.width / 2).max(6);
    while shown.len() > 1 {
        let (last, fixed) = shown.split_last().expect("one column at least");
        let need: u16 =
            fixed.iter().map(|&i| columns[i].width).sum::<u16>() + room_for_last(&columns[*last]);
        if need <= width {
            break;
        }
        let drop = shown
            .iter()
            .enumerate()
            .rev()
            .min_by_key(|(_, i)| columns[**i].keep)
            .map(|(at, _)| at)
            .expect("one column at least");
        shown.remove(drop);
    }
    shown
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
    let shown = fit(columns, area.width);
    let header: Vec<Cell> = columns
        .iter()
        .map(|c| cell(c.title, Role::Header))
        .collect();
    draw_row(
        theme,
        Rect { height: 1, ..area },
        buf,
        columns,
        &shown,
        &header,
        None,
    );
    let body = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    let height = body.height as usize;
    // Unselected, the marked row is kept in sight (a list that lent the keys to another).
    let offset = scroll_offset(selected.or(mark).unwrap_or(0), len, height);
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
        draw_row(theme, r, buf, columns, &shown, &row(i), highlight);
    }
    // Where the selection is, on the header line: drawn over a row, it would hide one.
    if len > height && height > 0 {
        let pos = format!(" {}/{} ", selected.map_or(0, |s| s + 1), len);
        let x = area.right().saturating_sub(pos.len() as u16 + 1);
        buf.set_string(x, area.y, pos, theme.style(Role::Dim));
    }
}

/// Under the header of an empty table: one line saying how to get something there.
pub fn draw_empty(theme: &Theme, area: Rect, buf: &mut Buffer, text: &str) {
    if area.height < 2 || text.is_empty() {
        return;
    }
    let line = Line::from(Span::styled(format!(" {text}"), theme.style(Role::Dim)));
    buf.set_line(area.x, area.y + 1, &line, area.width);
}

fn draw_row(
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
    columns: &[Column],
    shown: &[usize],
    cells: &[Cell],
    highlight: Option<Style>,
) {
    if let Some(h) = highlight {
        buf.set_style(area, h);
    }
    let mut x = area.x;
    for (n, &i) in shown.iter().enumerate() {
        let (Some(col), Some(cell)) = (columns.get(i), cells.get(i)) else {
            break;
        };
        let width = if n + 1 == shown.len() {
            area.right().saturating_sub(x)
        } else {
            col.width.min(area.right().saturating_sub(x))
        };
        if width == 0 {
            break;
        }
        // One cell of space before the next column.
        let room = width.saturating_sub(1).max(1) as usize;
        let spans: Vec<Span> = ellipsize(cell, room)
            .into_iter()
            .map(|(t, role)| {
                let s = theme.style(role);
                Span::styled(t, highlight.map_or(s, |h| s.patch(h)))
            })
            .collect();
        buf.set_line(x, area.y, &Line::from(spans), room as u16);
        x += width;
    }
}

/// The cell cut to `room` characters, its last one `…` when anything was cut. A path
/// (one span from `/` or `~/`) loses its middle instead: its end names it
/// (`/mnt/…/qwen3-8b/canary`).
fn ellipsize(cell: &Cell, room: usize) -> Cell {
    let total: usize = cell.iter().map(|(t, _)| t.chars().count()).sum();
    if total <= room {
        return cell.clone();
    }
    if let [(text, role)] = cell.as_slice()
        && (text.starts_with('/') || text.starts_with("~/"))
        && room >= 5
    {
        return vec![(middle_cut(text, room), *role)];
    }
    let mut left = room.saturating_sub(1);
    let mut out = Cell::new();
    for (t, role) in cell {
        if left == 0 {
            break;
        }
        let part: String = t.chars().take(left).collect();
        left -= part.chars().count();
        out.push((part, *role));
    }
    let role = cell.last().map_or(Role::Text, |(_, r)| *r);
    out.push(("…".into(), role));
    out
}

/// `text` in `room` characters: its start and (the longer part) its end, `…` between.
pub fn middle_cut(text: &str, room: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= room {
        return text.to_string();
    }
    let keep = room.saturating_sub(1);
    let head = keep / 3;
    let tail = keep - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_keeps_its_end() {
        let cell = vec![(
            "/mnt/models/weights/qwen3-8b/canary".to_string(),
            Role::Text,
        )];
        let cut = ellipsize(&cell, 21);
        assert_eq!(cut[0].0, "/mnt/m…wen3-8b/canary");
        assert_eq!(cut[0].0.chars().count(), 21);
        let text = vec![("weights/qwen3-8b@b3:9f3c1a2b".to_string(), Role::Text)];
        let cut: String = ellipsize(&text, 10).into_iter().map(|(t, _)| t).collect();
        assert_eq!(cut, "weights/q…", "not a path: its end is cut");
    }

    const COLS: [Column; 4] = [
        Column {
            title: "DIGEST",
            width: 16,
            keep: 9,
        },
        Column {
            title: "CREATED",
            width: 17,
            keep: 5,
        },
        Column {
            title: "TAGS",
            width: 15,
            keep: 8,
        },
        Column {
            title: "SOURCE",
            width: 0,
            keep: 1,
        },
    ];

    #[test]
    fn narrow_terminals_drop_the_least_kept_columns_first() {
        assert_eq!(fit(&COLS, 120), [0, 1, 2, 3]);
        assert_eq!(
            fit(&COLS, 52),
            [0, 1, 2],
            "SOURCE goes before it is cut to S"
        );
        assert_eq!(fit(&COLS, 40), [0, 1, 2]);
        assert_eq!(fit(&COLS, 36), [0, 2], "the digest and the tags go last");
        assert_eq!(fit(&COLS, 10), [0]);
    }

    #[test]
    fn long_cells_end_in_an_ellipsis() {
        let c = vec![
            ("weights/".to_string(), Role::Dim),
            ("qwen3-8b".to_string(), Role::Text),
        ];
        let cut = ellipsize(&c, 10);
        let text: String = cut.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(text, "weights/q…");
        assert_eq!(ellipsize(&c, 16), c);
    }

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
