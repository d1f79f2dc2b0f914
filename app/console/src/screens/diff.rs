//! What changed between two versions: files added, removed, modified and unchanged,
//! bytes and chunks new, a heat strip of where each modified file's new chunks lie, and
//! for `.safetensors` files the tensors that changed. Two lists: the files, and the
//! selected file's tensors (changed ones first); enter or tab moves the keys (and `/`)
//! into the tensors, esc or tab back.

use sealvol_core::diff::{FileDiff, Status, TensorDiff, VersionDiff};
use sealvol_core::refs::{Ref, VolumeName};
use sealvol_views::Body;
use sealvol_views::diff::{Change, DiffFile, DiffFocus, DiffTensor, DiffView};
use sealvol_views::format::short_digest;

use super::Hint;
use super::list::matches;
use super::{Ctx, Kind, Reply, Screen};
use crate::action::Action;
use crate::effects::{Effect, Loaded};

pub struct Diff {
    /// As typed or marked; resolved on every load.
    from: Ref,
    to: Ref,
    diff: Option<VersionDiff>,
    sel: usize,
    focus: DiffFocus,
    /// The selected tensor, among those shown.
    tensor_sel: usize,
    /// The filter of the list without the keys: `ctx.filter` is always the focused
    /// list's, so `/` filters what the keys move in.
    other_filter: String,
}

fn change(s: Status) -> Change {
    match s {
        Status::Added => Change::Added,
        Status::Removed => Change::Removed,
        Status::Modified => Change::Modified,
        Status::Unchanged => Change::Unchanged,
    }
}

impl Diff {
    pub fn new(from: Ref, to: Ref) -> Diff {
        Diff {
            from,
            to,
            diff: None,
            sel: 0,
            focus: DiffFocus::Files,
            tensor_sel: 0,
            other_filter: String::new(),
        }
    }

    fn file_filter<'a>(&'a self, ctx: &'a Ctx) -> &'a str {
        match self.focus {
            DiffFocus::Files => &ctx.filter,
            DiffFocus::Tensors => &self.other_filter,
        }
    }

    fn visible(&self, ctx: &Ctx) -> Vec<usize> {
        let Some(d) = &self.diff else {
            return Vec::new();
        };
        let filter = self.file_filter(ctx);
        (0..d.files.len())
            .filter(|&i| matches(filter, &d.files[i].path))
            .collect()
    }

    fn selected_file(&self, ctx: &Ctx) -> Option<&FileDiff> {
        let d = self.diff.as_ref()?;
        self.visible(ctx).get(self.sel).map(|&i| &d.files[i])
    }

    /// The selected file's tensors as listed: changed ones first (in the file's order),
    /// then the unchanged; while the tensors have the keys, only those the filter passes.
    fn tensors<'a>(&'a self, ctx: &'a Ctx) -> Vec<&'a TensorDiff> {
        let Some(all) = self.selected_file(ctx).and_then(|f| f.tensors.as_ref()) else {
            return Vec::new();
        };
        let filter = match self.focus {
            DiffFocus::Tensors => ctx.filter.as_str(),
            DiffFocus::Files => "",
        };
        let (mut changed, unchanged): (Vec<_>, Vec<_>) = all
            .iter()
            .filter(|t| matches(filter, &t.name))
            .partition(|t| t.status != Status::Unchanged);
        changed.extend(unchanged);
        changed
    }

    /// Moves the keys (and the filter) to the other list.
    fn switch(&mut self, ctx: &mut Ctx) {
        std::mem::swap(&mut ctx.filter, &mut self.other_filter);
        self.focus = match self.focus {
            DiffFocus::Files => DiffFocus::Tensors,
            DiffFocus::Tensors => DiffFocus::Files,
        };
        self.tensor_sel = 0;
    }

    /// Into the tensors, if the selected file has any; otherwise says why not.
    fn enter_tensors(&mut self, ctx: &mut Ctx) {
        let Some(f) = self.selected_file(ctx) else {
            return;
        };
        match (&f.tensors, &f.tensor_note) {
            (Some(t), _) if !t.is_empty() => {
                let (n, changed) = (t.len(), count_changed(t));
                self.switch(ctx);
                ctx.info(format!(
                    "{changed} of {n} tensor(s) changed; / filters them, tab or esc goes back to the files"
                ));
            }
            (_, Some(note)) => ctx.info(note.clone()),
            _ if f.path.ends_with(".safetensors") => {
                ctx.info(format!("{} is not modified: no tensors to compare", f.path))
            }
            _ => ctx.info(format!(
                "{} is not a .safetensors file: only its chunks are compared",
                f.path
            )),
        }
    }

