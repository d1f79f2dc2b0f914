//! Deployments: the config files the console was given (`--deploy`, `deploy_dirs`),
//! volume by volume, which version each serves now, disagreements marked and unpinned
//! refs flagged. Tab moves between deployments; `b` on a cell rolls that deployment's
//! ref back (the picker, then the file's diff, then a confirmation).

use std::path::PathBuf;

use sealvol_core::refs::VolumeName;
use sealvol_deploy::drift::{Cell, Matrix, Row};
use sealvol_views::Body;
use sealvol_views::deployments::{CellState, DeployCell, DeployRow, DeploymentsView};

use super::Hint;
use super::list::{self, pick};
use super::rollback::RollbackPick;
use super::{Ctx, Go, Kind, Reply, Screen};
use crate::action::Action;
use crate::effects::{Effect, Loaded};

pub struct Deployments {
    paths: Vec<PathBuf>,
    matrix: Option<Matrix>,
    sel: usize,
    column: usize,
}

impl Deployments {
    pub fn new(paths: Vec<PathBuf>) -> Deployments {
        Deployments {
            paths,
            matrix: None,
            sel: 0,
            column: 0,
        }
    }

    fn visible(&self, ctx: &Ctx) -> Vec<usize> {
        let Some(m) = &self.matrix else {
            return Vec::new();
        };
        list::shown(&m.rows, &ctx.filter, |r: &Row| r.volume.clone())
    }

    /// The selected cell's first mount: the row's volume, and the deployment's file.
    fn selected_cell(&self, ctx: &Ctx) -> Option<(&Cell, &PathBuf, &str, String)> {
        let m = self.matrix.as_ref()?;
        let row = &m.rows[pick(&self.visible(ctx), self.sel)?];
        let cell = row.cells.get(self.column)?.first()?;
        Some((
            cell,
            m.files.get(self.column)?,
            m.names.get(self.column)?,
            row.volume.clone(),
        ))
    }
}

impl Deployments {
    /// Why `b` found no cell to roll back: what the screen is missing, in order.
    fn why_nothing_to_roll_back(&self, ctx: &Ctx) -> String {
        let Some(m) = &self.matrix else {
            return match (self.paths.is_empty(), ctx.busy > 0) {
                (true, _) => "no deployment files to roll back: start with --deploy FILE (or a folder), or set deploy_dirs in config.toml".into(),
                (false, true) => "the deployments are still loading".into(),
                (false, false) => format!(
                    "no deployments could be read from {} (r reads them again)",
                    shown(&self.paths)
                ),
            };
        };
        if m.names.is_empty() {
            return format!("no deployment files found in {}", shown(&self.paths));
        }
        if self.visible(ctx).is_empty() {
            return match ctx.filter.is_empty() {
                true => "the deployments mount no volume".into(),
                false => format!("no volume matches /{} (esc clears the filter)", ctx.filter),
            };
        }
        match m.names.get(self.column) {
            Some(name) => {
                format!("{name} does not mount the selected volume: tab to a deployment that does")
            }
            None => "select a deployment with tab".into(),
        }
    }
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn cell_view(cells: &[Cell]) -> DeployCell {
    match cells.first() {
        None => DeployCell {
            text: "-".into(),
            state: CellState::Missing,
        },
        Some(c) => match (&c.digest, &c.follows) {
            (Some(d), Some(f)) => DeployCell {
                text: d.short(12),
                state: match f.pinned() {
                    true => CellState::Pinned,
                    false => CellState::Unpinned,
                },
            },
            _ => DeployCell {
                text: "error".into(),
                state: CellState::Error,
            },
        },
    }
}

impl Screen for Deployments {
    fn crumb(&self) -> String {
        "deployments".into()
    }

    fn crumbs(&self) -> Vec<String> {
        vec!["deployments".into()]
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        match self.paths.is_empty() {
            true => Vec::new(),
            false => vec![Effect::LoadDeployments(self.paths.clone())],
        }
    }

