//! A running job as the agent sees it: its figures (kept in the job record twice a
//! second), its rate over the last seconds, and which file it is on.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::jobs::{FileRow, FileState, Job, JobEvent, JobProgress, JobState};
use crate::log::JobLog;
use crate::state::StateDb;
use sealvol_core::progress::Progress;

const RECORD_EVERY: Duration = Duration::from_millis(500);
const RATE_WINDOW: Duration = Duration::from_secs(5);
const HISTORY: usize = 60;

pub struct LiveJob {
    id: u64,
    db: Arc<StateDb>,
    log: JobLog,
    st: Mutex<State>,
}

#[derive(Default)]
struct State {
    figures: JobProgress,
    recorded: Option<Instant>,
    /// (when, bytes done), for the rate.
    samples: VecDeque<(Instant, u64)>,
    history: VecDeque<u64>,
    last_second: Option<(Instant, u64)>,
    /// The files in the order they are processed; the first `kept` were stored before.
    plan: Vec<(String, u64)>,
    kept: usize,
}

impl LiveJob {
    pub fn new(id: u64, db: Arc<StateDb>, log: JobLog) -> LiveJob {
        LiveJob {
            id,
            db,
            log,
            st: Mutex::new(State::default()),
        }
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let Ok(mut st) = self.st.lock() else { return };
        f(&mut st);
        let now = Instant::now();
        let done = st.figures.bytes_done;
        if st
            .samples
            .back()
            .is_none_or(|(t, _)| now - *t >= Duration::from_millis(100))
        {
            st.samples.push_back((now, done));
            while st
                .samples
                .front()
                .is_some_and(|(t, _)| now - *t > RATE_WINDOW)
            {
                st.samples.pop_front();
            }
        }
        match st.last_second {
            None => st.last_second = Some((now, done)),
            Some((t, b)) if now - t >= Duration::from_secs(1) => {
                let rate = ((done - b) as f64 / (now - t).as_secs_f64()) as u64;
                st.history.push_back(rate);
                if st.history.len() > HISTORY {
                    st.history.pop_front();
                }
                st.last_second = Some((now, done));
            }
            Some(_) => {}
        }
        if st.recorded.is_none_or(|t| now - t >= RECORD_EVERY) {
            st.recorded = Some(now);
            self.record(&st.figures);
        }
    }

    fn record(&self, figures: &JobProgress) {
        let figures = figures.clone();
        if let Err(e) = self.db.update_job(self.id, |j| {
            j.progress = figures;
            Ok(())
        }) {
            tracing::warn!("cannot record the progress of job {}: {e}", self.id);
        }
    }

    /// Writes the figures now (before a state change).
    pub fn flush(&self) {
        if let Ok(st) = self.st.lock() {
            self.record(&st.figures);
        }
    }

    pub fn log(&self) -> &JobLog {
        &self.log
    }

    /// The live view of `job` (its record, as stored).
    pub fn snapshot(&self, job: Job, queued_ahead: u64) -> JobEvent {
        let Ok(st) = self.st.lock() else {
            return still(job, queued_ahead);
        };
        let rate = match (st.samples.front(), st.samples.back()) {
            (Some((t0, b0)), Some((t1, b1))) if t1 > t0 => {
                ((b1 - b0) as f64 / (*t1 - *t0).as_secs_f64()) as u64
            }
            _ => 0,
        };
        let left = st.figures.bytes_total.saturating_sub(st.figures.bytes_done);
        let eta_secs = (rate > 0 && job.state == JobState::Running).then(|| left / rate);
        let cursor = st.figures.files_done as usize;
        let from = cursor.saturating_sub(3);
        let to = (cursor + 7).min(st.plan.len());
        let files = (from..to)
            .map(|i| FileRow {
                path: st.plan[i].0.clone(),
                size: st.plan[i].1,
                state: if i < st.kept {
                    FileState::Kept
                } else if i < cursor {
                    FileState::Done
                } else if i == cursor {
                    FileState::Reading
                } else {
                    FileState::Waiting
                },
            })
            .collect();
        JobEvent {
            job,
            rate,
            eta_secs,
            rate_history: st.history.iter().copied().collect(),
            files,
            queued_ahead,
        }
    }
}

/// The view of a job that is not running here.
pub fn still(job: Job, queued_ahead: u64) -> JobEvent {
    JobEvent {
        job,
        rate: 0,
        eta_secs: None,
        rate_history: Vec::new(),
        files: Vec::new(),
        queued_ahead,
    }
}

impl Progress for LiveJob {
    fn begin(&self, _phase: &str, bytes: u64, files: u64) {
        self.update(|st| {
            st.figures = JobProgress {
                bytes_total: bytes,
                files_total: files,
                ..JobProgress::default()
            };
            st.samples.clear();
        });
    }

    fn advance(&self, bytes: u64) {
        self.update(|st| st.figures.bytes_done += bytes);
    }

    fn file_done(&self) {
        self.update(|st| st.figures.files_done += 1);
    }

    fn chunks(&self, new: u64, reused: u64) {
        self.update(|st| {
            st.figures.chunks_new += new;
            st.figures.chunks_reused += reused;
        });
    }

    fn plan(&self, files: &[(String, u64)], kept: usize) {
        self.update(|st| {
            st.plan = files.to_vec();
            st.kept = kept;
        });
    }

    fn note(&self, line: &str) {
        self.log.line(line);
    }

    fn sealing(&self) {
        self.flush();
        self.log.line("all files stored; sealing");
        if let Err(e) = self.db.move_job(self.id, JobState::Sealing, None) {
            tracing::warn!("job {}: {e}", self.id);
        }
    }
}
