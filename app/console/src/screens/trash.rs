//! The trash: deleted versions (of one volume, or of all), who deleted them and when,
//! the time left to restore them, and their size. Restores one (asks first, naming the
//! digest).

use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::trash::TrashedVersion;
use sealvol_views::Body;
use sealvol_views::format::{short_digest, time_left, when};
use sealvol_views::trash::{TrashRow, TrashView};

use super::Hint;
use super::list::List;
use super::{Ctx, Kind, Overlay, Reply, Screen};
use crate::action::Action;
use crate::effects::{Effect, Loaded, RestorePlan};

pub struct Trash {
    /// One volume's trash, or everyone's.
    volume: Option<VolumeName>,
    list: List<TrashedVersion>,
}

impl Trash {
    pub fn new(volume: Option<VolumeName>) -> Trash {
        Trash {
            volume,
            list: List::new(row_text),
        }
    }

    fn selected_item(&self, ctx: &Ctx) -> Option<&TrashedVersion> {
        self.list.selected(&ctx.filter)
    }

    fn plan_restore(&self, ctx: &mut Ctx) {
        let Some(t) = self.selected_item(ctx) else {
            ctx.info("nothing selected");
            return;
        };
        if t.purging || t.expired {
            ctx.error(format!(
                "{}@{} can no longer be restored: its window ended {}",
                t.volume,
                short_digest(&t.digest),
                when(&t.expires)
            ));
            return;
        }
        let (Ok(volume), Ok(digest)) = (VolumeName::parse(&t.volume), Digest::parse(&t.digest))
        else {
            return;
        };
        ctx.overlay = Some(Overlay::ConfirmRestore(RestorePlan {
            volume,
            digest,
            tags: t.tags.clone(),
        }));
    }
}

/// What the `/` filter matches a row by.
fn row_text(t: &TrashedVersion) -> String {
    format!(
        "{} {} {} {}",
        t.volume,
        t.digest,
        t.deleted_by,
        t.tags.join(" ")
    )
}

impl Screen for Trash {
    fn crumb(&self) -> String {
        "trash".into()
    }

    fn crumbs(&self) -> Vec<String> {
        match &self.volume {
            Some(v) => vec![v.to_string(), "trash".into()],
            None => vec!["trash".into()],
        }
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        vec![Effect::LoadTrash(self.volume.clone())]
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        if let Loaded::Trash(vol, items) = l
            && vol == self.volume
        {
            self.list.set_rows(items);
            // A reload after a restore keeps the line that says what happened.
            if ctx.status.1.is_empty() {
                ctx.info(match self.list.rows().len() {
                    0 => "nothing in the trash".to_string(),
                    n => format!("{n} version(s) in the trash · U restores the selected one"),
                });
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
            Action::Restore => {
                self.plan_restore(ctx);
                Some(Reply::default())
            }
            _ => None,
        }
    }

    fn body(&self, ctx: &Ctx) -> Body {
        let now = sealvol_core::stamp::now();
        Body::Trash(TrashView {
            volume: self.volume.as_ref().map(|v| v.to_string()),
            rows: self
                .list
                .shown(&ctx.filter)
                .into_iter()
                .map(|i| {
                    let t = &self.list.rows()[i];
                    TrashRow {
                        volume: t.volume.clone(),
                        digest: t.digest.clone(),
                        deleted_at: t.deleted_at.clone(),
                        deleted_by: t.deleted_by.clone(),
                        left: match (t.purging, t.expired) {
                            (true, _) => "purging".into(),
                            (false, true) => "expired".into(),
                            (false, false) => time_left(&t.expires, now),
                        },
                        gone: t.purging || t.expired,
                        bytes: t.bytes,
                        tags: t.tags.clone(),
                    }
                })
                .collect(),
            selected: self.list.sel,
            empty: match &self.volume {
                Some(v) => {
                    format!("the trash of {v} is empty: d on the versions screen deletes a version")
                }
                None => {
                    "the trash is empty: d on a volume's versions screen deletes a version".into()
                }
            },
        })
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Restore], "restore"),
            (&[Action::Copy], "copy ref"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, ctx: &Ctx) -> Option<VolumeName> {
        self.selected_item(ctx)
            .and_then(|t| VolumeName::parse(&t.volume).ok())
            .or_else(|| self.volume.clone())
    }

    fn digest(&self, ctx: &Ctx) -> Option<String> {
        self.selected_item(ctx).map(|t| t.digest.clone())
    }

    fn kind(&self) -> Kind {
        Kind::Trash
    }
}
