//! The agent: the one process that owns the state database runs sync jobs, as many at
//! once and in the order `schedule` says (a machine's: one at a time, oldest first; a
//! server's: a few, namespaces taking turns), each on a thread of its own, runs every
//! active watch on a thread of its own (`watches`), and
//! answers the other `sealvol` processes over a Unix socket in
//! the state directory (`agent.sock`). The console hosts it when no other agent runs,
//! `sealvol agent` runs it headless, and a foreground sync hosts it for its own job.
//!
//! Holding the database is what makes a process the agent: redb lets one process open
//! it, so two processes can never both think they are. A killed agent leaves its jobs
//! RUNNING or SEALING; the next one queues them again, and they resume (see `sync`).

mod inner;
pub mod live;
pub mod schedule;
pub mod socket;
#[cfg(test)]
mod tests;
mod watches;
mod watching;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::jobs::{Job, JobEvent, JobSpec, JobState, JobsApi};
use crate::log::JobLog;
use crate::state::StateDb;
use crate::watch::{Watch, WatchSpec, WatchView};
use inner::Inner;
pub use inner::{AgentSettings, TICK};
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::repo::Repository;
use sealvol_source::Connector;

pub struct Agent {
    inner: Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    stopper: socket::Stopper,
}

impl Agent {
    /// Becomes the agent for `state_dir`, or returns `None` if another process is.
    pub fn start(
        repo: Repository,
        state_dir: &Path,
        settings: AgentSettings,
        connector: Option<Arc<dyn Connector>>,
    ) -> Result<Option<Agent>> {
        let Some(db) = StateDb::open(state_dir, Duration::ZERO)? else {
            return Ok(None);
        };
        let requeued = db.requeue_interrupted()?;
        for id in &requeued {
            JobLog::new(state_dir, *id).line("the agent that ran this job stopped; queued again");
        }
        let inner = Arc::new_cyclic(|me| Inner {
            me: me.clone(),
            repo,
            connector,
            db: Arc::new(db),
            state_dir: state_dir.to_path_buf(),
            settings,
            running: Mutex::new(HashMap::new()),
            queueing: Mutex::new(()),
            board: Mutex::new(schedule::Board::default()),
            watches: Default::default(),
            wake: Condvar::new(),
            wake_lock: Mutex::new(0),
            stop: AtomicBool::new(false),
            busy_at: Mutex::new(Instant::now()),
        });
        let (listener, stopper) = socket::serve(inner.clone())?;
        let mut threads = vec![listener];
        if inner.settings.run_queue {
            inner.resume_watches()?;
            let worker = inner.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("sealvol-agent".into())
                    .spawn(move || worker.dispatch())
                    .map_err(|e| {
                        Error::new(ErrorKind::Io, format!("cannot start the agent: {e}"))
                    })?,
            );
        }
        Ok(Some(Agent {
            inner,
            threads,
            stopper,
        }))
    }

    /// True when nothing runs (no job, no watch), nothing waits, and no request came
    /// for `idle`.
    pub fn idle_for(&self, idle: Duration) -> bool {
        if self.inner.watches.any() {
            return false;
        }
        let quiet = self
            .inner
            .busy_at
            .lock()
            .map(|t| t.elapsed() >= idle)
            .unwrap_or(false);
        quiet
            && self
                .inner
                .running
                .lock()
                .map(|r| r.is_empty())
                .unwrap_or(false)
            && self
                .inner
                .db
                .jobs()
                .map(|j| !j.iter().any(|j| j.state == JobState::Queued))
                .unwrap_or(false)
    }
}

impl Drop for Agent {
    /// Stops: a job still running is interrupted and stays queued for the next agent.
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        if let Ok(r) = self.inner.running.lock() {
            for run in r.values() {
                run.cancel.store(true, Ordering::SeqCst);
            }
        }
        self.inner.wake.notify_all();
        self.inner.watches.halt();
        self.stopper.stop();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        socket::remove(&self.inner.state_dir);
    }
}

impl JobsApi for Agent {
    fn submit(&self, spec: JobSpec) -> Result<Job> {
        self.inner.submit(spec)
    }
    fn list(&self) -> Result<Vec<Job>> {
        self.inner.list()
    }
    fn show(&self, id: u64) -> Result<Job> {
        self.inner.show(id)
    }
    fn cancel(&self, id: u64) -> Result<Job> {
        self.inner.cancel(id)
    }
    fn retry(&self, id: u64) -> Result<Job> {
        self.inner.retry(id)
    }
    fn event(&self, id: u64) -> Result<JobEvent> {
        self.inner.event(id)
    }
    fn follow(&self, id: u64, on_event: &mut dyn FnMut(&JobEvent)) -> Result<Job> {
        self.inner.follow(id, on_event)
    }
    fn logs(&self, id: u64) -> Result<String> {
        self.inner.logs(id)
    }
    fn add_watch(&self, spec: WatchSpec, owner: Option<u32>) -> Result<Watch> {
        self.inner.add_watch(spec, owner)
    }
    fn watches(&self) -> Result<Vec<WatchView>> {
        self.inner.watch_list()
    }
    fn watch_view(&self, id: u64) -> Result<WatchView> {
        self.inner.watch_view(id)
    }
    fn stop_watch(&self, id: u64) -> Result<Watch> {
        self.inner.stop_watch(id)
    }
}
