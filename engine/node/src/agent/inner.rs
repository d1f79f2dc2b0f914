//! The agent's state behind its handle (`Agent`): the database, the jobs queued and
//! running, the watches, and the job API over them, which the socket and the watch
//! threads share.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::live;
use super::live::LiveJob;
use super::schedule;
use super::watching::Watches;
use crate::jobs::{Job, JobEvent, JobSpec, JobState, JobsApi};
use crate::log::JobLog;
use crate::state::StateDb;
use crate::sync::{self, SyncOptions};
use crate::watch::{Watch, WatchSpec, WatchView};
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::repo::Repository;
use sealvol_source::Connector;

/// How often a watcher gets a live view.
pub const TICK: Duration = Duration::from_millis(250);

pub(super) struct Inner {
    /// Itself, for the threads it starts (a watch's runner).
    pub(super) me: Weak<Inner>,
    pub(super) repo: Repository,
    /// How remote sources are reached (the app's `sealvol-sources`); without one, only
    /// local folders sync.
    pub(super) connector: Option<Arc<dyn Connector>>,
    pub(super) db: Arc<StateDb>,
    pub(super) state_dir: PathBuf,
    pub(super) settings: AgentSettings,
    pub(super) running: Mutex<HashMap<u64, Running>>,
    /// Held while a job is queued, so that racing submissions cannot pass a cap.
    pub(super) queueing: Mutex<()>,
    /// Which started jobs hold a slot (`schedule`).
    pub(super) board: Mutex<schedule::Board>,
    pub(super) watches: Watches,
    pub(super) wake: Condvar,
    /// Counts pokes, so that the dispatcher never sleeps through one.
    pub(super) wake_lock: Mutex<u64>,
    pub(super) stop: AtomicBool,
    /// When the agent last had something to do (a job, a request).
    pub(super) busy_at: Mutex<Instant>,
}

pub(super) struct Running {
    pub(super) live: Arc<LiveJob>,
    pub(super) cancel: Arc<AtomicBool>,
}

/// A running job's place among the jobs that run at once, which it gives up while it
/// only waits out retries (`sealvol_source::pace`).
pub(super) struct JobSlot {
    pub(super) agent: Weak<Inner>,
    pub(super) id: u64,
}

impl sealvol_source::pace::Slot for JobSlot {
    fn give_up(&self) {
        if let Some(agent) = self.agent.upgrade() {
            agent.board().give_up(self.id);
            JobLog::new(&agent.state_dir, self.id)
                .line("waiting out retries: its slot goes to other jobs meanwhile");
            agent.poke();
        }
    }

    fn take_back(&self) -> bool {
        let Some(agent) = self.agent.upgrade() else {
            return true;
        };
        // A stopping agent grants nothing: the job goes on to notice it is cancelled.
        if agent.stop.load(Ordering::SeqCst) || agent.board().take_grant(self.id) {
            return true;
        }
        agent.board().ask_back(self.id);
        agent.poke();
        false
    }
}

impl Inner {
    pub(super) fn touch(&self) {
        if let Ok(mut t) = self.busy_at.lock() {
            *t = Instant::now();
        }
    }

    fn poke(&self) {
        self.touch();
        if let Ok(mut pokes) = self.wake_lock.lock() {
            *pokes += 1;
        }
        self.wake.notify_all();
    }

    fn pokes(&self) -> u64 {
        self.wake_lock.lock().map(|p| *p).unwrap_or(0)
    }

    /// Sleeps until the next poke after `seen` (or a second, to look at the jobs again).
    fn sleep_past(&self, seen: u64) {
        if let Ok(pokes) = self.wake_lock.lock() {
            let _ = self
                .wake
                .wait_timeout_while(pokes, Duration::from_secs(1), |p| *p == seen);
        }
    }

    fn board(&self) -> std::sync::MutexGuard<'_, schedule::Board> {
        // The board holds no invariant a panic could break halfway: keep using it.
        self.board.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The dispatcher: starts queued jobs and gives slots back to jobs that ask, as
    /// `schedule` says, each job on a thread of its own, until the agent stops; then
    /// waits for the jobs it started.
    pub(super) fn dispatch(&self) {
        let mut started: Vec<JoinHandle<()>> = Vec::new();
        while !self.stop.load(Ordering::SeqCst) {
            started.retain(|t| !t.is_finished());
            let seen = self.pokes();
            let queued: Vec<(u64, schedule::Owner)> = match self.db.jobs() {
                Ok(jobs) => jobs
                    .into_iter()
                    .rev()
                    .filter(|j| j.state == JobState::Queued)
                    .map(|j| (j.id, schedule::Owner::of(&j.spec)))
                    .collect(),
                Err(e) => {
                    tracing::error!("the agent cannot read its jobs: {e}");
                    std::thread::sleep(Duration::from_secs(1));
                    continue;
                }
            };
            let mut board = self.board();
            match board.next(&queued, &self.settings.limits) {
                Some(schedule::Pick::Resume(id)) => board.grant(id),
                Some(schedule::Pick::Start(id)) => {
                    let Some((_, owner)) = queued.into_iter().find(|(q, _)| *q == id) else {
                        continue;
                    };
                    board.start(id, owner);
                    drop(board);
                    match self.spawn_job(id) {
                        Ok(t) => started.push(t),
                        Err(e) => {
                            tracing::error!("job {id}: {e}");
                            self.board().end(id);
                            std::thread::sleep(Duration::from_secs(1));
                        }
                    }
                }
                None => {
                    drop(board);
                    self.sleep_past(seen);
                }
            }
        }
        for t in started {
            let _ = t.join();
        }
    }

