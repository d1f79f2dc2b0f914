//! The trash: deleted versions, newest deletion first, with who deleted them, when,
//! the time left to restore them, their size and the tags they had.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use sealvol_themes::{Role, Theme};

use crate::format::{name, short_digest, size, tags, when};
use crate::list::{Column, cell, draw_empty, draw_table};

#[derive(Debug, Clone, Default)]
pub struct TrashRow {
    pub volume: String,
    pub digest: String,
    pub deleted_at: String,
    pub deleted_by: String,
    /// Time left to restore it (`6d 23h`), `expired`, or `purging`.
    pub left: String,
    /// Its window has passed, or a purge has begun: it can no longer be restored.
    pub gone: bool,
    pub bytes: u64,
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct TrashView {
    /// The volume shown, or every volume (`None`).
    pub volume: Option<String>,
    pub rows: Vec<TrashRow>,
    pub selected: usize,
    /// Shown under the headers when there are no rows.
    pub empty: String,
}

const COLUMNS: [Column; 7] = [
    Column {
        title: "VOLUME",
        width: 22,
        keep: 8,
    },
    Column {
        title: "DIGEST",
        width: 17,
        keep: 9,
    },
    Column {
        title: "DELETED",
        width: 18,
        keep: 5,
    },
    Column {
        title: "BY",
        width: 16,
        keep: 2,
    },
    Column {
        title: "LEFT",
        width: 9,
        keep: 7,
    },
    Column {
        title: "SIZE",
        width: 11,
        keep: 4,
    },
    Column {
        title: "HAD TAGS",
        width: 0,
        keep: 3,
    },
];

pub fn draw(vm: &TrashView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    draw_table(
        theme,
        area,
        buf,
        &COLUMNS,
        vm.rows.len(),
        Some(vm.selected),
        None,
        |i| {
            let r = &vm.rows[i];
            vec![
                cell(r.volume.clone(), Role::Text),
                cell(short_digest(&r.digest), Role::Pinned),
                cell(when(&r.deleted_at), Role::Dim),
                cell(name(&r.deleted_by), Role::Dim),
                cell(
                    r.left.clone(),
                    if r.gone { Role::Danger } else { Role::Text },
                ),
                cell(size(r.bytes), Role::Text),
                cell(tags(&r.tags), Role::Tag),
            ]
        },
    );
    if vm.rows.is_empty() {
        draw_empty(theme, area, buf, &vm.empty);
    }
}
