//! What changed between two versions: files added, removed, modified and unchanged,
//! bytes and chunks new, a heat strip of where each modified file's new chunks lie, and
//! for `.safetensors` files the tensors that changed.

use sealvol_core::diff::{Status, VersionDiff};
use sealvol_core::refs::{Ref, VolumeName};
use sealvol_views::Body;
use sealvol_views::diff::{Change, DiffFile, DiffTensor, DiffView};
use sealvol_views::format::short_digest;

use super::{Ctx, Kind, Screen};
use crate::effects::{Effect, Loaded};

pub struct Diff {
    /// As typed or marked; resolved on every load.
    from: Ref,
    to: Ref,
    diff: Option<VersionDiff>,
    sel: usize,
}

impl Diff {
    pub fn new(from: Ref, to: Ref) -> Diff {
        Diff {
            from,
            to,
            diff: None,
            sel: 0,
        }
    }

    fn visible(&self, ctx: &Ctx) -> Vec<usize> {
        let Some(d) = &self.diff else {
            return Vec::new();
        };
        (0..d.files.len())
            .filter(|&i| ctx.matches(&d.files[i].path))
            .collect()
    }

    fn view(&self, d: &VersionDiff, ctx: &Ctx) -> DiffView {
        let change = |s: Status| match s {
            Status::Added => Change::Added,
            Status::Removed => Change::Removed,
            Status::Modified => Change::Modified,
            Status::Unchanged => Change::Unchanged,
        };
        let t = &d.totals;
        let idx = self.visible(ctx);
        let selected = idx.get(self.sel).map(|&i| &d.files[i]);
        let (tensors, note) = match selected {
            Some(f) => (
                f.tensors
                    .iter()
                    .flatten()
                    .map(|x| DiffTensor {
                        name: x.name.clone(),
                        change: change(x.status),
                        kind: format!("{} {:?}", x.dtype, x.shape),
                        bytes: x.bytes,
                    })
                    .collect(),
                f.tensor_note.clone(),
            ),
            None => (Vec::new(), None),
        };
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
            note,
        }
    }
}

impl Screen for Diff {
    fn crumb(&self) -> String {
        self.to.volume.to_string()
    }

    fn crumbs(&self) -> Vec<String> {
        vec![self.to.volume.to_string(), "diff".into()]
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
            ctx.info(format!(
                "{} added, {} removed, {} modified, {} unchanged",
                t.added, t.removed, t.modified, t.unchanged
            ));
            self.diff = Some(*d);
        }
    }

    fn len(&self, ctx: &Ctx) -> usize {
        self.visible(ctx).len()
    }

    fn selected(&self) -> usize {
        self.sel
    }

    fn select(&mut self, i: usize, _ctx: &Ctx) {
        self.sel = i;
    }

    fn body(&self, ctx: &Ctx) -> Body {
        match &self.diff {
            Some(d) => Body::Diff(self.view(d, ctx)),
            None => Body::Empty(format!("comparing {} → {}…", self.from, self.to)),
        }
    }

    fn hints(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("j/k", "file (a .safetensors shows its tensors)"),
            ("/", "filter"),
            ("esc", "back"),
            ("?", "help"),
        ]
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
