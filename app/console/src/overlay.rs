//! The overlays as the views draw them: help, messages, the prompt with the palette's
//! suggestions, and each confirmation, which says what will change and what will not.

use sealvol_deploy::rollback::RollbackPlan;
use sealvol_themes::Role;
use sealvol_views::chrome::{Overlay as ViewOverlay, StatusKind};

use crate::effects::{DeletePlan, RestorePlan, TagMovePlan};
use crate::palette;
use crate::screens::{Overlay, PromptKind};

/// The view of overlay `o`; `help` is called only when help is what is shown.
pub fn view(
    o: &Overlay,
    help: impl FnOnce() -> Vec<(String, String)>,
    messages: &std::collections::VecDeque<(StatusKind, String)>,
    full: bool,
) -> ViewOverlay {
    let confirm = match o {
        Overlay::ConfirmCancel(id, what) => cancel_job(*id, what),
        Overlay::ConfirmRetry(id, what) => retry_job(*id, what),
        Overlay::ConfirmStopWatch(id, what) => stop_watch(*id, what),
        Overlay::ConfirmDelete(p) => delete(p),
        Overlay::ConfirmRollback(p) => rollback(p, full),
        Overlay::ConfirmRestore(p) => restore(p),
        Overlay::Confirm(p) => move_tag(p),
        _ => return other(o, help, messages),
    };
    match confirm {
        ViewOverlay::Confirm {
            title, lines, yes, ..
        } => ViewOverlay::Confirm {
            title,
            lines,
            yes,
            full,
        },
        v => v,
    }
}

/// The overlays that are not confirmations.
fn other(
    o: &Overlay,
    help: impl FnOnce() -> Vec<(String, String)>,
    messages: &std::collections::VecDeque<(StatusKind, String)>,
) -> ViewOverlay {
    match o {
        Overlay::Help(offset) => ViewOverlay::Help {
            bindings: help(),
            offset: *offset,
        },
        Overlay::Messages(offset) => ViewOverlay::Messages {
            messages: messages
                .iter()
                .rev()
                .map(|(k, t)| (t.clone(), *k == StatusKind::Error))
                .collect(),
            offset: *offset,
        },
        Overlay::Prompt(p) => ViewOverlay::Prompt {
            prefix: match p.kind {
                PromptKind::Filter => "/".to_string(),
                PromptKind::Command => ":".to_string(),
                PromptKind::TagName => p.label.clone(),
            },
            input: p.input.clone(),
            fresh: p.fresh,
            // The palette lists what it can do as you type.
            suggestions: match p.kind {
                PromptKind::Command => palette::matching(&p.input)
                    .iter()
                    .map(|c| (c.usage.to_string(), c.about.to_string()))
                    .collect(),
                _ => Vec::new(),
            },
        },
        // Confirmations are drawn by `view`.
        _ => ViewOverlay::Messages {
            messages: Vec::new(),
            offset: 0,
        },
    }
}

fn cancel_job(id: u64, what: &str) -> ViewOverlay {
    ViewOverlay::Confirm {
        title: format!("cancel job {id}"),
        lines: vec![
            (what.to_string(), Role::Text),
            (
                "it stops at its next read; nothing is sealed".into(),
                Role::Dim,
            ),
            (
                "what it stored stays, so a retry does not fetch it again".into(),
                Role::Dim,
            ),
        ],
        yes: format!("cancel job {id}"),
        // Set by `view`.
        full: false,
    }
}

fn retry_job(id: u64, what: &str) -> ViewOverlay {
    ViewOverlay::Confirm {
        title: format!("retry job {id}"),
        lines: vec![
            (what.to_string(), Role::Text),
            (
                "queued again: what it stored before is not fetched again".into(),
                Role::Dim,
            ),
        ],
        yes: format!("retry job {id}"),
        // Set by `view`.
        full: false,
    }
}

fn stop_watch(id: u64, what: &str) -> ViewOverlay {
    ViewOverlay::Confirm {
        title: format!("stop watch {id}"),
        lines: vec![
            (what.to_string(), Role::Text),
            (
                "a push under way stops at its next read; nothing half-sealed".into(),
                Role::Dim,
            ),
            (
                "the versions it sealed stay; the same `volume watch` starts it again".into(),
                Role::Dim,
            ),
        ],
        yes: format!("stop watch {id}"),
        // Set by `view`.
        full: false,
    }
}