    fn view(&self, d: &VersionDiff, ctx: &Ctx) -> DiffView {
        let t = &d.totals;
        let idx = self.visible(ctx);
        let selected = self.selected_file(ctx);
        let tensors = self
            .tensors(ctx)
            .into_iter()
            .map(|x| DiffTensor {
                name: x.name.clone(),
                change: change(x.status),
                kind: format!("{} {:?}", x.dtype, x.shape),
                bytes: x.bytes,
                changed_bytes: x.changed_bytes,
            })
            .collect();
        let tensor_summary = selected
            .and_then(|f| f.tensors.as_deref())
            .map(tensor_summary)
            .unwrap_or_default();
        // `vol:ns/name@b3:<64 hex>` → 12 hex digits, as everywhere else on screen.
        let short = |r: &str| match r.split_once("@") {
            Some((vol, digest)) => format!("{vol}@{}", short_digest(digest)),
            None => r.to_string(),
        };
        DiffView {
            from: short(&d.from),
            to: short(&d.to),
            summary: format!(
                "{} added · {} removed · {} modified · {} unchanged · {} in {} chunks new",
                t.added,
                t.removed,
                t.modified,
                t.unchanged,
                sealvol_views::format::size(t.changed_bytes),
                t.changed_chunks
            ),
            files: idx
                .iter()
                .map(|&i| {
                    let f = &d.files[i];
                    DiffFile {
                        path: f.path.clone(),
                        change: change(f.status),
                        size: f.size_to.or(f.size_from).unwrap_or(0),
                        changed_bytes: f.changed_bytes,
                        chunks: f.chunks,
                        changed_chunks: f.changed_chunks,
                        spans: f
                            .spans
                            .iter()
                            .map(|s| (s.offset, s.len, s.changed))
                            .collect(),
                    }
                })
                .collect(),
            selected: self.sel,
            tensors,
            tensor_summary,
            note: selected.and_then(|f| f.tensor_note.clone()),
            focus: self.focus,
            tensor_selected: self.tensor_sel,
        }
    }
}

fn count_changed(t: &[TensorDiff]) -> usize {
    t.iter().filter(|x| x.status != Status::Unchanged).count()
}

/// `1 added · 8 modified · 40 unchanged`: the kinds present, in a fixed order.
fn tensor_summary(t: &[TensorDiff]) -> String {
    [
        (Status::Added, "added"),
        (Status::Removed, "removed"),
        (Status::Modified, "modified"),
        (Status::Unchanged, "unchanged"),
    ]
    .iter()
    .filter_map(|(s, word)| {
        let n = t.iter().filter(|x| x.status == *s).count();
        (n > 0).then(|| format!("{n} {word}"))
    })
    .collect::<Vec<_>>()
    .join(" · ")
}

impl Screen for Diff {
    fn crumb(&self) -> String {
        self.to.volume.to_string()
    }

    fn crumbs(&self) -> Vec<String> {
        let mut c = vec![self.to.volume.to_string(), "diff".into()];
        if self.focus == DiffFocus::Tensors {
            c.push("tensors".into());
        }
        c
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        vec![Effect::Diff(self.from.clone(), self.to.clone())]
    }

    fn entered(&mut self, ctx: &mut Ctx) {
        ctx.info(format!("comparing {} → {}…", self.from, self.to));
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        if let Loaded::Diff(d) = l {
            let t = &d.totals;
            let first = self.diff.is_none();
            ctx.info(format!(
                "{} added, {} removed, {} modified, {} unchanged",
                t.added, t.removed, t.modified, t.unchanged
            ));
            // Opened on the first file that changed, so the tensors shown are ones
            // that did; a reload keeps where the user is.
            if first {
                self.sel = d
                    .files
                    .iter()
                    .position(|f| f.status != Status::Unchanged)
                    .unwrap_or(0);
            }
            self.diff = Some(*d);
            if self.focus == DiffFocus::Tensors && self.tensors(ctx).is_empty() {
                self.switch(ctx);
            }
        }
    }

    fn len(&self, ctx: &Ctx) -> usize {
        match self.focus {
            DiffFocus::Files => self.visible(ctx).len(),
            DiffFocus::Tensors => self.tensors(ctx).len(),
        }
    }

    fn selected(&self) -> usize {
        match self.focus {
            DiffFocus::Files => self.sel,
            DiffFocus::Tensors => self.tensor_sel,
        }
    }

    fn select(&mut self, i: usize, _ctx: &Ctx) {
        match self.focus {
            DiffFocus::Files => {
                if i != self.sel {
                    self.tensor_sel = 0;
                }
                self.sel = i;
            }
            DiffFocus::Tensors => self.tensor_sel = i,
        }
    }

    fn on_action(&mut self, a: Action, ctx: &mut Ctx) -> Option<Reply> {
        match (a, self.focus) {
            (Action::Open | Action::Focus, DiffFocus::Files) => self.enter_tensors(ctx),
            (Action::Focus | Action::Back, DiffFocus::Tensors) => {
                self.switch(ctx);
                ctx.info(String::new());
            }
            // Open on a tensor: nothing deeper to show, so not "no such key here".
            (Action::Open, DiffFocus::Tensors) => {}
            _ => return None,
        }
        Some(Reply::default())
    }

    fn body(&self, ctx: &Ctx) -> Body {
        match &self.diff {
            Some(d) => Body::Diff(self.view(d, ctx)),
            None => Body::Empty(format!("comparing {} → {}…", self.from, self.to)),
        }
    }

    fn hints(&self) -> &'static [Hint] {
        match self.focus {
            DiffFocus::Files => &[
                (&[Action::Down, Action::Up], "file"),
                (&[Action::Open], "its tensors"),
                (&[Action::Filter], "filter files"),
                (&[Action::Back], "back"),
                (&[Action::Help], "help"),
            ],
            DiffFocus::Tensors => &[
                (&[Action::Down, Action::Up], "tensor"),
                (&[Action::Filter], "filter tensors"),
                (&[Action::Focus], "files"),
                (&[Action::Back], "files"),
                (&[Action::Help], "help"),
            ],
        }
    }

    fn volume(&self, _ctx: &Ctx) -> Option<VolumeName> {
        Some(self.to.volume.clone())
    }

    fn clickable(&self) -> bool {
        false
    }

    fn kind(&self) -> Kind {
        Kind::Diff
    }
}
