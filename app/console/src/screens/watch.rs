//! The agent's watches, and the selected one in detail: what it is doing now (with a
//! countdown while a checkpoint settles and a gauge while it is pushed), the last
//! version it sealed, and its pushes. Stops a watch (asks first); refreshed every second.

use sealvol_core::refs::{Digest, VolumeName};
use sealvol_node::watch::{Outcome, Phase, PushRecord, WatchState, WatchView};
use sealvol_views::Body;
use sealvol_views::watch::{Now, PushLine, WatchDetail, WatchRow, WatchesView};

use super::Hint;
use super::files::Files;
use super::list::List;
use super::{Ctx, Go, Kind, Overlay, Reply, Screen};
use crate::action::Action;
use crate::effects::{Effect, Loaded};

pub struct Watches {
    list: List<WatchView>,
}

impl Default for Watches {
    fn default() -> Watches {
        Watches {
            list: List::new(row_text),
        }
    }
}

fn phase_name(p: &Phase) -> &'static str {
    match p {
        Phase::Waiting { .. } => "waiting",
        Phase::Settling { .. } => "settling",
        Phase::Pushing { .. } => "pushing",
        Phase::Idle => "idle",
        Phase::Failed { .. } => "failed",
        Phase::Stopped => "stopped",
    }
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Sealed => "sealed",
        Outcome::Unchanged => "unchanged",
        Outcome::Abandoned => "abandoned",
        Outcome::Failed => "failed",
    }
}

fn push_line(p: &PushRecord) -> PushLine {
    let note = match (p.outcome, p.trashed.len()) {
        (Outcome::Sealed | Outcome::Unchanged, 0) => None,
        (Outcome::Sealed | Outcome::Unchanged, n) => Some(format!("{n} to the trash")),
        _ => p.reason.clone(),
    };
    PushLine {
        at: p.at.clone(),
        name: p.name.clone(),
        outcome: outcome_name(p.outcome).into(),
        digest: p.digest.clone(),
        bytes_new: p.bytes_new,
        bytes_total: p.bytes_total,
        latency_secs: p.latency_secs,
        note,
    }
}

fn now(p: &Phase) -> Now {
    let mut n = Now {
        phase: phase_name(p).into(),
        ..Now::default()
    };
    match p {
        Phase::Waiting { why } => n.why = Some(why.clone()),
        Phase::Settling {
            name,
            left_secs,
            why,
        } => {
            n.name = Some(name.clone());
            n.left_secs = *left_secs;
            n.why = Some(why.clone());
        }
        Phase::Pushing {
            name,
            bytes_done,
            bytes_total,
        } => {
            n.name = Some(name.clone());
            n.bytes_done = *bytes_done;
            n.bytes_total = *bytes_total;
        }
        Phase::Failed { reason, retry_secs } => {
            n.why = Some(reason.clone());
            n.retry_secs = *retry_secs;
        }
        Phase::Idle | Phase::Stopped => {}
    }
    n
}

fn detail(v: &WatchView) -> WatchDetail {
    let w = &v.watch;
    let s = &w.spec;
    let mut keep = Vec::new();
    if let Some(n) = s.keep_last {
        keep.push(format!("the last {n}"));
    }
    if let Some(k) = s.keep_every {
        keep.push(format!("every step that is a multiple of {k}"));
    }
    WatchDetail {
        id: w.id,
        state: w.state.to_string(),
        dir: s.dir.clone(),
        volume: s.volume.clone(),
        layout: s.layout.to_string(),
        settle_secs: s.settle_secs,
        tags: s.tags.clone(),
        retention: (!keep.is_empty()).then(|| keep.join(" · ")),
        runs: match &w.owner {
            Some(o) => format!("for pid {} (foreground)", o.pid),
            None => "in the agent".into(),
        },
        now: now(&v.now),
        notifier: v.notifier.clone(),
        pending: v.pending.clone(),
        last: w
            .pushes
            .iter()
            .rev()
            .find(|p| p.outcome == Outcome::Sealed)
            .map(push_line),
        pushes: w.pushes.iter().rev().map(push_line).collect(),
        reason: w.reason.clone(),
    }
}

