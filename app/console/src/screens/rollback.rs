//! Rolling a deployment back: the volume's versions (sealed, size, tags), the one the
//! deployment serves marked, and the history of its tags beside them. Enter on a
//! version plans the change to the file; the confirmation shows the file, the volume,
//! both digests and the line that changes, and only then is the file written.

use super::Hint;
use std::path::PathBuf;

use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::registry::{TagFile, VersionInfo};
use sealvol_views::Body;
use sealvol_views::deployments::{RollbackRow, RollbackView};
use sealvol_views::format::{short_digest, when};

use super::{Ctx, Kind, Overlay, Reply, Screen};
use crate::action::Action;
use crate::effects::{Effect, Loaded, RollbackRequest};

pub struct RollbackPick {
    file: PathBuf,
    /// The deployment's short name.
    name: String,
    volume: VolumeName,
    path: String,
    serving: Option<Digest>,
    versions: Vec<VersionInfo>,
    tags: Vec<TagFile>,
    sel: usize,
    /// The selection was put on the version before the served one once loaded.
    placed: bool,
}

impl RollbackPick {
    pub fn new(
        file: PathBuf,
        name: String,
        volume: VolumeName,
        path: String,
        serving: Option<Digest>,
    ) -> RollbackPick {
        RollbackPick {
            file,
            name,
            volume,
            path,
            serving,
            versions: Vec::new(),
            tags: Vec::new(),
            sel: 0,
            placed: false,
        }
    }

    fn serving_str(&self) -> Option<String> {
        self.serving.map(|d| d.to_string())
    }
}

impl Screen for RollbackPick {
    fn crumb(&self) -> String {
        "roll back".into()
    }

    fn crumbs(&self) -> Vec<String> {
        vec!["deployments".into(), self.name.clone(), "roll back".into()]
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        vec![
            Effect::LoadVersions(self.volume.clone()),
            Effect::LoadTags(self.volume.clone()),
        ]
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        match l {
            Loaded::Versions(v, list) if v == self.volume => {
                self.versions = list.into_iter().filter(|v| v.damaged.is_none()).collect();
                if !self.placed {
                    // Rolling back usually means the one before: start there.
                    let here = self.serving_str();
                    if let Some(i) = self
                        .versions
                        .iter()
                        .position(|v| Some(&v.digest) == here.as_ref())
                    {
                        self.sel = (i + 1).min(self.versions.len().saturating_sub(1));
                    }
                    self.placed = true;
                }
                if ctx.status.1.is_empty() {
                    ctx.info(format!(
                        "{} version(s) of {} · enter: roll {} back to the selected one",
                        self.versions.len(),
                        self.volume,
                        self.name
                    ));
                }
            }
            Loaded::Tags(v, tags) if v == self.volume => self.tags = tags,
            Loaded::RollbackPlanned(req, plan) if req.volume == self.volume => match plan {
                Some(plan) => {
                    ctx.info(format!(
                        "y writes {}, n cancels, f shows the lines whole",
                        self.name
                    ));
                    ctx.overlay = Some(Overlay::ConfirmRollback(plan));
                }
                None => ctx.info(format!(
                    "{} pins {} to {} already: nothing to change",
                    self.name,
                    self.volume,
                    short_digest(&req.to.to_string())
                )),
            },
            _ => {}
        }
    }

    fn len(&self, _ctx: &Ctx) -> usize {
        self.versions.len()
    }

    fn selected(&self) -> usize {
        self.sel
    }

    fn select(&mut self, i: usize, _ctx: &Ctx) {
        self.sel = i;
    }

    fn on_action(&mut self, a: Action, ctx: &mut Ctx) -> Option<Reply> {
        match a {
            Action::Open | Action::Rollback => {
                let Some(v) = self.versions.get(self.sel) else {
                    return Some(Reply::default());
                };
                let Ok(to) = Digest::parse(&v.digest) else {
                    return Some(Reply::default());
                };
                if ctx.readonly {
                    ctx.error("read-only console (--readonly): deployment files are not changed");
                    return Some(Reply::default());
                }
                ctx.info(format!("planning the change to {}…", self.name));
                Some(Reply::effects(vec![Effect::PlanRollback(
                    RollbackRequest {
                        file: self.file.clone(),
                        volume: self.volume.clone(),
                        path: self.path.clone(),
                        to,
                    },
                )]))
            }
            _ => None,
        }
    }

    fn body(&self, _ctx: &Ctx) -> Body {
        let here = self.serving_str();
        let mut history: Vec<(String, String)> = self
            .tags
            .iter()
            .flat_map(|t| {
                t.history.iter().map(move |m| {
                    (
                        m.at.clone(),
                        format!(
                            "{:<8} {} → {}  {}  {}",
                            t.tag,
                            m.from.as_deref().map_or("(new)".to_string(), hex8),
                            match m.to.is_empty() {
                                true => "(removed)".to_string(),
                                false => hex8(&m.to),
                            },
                            when(&m.at),
                            sealvol_views::format::name(&m.by)
                        ),
                    )
                })
            })
            .collect();
        history.sort_by(|a, b| b.0.cmp(&a.0));
        Body::Rollback(RollbackView {
            title: format!(
                "{} · {} at {} · serving {}",
                self.name,
                self.volume,
                self.path,
                here.as_deref()
                    .map_or("an unresolved ref".to_string(), short_digest)
            ),
            rows: self
                .versions
                .iter()
                .map(|v| RollbackRow {
                    digest: v.digest.clone(),
                    created: v.created.clone(),
                    bytes: v.bytes,
                    tags: v.tags.clone(),
                    serving: Some(&v.digest) == here.as_ref(),
                })
                .collect(),
            selected: self.sel,
            history: history.into_iter().map(|(_, l)| l).collect(),
        })
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Open], "roll back to this"),
            (&[Action::Back], "back"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, _ctx: &Ctx) -> Option<VolumeName> {
        Some(self.volume.clone())
    }

    fn digest(&self, _ctx: &Ctx) -> Option<String> {
        self.versions.get(self.sel).map(|v| v.digest.clone())
    }

    fn kind(&self) -> Kind {
        Kind::Rollback
    }
}

/// 8 hex digits of a digest: enough to tell the moves of one volume's tags apart.
fn hex8(digest: &str) -> String {
    digest.trim_start_matches("b3:").chars().take(8).collect()
}
