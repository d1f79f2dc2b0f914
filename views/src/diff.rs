//! The chunk-level diff of two versions: a summary, each file with a heat strip of
//! where in it the new chunks lie, and the tensors of the selected safetensors file.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span as TextSpan};
use ratatui::widgets::{Block, Borders, Widget};
use sealvol_themes::{Role, Theme};

use crate::format::{name, size};
use crate::list::{Cell, Column, cell, draw_empty, draw_table};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Removed,
    Modified,
    Unchanged,
}

impl Change {
    fn mark(self) -> (&'static str, Role) {
        match self {
            Change::Added => ("+", Role::Added),
            Change::Removed => ("-", Role::Removed),
            Change::Modified => ("~", Role::Modified),
            Change::Unchanged => ("=", Role::Unchanged),
        }
    }
}

#[derive(Debug, Clone)]
pub struct DiffFile {
    pub path: String,
    pub change: Change,
    pub size: u64,
    pub changed_bytes: u64,
    pub chunks: u64,
    pub changed_chunks: u64,
    /// (offset, length, changed) of each chunk of the newer file.
    pub spans: Vec<(u64, u32, bool)>,
}

#[derive(Debug, Clone)]
pub struct DiffTensor {
    pub name: String,
    pub change: Change,
    pub kind: String,
    pub bytes: u64,
    /// Bytes of new chunks inside it (a modified tensor).
    pub changed_bytes: u64,
}

/// Which list the keys move in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DiffFocus {
    #[default]
    Files,
    Tensors,
}

#[derive(Debug, Clone, Default)]
pub struct DiffView {
    pub from: String,
    pub to: String,
    pub summary: String,
    pub files: Vec<DiffFile>,
    pub selected: usize,
    /// Tensors of the selected file (empty if it is not a safetensors file), changed
    /// ones first, after the filter when they have the focus.
    pub tensors: Vec<DiffTensor>,
    /// What the selected file's tensors add up to (`1 added · 8 modified · 40 unchanged`).
    pub tensor_summary: String,
    /// Why tensors are not shown, when that needs saying.
    pub note: Option<String>,
    pub focus: DiffFocus,
    pub tensor_selected: usize,
}

const FILE_COLUMNS: [Column; 5] = [
    Column {
        title: " ",
        width: 2,
        keep: 9,
    },
    Column {
        title: "FILE",
        width: 34,
        keep: 9,
    },
    Column {
        title: "SIZE",
        width: 11,
        keep: 4,
    },
    Column {
        title: "CHANGED",
        width: 24,
        keep: 6,
    },
    Column {
        title: "WHERE (new chunks ■)",
        width: 0,
        keep: 3,
    },
];

const TENSOR_COLUMNS: [Column; 5] = [
    Column {
        title: " ",
        width: 2,
        keep: 9,
    },
    Column {
        title: "TENSOR",
        width: 44,
        keep: 9,
    },
    Column {
        title: "TYPE",
        width: 20,
        keep: 3,
    },
    Column {
        title: "SIZE",
        width: 11,
        keep: 4,
    },
    Column {
        title: "NEW BYTES",
        width: 0,
        keep: 5,
    },
];

/// Bins a file's chunks into `width` cells: a cell is changed if any new chunk
/// overlaps it, so a one-chunk change is never lost to rounding.
pub fn heat_strip(spans: &[(u64, u32, bool)], size: u64, width: usize) -> Vec<bool> {
    let mut cells = vec![false; width];
    if size == 0 || width == 0 {
        return cells;
    }
    for &(off, len, changed) in spans {
        if !changed || len == 0 {
            continue;
        }
        let first = (off as u128 * width as u128 / size as u128) as usize;
        let last = ((off + len as u64 - 1) as u128 * width as u128 / size as u128) as usize;
        for c in cells.iter_mut().take(last.min(width - 1) + 1).skip(first) {
            *c = true;
        }
    }
    cells
}

