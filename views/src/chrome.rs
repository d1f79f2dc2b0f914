//! What surrounds every screen: the header with breadcrumbs, the status line, and the
//! overlays (help, confirmation, command palette).

use ratatui::buffer::Buffer;
use ratatui::layout::{Alignment, Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Widget, Wrap};
use sealvol_themes::{Role, Theme};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatusKind {
    Info,
    Error,
    /// A long engine call is running; the number is the spinner frame.
    Busy(usize),
}

#[derive(Debug, Clone)]
pub struct Status {
    pub kind: StatusKind,
    pub text: String,
    /// Key hints for the current screen, shown at the right: (key, what).
    pub hints: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub enum Overlay {
    /// Every binding of the current mode: (key, description).
    /// The keys, in the order given (a key of "" heads a section), scrolled by `offset`.
    Help {
        bindings: Vec<(String, String)>,
        offset: usize,
    },
    /// The status line's recent messages in full, newest first (text, is an error),
    /// wrapped, scrolled down by `offset` lines.
    Messages {
        messages: Vec<(String, bool)>,
        offset: usize,
    },
    /// A destructive action, named by what it changes, with from → to. It fits any
    /// size the console draws and always says how to confirm: lines too long are cut
    /// with `…` (wrapped instead when `full`, which `f` asks for), lines past the
    /// height are counted, and the `y`/`n` line is never what gives way.
    Confirm {
        title: String,
        lines: Vec<(String, Role)>,
        yes: String,
        full: bool,
    },
    /// A line being typed: `prefix` (`/`, `:` or what it asks for), the input (shown
    /// selected when `fresh`: typing replaces it), and what it can become.
    Prompt {
        prefix: String,
        input: String,
        fresh: bool,
        suggestions: Vec<(String, String)>,
    },
}

const SPINNER: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];

pub fn draw_header(crumbs: &[String], right: &str, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let mut spans = vec![Span::styled(" sealvol", theme.style(Role::Title))];
    for (i, c) in crumbs.iter().enumerate() {
        spans.push(Span::styled(" › ", theme.style(Role::Dim)));
        let role = if i + 1 == crumbs.len() {
            Role::Text
        } else {
            Role::Dim
        };
        spans.push(Span::styled(c.clone(), theme.style(role)));
    }
    let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    buf.set_line(area.x, area.y, &Line::from(spans), area.width);
    // The repository's path gets what the breadcrumbs leave (its end, which names it,
    // after a `…`), and nothing when that is too little to read.
    let room = (area.width as usize).saturating_sub(used + 3);
    let n = right.chars().count();
    let shown: String = if n <= room {
        right.to_string()
    } else if room >= 12 {
        let tail: String = right.chars().skip(n - (room - 1)).collect();
        format!("…{tail}")
    } else {
        String::new()
    };
    let w = shown.chars().count() as u16;
    if w > 0 {
        buf.set_string(area.right() - w - 1, area.y, shown, theme.style(Role::Dim));
    }
}

fn status_text(status: &Status) -> String {
    let prefix = match status.kind {
        StatusKind::Info => String::new(),
        StatusKind::Error => "✗ ".to_string(),
        StatusKind::Busy(f) => format!("{} ", SPINNER[f % SPINNER.len()]),
    };
    format!(" {prefix}{}", status.text)
}

