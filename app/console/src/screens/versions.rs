//! One volume's versions, newest first: digest, created, size, files, bytes added,
//! tags, who signed it (under the trust policy), mounts. Marks two versions for a diff; points a tag at one (asks first).

use sealvol_core::refs::{Digest, Name, Ref, VolumeName};
use sealvol_core::registry::VersionInfo;
use sealvol_node::api::Standing;
use sealvol_views::Body;
use sealvol_views::format::short_digest;
use sealvol_views::versions::{Signed, VersionRow, VersionsView};

use super::Hint;
use super::diff::Diff;
use super::files::Files;
use super::list::List;
use super::{Ctx, Go, Kind, Overlay, Prompt, PromptKind, Reply, Screen};
use crate::action::Action;
use crate::effects::{DeletePlan, Effect, Loaded, TagMovePlan};

pub struct Versions {
    volume: VolumeName,
    list: List<VersionInfo>,
    /// The digest marked as the "from" side of a diff.
    marked: Option<String>,
    /// Where each version stands under the trust policy, once checked.
    signing: std::collections::HashMap<String, Standing>,
}

impl Versions {
    pub fn new(volume: VolumeName) -> Versions {
        Versions {
            volume,
            list: List::new(row_text),
            marked: None,
            signing: std::collections::HashMap::new(),
        }
    }

    fn selected_version(&self, ctx: &Ctx) -> Option<&VersionInfo> {
        self.list.selected(&ctx.filter)
    }

    /// Where `tag` points, from what this screen loaded: the confirmation must match
    /// what was shown.
    fn current_tag_target(&self, tag: &Name) -> Option<Digest> {
        self.list
            .rows()
            .iter()
            .find(|v| v.tags.iter().any(|t| t == tag.as_str()))
            .and_then(|v| Digest::parse(&v.digest).ok())
    }

    /// Mark one version, then another: the diff from the first to the second opens.
    fn mark(&mut self, ctx: &mut Ctx) -> Reply {
        let Some(v) = self.selected_version(ctx) else {
            return Reply::default();
        };
        let d = v.digest.clone();
        if self.marked.as_deref() == Some(d.as_str()) {
            self.marked = None;
            ctx.info("unmarked");
        } else if let Some(first) = self.marked.take() {
            let vol = &self.volume;
            let pinned = |digest: &str| Ref::parse(&format!("vol:{vol}@{digest}"));
            if let (Ok(a), Ok(b)) = (pinned(&first), pinned(&d)) {
                return Reply::go(Go::Push(Box::new(Diff::new(a, b))));
            }
        } else {
            ctx.info(format!(
                "marked {}: mark another version to diff",
                short_digest(&d)
            ));
            self.marked = Some(d);
        }
        Reply::default()
    }
}

