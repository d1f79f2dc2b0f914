//! Jobs: the agent's sync jobs, newest first, and the selected one in detail: gauges
//! for bytes and files, the transfer rate over the last minute, chunks new against
//! reused, the files around the one being read, and, for a failed job, its error in
//! full.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline, Widget, Wrap};
use sealvol_themes::{Role, Theme};

use crate::format::{name, size, when};
use crate::list::{Column, cell, draw_empty, draw_table};

#[derive(Debug, Clone, Default)]
pub struct JobRow {
    pub id: u64,
    /// QUEUED, RUNNING, SEALING, READY, FAILED or CANCELLED.
    pub state: String,
    pub source: String,
    pub volume: String,
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub updated: String,
}

#[derive(Debug, Clone, Default)]
pub struct FileLine {
    pub path: String,
    pub size: u64,
    /// kept, done, reading or waiting.
    pub state: String,
}

#[derive(Debug, Clone, Default)]
pub struct JobDetail {
    pub id: u64,
    pub state: String,
    pub source: String,
    pub volume: String,
    pub tags: Vec<String>,
    pub attempts: u32,
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub files_done: u64,
    pub files_total: u64,
    pub chunks_new: u64,
    pub chunks_reused: u64,
    pub rate: u64,
    pub eta_secs: Option<u64>,
    pub rate_history: Vec<u64>,
    pub files: Vec<FileLine>,
    pub queued_ahead: u64,
    pub sealed: Option<String>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct JobsView {
    pub rows: Vec<JobRow>,
    pub selected: usize,
    pub detail: Option<JobDetail>,
    /// Shown under the headers when there are no rows: how to get some.
    pub empty: String,
}

const COLUMNS: [Column; 6] = [
    Column {
        title: "ID",
        width: 5,
        keep: 9,
    },
    Column {
        title: "STATE",
        width: 10,
        keep: 9,
    },
    Column {
        title: "SOURCE",
        width: 34,
        keep: 5,
    },
    Column {
        title: "VOLUME",
        width: 22,
        keep: 8,
    },
    Column {
        title: "DONE",
        width: 8,
        keep: 6,
    },
    Column {
        title: "UPDATED",
        width: 0,
        keep: 3,
    },
];

pub fn state_role(state: &str) -> Role {
    match state {
        "READY" => Role::Ok,
        "FAILED" => Role::Danger,
        "CANCELLED" => Role::Dim,
        "RUNNING" | "SEALING" => Role::Gauge,
        _ => Role::Text,
    }
}

fn pct(done: u64, total: u64) -> String {
    (done * 100)
        .checked_div(total)
        .map_or("-".into(), |p| format!("{p}%"))
}

pub fn draw(vm: &JobsView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    // At least the header and one row, at most half the screen (a tiny one gets less).
    let table_rows = (vm.rows.len() as u16 + 1).max(2).min(area.height / 2);
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
                cell(&r.state, state_role(&r.state)),
                cell(name(&r.source), Role::Text),
                cell(&r.volume, Role::Tag),
                cell(pct(r.bytes_done, r.bytes_total), Role::Text),
                cell(when(&r.updated), Role::Dim),
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

/// `[━━━━━━──────]` in `width` cells.
pub(crate) fn bar(done: u64, total: u64, width: usize) -> (String, String) {
    let filled = if total == 0 {
        0
    } else {
        (((done as u128 * width as u128) / total as u128) as usize).min(width)
    };
    ("━".repeat(filled), "─".repeat(width - filled))
}

pub(crate) fn gauge<'a>(
    label: &'a str,
    done: u64,
    total: u64,
    text: String,
    width: u16,
) -> Line<'a> {
    // The same width for every gauge, so that they line up.
    let w = (width as usize / 3).clamp(10, 40);
    let (on, off) = bar(done, total, w);
    Line::from(vec![
        Span::raw(format!(" {label:<7} ")),
        Span::raw(on),
        Span::raw(off),
        Span::raw(format!("  {text}")),
    ])
}

fn styled<'a>(mut line: Line<'a>, roles: &[Role], theme: &Theme) -> Line<'a> {
    for (span, role) in line.spans.iter_mut().zip(roles) {
        span.style = theme.style(*role);
    }
    line
}