pub fn draw(vm: &DiffView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let has_tensors = !vm.tensors.is_empty() || vm.note.is_some() || vm.focus == DiffFocus::Tensors;
    // The files take what they need, up to half (a third while the tensors have the
    // keys): a checkpoint is a few files and many tensors.
    let rest = area.height.saturating_sub(2);
    let files_height = match (has_tensors, vm.focus) {
        (false, _) => rest,
        (true, DiffFocus::Files) => rest / 2,
        (true, DiffFocus::Tensors) => rest / 3,
    }
    .min(vm.files.len() as u16 + 1)
    .max(rest.min(2));
    let [head, files, tensors] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(if has_tensors { files_height } else { rest }),
        Constraint::Min(0),
    ])
    .areas(area);
    buf.set_line(
        head.x,
        head.y,
        &Line::from(vec![
            TextSpan::styled(vm.from.clone(), theme.style(Role::Removed)),
            TextSpan::styled("  →  ", theme.style(Role::Dim)),
            TextSpan::styled(vm.to.clone(), theme.style(Role::Added)),
        ]),
        head.width,
    );
    if head.height > 1 {
        buf.set_string(head.x, head.y + 1, &vm.summary, theme.style(Role::Text));
    }

    let strip_w = files.width.saturating_sub(2 + 34 + 11 + 24 + 1) as usize;
    draw_table(
        theme,
        files,
        buf,
        &FILE_COLUMNS,
        vm.files.len(),
        (vm.focus == DiffFocus::Files).then_some(vm.selected),
        (vm.focus == DiffFocus::Tensors).then_some(vm.selected),
        |i| {
            let f = &vm.files[i];
            let (mark, role) = f.change.mark();
            let changed = match f.change {
                Change::Modified => format!(
                    "{} · {}/{} ch",
                    size(f.changed_bytes),
                    f.changed_chunks,
                    f.chunks
                ),
                Change::Added => format!("+{}", size(f.size)),
                Change::Removed => format!("-{}", size(f.size)),
                Change::Unchanged => String::new(),
            };
            let strip: Cell = match f.change {
                Change::Modified => heat_strip(&f.spans, f.size, strip_w)
                    .into_iter()
                    .map(|c| {
                        if c {
                            ("■".to_string(), Role::Modified)
                        } else {
                            ("·".to_string(), Role::Unchanged)
                        }
                    })
                    .collect(),
                Change::Added => cell("■".repeat(strip_w), Role::Added),
                Change::Removed => cell("□".repeat(strip_w), Role::Removed),
                Change::Unchanged => cell("·".repeat(strip_w), Role::Unchanged),
            };
            vec![
                cell(mark, role),
                cell(tail(&name(&f.path), 33), role),
                cell(size(f.size), Role::Text),
                cell(changed, role),
                strip,
            ]
        },
    );
    if !has_tensors {
        return;
    }
    let title = match vm.files.get(vm.selected) {
        Some(f) if vm.tensor_summary.is_empty() => format!(" tensors of {} ", name(&f.path)),
        Some(f) => format!(" tensors of {} · {} ", name(&f.path), vm.tensor_summary),
        None => " tensors ".into(),
    };
    let focused = vm.focus == DiffFocus::Tensors;
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.style(if focused { Role::Title } else { Role::Border }))
        .title(TextSpan::styled(title, theme.style(Role::Title)));
    let inner = block.inner(tensors);
    block.render(tensors, buf);
    if let Some(note) = &vm.note {
        buf.set_string(inner.x, inner.y, note, theme.style(Role::Dim));
        return;
    }
    draw_table(
        theme,
        inner,
        buf,
        &TENSOR_COLUMNS,
        vm.tensors.len(),
        focused.then_some(vm.tensor_selected),
        None,
        |i| {
            let t = &vm.tensors[i];
            let (mark, role) = t.change.mark();
            let new = match t.change {
                Change::Modified => size(t.changed_bytes),
                Change::Added => size(t.bytes),
                Change::Removed | Change::Unchanged => String::new(),
            };
            vec![
                cell(mark, role),
                cell(name(&t.name), role),
                cell(&t.kind, Role::Dim),
                cell(size(t.bytes), Role::Text),
                cell(new, role),
            ]
        },
    );
    if vm.tensors.is_empty() && focused {
        draw_empty(
            theme,
            inner,
            buf,
            "no tensor matches the filter (esc clears it)",
        );
    }
}

/// The last `max` characters of a path, with `…` in front when cut: the file name is
/// what tells shards apart.
fn tail(path: &str, max: usize) -> String {
    let n = path.chars().count();
    if n <= max {
        return path.to_string();
    }
    let keep: String = path.chars().skip(n - (max - 1)).collect();
    format!("…{keep}")
}

#[cfg(test)]
mod tests {
    use super::{heat_strip, tail};

    #[test]
    fn long_paths_keep_their_names() {
        assert_eq!(tail("a/b.txt", 33), "a/b.txt");
        assert_eq!(
            tail("very/long/path/model-00004-of-00004.safetensors", 20),
            "…f-00004.safetensors"
        );
    }

    #[test]
    fn one_small_change_is_never_lost() {
        let spans = vec![(0, 100, false), (100, 1, true), (101, 999_899, false)];
        let s = heat_strip(&spans, 1_000_000, 10);
        assert_eq!(
            s,
            [
                true, false, false, false, false, false, false, false, false, false
            ]
        );
        let end = vec![(0, 999_999, false), (999_999, 1, true)];
        assert_eq!(heat_strip(&end, 1_000_000, 4), [false, false, false, true]);
        assert!(heat_strip(&[], 0, 5).iter().all(|c| !c));
    }
}
