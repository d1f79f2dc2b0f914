//! Deployments side by side: one row per volume, one column per deployment file, each
//! cell the version it serves now (12 hex digits; `*` when the ref is a tag or a bare
//! volume, resolved now). A row whose deployments serve different versions is marked
//! `≠` and drawn in the changed colour; a cell whose ref does not resolve says `error`.
//! Under the matrix: the selected cell's ref and place in its file. And the rollback
//! picker: the volume's versions, the one served marked, with its tags' history.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use sealvol_themes::{Role, Theme};

use crate::format::{short_digest, size, when};
use crate::list::{Column, cell, draw_empty, draw_table};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellState {
    /// A full digest in the file.
    Pinned,
    /// A tag, a bare volume or a digest prefix: what it resolves to now.
    Unpinned,
    /// The ref does not resolve.
    Error,
    /// The deployment does not mount this volume.
    Missing,
}

#[derive(Debug, Clone)]
pub struct DeployCell {
    /// 12 hex digits, `error` or `-`.
    pub text: String,
    pub state: CellState,
}

#[derive(Debug, Clone)]
pub struct DeployRow {
    pub volume: String,
    pub agree: bool,
    pub cells: Vec<DeployCell>,
}

#[derive(Debug, Clone, Default)]
pub struct DeploymentsView {
    pub names: Vec<String>,
    pub rows: Vec<DeployRow>,
    pub selected: usize,
    /// The selected deployment (column).
    pub column: usize,
    /// The selected cell's ref and where it is written, or why it does not resolve.
    pub detail: Vec<String>,
    /// Files that could not be read: name and why.
    pub failed: Vec<String>,
    /// Shown when there is nothing to draw.
    pub empty: String,
}

const VOLUME_WIDTH: usize = 26;

fn column_width(name: &str) -> usize {
    name.chars().count().clamp(13, 28) + 2
}

pub fn draw(vm: &DeploymentsView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    if area.height == 0 {
        return;
    }
    if vm.names.is_empty() {
        draw_empty(theme, area, buf, &vm.empty);
        return;
    }
    let below = (vm.detail.len() + vm.failed.len() + 1) as u16;
    let table_height = area.height.saturating_sub(below).max(2);
    let mut header = vec![
        Span::styled("  ", theme.style(Role::Header)),
        Span::styled(
            format!("{:<VOLUME_WIDTH$}", "VOLUME"),
            theme.style(Role::Header),
        ),
    ];
    for (i, n) in vm.names.iter().enumerate() {
        let w = column_width(n);
        let shown: String = n.chars().take(w - 2).collect();
        let role = if i == vm.column {
            Role::Title
        } else {
            Role::Header
        };
        header.push(Span::styled(format!("{shown:<w$}"), theme.style(role)));
    }
    buf.set_line(area.x, area.y, &Line::from(header), area.width);
    let height = table_height.saturating_sub(1) as usize;
    let offset = crate::list::scroll_offset(vm.selected, vm.rows.len(), height);
    for (line, i) in (offset..vm.rows.len().min(offset + height)).enumerate() {
        let r = &vm.rows[i];
        let selected = i == vm.selected;
        let mut spans = vec![
            Span::styled(
                if r.agree { "  " } else { "≠ " },
                theme.style(if r.agree { Role::Text } else { Role::Modified }),
            ),
            Span::styled(
                format!("{:<VOLUME_WIDTH$}", truncate(&r.volume, VOLUME_WIDTH - 1)),
                theme.style(if selected { Role::Mark } else { Role::Text }),
            ),
        ];
        for (c, (cell, n)) in r.cells.iter().zip(&vm.names).enumerate() {
            let w = column_width(n);
            let role = match cell.state {
                CellState::Error => Role::Error,
                CellState::Missing => Role::Dim,
                _ if !r.agree => Role::Modified,
                _ => Role::Pinned,
            };
            let style = match selected && c == vm.column {
                true => theme.style(Role::Selection),
                false => theme.style(role),
            };
            let mark = if cell.state == CellState::Unpinned {
                "*"
            } else {
                ""
            };
            spans.push(Span::styled(
                format!("{:<w$}", format!("{}{mark}", cell.text)),
                style,
            ));
        }
        buf.set_line(
            area.x,
            area.y + 1 + line as u16,
            &Line::from(spans),
            area.width,
        );
    }
    if vm.rows.is_empty() {
        draw_empty(theme, area, buf, &vm.empty);
    }
    let mut y = area.y + table_height;
    for d in &vm.detail {
        if y >= area.y + area.height {
            return;
        }
        buf.set_string(
            area.x + 1,
            y,
            truncate(d, area.width as usize - 1),
            theme.style(Role::Dim),
        );
        y += 1;
    }
    for f in &vm.failed {
        if y >= area.y + area.height {
            return;
        }
        buf.set_string(
            area.x + 1,
            y,
            truncate(f, area.width as usize - 1),
            theme.style(Role::Error),
        );
        y += 1;
    }
}