fn delete(p: &DeletePlan) -> ViewOverlay {
    let mut lines = vec![
        (
            format!("vol:{}@b3:{}", p.volume, p.digest.short(16)),
            Role::Pinned,
        ),
        (
            "goes to the trash: restorable until its window ends (7 days by default)".into(),
            Role::Text,
        ),
    ];
    if !p.tags.is_empty() {
        lines.push((
            format!(
                "removes tag {}, which points at it (its history keeps the move)",
                p.tags.join(", ")
            ),
            Role::Danger,
        ));
    }
    lines.push((
        "mounts serving it keep serving it until it is purged".into(),
        Role::Dim,
    ));
    ViewOverlay::Confirm {
        title: "delete a version".into(),
        lines,
        yes: "delete".into(),
        // Set by `view`.
        full: false,
    }
}

/// `text` with every run of 64 hex digits (a digest) cut to its first 16 and `…`:
/// what tells two versions apart, in a line that fits.
fn short_digests(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let run = b[i..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
        if run == 64 {
            out.push_str(&text[i..i + 16]);
            out.push('…');
            i += 64;
        } else if run > 0 {
            out.push_str(&text[i..i + run]);
            i += run;
        } else {
            let c = text[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn rollback(p: &RollbackPlan, full: bool) -> ViewOverlay {
    let shown = |t: &str| match full {
        true => t.to_string(),
        false => short_digests(t),
    };
    let file = p.file.display().to_string();
    let mut lines = vec![
        (file.clone(), Role::Text),
        (format!("{} at {}", p.volume, p.path), Role::Text),
        (
            format!(
                "from {}",
                p.from
                    .map(|d| format!("b3:{}", d.short(16)))
                    .unwrap_or_else(|| format!("{} (does not resolve)", p.reference))
            ),
            Role::Removed,
        ),
        (format!("to   b3:{}", p.to.short(16)), Role::Added),
    ];
    for l in &p.edit.lines {
        lines.push((
            format!("-{:>4}: {}", l.line, shown(l.old.trim())),
            Role::Removed,
        ));
        lines.push((
            format!("+{:>4}: {}", l.line, shown(l.new.trim())),
            Role::Added,
        ));
    }
    for a in &p.edit.anchors {
        lines.push((
            format!("the ref comes from anchor &{a}: its other aliases change too"),
            Role::Danger,
        ));
    }
    lines.push((
        "only this ref changes; refused if the file changed since this diff".into(),
        Role::Dim,
    ));
    ViewOverlay::Confirm {
        title: format!("roll back {}", p.volume),
        lines,
        yes: format!("write {file}"),
        // Set by `view`.
        full: false,
    }
}

fn restore(p: &RestorePlan) -> ViewOverlay {
    let mut lines = vec![
        (
            format!("vol:{}@b3:{}", p.volume, p.digest.short(16)),
            Role::Pinned,
        ),
        (
            "comes back exactly as sealed: same digest, provenance and files".into(),
            Role::Text,
        ),
    ];
    if !p.tags.is_empty() {
        lines.push((
            format!("it had tag {}; tags are not moved back", p.tags.join(", ")),
            Role::Dim,
        ));
    }
    ViewOverlay::Confirm {
        title: "restore a version".into(),
        lines,
        yes: "restore".into(),
        // Set by `view`.
        full: false,
    }
}

fn move_tag(p: &TagMovePlan) -> ViewOverlay {
    ViewOverlay::Confirm {
        title: format!("move tag {}", p.tag),
        lines: vec![
            (format!("vol:{}:{}", p.volume, p.tag), Role::Tag),
            (
                format!(
                    "from {}",
                    p.from
                        .map(|d| format!("b3:{}", d.short(16)))
                        .unwrap_or_else(|| "(new tag)".into())
                ),
                Role::Removed,
            ),
            (format!("to   b3:{}", p.to.short(16)), Role::Added),
            (
                format!("everything that resolves :{} will get the new bytes", p.tag),
                Role::Dim,
            ),
        ],
        yes: format!("move {}", p.tag),
        // Set by `view`.
        full: false,
    }
}
