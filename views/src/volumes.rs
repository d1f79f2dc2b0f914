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
    /// Namespaces with a quota: drawn on the bottom line.
    pub quotas: Vec<QuotaLine>,
}

/// A namespace's usage against its quota.
#[derive(Debug, Clone, Default)]
pub struct QuotaLine {
    pub namespace: String,
    pub used: u64,
    pub quota: u64,
}

/// A quota this full or fuller is drawn as a warning.
const NEARLY_FULL: f64 = 0.9;

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
    // The quotas take the bottom line, when there are any and room for a table above.
    let (area, footer) = match vm.quotas.is_empty() || area.height < 4 {
        true => (area, None),
        false => (
            Rect {
                height: area.height - 1,
                ..area
            },
            Some(Rect {
                y: area.y + area.height - 1,
                height: 1,
                ..area
            }),
        ),
    };
    if let Some(line) = footer {
        draw_quotas(&vm.quotas, theme, line, buf);
    }
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

/// `quota team-a 3.0 MiB of 10.0 MiB (30%) · team-b …`, the fullest first, each in the
/// colour of how full it is, cut at the area's width.
fn draw_quotas(quotas: &[QuotaLine], theme: &Theme, area: Rect, buf: &mut Buffer) {
    let mut sorted: Vec<&QuotaLine> = quotas.iter().collect();
    let share = |q: &QuotaLine| q.used as f64 / q.quota.max(1) as f64;
    sorted.sort_by(|a, b| share(b).total_cmp(&share(a)));
    let mut x = area.x;
    let end = area.x + area.width;
    let mut put = |text: &str, role: Role, x: &mut u16| {
        if *x >= end {
            return;
        }
        let (nx, _) = buf.set_stringn(*x, area.y, text, (end - *x) as usize, theme.style(role));
        *x = nx;
    };
    put("quota ", Role::Dim, &mut x);
    for (i, q) in sorted.iter().enumerate() {
        if i > 0 {
            put(" · ", Role::Dim, &mut x);
        }
        let role = match share(q) {
            s if s >= 1.0 => Role::Error,
            s if s >= NEARLY_FULL => Role::Danger,
            _ => Role::Text,
        };
        put(
            &format!("{} {}", q.namespace, crate::format::quota(q.used, q.quota)),
            role,
            &mut x,
        );
    }
}
