//! Watch: every watch with its folder, state and last sealed version, and the selected
//! one in detail: what it is doing now (waiting, settling with a countdown, pushing
//! with a gauge, idle, failed with the reason), the last version it sealed with the
//! bytes it moved against the checkpoint's size, and its pushes, newest first.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};
use sealvol_themes::{Role, Theme};

use crate::format::{name, size, when};
use crate::jobs::bar;
use crate::list::{Column, cell, draw_empty, draw_table};

#[derive(Debug, Clone, Default)]
pub struct WatchRow {
    pub id: u64,
    /// ACTIVE or STOPPED.
    pub state: String,
    pub dir: String,
    pub volume: String,
    /// waiting, settling, pushing, idle, failed or stopped.
    pub phase: String,
    pub sealed: usize,
    /// The last sealed version's digest.
    pub last: Option<String>,
}

/// What a watch is doing now.
#[derive(Debug, Clone, Default)]
pub struct Now {
    /// waiting, settling, pushing, idle, failed or stopped.
    pub phase: String,
    /// The checkpoint concerned (settling, pushing).
    pub name: Option<String>,
    /// Why it waits, or why it failed.
    pub why: Option<String>,
    /// Settling: seconds left of `settle_secs`.
    pub left_secs: f64,
    /// Failed: seconds until it tries again.
    pub retry_secs: f64,
    pub bytes_done: u64,
    pub bytes_total: u64,
}