fn draw_detail(d: &JobDetail, theme: &Theme, area: Rect, buf: &mut Buffer) {
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
        Span::styled(format!(" job {} ", d.id), theme.style(Role::Title)),
        Span::styled(d.state.clone(), theme.style(state_role(&d.state))),
        Span::styled(
            format!("  {} → {}", name(&d.source), d.volume),
            theme.style(Role::Text),
        ),
    ];
    if !d.tags.is_empty() {
        head.push(Span::styled(
            format!("  :{}", d.tags.join(" :")),
            theme.style(Role::Tag),
        ));
    }
    if d.attempts > 1 {
        head.push(Span::styled(
            format!("  attempt {}", d.attempts),
            theme.style(Role::Dim),
        ));
    }
    lines.push(Line::from(head));
    let roles = [Role::Dim, Role::Gauge, Role::Dim, Role::Text];
    let rate = if d.state == "RUNNING" {
        format!(
            " · {}/s · eta {}",
            size(d.rate),
            d.eta_secs.map_or("-".into(), |s| format!("{s} s"))
        )
    } else {
        String::new()
    };
    lines.push(styled(
        gauge(
            "bytes",
            d.bytes_done,
            d.bytes_total,
            format!(
                "{} / {} {}{rate}",
                size(d.bytes_done),
                size(d.bytes_total),
                pct(d.bytes_done, d.bytes_total)
            ),
            area.width,
        ),
        &roles,
        theme,
    ));
    lines.push(styled(
        gauge(
            "files",
            d.files_done,
            d.files_total,
            format!("{} / {}", d.files_done, d.files_total),
            area.width,
        ),
        &roles,
        theme,
    ));
    lines.push(Line::from(vec![
        Span::styled(" chunks  ".to_string(), theme.style(Role::Dim)),
        Span::styled(format!("{} new", d.chunks_new), theme.style(Role::Added)),
        Span::styled(" · ".to_string(), theme.style(Role::Dim)),
        Span::styled(
            format!("{} reused", d.chunks_reused),
            theme.style(Role::Unchanged),
        ),
    ]));
    if d.queued_ahead > 0 {
        lines.push(Line::styled(
            format!(" waiting behind {} job(s)", d.queued_ahead),
            theme.style(Role::Dim),
        ));
    }
    if let Some(s) = &d.sealed {
        lines.push(Line::from(vec![
            Span::styled(" sealed  ".to_string(), theme.style(Role::Dim)),
            Span::styled(s.clone(), theme.style(Role::Pinned)),
        ]));
    }
    let fixed = lines.len() as u16;
    let [top, rest] =
        Layout::vertical([Constraint::Length(fixed), Constraint::Min(0)]).areas(inner);
    Paragraph::new(lines).render(top, buf);

    if let Some(r) = &d.reason {
        // The error in full, wrapped: the one place a long message must not be cut.
        let text = vec![Line::from(vec![
            Span::styled(
                format!(" {}: ", if d.state == "FAILED" { "error" } else { "why" }),
                theme.style(Role::Danger),
            ),
            Span::styled(r.clone(), theme.style(Role::Text)),
        ])];
        Paragraph::new(text)
            .wrap(Wrap { trim: false })
            .render(rest, buf);
        return;
    }
    let spark_h = if d.rate_history.is_empty() { 0 } else { 3 };
    let [spark, files] =
        Layout::vertical([Constraint::Length(spark_h), Constraint::Min(0)]).areas(rest);
    if spark_h > 0 {
        let label = " rate   ";
        buf.set_string(spark.x, spark.y, label, theme.style(Role::Dim));
        let graph = Rect {
            x: spark.x + label.len() as u16,
            width: spark.width.saturating_sub(label.len() as u16 + 1).min(60),
            ..spark
        };
        Sparkline::default()
            .data(&d.rate_history)
            .style(theme.style(Role::Gauge))
            .render(graph, buf);
    }
    let rows: Vec<Line> = d
        .files
        .iter()
        .map(|f| {
            let (mark, role) = match f.state.as_str() {
                "kept" => ("= ", Role::Unchanged),
                "done" => ("✓ ", Role::Ok),
                "reading" => ("▸ ", Role::Gauge),
                _ => ("  ", Role::Dim),
            };
            Line::from(vec![
                Span::styled(format!(" {mark}"), theme.style(role)),
                Span::styled(format!("{:<9}", f.state), theme.style(role)),
                Span::styled(format!("{:>10}  ", size(f.size)), theme.style(Role::Dim)),
                Span::styled(name(&f.path).into_owned(), theme.style(Role::Text)),
            ])
        })
        .collect();
    Paragraph::new(rows).render(files, buf);
}

#[cfg(test)]
mod tests {
    use super::bar;

    #[test]
    fn bars_fill_in_proportion_and_never_overflow() {
        assert_eq!(bar(0, 100, 10), (String::new(), "─".repeat(10)));
        assert_eq!(bar(50, 100, 10).0.chars().count(), 5);
        assert_eq!(bar(100, 100, 10), ("━".repeat(10), String::new()));
        assert_eq!(bar(5, 0, 10).0, "", "no total: an empty bar");
        assert_eq!(bar(200, 100, 10), ("━".repeat(10), String::new()));
    }
}