/// Where each key hint sits on a status line `width` wide: (start, end) columns, or
/// `None` when the hints do not fit beside the message (the message wins).
fn hint_columns(status: &Status, width: u16) -> Vec<(usize, (u16, u16))> {
    let widths: Vec<u16> = status
        .hints
        .iter()
        .map(|(k, w)| (k.chars().count() + w.chars().count() + 3) as u16)
        .collect();
    let total: u16 = widths.iter().sum();
    let text_w = status_text(status).chars().count() as u16;
    let chosen: Vec<usize> = if text_w + total + 2 <= width {
        (0..widths.len()).collect()
    } else {
        // The message does not fit beside them all: help and the command line stay
        // (how to find everything else), then the others in their order while the
        // message still fits whole; a message too long for that gets the room.
        let essential = |i: &usize| matches!(status.hints[*i].0.as_str(), "?" | ":");
        let mut chosen: Vec<usize> = (0..widths.len()).filter(essential).collect();
        let mut used: u16 = chosen.iter().map(|&i| widths[i]).sum();
        if used + 2 > width {
            return Vec::new();
        }
        for i in (0..widths.len()).filter(|i| !essential(i)) {
            if text_w + used + widths[i] + 2 <= width {
                chosen.push(i);
                used += widths[i];
            }
        }
        chosen.sort_unstable();
        chosen
    };
    let shown: u16 = chosen.iter().map(|&i| widths[i]).sum();
    let mut x = width - shown;
    chosen
        .into_iter()
        .map(|i| {
            let r = (x, x + widths[i]);
            x += widths[i];
            (i, r)
        })
        .collect()
}

/// The index of the hint under `column` of a status line `width` wide: hints are
/// clickable and do what their key does.
pub fn hint_at(status: &Status, width: u16, column: u16) -> Option<usize> {
    hint_columns(status, width)
        .into_iter()
        .find(|&(_, (a, b))| (a..b).contains(&column))
        .map(|(i, _)| i)
}

pub fn draw_status(status: &Status, theme: &Theme, area: Rect, buf: &mut Buffer) {
    buf.set_style(area, theme.style(Role::Status));
    let role = match status.kind {
        StatusKind::Error => Role::Error,
        _ => Role::Status,
    };
    let style = theme.style(Role::Status).patch(theme.style(role));
    // Text wider than the terminal ends in `…` rather than at the edge mid-word, and
    // says where the rest is when there is room to.
    let text = status_text(status);
    let columns = hint_columns(status, area.width);
    // The message gets what the hints leave.
    let hints_w: usize = columns.iter().map(|(_, (a, b))| (b - a) as usize).sum();
    let room = (area.width as usize).saturating_sub(hints_w + usize::from(hints_w > 0));
    const REST: &str = "… (L: in full)";
    let text = if text.chars().count() > room && room > 1 {
        let tail = if room > 30 { REST } else { "…" };
        let mut cut: String = text.chars().take(room - tail.chars().count()).collect();
        cut.push_str(tail);
        cut
    } else {
        text.chars().take(room).collect()
    };
    buf.set_string(area.x, area.y, text, style);
    for (i, (x, _)) in columns {
        let (k, what) = &status.hints[i];
        let line = Line::from(vec![
            Span::styled(
                format!(" {k}"),
                theme.style(Role::Status).patch(theme.style(Role::Key)),
            ),
            Span::styled(format!(" {what} "), theme.style(Role::Status)),
        ]);
        buf.set_line(area.x + x, area.y, &line, area.width.saturating_sub(x));
    }
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let [v] = Layout::vertical([Constraint::Length(height.min(area.height))])
        .flex(Flex::Center)
        .areas(area);
    let [h] = Layout::horizontal([Constraint::Length(width.min(area.width))])
        .flex(Flex::Center)
        .areas(v);
    h
}

