//! Mounts: every live mount on this node, the digest it serves (fixed at mount time),
//! bytes served, where its chunks came from (memory, the node-disk cache, the peers
//! (cache servers) or the origin repository), the most memory its read-ahead held
//! against its bound, the share of read-ahead dropped unread, and failed reads. Under
//! them, the cache servers the selected mount reads through, as it sees them: up or
//! passed over, each one's share of the key space, what it asked and got of each.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;
use sealvol_themes::{Role, Theme};

use crate::format::{as_given, name, short_digest, size, when};
use crate::list::{Column, cell, draw_empty, draw_table};

#[derive(Debug, Clone, Default)]
pub struct MountRow {
    pub dir: String,
    pub volume: String,
    pub digest: String,
    /// The ref as given at mount time (a tag shows what it resolved to then).
    pub requested: String,
    pub pid: u32,
    pub started: String,
    pub bytes_served: u64,
    pub memory_hits: u64,
    pub cache_hits: u64,
    /// Chunks from peers, and peer requests that failed or returned bad bytes (each
    /// of which went to the next tier instead).
    pub peer_chunks: u64,
    pub peer_faults: u64,
    /// Peer requests refused this node's API key: the peer serves it nothing.
    pub peer_refused: u64,
    /// How many peers the mount reads through: none shows `-`, not `0%`.
    pub peers: usize,
    pub origin_chunks: u64,
    /// The most memory read-ahead held at once, against `--prefetch-memory`.
    pub memory_peak: u64,
    pub memory_bound: u64,
    /// The most memory the mount process held resident at once: everything, not only
    /// what the bound counts.
    pub process_peak: u64,
    /// Bytes read ahead, and those dropped before any reader asked for them.
    pub prefetched_bytes: u64,
    pub prefetch_wasted_bytes: u64,
    pub errors: u64,
    /// The servers it reads through, in the order it lists them.
    pub ring: Vec<RingRow>,
}

/// One cache server as a mount reads through it.
#[derive(Debug, Clone, Default)]
pub struct RingRow {
    pub url: String,
    /// Not passed over after a failure just now.
    pub up: bool,
    /// Its share of the key space, in millionths.
    pub share_ppm: u64,
    /// Runs asked of it, the bytes it sent, and the runs it failed.
    pub requests: u64,
    pub bytes: u64,
    pub errors: u64,
}

#[derive(Debug, Clone, Default)]
pub struct MountsView {
    pub rows: Vec<MountRow>,
    pub selected: usize,
    /// Shown under the headers when there are no rows: how to get some.
    pub empty: String,
}

const COLUMNS: [Column; 13] = [
    Column {
        title: "MOUNT POINT",
        width: 22,
        keep: 9,
    },
    Column {
        title: "SERVES",
        width: 33,
        keep: 8,
    },
    Column {
        title: "MOUNTED AS",
        width: 11,
        keep: 5,
    },
    Column {
        title: "SINCE",
        width: 17,
        keep: 1,
    },
    Column {
        title: "SERVED",
        width: 10,
        keep: 6,
    },
    Column {
        title: "MEMORY",
        width: 7,
        keep: 3,
    },
    Column {
        title: "CACHE",
        width: 7,
        keep: 3,
    },
    Column {
        title: "PEERS",
        width: 7,
        keep: 3,
    },
    Column {
        title: "ORIGIN",
        width: 7,
        keep: 3,
    },
    Column {
        title: "MEMORY PEAK",
        width: 12,
        keep: 2,
    },
    Column {
        title: "PROCESS",
        width: 8,
        keep: 1,
    },
    Column {
        title: "WASTED",
        width: 7,
        keep: 1,
    },
    Column {
        title: "ERRORS",
        width: 0,
        keep: 7,
    },
];

fn pct(n: u64, total: u64) -> String {
    if total == 0 {
        "-".into()
    } else {
        format!("{:.0}%", n as f64 * 100.0 / total as f64)
    }
}

/// `412M/512M`: what fits a narrow column.
fn short(b: u64) -> String {
    match b {
        0..1024 => format!("{b}B"),
        1024..0x10_0000 => format!("{}K", b >> 10),
        0x10_0000..0x4000_0000 => format!("{}M", b >> 20),
        _ => format!("{:.1}G", b as f64 / (1u64 << 30) as f64),
    }
}

fn of_bound(n: u64, bound: u64) -> String {
    if bound == 0 {
        "-".into()
    } else {
        format!("{}/{}", short(n), short(bound))
    }
}

/// Where PEERS is in `COLUMNS`.
const PEERS: usize = 7;

const RING_COLUMNS: [Column; 6] = [
    Column {
        title: "SERVER",
        width: 36,
        keep: 9,
    },
    Column {
        title: "STATE",
        width: 12,
        keep: 8,
    },
    Column {
        title: "SHARE",
        width: 7,
        keep: 7,
    },
    Column {
        title: "RUNS",
        width: 9,
        keep: 3,
    },
    Column {
        title: "RECEIVED",
        width: 10,
        keep: 6,
    },
    Column {
        title: "ERRORS",
        width: 0,
        keep: 5,
    },
];