#[derive(Debug, Clone, Default)]
pub struct PushLine {
    pub at: String,
    pub name: String,
    /// sealed, unchanged, abandoned or failed.
    pub outcome: String,
    pub digest: Option<String>,
    pub bytes_new: u64,
    pub bytes_total: u64,
    pub latency_secs: Option<f64>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct WatchDetail {
    pub id: u64,
    pub state: String,
    pub dir: String,
    pub volume: String,
    pub layout: String,
    pub settle_secs: f64,
    pub tags: Vec<String>,
    /// `keep the last 3 · every step multiple of 1000`, when retention is on.
    pub retention: Option<String>,
    /// `in the agent` or `for pid 4242 (foreground)`.
    pub runs: String,
    pub now: Now,
    /// `inotify`, or polling and why.
    pub notifier: Option<String>,
    pub pending: Vec<String>,
    /// The newest sealing push.
    pub last: Option<PushLine>,
    /// Newest first.
    pub pushes: Vec<PushLine>,
    /// Why it was stopped.
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct WatchesView {
    pub rows: Vec<WatchRow>,
    pub selected: usize,
    pub detail: Option<Box<WatchDetail>>,
    /// Shown under the headers when there are no rows: how to get some.
    pub empty: String,
}

const COLUMNS: [Column; 6] = [
    Column {
        title: "ID",
        width: 4,
        keep: 9,
    },
    Column {
        title: "NOW",
        width: 10,
        keep: 8,
    },
    Column {
        title: "DIR",
        width: 24,
        keep: 5,
    },
    Column {
        title: "VOLUME",
        width: 18,
        keep: 7,
    },
    Column {
        title: "SEALED",
        width: 7,
        keep: 6,
    },
    Column {
        title: "LAST",
        width: 0,
        keep: 4,
    },
];

fn phase_role(phase: &str) -> Role {
    match phase {
        "failed" => Role::Danger,
        "stopped" => Role::Dim,
        "idle" => Role::Ok,
        _ => Role::Text,
    }
}

fn outcome_role(outcome: &str) -> Role {
    match outcome {
        "sealed" => Role::Ok,
        "unchanged" => Role::Unchanged,
        "abandoned" => Role::Modified,
        "failed" => Role::Danger,
        _ => Role::Text,
    }
}

fn short(d: &str) -> String {
    d.get(..15).unwrap_or(d).to_string()
}

fn secs(s: f64) -> String {
    format!("{s:.1} s")
}

pub fn draw(vm: &WatchesView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    // At least the header and one row, at most a third of the screen (a tiny one gets
    // less).
    let table_rows = (vm.rows.len() as u16 + 1).max(2).min(area.height / 3);
    let [table, detail] =
        Layout::vertical([Constraint::Length(table_rows), Constraint::Min(0)]).areas(area);
    draw_table(
        theme,
        table,
        buf,
        &COLUMNS,
        vm.rows.len(),
        Some(vm.selected),
        None,
        |i| {
            let r = &vm.rows[i];
            vec![
                cell(r.id.to_string(), Role::Dim),
                cell(&r.phase, phase_role(&r.phase)),
                cell(name(&r.dir).into_owned(), Role::Text),
                cell(&r.volume, Role::Tag),
                cell(r.sealed.to_string(), Role::Text),
                cell(
                    r.last.as_deref().map(short).unwrap_or_else(|| "-".into()),
                    Role::Pinned,
                ),
            ]
        },
    );
    if vm.rows.is_empty() {
        draw_empty(theme, table, buf, &vm.empty);
    }
    if let Some(d) = &vm.detail {
        draw_detail(d, theme, detail, buf);
    }
}

fn label<'a>(text: &str, theme: &Theme) -> Span<'a> {
    Span::styled(format!(" {text:<8}"), theme.style(Role::Dim))
}

/// The line that says what the watch is doing, with a gauge when there is one.
fn now_line<'a>(d: &WatchDetail, theme: &Theme, width: u16) -> Line<'a> {
    let n = &d.now;
    let what = n.name.clone().unwrap_or_default();
    let mut spans = vec![
        label("now", theme),
        Span::styled(format!("{} ", n.phase), theme.style(phase_role(&n.phase))),
    ];
    let w = (width as usize / 4).clamp(8, 30);
    let mut gauge = |done: u64, total: u64, text: String| {
        let (on, off) = bar(done, total, w);
        spans.push(Span::styled(on, theme.style(Role::Gauge)));
        spans.push(Span::styled(off, theme.style(Role::Dim)));
        spans.push(Span::styled(format!(" {text}"), theme.style(Role::Text)));
    };
    match n.phase.as_str() {
        "settling" => {
            let total = (d.settle_secs * 10.0) as u64;
            let waited = total.saturating_sub((n.left_secs * 10.0) as u64);
            gauge(
                waited,
                total,
                format!(
                    "{what}: {} left ({})",
                    secs(n.left_secs),
                    n.why.as_deref().unwrap_or("written to")
                ),
            );
        }
        "pushing" => gauge(
            n.bytes_done,
            n.bytes_total,
            format!("{what}: {} / {}", size(n.bytes_done), size(n.bytes_total)),
        ),
        "waiting" => spans.push(Span::styled(
            n.why.clone().unwrap_or_default(),
            theme.style(Role::Text),
        )),
        "failed" => spans.push(Span::styled(
            format!("(tried again in {})", secs(n.retry_secs)),
            theme.style(Role::Dim),
        )),
        "idle" if d.pending.is_empty() => spans.push(Span::styled(
            "every checkpoint seen is sealed",
            theme.style(Role::Dim),
        )),
        _ => {}
    }
    Line::from(spans)
}

fn draw_detail(d: &WatchDetail, theme: &Theme, area: Rect, buf: &mut Buffer) {
    if area.height < 3 {
        return;
    }
    let inner = Rect {
        y: area.y + 1,
        height: area.height - 1,
        ..area
    };
    let mut lines: Vec<Line> = Vec::new();
    let mut head = vec![
        Span::styled(format!(" watch {} ", d.id), theme.style(Role::Title)),
        Span::styled(d.state.clone(), theme.style(Role::Text)),
        Span::styled(
            format!("  {} → {}", name(&d.dir), d.volume),
            theme.style(Role::Text),
        ),
    ];
    if !d.tags.is_empty() {
        head.push(Span::styled(
            format!("  :{}", d.tags.join(" :")),
            theme.style(Role::Tag),
        ));
    }
    lines.push(Line::from(head));
    lines.push(Line::from(vec![
        label("how", theme),
        Span::styled(
            format!(
                "{} layout · settle {} · {}",
                d.layout,
                secs(d.settle_secs),
                d.runs
            ),
            theme.style(Role::Text),
        ),
    ]));
    if let Some(n) = &d.notifier {
        lines.push(Line::from(vec![
            label("changes", theme),
            Span::styled(n.clone(), theme.style(Role::Text)),
        ]));
    }
    if let Some(r) = &d.retention {
        lines.push(Line::from(vec![
            label("keep", theme),
            Span::styled(r.clone(), theme.style(Role::Text)),
        ]));
    }
    lines.push(now_line(d, theme, area.width));
    if !d.pending.is_empty() {
        lines.push(Line::from(vec![
            label("pending", theme),
            Span::styled(d.pending.join(", "), theme.style(Role::Text)),
        ]));
    }
    if let Some(p) = &d.last {
        lines.push(Line::from(vec![
            label("last", theme),
            Span::styled(format!("{}  ", p.name), theme.style(Role::Text)),
            Span::styled(
                p.digest.clone().unwrap_or_default(),
                theme.style(Role::Pinned),
            ),
        ]));
        lines.push(Line::from(vec![
            label("moved", theme),
            Span::styled(size(p.bytes_new), theme.style(Role::Added)),
            Span::styled(
                format!(" of {}", size(p.bytes_total)),
                theme.style(Role::Text),
            ),
            Span::styled(
                p.latency_secs
                    .map(|l| format!(" · sealed {} after the last write", secs(l)))
                    .unwrap_or_default(),
                theme.style(Role::Dim),
            ),
        ]));
    }
    let fixed = lines.len() as u16;
    let [top, rest] =
        Layout::vertical([Constraint::Length(fixed), Constraint::Min(0)]).areas(inner);
    Paragraph::new(lines).render(top, buf);

    // The reason in full, wrapped: a failure must not be cut.
    let why = match d.now.phase.as_str() {
        "failed" => d.now.why.clone().map(|w| ("error", w)),
        "stopped" => d.reason.clone().map(|w| ("why", w)),
        _ => None,
    };
    let rest = match why {
        Some((what, text)) => {
            let text_len = text.chars().count() as u16;
            let para = Paragraph::new(vec![Line::from(vec![
                Span::styled(format!(" {what}: "), theme.style(Role::Danger)),
                Span::styled(text, theme.style(Role::Text)),
            ])])
            .wrap(Wrap { trim: false });
            // Lines it wraps to: the label and text over the width, rounded up.
            let chars = what.len() as u16 + 3 + text_len;
            let h = chars.div_ceil(rest.width.max(1)).max(1).min(rest.height);
            let [r, after] =
                Layout::vertical([Constraint::Length(h), Constraint::Min(0)]).areas(rest);
            para.render(r, buf);
            after
        }
        None => rest,
    };
    if rest.height < 2 || d.pushes.is_empty() {
        return;
    }
    let hist = Rect {
        y: rest.y + 1,
        height: rest.height - 1,
        ..rest
    };
    let rows: Vec<Line> = d
        .pushes
        .iter()
        .map(|p| {
            Line::from(vec![
                Span::styled(format!(" {:<17}", when(&p.at)), theme.style(Role::Dim)),
                Span::styled(format!("{:<17}", name(&p.name)), theme.style(Role::Text)),
                Span::styled(
                    format!("{:<10}", p.outcome),
                    theme.style(outcome_role(&p.outcome)),
                ),
                Span::styled(
                    format!(
                        "{:<13}",
                        p.digest
                            .as_deref()
                            .map(|d| d.get(..12).unwrap_or(d))
                            .unwrap_or("")
                    ),
                    theme.style(Role::Pinned),
                ),
                Span::styled(
                    match p.outcome.as_str() {
                        "sealed" | "unchanged" => format!("{:>9} new", size(p.bytes_new)),
                        _ => format!("{:13}", ""),
                    },
                    theme.style(Role::Added),
                ),
                Span::styled(
                    p.latency_secs
                        .map_or(format!("{:7}", ""), |l| format!(" {:>6}", secs(l))),
                    theme.style(Role::Dim),
                ),
                Span::styled(
                    p.note
                        .as_deref()
                        .map(|n| format!("  {n}"))
                        .unwrap_or_default(),
                    theme.style(Role::Dim),
                ),
            ])
        })
        .collect();
    Paragraph::new(rows).render(hist, buf);
}