pub fn draw_overlay(overlay: &Overlay, theme: &Theme, area: Rect, buf: &mut Buffer) {
    match overlay {
        Overlay::Help { bindings, offset } => {
            let key_w = bindings
                .iter()
                .map(|(k, _)| k.chars().count())
                .max()
                .unwrap_or(8);
            let width = bindings
                .iter()
                .map(|(_, d)| key_w + d.chars().count() + 4)
                .max()
                .unwrap_or(20)
                .max(34) as u16
                + 2;
            let r = centered(area, width, bindings.len() as u16 + 2);
            Clear.render(r, buf);
            let rows = r.height.saturating_sub(2) as usize;
            let offset = (*offset).min(bindings.len().saturating_sub(rows));
            let lines: Vec<Line> = bindings
                .iter()
                .skip(offset)
                .take(rows)
                .map(|(k, d)| {
                    if k.is_empty() {
                        // A section heading.
                        return Line::from(Span::styled(
                            format!(" {d}"),
                            theme.style(Role::Header),
                        ));
                    }
                    // A description wider than the window ends in `…`, not mid-word
                    // at the frame.
                    let room = (r.width as usize).saturating_sub(key_w + 5);
                    Line::from(vec![
                        Span::styled(format!(" {k:<key_w$}  "), theme.style(Role::Key)),
                        Span::styled(cut(d, room), theme.style(Role::Text)),
                    ])
                })
                .collect();
            let more = bindings.len().saturating_sub(offset + rows);
            let title = if more > 0 || offset > 0 {
                format!(" keys: j/k scroll, {more} more below; esc closes ")
            } else {
                " keys (esc closes) ".to_string()
            };
            Paragraph::new(lines)
                .block(framed(&title, Role::Border, theme))
                .render(r, buf);
        }
        Overlay::Messages { messages, offset } => {
            let width = area.width.saturating_sub(4).min(120);
            let r = centered(area, width, area.height.saturating_sub(2));
            Clear.render(r, buf);
            let mut lines: Vec<Line> = Vec::new();
            for (text, error) in messages {
                let role = if *error { Role::Error } else { Role::Text };
                lines.push(Line::from(Span::styled(text.clone(), theme.style(role))));
                lines.push(Line::default());
            }
            let title = " messages, newest first (j/k scroll; esc closes) ";
            Paragraph::new(lines)
                .wrap(Wrap { trim: false })
                .scroll((u16::try_from(*offset).unwrap_or(u16::MAX), 0))
                .block(framed(title, Role::Border, theme))
                .render(r, buf);
        }
        Overlay::Confirm {
            title,
            lines,
            yes,
            full,
        } => draw_confirm(title, lines, yes, *full, theme, area, buf),
        Overlay::Prompt {
            prefix,
            input,
            fresh,
            suggestions,
        } => {
            let r = Rect {
                y: area.bottom().saturating_sub(1),
                height: 1,
                ..area
            };
            Clear.render(r, buf);
            let input_role = if *fresh { Role::Selection } else { Role::Text };
            buf.set_line(
                r.x,
                r.y,
                &Line::from(vec![
                    Span::styled(prefix.clone(), theme.style(Role::Key)),
                    Span::styled(input.clone(), theme.style(input_role)),
                    Span::styled("█", theme.style(Role::Dim)),
                ]),
                r.width,
            );
            // What the line can become, just above it (the palette's commands).
            let shown = suggestions
                .len()
                .min(area.height.saturating_sub(2) as usize);
            let width = suggestions
                .iter()
                .map(|(u, _)| u.chars().count())
                .max()
                .unwrap_or(0);
            for (i, (usage, about)) in suggestions.iter().take(shown).enumerate() {
                let y = r.y - (shown - i) as u16;
                let row = Rect { y, height: 1, ..r };
                Clear.render(row, buf);
                buf.set_line(
                    r.x,
                    y,
                    &Line::from(vec![
                        Span::styled(format!(" {usage:<width$}  "), theme.style(Role::Key)),
                        Span::styled(about.clone(), theme.style(Role::Dim)),
                    ]),
                    r.width,
                );
            }
        }
    }
}

/// `text` in at most `width` characters: cut at the end with `…`.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// How to answer a confirmation, in `width` columns: what `y` does when it fits, else
/// just the keys.
fn answer_line(yes: &str, width: usize, theme: &Theme) -> Line<'static> {
    let y = Span::styled(" y ", theme.style(Role::Danger));
    let fixed = " y   ".len() + "    n/esc  cancel".len();
    if width >= fixed + 4 {
        let yes = cut_middle(yes, width - fixed);
        return Line::from(vec![
            y,
            Span::styled(format!(" {yes}    "), theme.style(Role::Text)),
            Span::styled(" n/esc ", theme.style(Role::Key)),
            Span::styled(" cancel", theme.style(Role::Text)),
        ]);
    }
    if width >= " y  n  cancel".len() {
        return Line::from(vec![
            y,
            Span::styled(" ", theme.style(Role::Text)),
            Span::styled(" n ", theme.style(Role::Key)),
            Span::styled(" cancel", theme.style(Role::Text)),
        ]);
    }
    Line::from(vec![
        Span::styled("y", theme.style(Role::Danger)),
        Span::styled("/", theme.style(Role::Text)),
        Span::styled("n", theme.style(Role::Key)),
        Span::styled(" cancel", theme.style(Role::Text)),
    ])
}

