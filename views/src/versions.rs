//! Versions of one volume, newest first: what each added, where it came from, and the
//! tags on it. A tagged version shows its tags; an untagged one is only reachable by
//! its pinned digest, shown in the pinned colour.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use sealvol_themes::{Role, Theme};

use crate::format::{name, short_digest, size, tags, when};
use crate::list::{Cell, Column, cell, draw_table};

#[derive(Debug, Clone, Default)]
pub struct VersionRow {
    pub digest: String,
    pub created: String,
    pub bytes: u64,
    pub files: u64,
    pub new_bytes: u64,
    pub source: String,
    pub tags: Vec<String>,
    /// What its pusher said about it (`k=v, k=v`), not part of its digest.
    pub labels: String,
    /// Live mounts on this node serving this version.
    pub mounts: usize,
    /// Who signed it, as the trust policy sees it.
    pub signed: Signed,
    /// Why its manifest cannot be read (its other fields are then empty).
    pub damaged: Option<String>,
}

/// A version's signatures under the trust policy (config.toml's `[trust]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Signed {
    /// Not known yet (being checked).
    #[default]
    Unknown,
    /// Its namespace is not policed: this many signatures, checked by no key.
    Unpoliced(usize),
    /// Signed by a key the policy trusts (the key file's name).
    Trusted(String),
    /// The policy refuses it: it would not mount or pull.
    Refused,
}

#[derive(Debug, Clone, Default)]
pub struct VersionsView {
    pub volume: String,
    pub rows: Vec<VersionRow>,
    pub selected: usize,
    /// The first side of a diff, once marked.
    pub marked: Option<usize>,
}

const COLUMNS: [Column; 9] = [
    Column {
        title: "DIGEST",
        width: 18,
        keep: 9,
    },
    Column {
        title: "CREATED",
        width: 17,
        keep: 5,
    },
    Column {
        title: "SIZE",
        width: 10,
        keep: 4,
    },
    Column {
        title: "FILES",
        width: 6,
        keep: 2,
    },
    Column {
        title: "NEW TO REPO",
        width: 12,
        keep: 3,
    },
    Column {
        title: "TAGS",
        width: 15,
        keep: 8,
    },
    Column {
        title: "SIGNED",
        width: 14,
        keep: 2,
    },
    Column {
        title: "LABELS",
        width: 22,
        keep: 2,
    },
    Column {
        title: "SOURCE",
        width: 0,
        keep: 1,
    },
];

pub fn draw(vm: &VersionsView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    draw_table(
        theme,
        area,
        buf,
        &COLUMNS,
        vm.rows.len(),
        Some(vm.selected),
        vm.marked,
        |i| {
            let r = &vm.rows[i];
            let digest_role = if r.tags.is_empty() {
                Role::Pinned
            } else {
                Role::Text
            };
            let mark = if vm.marked == Some(i) { "◆ " } else { "" };
            let mounted = match r.mounts {
                0 => String::new(),
                1 => "◉ mounted".into(),
                n => format!("◉ mounted ×{n}"),
            };
            let tags: Cell = match (r.tags.is_empty(), r.mounts) {
                (true, 0) => cell("pinned only", Role::Dim),
                (true, _) => cell(mounted, Role::Added),
                (false, 0) => cell(tags(&r.tags), Role::Tag),
                (false, _) => cell(format!("{} {mounted}", tags(&r.tags)), Role::Tag),
            };
            let new_role = if r.new_bytes == 0 {
                Role::Unchanged
            } else {
                Role::Added
            };
            let signed = match &r.signed {
                Signed::Unknown => cell("…", Role::Dim),
                Signed::Unpoliced(0) => cell("-", Role::Dim),
                Signed::Unpoliced(n) => cell(format!("{n} unchecked"), Role::Dim),
                Signed::Trusted(by) => cell(format!("✓ {by}"), Role::Added),
                Signed::Refused => cell("✗ not trusted", Role::Error),
            };
            if let Some(why) = &r.damaged {
                return vec![
                    cell(format!("{mark}{}", short_digest(&r.digest)), Role::Error),
                    cell("⚠ damaged", Role::Error),
                    cell("-", Role::Dim),
                    cell("-", Role::Dim),
                    cell("-", Role::Dim),
                    tags,
                    cell("", Role::Dim),
                    cell("", Role::Dim),
                    cell(why, Role::Error),
                ];
            }
            vec![
                cell(format!("{mark}{}", short_digest(&r.digest)), digest_role),
                cell(when(&r.created), Role::Dim),
                cell(size(r.bytes), Role::Text),
                cell(r.files.to_string(), Role::Text),
                cell(format!("+{}", size(r.new_bytes)), new_role),
                tags,
                signed,
                cell(&r.labels, Role::Text),
                cell(name(&r.source), Role::Dim),
            ]
        },
    );
}
