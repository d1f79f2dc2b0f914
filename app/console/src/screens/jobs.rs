//! The agent's sync jobs, and the selected one in detail: gauges, the rate over the last
//! minute, chunks new against reused, the files around the one being read, a failed
//! job's error in full. Cancels (asks first) and retries; refreshed every second.

use sealvol_core::refs::{Digest, Ref, VolumeName};
use sealvol_node::jobs::{FileState, Job, JobEvent, JobState};
use sealvol_views::Body;
use sealvol_views::jobs::{FileLine, JobDetail, JobRow, JobsView};

use super::Hint;
use super::files::Files;
use super::list::List;
use super::{Ctx, Go, Kind, Overlay, Prompt, PromptKind, Reply, Screen};
use crate::action::Action;
use crate::effects::{Effect, Loaded};

pub struct Jobs {
    list: List<Job>,
    /// The live view of the selected job.
    event: Option<JobEvent>,
}

impl Default for Jobs {
    fn default() -> Jobs {
        Jobs {
            list: List::new(row_text),
            event: None,
        }
    }
}

impl Jobs {
    fn selected_job(&self, ctx: &Ctx) -> Option<&Job> {
        self.list.selected(&ctx.filter)
    }

    /// The version a READY job sealed.
    fn sealed(&self, ctx: &Ctx) -> Option<(VolumeName, Digest)> {
        let sealed = self.selected_job(ctx)?.sealed.as_deref()?;
        let r = Ref::parse(sealed).ok()?;
        let digest = Digest::parse(sealed.rsplit_once('@')?.1).ok()?;
        Some((r.volume, digest))
    }

    fn plan_cancel(&self, ctx: &mut Ctx) {
        let Some(j) = self.selected_job(ctx) else {
            return;
        };
        match j.state {
            JobState::Queued | JobState::Running => {
                let what = format!("{} → {}", j.spec.source, j.spec.volume);
                ctx.overlay = Some(Overlay::ConfirmCancel(j.id, what));
            }
            other => {
                let id = j.id;
                ctx.info(format!(
                    "job {id} is {other}: only queued or running jobs can be cancelled"
                ));
            }
        }
    }

    /// Asks before a failed or cancelled job is queued again.
    fn plan_retry(&self, ctx: &mut Ctx) {
        let Some(j) = self.selected_job(ctx) else {
            return;
        };
        let (id, state) = (j.id, j.state);
        if matches!(state, JobState::Failed | JobState::Cancelled) {
            let what = format!("{} → {}", j.spec.source, j.spec.volume);
            ctx.overlay = Some(Overlay::ConfirmRetry(id, what));
            return;
        }
        ctx.info(format!(
            "job {id} is {state}: only failed or cancelled jobs can be retried"
        ));
    }