fn truncate(s: &str, n: usize) -> String {
    match s.chars().count() > n {
        true => s.chars().take(n.saturating_sub(1)).chain(['…']).collect(),
        false => s.to_string(),
    }
}

#[derive(Debug, Clone, Default)]
pub struct RollbackRow {
    pub digest: String,
    pub created: String,
    pub bytes: u64,
    pub tags: Vec<String>,
    /// The version the deployment serves now.
    pub serving: bool,
}

#[derive(Debug, Clone, Default)]
pub struct RollbackView {
    /// `prod/config.yaml · weights/qwen3-8b at /app/weights`.
    pub title: String,
    pub rows: Vec<RollbackRow>,
    pub selected: usize,
    /// The volume's tag moves, newest first: `prod  b3:… → b3:…  2026-11-30 14:02  alice`.
    pub history: Vec<String>,
}

const PICK_COLUMNS: [Column; 4] = [
    Column {
        title: "DIGEST",
        width: 18,
        keep: 9,
    },
    Column {
        title: "SEALED",
        width: 18,
        keep: 5,
    },
    Column {
        title: "SIZE",
        width: 10,
        keep: 4,
    },
    Column {
        title: "TAGS",
        width: 0,
        keep: 8,
    },
];

/// Wide enough for the tag history beside the versions, not under them.
const BESIDE_FROM: u16 = 110;
const HISTORY_WIDTH: u16 = 46;

pub fn draw_rollback(vm: &RollbackView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    if area.height < 3 {
        return;
    }
    buf.set_string(
        area.x + 1,
        area.y,
        truncate(&vm.title, area.width as usize - 1),
        theme.style(Role::Title),
    );
    let below = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    let (table, history) = match area.width >= BESIDE_FROM {
        true => (
            Rect {
                width: below.width - HISTORY_WIDTH,
                ..below
            },
            Rect {
                x: below.x + below.width - HISTORY_WIDTH + 1,
                width: HISTORY_WIDTH - 1,
                ..below
            },
        ),
        false => {
            let h = (vm.history.len() as u16 + 1).min(below.height / 3);
            (
                Rect {
                    height: below.height - h,
                    ..below
                },
                Rect {
                    y: below.y + below.height - h,
                    height: h,
                    ..below
                },
            )
        }
    };
    draw_table(
        theme,
        table,
        buf,
        &PICK_COLUMNS,
        vm.rows.len(),
        Some(vm.selected),
        None,
        |i| {
            let r = &vm.rows[i];
            vec![
                cell(short_digest(&r.digest), Role::Pinned),
                cell(when(&r.created), Role::Dim),
                cell(size(r.bytes), Role::Text),
                {
                    let mut c = cell(r.tags.join(", "), Role::Tag);
                    if r.serving {
                        c.insert(0, ("◀ serving now  ".into(), Role::Modified));
                    }
                    c
                },
            ]
        },
    );
    if history.height == 0 {
        return;
    }
    buf.set_string(
        history.x,
        history.y,
        "TAG HISTORY",
        theme.style(Role::Header),
    );
    for (n, h) in vm
        .history
        .iter()
        .take(history.height as usize - 1)
        .enumerate()
    {
        buf.set_string(
            history.x,
            history.y + 1 + n as u16,
            truncate(h, history.width as usize),
            theme.style(Role::Dim),
        );
    }
}
