//! A volume's tags, each with its target and its full history of moves; a move can be
//! undone from the history (asks first, naming the tag and both digests).

use super::Hint;
use sealvol_core::refs::{Digest, Name, VolumeName};
use sealvol_core::registry::TagFile;
use sealvol_views::Body;
use sealvol_views::format::short_digest;
use sealvol_views::tags::{MoveRow, TagRow, TagsFocus, TagsView};

use super::{Ctx, Kind, Overlay, Reply, Screen};
use crate::action::Action;
use crate::effects::{Effect, Loaded, TagMovePlan};

pub struct Tags {
    volume: VolumeName,
    tags: Vec<TagFile>,
    sel: usize,
    focus: TagsFocus,
    /// The selected move in the selected tag's history, newest first.
    move_sel: usize,
}

impl Tags {
    pub fn new(volume: VolumeName) -> Tags {
        Tags {
            volume,
            tags: Vec::new(),
            sel: 0,
            focus: TagsFocus::Tags,
            move_sel: 0,
        }
    }

    fn toggle_focus(&mut self) {
        self.focus = match self.focus {
            TagsFocus::Tags => TagsFocus::History,
            TagsFocus::History => TagsFocus::Tags,
        };
        self.move_sel = 0;
    }

    fn plan_undo(&mut self, ctx: &mut Ctx) {
        let Some(tag) = self.tags.get(self.sel) else {
            return;
        };
        if self.focus != TagsFocus::History {
            ctx.info("tab into the history, select the move to undo, then u");
            return;
        }
        let n = tag.history.len();
        let Some(m) = n
            .checked_sub(1 + self.move_sel)
            .and_then(|i| tag.history.get(i))
        else {
            return;
        };
        let Some(back_to) = m.from.as_deref().and_then(|d| Digest::parse(d).ok()) else {
            ctx.info(format!(
                "that move created {}; there is nothing before it",
                tag.tag
            ));
            return;
        };
        let (Ok(name), Ok(current)) = (Name::parse("tag", &tag.tag), Digest::parse(&tag.digest))
        else {
            ctx.error("this tag's record is damaged; run `sealvol volume verify`");
            return;
        };
        if current == back_to {
            ctx.info(format!(
                "{} already points at {}",
                tag.tag,
                short_digest(&tag.digest)
            ));
            return;
        }
        ctx.overlay = Some(Overlay::Confirm(TagMovePlan {
            volume: self.volume.clone(),
            tag: name,
            from: Some(current),
            to: back_to,
        }));
    }
}

impl Screen for Tags {
    fn crumb(&self) -> String {
        self.volume.to_string()
    }

    fn crumbs(&self) -> Vec<String> {
        vec![self.volume.to_string(), "tags".into()]
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        vec![Effect::LoadTags(self.volume.clone())]
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        if let Loaded::Tags(vol, t) = l
            && vol == self.volume
        {
            self.tags = t;
            if ctx.status.1.is_empty() || ctx.status.1.ends_with('…') {
                ctx.info(format!("{} tag(s) on {vol}", self.tags.len()));
            }
        }
    }

    fn len(&self, _ctx: &Ctx) -> usize {
        match self.focus {
            TagsFocus::Tags => self.tags.len(),
            TagsFocus::History => self.tags.get(self.sel).map_or(0, |t| t.history.len()),
        }
    }

    fn selected(&self) -> usize {
        match self.focus {
            TagsFocus::Tags => self.sel,
            TagsFocus::History => self.move_sel,
        }
    }

    fn select(&mut self, i: usize, _ctx: &Ctx) {
        match self.focus {
            TagsFocus::Tags => {
                self.sel = i;
                self.move_sel = 0;
            }
            TagsFocus::History => self.move_sel = i,
        }
    }

    fn on_action(&mut self, a: Action, ctx: &mut Ctx) -> Option<Reply> {
        match a {
            Action::Open | Action::Focus => self.toggle_focus(),
            Action::UndoMove => self.plan_undo(ctx),
            _ => return None,
        }
        Some(Reply::default())
    }

    fn body(&self, _ctx: &Ctx) -> Body {
        let now = sealvol_core::stamp::now();
        Body::Tags(TagsView {
            volume: self.volume.to_string(),
            tags: self
                .tags
                .iter()
                .map(|t| TagRow {
                    tag: t.tag.clone(),
                    digest: t.digest.clone(),
                    damaged: t.damaged.clone(),
                    expires_in: t
                        .expires
                        .as_deref()
                        .map(|at| sealvol_views::format::expires_in(at, now)),
                    history: t
                        .history
                        .iter()
                        .map(|m| MoveRow {
                            from: m.from.clone(),
                            to: m.to.clone(),
                            at: m.at.clone(),
                            by: m.by.clone(),
                        })
                        .collect(),
                })
                .collect(),
            selected: self.sel,
            focus: self.focus,
            selected_move: self.move_sel,
        })
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Focus], "history"),
            (&[Action::UndoMove], "undo move"),
            (&[Action::Back], "back"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, _ctx: &Ctx) -> Option<VolumeName> {
        Some(self.volume.clone())
    }

    fn digest(&self, _ctx: &Ctx) -> Option<String> {
        self.tags.get(self.sel).map(|t| t.digest.clone())
    }

    fn clickable(&self) -> bool {
        false
    }

    fn kind(&self) -> Kind {
        Kind::Tags
    }
}