    /// Runs job `id` on a thread of its own; its slot is freed when it ends.
    fn spawn_job(&self, id: u64) -> std::io::Result<JoinHandle<()>> {
        let me = self.me.clone();
        std::thread::Builder::new()
            .name(format!("sealvol-job-{id}"))
            .spawn(move || {
                if let Some(agent) = me.upgrade() {
                    agent.run(id);
                    agent.board().end(id);
                    agent.poke();
                }
            })
    }

    /// How many files of the version `pinned` a sync sealed passed each set of checks
    /// of the source's hashes (its provenance); empty for a push or a mirror.
    fn source_checks(&self, pinned: &str) -> std::collections::BTreeMap<String, u64> {
        let Ok(r) = sealvol_core::Ref::parse(pinned) else {
            return Default::default();
        };
        self.repo
            .resolve(&r)
            .and_then(|d| self.repo.manifest(&r.volume, &d))
            .map(|m| m.provenance.checks_summary())
            .unwrap_or_default()
    }

    fn run(&self, id: u64) {
        self.touch();
        let log = JobLog::new(&self.state_dir, id);
        let job = match self.db.move_job(id, JobState::Running, None) {
            Ok(j) => j,
            Err(e) => {
                tracing::warn!("job {id}: {e}");
                return;
            }
        };
        log.line(&format!(
            "attempt {} started (agent pid {})",
            job.attempts,
            std::process::id()
        ));
        let live = Arc::new(LiveJob::new(id, self.db.clone(), log.clone()));
        let cancel = Arc::new(AtomicBool::new(false));
        if let Ok(mut r) = self.running.lock() {
            r.insert(
                id,
                Running {
                    live: live.clone(),
                    cancel: cancel.clone(),
                },
            );
        }
        let opts = SyncOptions {
            state_dir: &self.state_dir,
            trust: self.settings.trust,
            batch_bytes: self.settings.batch_bytes,
            streams: self.settings.streams,
            progress: live.as_ref(),
            cancel: cancel.clone(),
            connector: self.connector.as_deref(),
            slot: Some(Arc::new(JobSlot {
                agent: self.me.clone(),
                id,
            })),
            tap: self
                .settings
                .taps
                .as_ref()
                .and_then(|t| t.tap_for(&job.spec)),
        };
        let result = match &job.spec.mirror_to {
            Some(to) => self.mirror(&job.spec, to, live.as_ref()),
            None => sync::run(&self.repo, &self.db, &job.spec, &opts).map(|r| r.pinned_ref()),
        };
        live.flush();
        let outcome = match result {
            Ok(pinned) => {
                log.line(&format!("READY: sealed {pinned}"));
                let checks = self.source_checks(&pinned);
                if !checks.is_empty() {
                    let said: Vec<String> =
                        checks.iter().map(|(k, n)| format!("{n} {k}")).collect();
                    log.line(&format!(
                        "checked against the source's hashes: {}",
                        said.join(", ")
                    ));
                }
                // A local push seals without a separate SEALING step.
                let sealing = match self.db.job(id) {
                    Ok(j) if j.state == JobState::Running => {
                        self.db.move_job(id, JobState::Sealing, None).map(|_| ())
                    }
                    other => other.map(|_| ()),
                };
                sealing.and_then(|_| self.db.job_ready(id, pinned, checks).map(|_| ()))
            }
            Err(e) if e.kind() == ErrorKind::Cancelled && self.stop.load(Ordering::SeqCst) => {
                log.line("interrupted: the agent is stopping; queued for the next one");
                self.db.move_job(id, JobState::Queued, None).map(|_| ())
            }
            Err(e) => {
                let to = if e.kind() == ErrorKind::Cancelled {
                    JobState::Cancelled
                } else {
                    JobState::Failed
                };
                log.line(&format!("{to}: {e}"));
                if let Some(h) = e.hint_text() {
                    log.line(&format!("hint: {h}"));
                }
                self.db.job_failed(id, to, &e).map(|_| ())
            }
        };
        if let Err(e) = outcome {
            tracing::error!("job {id}: cannot record its end: {e}");
        }
        if let Ok(mut r) = self.running.lock() {
            r.remove(&id);
        }
        self.touch();
    }

