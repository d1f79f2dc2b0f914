//! Watches: a folder a trainer writes checkpoints into becomes sealed versions, each
//! pushed once it has settled (`settle`), only its new chunks written, tags moved, and
//! older versions moved to the trash by the retention rules (`retention`). `names`
//! says which names are checkpoints, steps and temporary files; `notifier` hears
//! changes (inotify, or polling); `push` pushes one checkpoint and abandons it if it
//! changes meanwhile; `live` is what a running watch is doing, for those who ask.
//!
//! A watch is a durable record of the agent (`Watch`, in the state database), like a
//! sync job: the agent runs every active one on its own thread (`runner`), and an
//! agent that starts takes up the detached ones a stopped agent left, catching up on
//! the checkpoints written meanwhile. What a watch sealed is in its record, keyed by
//! checkpoint folder, so no checkpoint is pushed twice, and a checkpoint that
//! retention trashed is not brought back by a later catch-up.

pub mod live;
pub mod names;
pub mod notifier;
mod push;
pub mod retention;
pub mod runner;
pub mod settle;

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use names::TagTemplate;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::refs::VolumeName;

/// Where the node keeps its watches' records (the state database, `state.rs`): what a
/// runner reads and updates, and the stat cache its pushes use.
pub trait Records: Send + Sync {
    fn watch(&self, id: u64) -> Result<Watch>;

    /// Changes watch `id`'s record with `change` (called once), returning it changed.
    fn update_watch(
        &self,
        id: u64,
        change: &mut dyn FnMut(&mut Watch) -> Result<()>,
    ) -> Result<Watch>;

    fn stat_cache(&self) -> &dyn sealvol_core::push::StatCache;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// Each subfolder with a step in its name is one checkpoint, pushed once.
    Steps,
    /// The folder itself is the checkpoint, pushed whenever it settles after a change.
    Flat,
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Layout::Steps => "steps",
            Layout::Flat => "flat",
        })
    }
}

/// What a watch does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchSpec {
    /// The watched folder, absolute (it may not exist yet).
    pub dir: String,
    /// `NS/NAME`.
    pub volume: String,
    /// Tags as given: `latest` moves to each newer checkpoint, `step-{step}` names one.
    #[serde(default)]
    pub tags: Vec<String>,
    pub layout: Layout,
    pub settle_secs: f64,
    #[serde(default)]
    pub keep_last: Option<u32>,
    #[serde(default)]
    pub keep_every: Option<u64>,
    /// Poll instead of waiting for events (`--poll`).
    #[serde(default)]
    pub poll: bool,
}

/// The shortest settle accepted: below it a writer's pause between two blocks passes
/// for the end of a checkpoint.
pub const MIN_SETTLE: Duration = Duration::from_millis(500);

impl WatchSpec {
    pub fn settle(&self) -> Duration {
        Duration::from_secs_f64(self.settle_secs)
    }

    pub fn templates(&self) -> Result<Vec<TagTemplate>> {
        self.tags.iter().map(|t| TagTemplate::parse(t)).collect()
    }

    /// Checks every input before a watch exists, so that a bad one leaves no trace.
    /// `forbidden` are folders a watch must not be inside of (the repository, the
    /// state directory): pushing into them would feed the watch its own writes.
    pub fn check(&self, forbidden: &[&Path]) -> Result<()> {
        VolumeName::parse(&self.volume)?;
        let templates = self.templates()?;
        if self.layout == Layout::Flat {
            if let Some(t) = templates.iter().find(|t| t.per_step()) {
                return Err(Error::invalid(format!(
                    "tag {:?} needs a step, and --layout flat has none",
                    t.as_str()
                ))
                .hint("use --layout steps for folders named by step (checkpoint-500/), or a tag without {step}"));
            }
            if self.keep_every.is_some() {
                return Err(Error::invalid("--keep-every needs --layout steps")
                    .hint("a flat folder has no step numbers; use --keep-last N"));
            }
        }
        if self.settle() < MIN_SETTLE {
            return Err(Error::invalid(format!(
                "--settle {} is too short",
                humantime::format_duration(self.settle())
            ))
            .hint("use at least 500ms: a shorter one would take a writer's pause for a finished checkpoint"));
        }
        if self.keep_last == Some(0) {
            return Err(Error::invalid("--keep-last 0 would trash every checkpoint")
                .hint("keep at least one: --keep-last 1"));
        }
        if self.keep_every == Some(0) {
            return Err(Error::invalid("--keep-every 0 is not a step interval")
                .hint("--keep-every K keeps the checkpoints whose step is a multiple of K"));
        }
        let dir = Path::new(&self.dir);
        if !dir.is_absolute() {
            return Err(Error::invalid(format!(
                "{} is not an absolute path",
                self.dir
            )));
        }
        match std::fs::metadata(dir) {
            Ok(m) if !m.is_dir() => {
                return Err(
                    Error::invalid(format!("{} is a file, not a folder", self.dir))
                        .hint("watch the folder the checkpoints are written into"),
                );
            }
            _ => {}
        }
        // Compared as the kernel names them; one that does not exist yet holds nothing.
        for f in forbidden.iter().filter_map(|f| f.canonicalize().ok()) {
            if dir.starts_with(&f) || f.starts_with(dir) {
                return Err(Error::invalid(format!(
                    "{} overlaps {}, which sealvol itself writes to",
                    self.dir,
                    f.display()
                ))
                .hint("watch the trainer's output folder, outside the repository and the state directory"));
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WatchState {
    Active,
    Stopped,
}

impl std::fmt::Display for WatchState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WatchState::Active => "ACTIVE",
            WatchState::Stopped => "STOPPED",
        })
    }
}

