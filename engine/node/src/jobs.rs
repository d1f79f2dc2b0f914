//! Durable sync job records, in the state database: what to sync where, and how far it
//! got. A job moves QUEUED → RUNNING → SEALING → READY, or ends FAILED or CANCELLED with
//! the reason; an agent that starts finds RUNNING and SEALING jobs of a dead agent and
//! queues them again, so they resume. Records hold a secret's name, never its value.

use serde::{Deserialize, Serialize};

use crate::watch::{Watch, WatchSpec, WatchView};
use sealvol_core::error::{Error, ErrorKind, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum JobState {
    Queued,
    Running,
    Sealing,
    Ready,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Ready | JobState::Failed | JobState::Cancelled
        )
    }

    /// The moves a job may make. Retrying is FAILED/CANCELLED → QUEUED; an agent
    /// restart is RUNNING/SEALING → QUEUED.
    pub fn can_become(self, next: JobState) -> bool {
        use JobState::*;
        matches!(
            (self, next),
            (Queued, Running | Cancelled)
                | (Running, Sealing | Failed | Cancelled | Queued)
                | (Sealing, Ready | Failed | Queued)
                | (Failed | Cancelled, Queued)
        )
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            JobState::Queued => "QUEUED",
            JobState::Running => "RUNNING",
            JobState::Sealing => "SEALING",
            JobState::Ready => "READY",
            JobState::Failed => "FAILED",
            JobState::Cancelled => "CANCELLED",
        };
        f.write_str(s)
    }
}

/// What a job syncs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The source address, canonical (`sources::SourceUrl`'s form).
    pub source: String,
    /// `NS/NAME`.
    pub volume: String,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The name of a stored secret, never its value.
    #[serde(default)]
    pub secret: Option<String>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Where the source is reached, fixed when the job was queued.
    #[serde(default)]
    pub endpoint: sealvol_source::endpoints::Resolved,
    /// A mirror job instead of a sync: the name of the destination (one of the agent's
    /// `Mirrors`) the version `source` names (a ref) is copied to, tag and all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_to: Option<String>,
    /// On a server: the name of the key that started it. The job acts for that key,
    /// and ends when the key is revoked (`sealvol_serve::jobs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_by: Option<String>,
}

/// Where an agent may copy versions to (`serve --mirror-to NAME=REPO`): destinations
/// by name, so that a job names one the operator gave and never an address of its own.
pub trait Mirrors: Send + Sync {
    /// The destinations' names, sorted.
    fn names(&self) -> Vec<String>;
    /// Opens destination `name`.
    fn open(&self, name: &str) -> Result<sealvol_core::repo::Repository>;
}

impl std::fmt::Debug for dyn Mirrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mirrors({})", self.names().join(", "))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobProgress {
    pub bytes_done: u64,
    pub bytes_total: u64,
    pub files_done: u64,
    pub files_total: u64,
    pub chunks_new: u64,
    pub chunks_reused: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    pub id: u64,
    pub spec: JobSpec,
    pub state: JobState,
    /// RFC 3339, UTC.
    pub created: String,
    pub updated: String,
    /// How many times it has been started.
    pub attempts: u32,
    /// Why it failed or was cancelled.
    #[serde(default)]
    pub reason: Option<String>,
    /// The error that failed it, with its kind (for exit codes) and hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<sealvol_core::error::WireError>,
    /// The pinned ref, once READY.
    #[serde(default)]
    pub sealed: Option<String>,
    /// Once READY: how many files passed each set of checks of the source's own hashes
    /// (`sha256`, `git-blob-sha1`, `md5`, `crc32c`; `unchecked` when the source gave
    /// none), as the version's provenance records them by path.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub checks: std::collections::BTreeMap<String, u64>,
    #[serde(default)]
    pub progress: JobProgress,
}