    /// A mirror job: the version `spec.source` names, copied to destination `to`. It
    /// runs to its end once started (a copy has no cancel point; what it copied stays).
    fn mirror(
        &self,
        spec: &JobSpec,
        to: &str,
        progress: &dyn sealvol_core::progress::Progress,
    ) -> Result<String> {
        let r = sealvol_core::refs::Ref::parse(&spec.source)?;
        let dest = self.mirrors()?.open(to)?;
        let report = sealvol_core::mirror::mirror(&self.repo, &dest, &r, progress)?;
        progress.note(&match report.new {
            true => format!(
                "mirrored to {to}: {} file(s), {} chunk(s) copied ({} bytes), {} already there",
                report.files_copied,
                report.chunks_copied,
                report.bytes_copied,
                report.chunks_present
            ),
            false => format!("{to} already held the version: nothing copied"),
        });
        Ok(format!("vol:{}@{}", report.volume, report.digest))
    }

    fn mirrors(&self) -> Result<&Arc<dyn crate::jobs::Mirrors>> {
        self.settings.mirrors.as_ref().ok_or_else(|| {
            Error::invalid("this agent mirrors to nowhere")
                .hint("a server copies versions to the destinations it was started with: `sealvol serve --mirror-to NAME=REPO`")
        })
    }

    /// A mirror job's inputs: a ref that resolves now, a destination this agent has.
    fn check_mirror(&self, spec: &JobSpec, to: &str) -> Result<()> {
        let names = self.mirrors()?.names();
        if !names.iter().any(|n| n == to) {
            return Err(Error::not_found(format!("no mirror destination named {to}"))
                .hint(match names.is_empty() {
                    true => "this server has none: its operator adds them with `serve --mirror-to NAME=REPO`".to_string(),
                    false => format!("this server mirrors to: {}", names.join(", ")),
                }));
        }
        let r = sealvol_core::refs::Ref::parse(&spec.source)?;
        if r.volume.to_string() != spec.volume {
            return Err(Error::invalid(format!(
                "{} is not a version of {}",
                spec.source, spec.volume
            )));
        }
        self.repo.resolve(&r)?;
        Ok(())
    }

    fn check(&self, spec: &JobSpec) -> Result<()> {
        match &spec.mirror_to {
            Some(to) => self.check_mirror(spec, to),
            None => sync::check_spec(spec, &self.state_dir, self.settings.trust),
        }
    }

    /// Refuses to queue `spec` when its namespace or key has as many queued as it may.
    fn admit(&self, spec: &JobSpec, jobs: &[Job]) -> Result<()> {
        let queued: Vec<schedule::Owner> = jobs
            .iter()
            .filter(|j| j.state == JobState::Queued)
            .map(|j| schedule::Owner::of(&j.spec))
            .collect();
        self.settings
            .limits
            .admit(&schedule::Owner::of(spec), queued.iter())
    }

    /// The jobs of `id`'s namespace that start or run before it: running, or queued
    /// earlier (other namespaces' jobs take their own turns).
    fn queued_ahead(&self, id: u64) -> u64 {
        let jobs = self.db.jobs().unwrap_or_default();
        let Some(me) = jobs.iter().find(|j| j.id == id) else {
            return 0;
        };
        let ns = schedule::Owner::of(&me.spec).namespace;
        let queued = jobs
            .iter()
            .filter(|j| {
                j.state == JobState::Queued
                    && j.id < id
                    && schedule::Owner::of(&j.spec).namespace == ns
            })
            .count();
        (self.board().started_in(&ns) + queued) as u64
    }
}

impl JobsApi for Inner {
    fn submit(&self, spec: JobSpec) -> Result<Job> {
        self.check(&spec)?;
        let _one = self.queueing.lock().unwrap_or_else(|p| p.into_inner());
        // The same sync already waiting or running (a killed agent's, requeued) is that
        // job, not a second one.
        let jobs = self.db.jobs()?;
        let same = jobs.iter().rev().find(|j| {
            matches!(
                j.state,
                JobState::Queued | JobState::Running | JobState::Sealing
            ) && j.spec == spec
        });
        if let Some(j) = same {
            self.poke();
            return Ok(j.clone());
        }
        self.admit(&spec, &jobs)?;
        let job = self.db.add_job(spec)?;
        JobLog::new(&self.state_dir, job.id).line(&match &job.spec.mirror_to {
            Some(to) => format!("queued: mirror {} to {to}", job.spec.source),
            None => format!("queued: {} -> {}", job.spec.source, job.spec.volume),
        });
        self.poke();
        Ok(job)
    }

