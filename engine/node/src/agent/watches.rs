//! The agent's watches: each active one runs on its own thread (`watch::runner`). An
//! agent that starts takes up the detached watches a stopped agent left, and stops the
//! foreground ones whose command has ended.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::inner::Inner;
use super::watching::Running;
use crate::log::JobLog;
use crate::watch::live::{self, Live};
use crate::watch::runner;
use crate::watch::{Owner, Watch, WatchSpec, WatchState, WatchView};
use sealvol_core::error::{Error, ErrorKind, Result};

/// How long `stop` waits for a watch's push to notice.
const STOP_PATIENCE: Duration = Duration::from_secs(30);

impl Inner {
    /// Takes up the watches a stopped agent left.
    pub(super) fn resume_watches(&self) -> Result<()> {
        for w in self.db.watches()? {
            if w.state != WatchState::Active {
                continue;
            }
            match &w.owner {
                Some(o) if o.gone() => {
                    let reason = format!("the command that ran it (pid {}) ended", o.pid);
                    JobLog::watch(&self.state_dir, w.id).line(&format!("stopped: {reason}"));
                    self.db.update_watch(w.id, |w| {
                        w.state = WatchState::Stopped;
                        w.reason = Some(reason);
                        Ok(())
                    })?;
                }
                _ => {
                    JobLog::watch(&self.state_dir, w.id).line("taken up by a new agent");
                    self.start_watch(w.id)?;
                }
            }
        }
        Ok(())
    }

    fn start_watch(&self, id: u64) -> Result<()> {
        let Some(inner) = self.me.upgrade() else {
            return Err(Error::new(ErrorKind::Io, "the agent is stopping"));
        };
        let live = Arc::new(Live::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (l, s) = (live.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("sealvol-watch-{id}"))
            .spawn(move || {
                let ctx = runner::Context {
                    repo: &inner.repo,
                    db: inner.db.as_ref(),
                    state_dir: &inner.state_dir,
                    stop: &s,
                    live: &l,
                };
                if let Err(e) = runner::run(id, &ctx) {
                    tracing::error!("watch {id}: {e}");
                    JobLog::watch(&inner.state_dir, id).line(&format!("ended: {e}"));
                }
                inner.touch();
            })
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start watch {id}: {e}")))?;
        if let Ok(mut r) = self.watches.running.lock() {
            r.insert(
                id,
                Running {
                    live,
                    stop,
                    thread: Some(thread),
                },
            );
        }
        Ok(())
    }

    pub(super) fn add_watch(&self, spec: WatchSpec, owner: Option<u32>) -> Result<Watch> {
        self.touch();
        // sealvol writes into these itself: a watch of them would hear its own pushes.
        spec.check(&[Path::new(self.repo.location()), &self.state_dir])?;
        let owner =
            match owner {
                Some(pid) => Some(Owner::of(pid).ok_or_else(|| {
                    Error::invalid(format!("no process {pid} to run the watch for"))
                })?),
                None => None,
            };
        let same = self
            .db
            .watches()?
            .into_iter()
            .rev()
            .find(|w| w.spec.dir == spec.dir && w.spec.volume == spec.volume);
        let watch = match same {
            Some(w) if w.state == WatchState::Active => {
                if w.spec != spec {
                    return Err(crate::watch::already(&w));
                }
                if self.watches.live(w.id).is_none() {
                    self.start_watch(w.id)?;
                }
                return Ok(w);
            }
            // Stopped: started again, with what it sealed, so nothing is pushed twice.
            Some(w) => {
                let w = self.db.update_watch(w.id, |w| {
                    w.spec = spec;
                    w.owner = owner;
                    w.state = WatchState::Active;
                    w.reason = None;
                    Ok(())
                })?;
                JobLog::watch(&self.state_dir, w.id).line("started again");
                w
            }
            None => {
                let w = self.db.add_watch(|id, now| Watch {
                    id,
                    spec,
                    state: WatchState::Active,
                    owner,
                    created: now.clone(),
                    updated: now,
                    reason: None,
                    sealed: Vec::new(),
                    pushes: Vec::new(),
                })?;
                JobLog::watch(&self.state_dir, w.id)
                    .line(&format!("created: {} -> {}", w.spec.dir, w.spec.volume));
                w
            }
        };
        self.start_watch(watch.id)?;
        Ok(watch)
    }

    pub(super) fn watch_list(&self) -> Result<Vec<WatchView>> {
        self.touch();
        Ok(self
            .db
            .watches()?
            .into_iter()
            .map(|w| self.view_of(w))
            .collect())
    }

    pub(super) fn watch_view(&self, id: u64) -> Result<WatchView> {
        self.touch();
        let w = self.db.watch(id)?;
        Ok(self.view_of(w))
    }

    fn view_of(&self, w: Watch) -> WatchView {
        match (w.state, self.watches.live(w.id)) {
            (WatchState::Active, Some(live)) => live.view(w),
            _ => live::still(w),
        }
    }

    pub(super) fn stop_watch(&self, id: u64) -> Result<Watch> {
        self.touch();
        let w = self.db.watch(id)?;
        if w.state == WatchState::Stopped {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("watch {id} is already stopped"),
            )
            .hint("`sealvol volume watch` with the same folder and volume starts it again"));
        }
        let w = self.db.update_watch(id, |w| {
            w.state = WatchState::Stopped;
            w.reason = Some("stopped by the user".into());
            Ok(())
        })?;
        JobLog::watch(&self.state_dir, id).line("stopped by the user");
        let running = self
            .watches
            .running
            .lock()
            .ok()
            .and_then(|mut r| r.remove(&id));
        if let Some(mut run) = running {
            run.stop.store(true, Ordering::SeqCst);
            let deadline = Instant::now() + STOP_PATIENCE;
            if let Some(t) = run.thread.take() {
                while !t.is_finished() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if t.is_finished() {
                    let _ = t.join();
                }
            }
        }
        Ok(w)
    }
}