/// A live view of a job, published by the agent about four times a second while the
/// job runs (and once for a job that waits or has ended).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    pub job: Job,
    /// Bytes per second over the last few seconds.
    pub rate: u64,
    /// Seconds left at that rate.
    pub eta_secs: Option<u64>,
    /// Bytes per second, one sample a second, oldest first (up to a minute).
    pub rate_history: Vec<u64>,
    /// A window of the job's files around the one being read.
    pub files: Vec<FileRow>,
    /// Jobs queued ahead of this one.
    pub queued_ahead: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRow {
    pub path: String,
    pub size: u64,
    pub state: FileState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileState {
    /// Already stored by an earlier run: not fetched.
    Kept,
    Done,
    Reading,
    Waiting,
}

/// What the CLI and the console can ask of the agent, whether it runs in this process
/// or in another one behind the socket: sync jobs, and watches.
pub trait JobsApi: Send + Sync {
    /// Queues a sync; the agent starts it when it is at the head of the queue.
    fn submit(&self, spec: JobSpec) -> Result<Job>;
    /// Every job, newest first.
    fn list(&self) -> Result<Vec<Job>>;
    fn show(&self, id: u64) -> Result<Job>;
    /// Stops a queued or running job; it ends CANCELLED.
    fn cancel(&self, id: u64) -> Result<Job>;
    /// Queues a failed or cancelled job again.
    fn retry(&self, id: u64) -> Result<Job>;
    /// The current live view of a job.
    fn event(&self, id: u64) -> Result<JobEvent>;
    /// Calls `on_event` with live views until the job ends; returns its final record.
    fn follow(&self, id: u64, on_event: &mut dyn FnMut(&JobEvent)) -> Result<Job>;
    /// What happened to the job, in words, one line each (`log.rs`).
    fn logs(&self, id: u64) -> Result<String>;
    /// Starts a watch (or starts again a stopped one of the same folder and volume,
    /// with what it sealed). `owner`: the pid of the foreground command it ends with;
    /// `None` hands it to the agent for good (`--detach`).
    fn add_watch(&self, spec: WatchSpec, owner: Option<u32>) -> Result<Watch>;
    /// Every watch, oldest first, with what it is doing.
    fn watches(&self) -> Result<Vec<WatchView>>;
    fn watch_view(&self, id: u64) -> Result<WatchView>;
    /// Stops a watch; what it sealed stays.
    fn stop_watch(&self, id: u64) -> Result<Watch>;
}

/// Jobs from one agent, watches from another: on a remote engine the jobs are the
/// server's, while a watch reads a folder, so it runs on the machine that has it.
pub struct Split {
    pub jobs: std::sync::Arc<dyn JobsApi>,
    pub watches: std::sync::Arc<dyn JobsApi>,
}

impl JobsApi for Split {
    fn submit(&self, spec: JobSpec) -> Result<Job> {
        self.jobs.submit(spec)
    }
    fn list(&self) -> Result<Vec<Job>> {
        self.jobs.list()
    }
    fn show(&self, id: u64) -> Result<Job> {
        self.jobs.show(id)
    }
    fn cancel(&self, id: u64) -> Result<Job> {
        self.jobs.cancel(id)
    }
    fn retry(&self, id: u64) -> Result<Job> {
        self.jobs.retry(id)
    }
    fn event(&self, id: u64) -> Result<JobEvent> {
        self.jobs.event(id)
    }
    fn follow(&self, id: u64, on_event: &mut dyn FnMut(&JobEvent)) -> Result<Job> {
        self.jobs.follow(id, on_event)
    }
    fn logs(&self, id: u64) -> Result<String> {
        self.jobs.logs(id)
    }
    fn add_watch(&self, spec: WatchSpec, owner: Option<u32>) -> Result<Watch> {
        self.watches.add_watch(spec, owner)
    }
    fn watches(&self) -> Result<Vec<WatchView>> {
        self.watches.watches()
    }
    fn watch_view(&self, id: u64) -> Result<WatchView> {
        self.watches.watch_view(id)
    }
    fn stop_watch(&self, id: u64) -> Result<Watch> {
        self.watches.stop_watch(id)
    }
}

pub fn not_found(id: u64) -> Error {
    Error::not_found(format!("no job {id}")).hint("`sealvol jobs ls` lists them")
}

pub(crate) fn bad_move(job: &Job, to: JobState) -> Error {
    let hint = match to {
        JobState::Queued => "only FAILED or CANCELLED jobs can be retried",
        JobState::Cancelled => "only QUEUED or RUNNING jobs can be cancelled",
        _ => "this is a bug in the agent: please report it",
    };
    Error::new(
        ErrorKind::Conflict,
        format!("job {} is {}; it cannot become {to}", job.id, job.state),
    )
    .hint(hint)
}

#[cfg(test)]
mod tests {
    use super::JobState::*;

    #[test]
    fn only_the_documented_moves_are_allowed() {
        assert!(Queued.can_become(Running));
        assert!(Running.can_become(Sealing));
        assert!(Sealing.can_become(Ready));
        assert!(Failed.can_become(Queued));
        assert!(Running.can_become(Queued), "an agent restart requeues");
        assert!(!Ready.can_become(Queued), "a sealed job is done");
        assert!(!Ready.can_become(Failed));
        assert!(!Queued.can_become(Ready));
        assert!(
            !Sealing.can_become(Cancelled),
            "sealing is the commit; it finishes"
        );
        assert!(Ready.is_final() && Failed.is_final() && !Sealing.is_final());
    }
}
