//! A version's tree: sizes, chunk counts, and how much of each file the previous
//! version already had; its status line says who signed it.

use super::Hint;
use crate::action::Action;
use sealvol_core::files::VersionFiles;
use sealvol_core::refs::{Digest, VolumeName};
use sealvol_node::api::Standing;
use sealvol_views::Body;
use sealvol_views::files::{Entry, FilesView, Kind as EntryKind, Row, tree};

use super::{Ctx, Kind, Screen};
use crate::effects::{Effect, Loaded};

pub struct Files {
    volume: VolumeName,
    digest: Digest,
    /// The entries, and their tree built once per load; what "shared" compares with.
    entries: Vec<Entry>,
    rows: Vec<Row>,
    previous: Option<String>,
    sel: usize,
    /// The tree of the entries that pass the `/` filter, built once per filter.
    filtered: std::cell::RefCell<Option<(String, Vec<Row>)>>,
    /// What the entries line says, and who signed the version (once checked).
    summary: Option<String>,
    signing: Option<Standing>,
}

impl Files {
    pub fn new(volume: VolumeName, digest: Digest) -> Files {
        Files {
            volume,
            digest,
            entries: Vec::new(),
            rows: Vec::new(),
            previous: None,
            sel: 0,
            filtered: Default::default(),
            summary: None,
            signing: None,
        }
    }

    /// Calls `f` with the rows shown: the whole tree, or the tree of the paths the
    /// filter matches (built once per filter, not per frame or key).
    fn with_shown<R>(&self, ctx: &Ctx, f: impl FnOnce(&[Row]) -> R) -> R {
        if ctx.filter.is_empty() {
            return f(&self.rows);
        }
        let mut cache = self.filtered.borrow_mut();
        if cache
            .as_ref()
            .is_none_or(|(filter, _)| *filter != ctx.filter)
        {
            let kept: Vec<Entry> = self
                .entries
                .iter()
                .filter(|e| ctx.matches(&e.path))
                .cloned()
                .collect();
            *cache = Some((ctx.filter.clone(), tree(&kept)));
        }
        f(cache.as_ref().map_or(&[][..], |(_, rows)| rows))
    }

    /// Whether a result is the files of the version this screen shows.
    pub fn shows(&self, volume: &VolumeName, digest: &Digest) -> bool {
        &self.volume == volume && &self.digest == digest
    }

    fn fill(&mut self, f: VersionFiles, ctx: &mut Ctx) {
        let entries: Vec<Entry> = f
            .files
            .iter()
            .map(|x| Entry {
                path: x.path.clone(),
                kind: match x.kind {
                    "dir" => EntryKind::EmptyDir,
                    "symlink" => EntryKind::Symlink,
                    _ => EntryKind::File { exec: x.exec },
                },
                size: x.size,
                chunks: x.chunks,
                shared_bytes: x.shared_bytes,
                target: x.target.clone(),
            })
            .collect();
        self.rows = tree(&entries);
        self.entries = entries;
        self.filtered.replace(None);
        self.previous = f.previous.clone();
        self.summary = Some(match &f.previous {
            Some(p) => format!(
                "{} entries · shared = already in the previous version, {}",
                self.entries.len(),
                sealvol_views::format::short_digest(p)
            ),
            None => format!(
                "{} entries · the first version: nothing to compare with",
                self.entries.len()
            ),
        });
        self.say(ctx);
    }

    /// The version's details in the status line: its entries, and who signed it.
    fn say(&self, ctx: &mut Ctx) {
        let signed = self.signing.as_ref().map(|s| match s {
            Standing::Unpoliced(0) => "not signed".to_string(),
            Standing::Unpoliced(n) => format!(
                "{n} signature(s), checked by no key: config.toml's [trust] names none for {}",
                self.volume.namespace
            ),
            Standing::Trusted(by) => format!("signed by {}", by.join(", ")),
            Standing::Refused(why) => why.clone(),
        });
        let line = [self.summary.clone(), signed]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" · ");
        match &self.signing {
            Some(Standing::Refused(_)) => ctx.error(line),
            _ => ctx.info(line),
        }
    }
}

impl Screen for Files {
    fn crumb(&self) -> String {
        format!("b3:{}", self.digest.short(12))
    }

    fn crumbs(&self) -> Vec<String> {
        vec![self.volume.to_string(), self.crumb()]
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        vec![
            Effect::LoadFiles(self.volume.clone(), self.digest),
            Effect::LoadSigning(self.volume.clone(), Some(self.digest)),
        ]
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        if let Loaded::Signing(vol, s) = &l
            && *vol == self.volume
            && let Some((_, st)) = s.iter().find(|(d, _)| *d == self.digest)
        {
            self.signing = Some(st.clone());
            self.say(ctx);
            return;
        }
        if let Loaded::Files(vol, digest, f) = l
            && self.shows(&vol, &digest)
        {
            self.fill(f, ctx);
        }
    }

    fn len(&self, ctx: &Ctx) -> usize {
        self.with_shown(ctx, <[Row]>::len)
    }

    fn selected(&self) -> usize {
        self.sel
    }

    fn select(&mut self, i: usize, _ctx: &Ctx) {
        self.sel = i;
    }

    fn body(&self, ctx: &Ctx) -> Body {
        Body::Files(FilesView {
            version: format!("vol:{}@{}", self.volume, self.digest),
            previous: self.previous.clone(),
            rows: self.with_shown(ctx, <[Row]>::to_vec),
            selected: self.sel,
        })
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Copy], "copy ref"),
            (&[Action::Back], "back"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, _ctx: &Ctx) -> Option<VolumeName> {
        Some(self.volume.clone())
    }

    fn digest(&self, _ctx: &Ctx) -> Option<String> {
        Some(self.digest.to_string())
    }

    fn kind(&self) -> Kind {
        Kind::Files
    }
}