    fn entered(&mut self, ctx: &mut Ctx) {
        if self.paths.is_empty() {
            ctx.info("no deployment files: start with --deploy FILE (or a folder), or set deploy_dirs in config.toml");
        }
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        if let Loaded::Deployments(m) = l {
            let disagree = m.rows.iter().filter(|r| !r.agree).count();
            let unpinned = m
                .rows
                .iter()
                .flat_map(|r| r.cells.iter().flatten())
                .filter(|c| c.follows.as_ref().is_some_and(|f| !f.pinned()))
                .count();
            if ctx.status.1.is_empty() {
                ctx.info(format!(
                    "{} volume(s) × {} deployment(s): {disagree} disagree, {unpinned} unpinned (*) · tab: next deployment · b: roll back",
                    m.rows.len(),
                    m.names.len()
                ));
            }
            self.column = self.column.min(m.names.len().saturating_sub(1));
            self.matrix = Some(*m);
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

    fn on_action(&mut self, a: Action, ctx: &mut Ctx) -> Option<Reply> {
        match a {
            Action::Focus => {
                let n = self.matrix.as_ref().map_or(0, |m| m.names.len());
                if n > 0 {
                    self.column = (self.column + 1) % n;
                }
                Some(Reply::default())
            }
            Action::Rollback | Action::Open => {
                let Some((cell, file, name, volume)) = self.selected_cell(ctx) else {
                    ctx.info(self.why_nothing_to_roll_back(ctx));
                    return Some(Reply::default());
                };
                let Ok(volume) = VolumeName::parse(&volume) else {
                    ctx.error(format!(
                        "{volume} is not a volume name: fix the ref in {name}"
                    ));
                    return Some(Reply::default());
                };
                let pick = RollbackPick::new(
                    file.clone(),
                    name.to_string(),
                    volume,
                    cell.path.clone(),
                    cell.digest,
                );
                Some(Reply::go(Go::Push(Box::new(pick))))
            }
            _ => None,
        }
    }

    fn body(&self, ctx: &Ctx) -> Body {
        let Some(m) = &self.matrix else {
            return Body::Deployments(DeploymentsView {
                empty: match self.paths.is_empty() {
                    true => {
                        "no deployment files: `sealvol --deploy FILE` or deploy_dirs in config.toml"
                            .into()
                    }
                    false => "reading the deployment files…".into(),
                },
                ..DeploymentsView::default()
            });
        };
        let rows: Vec<DeployRow> = self
            .visible(ctx)
            .into_iter()
            .map(|i| {
                let r = &m.rows[i];
                DeployRow {
                    volume: r.volume.clone(),
                    agree: r.agree,
                    cells: r.cells.iter().map(|c| cell_view(c)).collect(),
                }
            })
            .collect();
        let mut detail = Vec::new();
        if let Some((cell, _, name, _)) = self.selected_cell(ctx) {
            detail.push(format!(
                "{name}:{}  {}  ref: {}",
                cell.line, cell.path, cell.reference
            ));
            match (&cell.error, &cell.follows, &cell.digest) {
                (Some(e), _, _) => detail.push(format!("does not resolve: {e}")),
                (None, Some(f), Some(d)) if !f.pinned() => detail.push(format!(
                    "unpinned: resolves to {d} now; new replicas may serve another version"
                )),
                (None, _, Some(d)) => detail.push(format!("pinned: {d}")),
                _ => {}
            }
        }
        Body::Deployments(DeploymentsView {
            names: m.names.clone(),
            rows,
            selected: self.sel,
            column: self.column,
            detail,
            failed: m
                .failed
                .iter()
                .map(|(n, why)| format!("{n}: {why}"))
                .collect(),
            empty: "the deployment files mount no volumes".into(),
        })
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Focus], "next deployment"),
            (&[Action::Rollback], "roll back"),
            (&[Action::Copy], "copy ref"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, ctx: &Ctx) -> Option<VolumeName> {
        let m = self.matrix.as_ref()?;
        VolumeName::parse(&m.rows[pick(&self.visible(ctx), self.sel)?].volume).ok()
    }

    fn digest(&self, ctx: &Ctx) -> Option<String> {
        self.selected_cell(ctx)?.0.digest.map(|d| d.to_string())
    }

    fn kind(&self) -> Kind {
        Kind::Deployments
    }
}