/// `text` in at most `width` characters: cut in the middle with `…`, so that a path
/// keeps its file's name.
fn cut_middle(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text.to_string();
    }
    let keep = width.saturating_sub(1);
    let head = keep / 2;
    let tail = keep - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// `text` in rows of at most `width` characters.
fn wrapped(text: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() || width == 0 {
        return vec![String::new()];
    }
    chars.chunks(width).map(|c| c.iter().collect()).collect()
}

fn draw_confirm(
    title: &str,
    lines: &[(String, Role)],
    yes: &str,
    full: bool,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    const ANSWER: usize = " y   ".len() + "    n/esc  cancel".len();
    let want = lines
        .iter()
        .map(|(l, _)| l.chars().count())
        .chain([title.chars().count() + 2, yes.chars().count() + ANSWER])
        .max()
        .unwrap_or(40)
        + 4;
    let width = (want as u16).min(area.width).max(1);
    // Inside the frame and a space of margin on each side.
    let inner = (width as usize).saturating_sub(4).max(1);
    let mut rows: Vec<(String, Role)> = Vec::new();
    for (l, role) in lines {
        match full {
            true => rows.extend(wrapped(l, inner).into_iter().map(|r| (r, *role))),
            false => rows.push((cut(l, inner), *role)),
        }
    }
    // The frame, a blank line and the answer line are always drawn.
    let room = (area.height as usize).saturating_sub(4);
    let whole = match !full && lines.iter().any(|(l, _)| l.chars().count() > inner) {
        true => " · f shows the lines whole",
        false => "",
    };
    if rows.len() > room {
        let hidden = rows.len() - room.saturating_sub(1);
        rows.truncate(room.saturating_sub(1));
        if room > 0 {
            let more = format!("… {hidden} more line(s){whole}");
            rows.push((cut(&more, inner), Role::Dim));
        }
    } else if !whole.is_empty() && rows.len() < room {
        rows.push((cut(whole.trim_start_matches(" · "), inner), Role::Dim));
    }
    let height = (rows.len() + 4) as u16;
    let r = centered(area, width, height);
    Clear.render(r, buf);
    let mut text: Vec<Line> = rows
        .into_iter()
        .map(|(l, role)| Line::from(Span::styled(l, theme.style(role))))
        .collect();
    if r.height >= 4 {
        text.push(Line::default());
    }
    text.push(answer_line(yes, (width as usize).saturating_sub(2), theme));
    // Too short for the frame: the answer line alone, at the bottom.
    if r.height < 3 {
        let row = Rect {
            y: area.bottom().saturating_sub(1),
            height: 1,
            ..area
        };
        Clear.render(row, buf);
        let answer = answer_line(yes, area.width as usize, theme);
        buf.set_line(row.x, row.y, &answer, row.width);
        return;
    }
    let skip = text
        .len()
        .saturating_sub(r.height.saturating_sub(2) as usize);
    let text: Vec<Line> = text.into_iter().skip(skip).collect();
    let title = cut(&format!(" {title} "), (width as usize).saturating_sub(2));
    Paragraph::new(text)
        .alignment(Alignment::Center)
        .block(framed(&title, Role::Danger, theme))
        .render(r, buf);
}

fn framed<'a>(title: &'a str, role: Role, theme: &Theme) -> Block<'a> {
    // A role that stands out by its background (danger) draws its frame as a line in
    // that colour; the title keeps the full style.
    let style = theme.style(role);
    let line = match style.bg {
        Some(bg) => ratatui::style::Style::default().fg(bg),
        None => style,
    };
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(line)
        .title(Span::styled(title, style))
}
