//! Tags of one volume and the full move history of the selected tag. The history pane
//! is where a move is undone: select a past move and point the tag back.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::{Block, Borders, Widget};
use sealvol_themes::{Role, Theme};

use crate::format::{name, short_digest, when};
use crate::list::{Column, cell, draw_table};

#[derive(Debug, Clone, Default)]
pub struct MoveRow {
    /// `None` for the move that created the tag.
    pub from: Option<String>,
    pub to: String,
    pub at: String,
    pub by: String,
}

#[derive(Debug, Clone, Default)]
pub struct TagRow {
    pub tag: String,
    pub digest: String,
    /// Oldest first, as stored.
    pub history: Vec<MoveRow>,
    /// Why the tag cannot be used (a damaged file, or a version that does not exist).
    pub damaged: Option<String>,
    /// For a tag that expires: the time left (`29d 23h`), or `expired`.
    pub expires_in: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TagsFocus {
    #[default]
    Tags,
    History,
}

#[derive(Debug, Clone, Default)]
pub struct TagsView {
    pub volume: String,
    pub tags: Vec<TagRow>,
    pub selected: usize,
    pub focus: TagsFocus,
    /// Index into the selected tag's history shown newest first.
    pub selected_move: usize,
}

const TAG_COLUMNS: [Column; 5] = [
    Column {
        title: "TAG",
        width: 14,
        keep: 9,
    },
    Column {
        title: "POINTS AT",
        width: 17,
        keep: 8,
    },
    Column {
        title: "MOVED",
        width: 18,
        keep: 4,
    },
    Column {
        title: "MOVES",
        width: 7,
        keep: 3,
    },
    Column {
        title: "EXPIRES",
        width: 0,
        keep: 7,
    },
];

const MOVE_COLUMNS: [Column; 4] = [
    Column {
        title: "WHEN",
        width: 18,
        keep: 6,
    },
    Column {
        title: "FROM",
        width: 17,
        keep: 8,
    },
    Column {
        title: "TO",
        width: 17,
        keep: 8,
    },
    Column {
        title: "BY",
        width: 0,
        keep: 3,
    },
];

pub fn draw(vm: &TagsView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let [top, bottom] =
        Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(area);
    let sel_tags = (vm.focus == TagsFocus::Tags).then_some(vm.selected);
    draw_table(
        theme,
        top,
        buf,
        &TAG_COLUMNS,
        vm.tags.len(),
        sel_tags,
        None,
        |i| {
            let t = &vm.tags[i];
            vec![
                cell(&t.tag, Role::Tag),
                match (&t.damaged, t.digest.is_empty()) {
                    (None, _) => cell(short_digest(&t.digest), Role::Pinned),
                    (Some(_), true) => cell("⚠ damaged", Role::Error),
                    (Some(_), false) => cell(format!("⚠ {}", short_digest(&t.digest)), Role::Error),
                },
                cell(
                    t.history.last().map(|m| when(&m.at)).unwrap_or_default(),
                    Role::Dim,
                ),
                cell(t.history.len().to_string(), Role::Text),
                match t.expires_in.as_deref() {
                    None => cell("-", Role::Dim),
                    Some("expired") => cell("expired", Role::Error),
                    Some(left) => cell(format!("in {left}"), Role::Text),
                },
            ]
        },
    );
    let Some(tag) = vm.tags.get(vm.selected) else {
        return;
    };
    let title = match &tag.damaged {
        Some(why) => format!(" history of {}: {why} ", tag.tag),
        None => format!(" history of {} ", tag.tag),
    };
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.style(Role::Border))
        .title(ratatui::text::Span::styled(title, theme.style(Role::Title)));
    let inner = block.inner(bottom);
    block.render(bottom, buf);
    let n = tag.history.len();
    let sel_move = (vm.focus == TagsFocus::History).then_some(vm.selected_move);
    draw_table(theme, inner, buf, &MOVE_COLUMNS, n, sel_move, None, |i| {
        let m = &tag.history[n - 1 - i];
        let from = match &m.from {
            Some(f) => cell(short_digest(f), Role::Removed),
            None => cell("(created)", Role::Dim),
        };
        vec![
            cell(when(&m.at), Role::Dim),
            from,
            cell(short_digest(&m.to), Role::Added),
            cell(name(&m.by), Role::Dim),
        ]
    });
}
