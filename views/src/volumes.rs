//! Volumes: every namespace's volumes with version count, tags, latest size and update.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use sealvol_themes::{Role, Theme};

use crate::format::{short_digest, size, tags, when};
use crate::list::{Column, cell, draw_empty, draw_table};

#[derive(Debug, Clone, Default)]
pub struct VolumeRow {
    pub namespace: String,
    pub name: String,
    pub versions: usize,
    pub tags: Vec<String>,
    pub latest_bytes: u64,
    /// Damaged manifests and tags (listed by the repository, marked here).
    pub damaged: usize,
    pub updated: String,
    /// Digests served by live mounts on this node.
    pub mounted: Vec<String>,
}

#[derive(Debug, Clone, Default)]
pub struct VolumesView {
    /// Already filtered by the app.
    pub rows: Vec<VolumeRow>,
    pub selected: usize,
    /// Shown under the headers when there are no rows: how to get some.
    pub empty: String,
}

const COLUMNS: [Column; 6] = [
    Column {
        title: "NAMESPACE",
        width: 12,
        keep: 9,
    },
    Column {
        title: "VOLUME",
        width: 20,
        keep: 9,
    },
    Column {
        title: "VERSIONS",
        width: 9,
        keep: 4,
    },
    Column {
        title: "LATEST",
        width: 10,
        keep: 5,
    },
    Column {
        title: "UPDATED",
        width: 17,
        keep: 3,
    },
    Column {
        title: "TAGS",
        width: 0,
        keep: 8,
    },
];

pub fn draw(vm: &VolumesView, theme: &Theme, area: Rect, buf: &mut Buffer) {
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
                cell(&r.namespace, Role::Dim),
                cell(&r.name, Role::Text),
                cell(r.versions.to_string(), Role::Text),
                cell(size(r.latest_bytes), Role::Text),
                cell(when(&r.updated), Role::Dim),
                if r.damaged > 0 {
                    cell(
                        format!("⚠ {} damaged  {}", r.damaged, tags(&r.tags)),
                        Role::Error,
                    )
                } else if r.mounted.is_empty() {
                    cell(tags(&r.tags), Role::Tag)
                } else {
                    let served: Vec<String> = r
                        .mounted
                        .iter()
                        .map(|d| format!("◉ {}", short_digest(d)))
                        .collect();
                    cell(format!("{} {}", tags(&r.tags), served.join(" ")), Role::Tag)
                },
            ]
        },
    );
    if vm.rows.is_empty() {
        draw_empty(theme, area, buf, &vm.empty);
    }
}