    fn list(&self) -> Result<Vec<Job>> {
        self.touch();
        self.db.jobs()
    }

    fn show(&self, id: u64) -> Result<Job> {
        self.touch();
        self.db.job(id)
    }

    fn cancel(&self, id: u64) -> Result<Job> {
        self.touch();
        let job = self.db.job(id)?;
        match job.state {
            JobState::Queued => {
                JobLog::new(&self.state_dir, id).line("cancelled by the user while queued");
                self.db.move_job(
                    id,
                    JobState::Cancelled,
                    Some("cancelled by the user".into()),
                )
            }
            JobState::Running => {
                let flag = self
                    .running
                    .lock()
                    .ok()
                    .and_then(|r| r.get(&id).map(|run| run.cancel.clone()));
                let Some(flag) = flag else {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        format!("job {id} is RUNNING in no agent"),
                    ));
                };
                JobLog::new(&self.state_dir, id).line("cancel requested by the user");
                flag.store(true, Ordering::SeqCst);
                // Every request of the sync races the flag (a backoff sleep, a slow read
                // included), so the record says CANCELLED within a moment; only sealing,
                // which cannot be cancelled, takes longer.
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    let j = self.db.job(id)?;
                    if j.state != JobState::Running || Instant::now() > deadline {
                        return Ok(j);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            _ => Err(crate::jobs::bad_move(&job, JobState::Cancelled)),
        }
    }

    fn retry(&self, id: u64) -> Result<Job> {
        let job = self.db.job(id)?;
        if !job.state.can_become(JobState::Queued) || job.state == JobState::Running {
            return Err(crate::jobs::bad_move(&job, JobState::Queued));
        }
        self.check(&job.spec)?;
        let _one = self.queueing.lock().unwrap_or_else(|p| p.into_inner());
        self.admit(&job.spec, &self.db.jobs()?)?;
        let job = self.db.move_job(id, JobState::Queued, None)?;
        JobLog::new(&self.state_dir, id).line("queued again by the user");
        self.poke();
        Ok(job)
    }

    fn event(&self, id: u64) -> Result<JobEvent> {
        let job = self.db.job(id)?;
        let ahead = if job.state == JobState::Queued {
            self.queued_ahead(id)
        } else {
            0
        };
        let live = self
            .running
            .lock()
            .ok()
            .and_then(|r| r.get(&id).map(|run| run.live.clone()));
        Ok(match live {
            Some(l) => l.snapshot(job, ahead),
            None => live::still(job, ahead),
        })
    }

    fn follow(&self, id: u64, on_event: &mut dyn FnMut(&JobEvent)) -> Result<Job> {
        loop {
            self.touch();
            let ev = self.event(id)?;
            on_event(&ev);
            if ev.job.state.is_final() {
                return Ok(ev.job);
            }
            if self.stop.load(Ordering::SeqCst) {
                return Err(Error::new(ErrorKind::Io, "the agent stopped"));
            }
            std::thread::sleep(TICK);
        }
    }

    fn logs(&self, id: u64) -> Result<String> {
        self.touch();
        self.db.job(id)?;
        crate::log::read(&self.state_dir, id)
    }

    fn add_watch(&self, spec: WatchSpec, owner: Option<u32>) -> Result<Watch> {
        Inner::add_watch(self, spec, owner)
    }
    fn watches(&self) -> Result<Vec<WatchView>> {
        self.watch_list()
    }
    fn watch_view(&self, id: u64) -> Result<WatchView> {
        Inner::watch_view(self, id)
    }
    fn stop_watch(&self, id: u64) -> Result<Watch> {
        Inner::stop_watch(self, id)
    }
}

#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub batch_bytes: u64,
    pub streams: usize,
    /// Run queued jobs. Off for a process that hosts the agent only to answer questions
    /// (`sealvol jobs ls` with no agent running): it must not start work it will not
    /// stay to finish.
    pub run_queue: bool,
    /// Whose jobs these are (`sync::Trust`).
    pub trust: sync::Trust,
    /// Where mirror jobs may copy versions; none: this agent runs no mirror job.
    pub mirrors: Option<Arc<dyn crate::jobs::Mirrors>>,
    /// How many jobs run at once and wait, per namespace and key (`schedule`).
    pub limits: schedule::Limits,
    /// Who watches which syncs' files go by (`sync::TapFor`); none: no one does.
    pub taps: Option<Arc<dyn sync::TapFor>>,
}