/// A process, told apart from a later one that reuses its pid by when it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// Milliseconds since the epoch.
    pub started_ms: u64,
}

impl Owner {
    /// Process `pid` as it is now; `None` if there is none.
    pub fn of(pid: u32) -> Option<Owner> {
        let started = sealvol_core::store::process_started(pid)?;
        let started_ms = started
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_millis() as u64;
        Some(Owner { pid, started_ms })
    }

    pub fn gone(&self) -> bool {
        Owner::of(self.pid).is_none_or(|now| now.started_ms.abs_diff(self.started_ms) > 1000)
    }
}

/// A checkpoint the watch sealed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedCheckpoint {
    /// The checkpoint folder's name in the watched folder; `.` for a flat watch.
    pub name: String,
    pub step: Option<u64>,
    /// `b3:…`.
    pub digest: String,
    pub sealed_at: String,
    /// Set when retention moved it to the trash.
    #[serde(default)]
    pub trashed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A new version.
    Sealed,
    /// The same files as a version already sealed: nothing new.
    Unchanged,
    /// The checkpoint changed while it was pushed: nothing sealed, tried again.
    Abandoned,
    Failed,
}

/// One push of a watch, for its history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushRecord {
    pub at: String,
    pub name: String,
    pub step: Option<u64>,
    pub outcome: Outcome,
    #[serde(default)]
    pub digest: Option<String>,
    /// The checkpoint's bytes, and those written to the repository (new chunks).
    pub bytes_total: u64,
    pub bytes_new: u64,
    /// Files read, and those the stat cache let the push skip.
    pub files_read: u64,
    pub files_unchanged: u64,
    /// How long the push took.
    pub push_secs: f64,
    /// From the checkpoint's last write to its seal.
    #[serde(default)]
    pub latency_secs: Option<f64>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Versions retention moved to the trash after this push.
    #[serde(default)]
    pub trashed: Vec<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// How many pushes a record keeps.
pub const HISTORY: usize = 200;

/// A watch's durable record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Watch {
    pub id: u64,
    pub spec: WatchSpec,
    pub state: WatchState,
    /// The foreground command that runs it; `None` for a watch handed to the agent
    /// (`--detach`), which runs until stopped, across agent restarts. A foreground
    /// watch stops when its command ends.
    #[serde(default)]
    pub owner: Option<Owner>,
    pub created: String,
    pub updated: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// In the order they were sealed.
    #[serde(default)]
    pub sealed: Vec<SealedCheckpoint>,
    /// The newest last, at most `HISTORY`.
    #[serde(default)]
    pub pushes: Vec<PushRecord>,
}

impl Watch {
    pub fn sealed(&self, name: &str) -> Option<&SealedCheckpoint> {
        self.sealed.iter().rev().find(|s| s.name == name)
    }

    /// The highest step sealed so far.
    pub fn top_step(&self) -> Option<u64> {
        self.sealed.iter().filter_map(|s| s.step).max()
    }

    pub fn last_sealed(&self) -> Option<&SealedCheckpoint> {
        self.sealed.last()
    }

    pub fn push_record(&mut self, p: PushRecord) {
        self.pushes.push(p);
        if self.pushes.len() > HISTORY {
            let extra = self.pushes.len() - HISTORY;
            self.pushes.drain(..extra);
        }
    }
}

/// What a watch is doing right now (not stored: the runner publishes it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// The folder does not exist yet.
    Waiting {
        why: String,
    },
    /// A checkpoint was written to; it is pushed once it has been quiet long enough.
    Settling {
        name: String,
        left_secs: f64,
        why: String,
    },
    Pushing {
        name: String,
        bytes_done: u64,
        bytes_total: u64,
    },
    /// Everything seen is sealed.
    Idle,
    /// The last push failed; it is tried again after `retry_secs`, or at the next change.
    Failed {
        reason: String,
        retry_secs: f64,
    },
    Stopped,
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |s: &f64| {
            humantime::format_duration(Duration::from_millis((s * 10.0).round() as u64 * 100))
        };
        match self {
            Phase::Waiting { why } => write!(f, "waiting: {why}"),
            Phase::Settling {
                name,
                left_secs,
                why,
            } => {
                write!(f, "settling {name}: {} left ({why})", secs(left_secs))
            }
            Phase::Pushing {
                name,
                bytes_done,
                bytes_total,
            } => {
                let pct = (bytes_done * 100).checked_div(*bytes_total).unwrap_or(100);
                write!(f, "pushing {name}: {pct}%")
            }
            Phase::Idle => f.write_str("idle"),
            Phase::Failed { reason, retry_secs } => {
                write!(f, "failed: {reason} (again in {})", secs(retry_secs))
            }
            Phase::Stopped => f.write_str("stopped"),
        }
    }
}

/// A watch with what it is doing: what `watch show` and the console display.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchView {
    pub watch: Watch,
    /// What it is doing now.
    pub now: Phase,
    /// How changes are seen: `inotify`, or polling and why.
    #[serde(default)]
    pub notifier: Option<String>,
    /// Checkpoints seen and not sealed yet, in the order they will be pushed.
    #[serde(default)]
    pub pending: Vec<String>,
}

pub(crate) fn not_found(id: u64) -> Error {
    Error::not_found(format!("no watch {id}")).hint("`sealvol watch ls` lists them")
}

pub(crate) fn already(w: &Watch) -> Error {
    Error::new(
        ErrorKind::Conflict,
        format!(
            "{} is already watched into {} by watch {}, with other options",
            w.spec.dir, w.spec.volume, w.id
        ),
    )
    .hint(format!("stop it first: `sealvol watch stop {}`", w.id))
}