    fn view(&self, visible: &[usize], ctx: &Ctx) -> JobsView {
        let rows = visible
            .iter()
            .map(|&i| {
                let j = &self.list.rows()[i];
                JobRow {
                    id: j.id,
                    state: j.state.to_string(),
                    source: j.spec.source.clone(),
                    volume: j.spec.volume.clone(),
                    bytes_done: j.progress.bytes_done,
                    bytes_total: j.progress.bytes_total,
                    updated: j.updated.clone(),
                }
            })
            .collect();
        let detail = self.selected_job(ctx).map(|j| {
            // The live view when it is this job's; else what the list knows.
            let ev = self.event.as_ref().filter(|e| e.job.id == j.id);
            let job = ev.map_or(j, |e| &e.job);
            let p = &job.progress;
            JobDetail {
                id: job.id,
                state: job.state.to_string(),
                source: job.spec.source.clone(),
                volume: job.spec.volume.clone(),
                tags: job.spec.tags.clone(),
                attempts: job.attempts,
                bytes_done: p.bytes_done,
                bytes_total: p.bytes_total,
                files_done: p.files_done,
                files_total: p.files_total,
                chunks_new: p.chunks_new,
                chunks_reused: p.chunks_reused,
                rate: ev.map_or(0, |e| e.rate),
                eta_secs: ev.and_then(|e| e.eta_secs),
                rate_history: ev.map(|e| e.rate_history.clone()).unwrap_or_default(),
                files: ev
                    .map(|e| {
                        e.files
                            .iter()
                            .map(|f| FileLine {
                                path: f.path.clone(),
                                size: f.size,
                                state: match f.state {
                                    FileState::Kept => "kept",
                                    FileState::Done => "done",
                                    FileState::Reading => "reading",
                                    FileState::Waiting => "waiting",
                                }
                                .into(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                queued_ahead: ev.map_or(0, |e| e.queued_ahead),
                sealed: job.sealed.clone(),
                reason: job.reason.clone(),
            }
        });
        JobsView {
            empty: String::new(),
            rows,
            selected: self.list.sel,
            detail,
        }
    }
}

/// What the `/` filter matches a row by.
fn row_text(j: &Job) -> String {
    format!("{} {} {} {}", j.id, j.state, j.spec.source, j.spec.volume)
}

impl Screen for Jobs {
    fn crumb(&self) -> String {
        "jobs".into()
    }

    fn crumbs(&self) -> Vec<String> {
        vec!["jobs".into()]
    }

    fn load(&self, ctx: &Ctx) -> Vec<Effect> {
        // The selected job's live view comes with the list.
        vec![Effect::LoadJobs(self.selected_job(ctx).map(|j| j.id))]
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        let Loaded::Jobs(jobs, ev) = l else { return };
        self.list.set_rows(jobs);
        self.event = ev.map(|e| *e);
        // The summary, unless the status says something else (a job just cancelled or
        // retried, an error).
        let summary = ctx.status.1.is_empty() || ctx.status.1.contains(" job(s): ");
        if summary && !ctx.status_is_error() {
            let running = self
                .list
                .rows()
                .iter()
                .filter(|j| matches!(j.state, JobState::Running | JobState::Sealing))
                .count();
            let queued = self
                .list
                .rows()
                .iter()
                .filter(|j| j.state == JobState::Queued)
                .count();
            ctx.info(format!(
                "{} job(s): {running} running, {queued} queued",
                self.list.rows().len()
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
        if self.list.sel != i {
            self.event = None;
        }
        self.list.sel = i;
    }

    fn on_action(&mut self, a: Action, ctx: &mut Ctx) -> Option<Reply> {
        Some(match a {
            // A sealed job: the files of the version it made.
            Action::Open => match self.sealed(ctx) {
                Some((v, d)) => Reply::go(Go::Push(Box::new(Files::new(v, d)))),
                None => Reply::default(),
            },
            Action::Stop => {
                self.plan_cancel(ctx);
                Reply::default()
            }
            Action::RetryJob => {
                self.plan_retry(ctx);
                Reply::default()
            }
            // The palette, with `:sync ` typed: a source and a volume to go.
            Action::NewSync => {
                let mut p = Prompt::editing(PromptKind::Command, "", "sync ".into());
                p.fresh = false;
                ctx.overlay = Some(Overlay::Prompt(p));
                Reply::effects(vec![Effect::LoadSecretNames])
            }
            _ => return None,
        })
    }

    fn body(&self, ctx: &Ctx) -> Body {
        let visible = self.list.shown(&ctx.filter);
        let mut view = self.view(&visible, ctx);
        view.empty = if self.list.rows().is_empty() {
            "no sync jobs: `sealvol volume sync SOURCE NS/NAME --detach` queues one".into()
        } else {
            format!("no job matches /{}", ctx.filter)
        };
        Body::Jobs(view)
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Open], "files"),
            (&[Action::Stop], "cancel"),
            (&[Action::RetryJob], "retry"),
            (&[Action::NewSync], "new sync"),
            (&[Action::Filter], "filter"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, ctx: &Ctx) -> Option<VolumeName> {
        self.sealed(ctx).map(|(v, _)| v)
    }

    fn digest(&self, ctx: &Ctx) -> Option<String> {
        self.sealed(ctx).map(|(_, d)| d.to_string())
    }

    fn live(&self) -> bool {
        true
    }

    fn kind(&self) -> Kind {
        Kind::Jobs
    }
}