impl Watches {
    fn selected_watch(&self, ctx: &Ctx) -> Option<&WatchView> {
        self.list.selected(&ctx.filter)
    }

    /// The newest version the selected watch sealed.
    fn last(&self, ctx: &Ctx) -> Option<(VolumeName, Digest)> {
        let w = &self.selected_watch(ctx)?.watch;
        let s = w.sealed.iter().rev().find(|s| !s.trashed)?;
        Some((
            VolumeName::parse(&w.spec.volume).ok()?,
            Digest::parse(&s.digest).ok()?,
        ))
    }

    fn plan_stop(&self, ctx: &mut Ctx) {
        let Some(v) = self.selected_watch(ctx) else {
            return;
        };
        let w = &v.watch;
        if w.state == WatchState::Stopped {
            let id = w.id;
            ctx.info(format!("watch {id} is already stopped"));
            return;
        }
        let what = format!("{} → {}", w.spec.dir, w.spec.volume);
        ctx.overlay = Some(Overlay::ConfirmStopWatch(w.id, what));
    }

    fn view(&self, visible: &[usize], ctx: &Ctx) -> WatchesView {
        let rows = visible
            .iter()
            .map(|&i| {
                let v = &self.list.rows()[i];
                let w = &v.watch;
                WatchRow {
                    id: w.id,
                    state: w.state.to_string(),
                    dir: w.spec.dir.clone(),
                    volume: w.spec.volume.clone(),
                    phase: phase_name(&v.now).into(),
                    sealed: w.sealed.len(),
                    last: w.last_sealed().map(|s| s.digest.clone()),
                }
            })
            .collect();
        WatchesView {
            empty: String::new(),
            rows,
            selected: self.list.sel,
            detail: self.selected_watch(ctx).map(|v| Box::new(detail(v))),
        }
    }
}

/// What the `/` filter matches a row by.
fn row_text(v: &WatchView) -> String {
    let w = &v.watch;
    format!("{} {} {} {}", w.id, w.state, w.spec.dir, w.spec.volume)
}

impl Screen for Watches {
    fn crumb(&self) -> String {
        "watch".into()
    }

    fn crumbs(&self) -> Vec<String> {
        vec!["watch".into()]
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        vec![Effect::LoadWatches]
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        let Loaded::Watches(watches) = l else { return };
        self.list.set_rows(watches);
        let summary = ctx.status.1.is_empty() || ctx.status.1.contains(" watch(es): ");
        if summary && !ctx.status_is_error() {
            let active = self
                .list
                .rows()
                .iter()
                .filter(|v| v.watch.state == WatchState::Active)
                .count();
            ctx.info(format!(
                "{} watch(es): {active} active, {} stopped",
                self.list.rows().len(),
                self.list.rows().len() - active
            ));
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
        Some(match a {
            // The files of the newest version it sealed.
            Action::Open => match self.last(ctx) {
                Some((v, d)) => Reply::go(Go::Push(Box::new(Files::new(v, d)))),
                None => {
                    ctx.info("this watch has sealed nothing yet");
                    Reply::default()
                }
            },
            Action::Stop => {
                self.plan_stop(ctx);
                Reply::default()
            }
            _ => return None,
        })
    }

    fn body(&self, ctx: &Ctx) -> Body {
        let visible = self.list.shown(&ctx.filter);
        let mut view = self.view(&visible, ctx);
        view.empty = if self.list.rows().is_empty() {
            "no watches: `sealvol volume watch DIR NS/NAME --detach` starts one".into()
        } else {
            format!("no watch matches /{}", ctx.filter)
        };
        Body::Watch(view)
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Open], "files"),
            (&[Action::Stop], "stop"),
            (&[Action::Filter], "filter"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, ctx: &Ctx) -> Option<VolumeName> {
        VolumeName::parse(&self.selected_watch(ctx)?.watch.spec.volume).ok()
    }

    fn digest(&self, ctx: &Ctx) -> Option<String> {
        self.last(ctx).map(|(_, d)| d.to_string())
    }

    fn live(&self) -> bool {
        true
    }

    fn kind(&self) -> Kind {
        Kind::Watch
    }
}