/// A standing as the SIGNED column shows it: the key file's name, not its path.
fn signed(s: Option<&Standing>) -> Signed {
    match s {
        None => Signed::Unknown,
        Some(Standing::Unpoliced(n)) => Signed::Unpoliced(*n),
        Some(Standing::Trusted(by)) => Signed::Trusted(
            by.iter()
                .map(|p| {
                    std::path::Path::new(p)
                        .file_name()
                        .map_or(p.clone(), |f| f.to_string_lossy().into_owned())
                })
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Some(Standing::Refused(_)) => Signed::Refused,
    }
}

/// What the `/` filter matches a row by.
fn row_text(v: &VersionInfo) -> String {
    format!("{} {} {}", v.digest, v.tags.join(" "), v.source)
}

impl Screen for Versions {
    fn crumb(&self) -> String {
        self.volume.to_string()
    }

    fn crumbs(&self) -> Vec<String> {
        vec![self.volume.to_string(), "versions".into()]
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        vec![
            Effect::LoadMounts,
            Effect::LoadVersions(self.volume.clone()),
            Effect::LoadSigning(self.volume.clone(), None),
        ]
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        if let Loaded::Signing(vol, s) = &l
            && *vol == self.volume
        {
            self.signing = s
                .iter()
                .map(|(d, st)| (d.to_string(), st.clone()))
                .collect();
            return;
        }
        if let Loaded::Versions(vol, v) = l
            && vol == self.volume
        {
            self.list.set_rows(v);
            // A reload after a change keeps the line that says what changed.
            if ctx.status.1.is_empty() {
                ctx.info(format!("{} version(s) of {vol}", self.list.rows().len()));
            }
        }
    }

    fn len(&self, ctx: &Ctx) -> usize {
        self.list.len(&ctx.filter)
    }

    fn selected(&self) -> usize {
        self.list.sel
    }

    fn select(&mut self, i: usize, _ctx: &Ctx) {
        self.list.sel = i;
    }

    fn on_action(&mut self, a: Action, ctx: &mut Ctx) -> Option<Reply> {
        match a {
            Action::Open => Some(
                match self.selected_version(ctx).map(|v| Digest::parse(&v.digest)) {
                    Some(Ok(d)) => {
                        Reply::go(Go::Push(Box::new(Files::new(self.volume.clone(), d))))
                    }
                    _ => Reply::default(),
                },
            ),
            Action::PointTag if self.selected_version(ctx).is_some() => {
                let digest = self
                    .selected_version(ctx)
                    .map(|v| short_digest(&v.digest))
                    .unwrap_or_default();
                let mut tags: Vec<&str> = self
                    .list
                    .rows()
                    .iter()
                    .flat_map(|v| v.tags.iter().map(String::as_str))
                    .collect();
                tags.sort_unstable();
                tags.dedup();
                let offer = match tags.is_empty() {
                    true => "a new tag name".to_string(),
                    false => format!("{} or a new name", tags.join(", ")),
                };
                ctx.overlay = Some(Overlay::Prompt(Prompt::new(
                    PromptKind::TagName,
                    format!("tag to point at {digest} ({offer}): "),
                )));
                ctx.info("enter to see the move before it is made, esc to cancel");
                Some(Reply::default())
            }
            Action::Mark => Some(self.mark(ctx)),
            Action::Delete => {
                match self.selected_version(ctx) {
                    Some(v) if v.damaged.is_some() => ctx.error(
                        "a damaged version cannot be deleted here: `sealvol volume verify` says what is wrong",
                    ),
                    Some(v) => {
                        if let Ok(digest) = Digest::parse(&v.digest) {
                            ctx.overlay = Some(Overlay::ConfirmDelete(DeletePlan {
                                volume: self.volume.clone(),
                                digest,
                                tags: v.tags.clone(),
                            }));
                        }
                    }
                    None => ctx.info("nothing selected"),
                }
                Some(Reply::default())
            }
            _ => None,
        }
    }

    fn on_prompt(&mut self, kind: PromptKind, text: &str, ctx: &mut Ctx) {
        if kind != PromptKind::TagName {
            return;
        }
        let Some(v) = self.selected_version(ctx) else {
            return;
        };
        let Ok(to) = Digest::parse(&v.digest) else {
            return;
        };
        match Name::parse("tag", text) {
            Ok(tag) => {
                let from = self.current_tag_target(&tag);
                if from == Some(to) {
                    ctx.info(format!("{tag} already points at this version"));
                    return;
                }
                ctx.overlay = Some(Overlay::Confirm(TagMovePlan {
                    volume: self.volume.clone(),
                    tag,
                    from,
                    to,
                }));
            }
            Err(e) => ctx.error(e.to_string()),
        }
    }

    fn body(&self, ctx: &Ctx) -> Body {
        let idx = self.list.shown(&ctx.filter);
        let marked = self
            .marked
            .as_ref()
            .and_then(|m| idx.iter().position(|&i| &self.list.rows()[i].digest == m));
        let vol = self.volume.to_string();
        Body::Versions(VersionsView {
            volume: vol.clone(),
            rows: idx
                .into_iter()
                .map(|i| {
                    let v = &self.list.rows()[i];
                    VersionRow {
                        digest: v.digest.clone(),
                        created: v.created.clone(),
                        bytes: v.bytes,
                        files: v.files,
                        new_bytes: v.new_bytes,
                        source: v.source.clone(),
                        tags: v.tags.clone(),
                        labels: sealvol_core::labels::shown(&v.labels),
                        signed: signed(self.signing.get(&v.digest)),
                        damaged: v.damaged.clone(),
                        mounts: ctx
                            .mounts
                            .iter()
                            .filter(|m| m.volume == vol && m.digest == v.digest)
                            .count(),
                    }
                })
                .collect(),
            selected: self.list.sel,
            marked,
        })
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Copy], "copy ref"),
            (&[Action::Mark], "mark/diff"),
            (&[Action::PointTag], "tag"),
            (&[Action::Tags], "tags"),
            (&[Action::Delete], "delete"),
            (&[Action::Trash], "trash"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, _ctx: &Ctx) -> Option<VolumeName> {
        Some(self.volume.clone())
    }

    fn digest(&self, ctx: &Ctx) -> Option<String> {
        self.selected_version(ctx).map(|v| v.digest.clone())
    }

    fn kind(&self) -> Kind {
        Kind::Versions
    }
}
