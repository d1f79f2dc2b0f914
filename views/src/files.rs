//! The files of a version as a tree: sizes, chunk counts, and how much of each file
//! the previous version already had (all of it: unchanged; none: new).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use sealvol_themes::{Role, Theme};

use crate::format::{name, size};
use crate::list::{Column, cell, draw_table};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File { exec: bool },
    Symlink,
    EmptyDir,
}

/// One entry of a version, as the engine lists it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: String,
    pub kind: Kind,
    pub size: u64,
    pub chunks: u64,
    pub shared_bytes: u64,
    pub target: Option<String>,
}

/// One row of the tree: directories carry the totals of everything below them.
#[derive(Debug, Clone)]
pub struct Row {
    pub depth: u16,
    pub name: String,
    pub kind: Kind,
    pub size: u64,
    pub chunks: u64,
    pub shared_bytes: u64,
    pub target: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct FilesView {
    pub version: String,
    /// The version compared against for "shared", if there is one.
    pub previous: Option<String>,
    pub rows: Vec<Row>,
    pub selected: usize,
}

/// Turns entries sorted bytewise by path into tree rows, directories first where they
/// open. Built once per load, not per frame.
pub fn tree(entries: &[Entry]) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::with_capacity(entries.len());
    // Open directories: (name, row index).
    let mut open: Vec<(String, usize)> = Vec::new();
    for e in entries {
        let parts: Vec<&str> = e.path.split('/').collect();
        let dirs = &parts[..parts.len() - 1];
        let common = open
            .iter()
            .zip(dirs)
            .take_while(|((name, _), d)| name == *d)
            .count();
        open.truncate(common);
        for d in &dirs[common..] {
            rows.push(Row {
                depth: open.len() as u16,
                name: format!("{d}/"),
                kind: Kind::Dir,
                size: 0,
                chunks: 0,
                shared_bytes: 0,
                target: None,
            });
            open.push((d.to_string(), rows.len() - 1));
        }
        for (_, i) in &open {
            let r = &mut rows[*i];
            r.size += e.size;
            r.chunks += e.chunks;
            r.shared_bytes += e.shared_bytes;
        }
        let name = parts[parts.len() - 1];
        rows.push(Row {
            depth: open.len() as u16,
            name: if e.kind == Kind::EmptyDir {
                format!("{name}/")
            } else {
                name.to_string()
            },
            kind: e.kind,
            size: e.size,
            chunks: e.chunks,
            shared_bytes: e.shared_bytes,
            target: e.target.clone(),
        });
    }
    rows
}

const COLUMNS: [Column; 4] = [
    Column {
        title: "NAME",
        width: 48,
        keep: 9,
    },
    Column {
        title: "SIZE",
        width: 11,
        keep: 6,
    },
    Column {
        title: "CHUNKS",
        width: 8,
        keep: 2,
    },
    Column {
        title: "SHARED WITH PREVIOUS",
        width: 0,
        keep: 5,
    },
];

pub fn draw(vm: &FilesView, theme: &Theme, area: Rect, buf: &mut Buffer) {
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
            let indent = "  ".repeat(r.depth as usize);
            let (name, role) = match r.kind {
                Kind::Dir | Kind::EmptyDir => (format!("{indent}{}", name(&r.name)), Role::Title),
                Kind::File { exec } => (
                    format!("{indent}{}{}", name(&r.name), if exec { "*" } else { "" }),
                    Role::Text,
                ),
                Kind::Symlink => (
                    format!(
                        "{indent}{} -> {}",
                        name(&r.name),
                        name(r.target.as_deref().unwrap_or(""))
                    ),
                    Role::Pinned,
                ),
            };
            let shared = if vm.previous.is_none()
                || r.size == 0
                || matches!(r.kind, Kind::Symlink | Kind::EmptyDir)
            {
                cell("", Role::Dim)
            } else if r.shared_bytes >= r.size {
                cell("all (unchanged)", Role::Unchanged)
            } else if r.shared_bytes == 0 {
                cell("none (new)", Role::Added)
            } else {
                let pct = r.shared_bytes as f64 * 100.0 / r.size as f64;
                cell(
                    format!("{pct:.1}% · {} not in it", size(r.size - r.shared_bytes)),
                    Role::Modified,
                )
            };
            vec![
                cell(name, role),
                cell(
                    if r.kind == Kind::Symlink {
                        String::new()
                    } else {
                        size(r.size)
                    },
                    Role::Text,
                ),
                cell(
                    if r.chunks == 0 {
                        String::new()
                    } else {
                        r.chunks.to_string()
                    },
                    Role::Dim,
                ),
                shared,
            ]
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, size: u64) -> Entry {
        Entry {
            path: path.into(),
            kind: Kind::File { exec: false },
            size,
            chunks: 1,
            shared_bytes: size / 2,
            target: None,
        }
    }

    #[test]
    fn tree_nests_and_sums() {
        let rows = tree(&[
            file("a.txt", 10),
            file("a/b/c.bin", 100),
            file("a/b/d.bin", 50),
            file("a/e.bin", 1),
            file("z.bin", 7),
        ]);
        let shape: Vec<(u16, &str, u64)> = rows
            .iter()
            .map(|r| (r.depth, r.name.as_str(), r.size))
            .collect();
        assert_eq!(
            shape,
            [
                (0, "a.txt", 10),
                (0, "a/", 151),
                (1, "b/", 150),
                (2, "c.bin", 100),
                (2, "d.bin", 50),
                (1, "e.bin", 1),
                (0, "z.bin", 7),
            ]
        );
    }

    #[test]
    fn names_with_control_characters_draw_as_one_quoted_row() {
        let vm = FilesView {
            version: "v".into(),
            previous: None,
            rows: tree(&[file("evil\nforged row", 1), file("esc\x1b[2J.txt", 2)]),
            selected: 0,
        };
        let theme = sealvol_themes::Theme::preset("dark").unwrap();
        let area = Rect::new(0, 0, 70, 5);
        let mut buf = Buffer::empty(area);
        draw(&vm, &theme, area, &mut buf);
        let text: String = buf.content().iter().map(|c| c.symbol()).collect();
        assert!(text.contains(r#""esc\x1b[2J.txt""#), "{text}");
        assert!(text.contains(r#""evil\nforged row""#), "{text}");
        assert!(!text.contains('\x1b'), "{text}");
    }
}