pub fn draw(vm: &MountsView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let ring = vm.rows.get(vm.selected).map_or(&[][..], |r| &r.ring[..]);
    // The ring under the table when the selected mount has one and there is room for
    // it and two rows of the table; the table scrolls in what is left.
    let ring_rows = ring.len() as u16 + 3;
    if ring.is_empty() || area.height < ring_rows + 3 {
        return draw_mounts(vm, theme, area, buf);
    }
    let table_rows = (vm.rows.len() as u16 + 2).min(area.height - ring_rows);
    let [table, detail, _] = Layout::vertical([
        Constraint::Length(table_rows),
        Constraint::Length(ring_rows),
        Constraint::Min(0),
    ])
    .areas(area);
    draw_mounts(vm, theme, table, buf);
    draw_ring(ring, theme, detail, buf);
}

/// The selected mount's servers: a title line, then a row each.
fn draw_ring(ring: &[RingRow], theme: &Theme, area: Rect, buf: &mut Buffer) {
    if area.height < 3 {
        return;
    }
    let up = ring.iter().filter(|r| r.up).count();
    Line::from(vec![
        Span::styled(" ring ", theme.style(Role::Title)),
        Span::styled(
            format!("{up} of {} up, as this mount sees them", ring.len()),
            theme.style(Role::Text),
        ),
        Span::styled(
            " · their own figures: sealvol peers",
            theme.style(Role::Dim),
        ),
    ])
    .render(
        Rect {
            y: area.y + 1,
            height: 1,
            ..area
        },
        buf,
    );
    let rows = Rect {
        y: area.y + 2,
        height: area.height - 2,
        ..area
    };
    draw_table(
        theme,
        rows,
        buf,
        &RING_COLUMNS,
        ring.len(),
        None,
        None,
        |i| {
            let r = &ring[i];
            vec![
                // The host is what tells servers apart; the scheme takes room.
                cell(
                    r.url
                        .trim_start_matches("http://")
                        .trim_start_matches("https://")
                        .to_string(),
                    Role::Text,
                ),
                match r.up {
                    true => cell("up".to_string(), Role::Text),
                    false => cell("passed over".to_string(), Role::Error),
                },
                cell(format!("{:.0}%", r.share_ppm as f64 / 10_000.0), Role::Text),
                cell(r.requests.to_string(), Role::Dim),
                cell(size(r.bytes), Role::Text),
                cell(
                    r.errors.to_string(),
                    if r.errors > 0 {
                        Role::Danger
                    } else {
                        Role::Dim
                    },
                ),
            ]
        },
    );
}

fn draw_mounts(vm: &MountsView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    // PEERS only when some mount reads through peers: elsewhere it would take the room
    // of columns that say something.
    let with_peers = vm.rows.iter().any(|r| r.peers > 0);
    let columns: Vec<Column> = (0..COLUMNS.len())
        .filter(|&i| with_peers || i != PEERS)
        .map(|i| COLUMNS[i])
        .collect();
    draw_table(
        theme,
        area,
        buf,
        &columns,
        vm.rows.len(),
        Some(vm.selected),
        None,
        |i| {
            let r = &vm.rows[i];
            let total = r.memory_hits + r.cache_hits + r.peer_chunks + r.origin_chunks;
            // Faults mark the share: a peer that fails sends its reads to the origin.
            let peers = match (r.peers, r.peer_faults) {
                (0, _) => cell("-".to_string(), Role::Dim),
                _ if r.peer_refused > 0 => cell(
                    format!("{} refused", pct(r.peer_chunks, total)),
                    Role::Error,
                ),
                (_, 0) => cell(pct(r.peer_chunks, total), Role::Text),
                (_, f) => cell(format!("{} !{f}", pct(r.peer_chunks, total)), Role::Error),
            };
            let mut cells = vec![
                cell(name(&r.dir), Role::Text),
                cell(
                    format!("{}@{}", r.volume, short_digest(&r.digest)),
                    Role::Pinned,
                ),
                cell(as_given(&r.volume, &r.requested), Role::Tag),
                cell(when(&r.started), Role::Dim),
                cell(size(r.bytes_served), Role::Text),
                cell(pct(r.memory_hits, total), Role::Text),
                cell(pct(r.cache_hits, total), Role::Text),
                peers,
                cell(pct(r.origin_chunks, total), Role::Dim),
                cell(of_bound(r.memory_peak, r.memory_bound), Role::Dim),
                match r.process_peak {
                    0 => cell("-".to_string(), Role::Dim),
                    n => cell(short(n), Role::Dim),
                },
                cell(pct(r.prefetch_wasted_bytes, r.prefetched_bytes), Role::Dim),
                cell(
                    r.errors.to_string(),
                    if r.errors > 0 {
                        Role::Danger
                    } else {
                        Role::Dim
                    },
                ),
            ];
            if !with_peers {
                cells.remove(PEERS);
            }
            cells
        },
    );
    if vm.rows.is_empty() {
        draw_empty(theme, area, buf, &vm.empty);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_is_where_draw_drops_it_from() {
        assert_eq!(COLUMNS[PEERS].title, "PEERS");
    }
}
