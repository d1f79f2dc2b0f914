//! One watch at work, on its own thread: waits for the folder, follows its change
//! events, and pushes each checkpoint once it has settled, in step order. A push is
//! abandoned (nothing sealed) when the checkpoint changes while it is read, and tried
//! again after the next settle. After each seal: the record, then retention.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::names::{TagTemplate, has_temporary, is_temporary, step_of};
use super::notifier::{self, Mode, Notifier, Signal};
use super::retention::{self, Kept};
use super::settle::{Fingerprint, writer_under};
use super::{Layout, Outcome, Phase, PushRecord, SealedCheckpoint, Watch, WatchState, WatchView};
use crate::agent::log::JobLog;
use crate::state::StateDb;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::progress::Progress;
use sealvol_core::push::{self, PushOptions, PushReport, SealGuard};
use sealvol_core::refs::{Name, VolumeName};
use sealvol_core::registry::now_rfc3339;
use sealvol_core::repo::Repository;

/// How often the runner looks at its checkpoints when nothing happens.
const TICK: Duration = Duration::from_millis(250);
/// How often the runner wakes when no checkpoint is pending.
const IDLE_TICK: Duration = Duration::from_secs(1);
/// How often a missing folder is looked for.
const LOOK_FOR_DIR: Duration = Duration::from_secs(1);
/// How often the open files of other processes are read for one checkpoint.
const WRITER_CHECK: Duration = Duration::from_secs(1);
/// A failed push is tried again after this, doubling up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How often the process that owns a foreground watch is checked for.
const OWNER_CHECK: Duration = Duration::from_secs(1);

/// What a running watch is doing, shared with whoever asks (`watch show`, the console).
#[derive(Default)]
pub struct Live {
    inner: Mutex<LiveState>,
}

#[derive(Default)]
struct LiveState {
    phase: Option<Phase>,
    notifier: Option<String>,
    pending: Vec<String>,
}

impl Live {
    fn set(&self, phase: Phase) {
        if let Ok(mut s) = self.inner.lock() {
            s.phase = Some(phase);
        }
    }

    fn update(&self, f: impl FnOnce(&mut LiveState)) {
        if let Ok(mut s) = self.inner.lock() {
            f(&mut s);
        }
    }

    /// The record with what its runner is doing now.
    pub fn view(&self, watch: Watch) -> WatchView {
        let s = self.inner.lock().ok();
        let phase = s
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or(Phase::Idle);
        WatchView {
            now: phase,
            notifier: s.as_ref().and_then(|s| s.notifier.clone()),
            pending: s.map(|s| s.pending.clone()).unwrap_or_default(),
            watch,
        }
    }
}

/// A record with no runner: stopped, or waiting for an agent.
pub fn still(watch: Watch) -> WatchView {
    let phase = match watch.state {
        WatchState::Stopped => Phase::Stopped,
        WatchState::Active => Phase::Waiting {
            why: "no agent runs it yet".into(),
        },
    };
    WatchView {
        watch,
        now: phase,
        notifier: None,
        pending: Vec::new(),
    }
}

pub struct Context<'a> {
    pub repo: &'a Repository,
    pub db: &'a StateDb,
    pub state_dir: &'a Path,
    pub stop: &'a AtomicBool,
    pub live: &'a Live,
}

/// Runs watch `id` until `ctx.stop` is set or the process that owns it ends.
pub fn run(id: u64, ctx: &Context) -> Result<()> {
    let watch = ctx.db.watch(id)?;
    let mut r = Runner::new(watch, ctx)?;
    r.run();
    Ok(())
}

struct Candidate {
    path: PathBuf,
    step: Option<u64>,
    /// The newest change event seen for it.
    last_event: Option<Instant>,
    /// Not looked at again before this.
    not_before: Instant,
    /// Its stamps could not tell (a clock ahead): the fingerprint and since when it held.
    stable: Option<(Fingerprint, Instant)>,
    /// It cannot be sealed as it is (a socket inside, say): left until it changes.
    blocked: bool,
}

struct Runner<'a> {
    ctx: &'a Context<'a>,
    watch: Watch,
    volume: VolumeName,
    templates: Vec<TagTemplate>,
    dir: PathBuf,
    settle: Duration,
    log: JobLog,
    tx: Sender<Signal>,
    rx: Receiver<Signal>,
    notifier: Option<(Notifier, Mode)>,
    /// The folder as the kernel names it (events and `/proc` use it).
    canon: PathBuf,
    /// Which folder that was when it was opened: (device, inode).
    opened: (u64, u64),
    candidates: BTreeMap<String, Candidate>,
    backoff: Duration,
    /// Sealed checkpoints found changed afterwards, said once each.
    noted: std::collections::HashSet<String>,
    said_polling: bool,
    owner_checked: Instant,
}

impl<'a> Runner<'a> {
    fn new(watch: Watch, ctx: &'a Context<'a>) -> Result<Runner<'a>> {
        let volume = VolumeName::parse(&watch.spec.volume)?;
        let templates = watch.spec.templates()?;
        let (tx, rx) = crossbeam_channel::unbounded();
        Ok(Runner {
            log: JobLog::watch(ctx.state_dir, watch.id),
            dir: PathBuf::from(&watch.spec.dir),
            settle: watch.spec.settle(),
            volume,
            templates,
            ctx,
            watch,
            tx,
            rx,
            notifier: None,
            canon: PathBuf::new(),
            opened: (0, 0),
            candidates: BTreeMap::new(),
            backoff: FIRST_BACKOFF,
            noted: Default::default(),
            said_polling: false,
            owner_checked: Instant::now(),
        })
    }

    fn stopping(&self) -> bool {
        self.ctx.stop.load(Ordering::SeqCst)
    }

    fn run(&mut self) {
        self.log.line(&format!(
            "watching {} into {} (agent pid {})",
            self.watch.spec.dir,
            self.watch.spec.volume,
            std::process::id()
        ));
        while !self.stopping() {
            if self.owner_gone() {
                let reason = "the command that ran this watch ended";
                self.log.line(&format!("stopped: {reason}"));
                let _ = self.ctx.db.update_watch(self.watch.id, |w| {
                    w.state = WatchState::Stopped;
                    w.reason = Some(reason.into());
                    Ok(())
                });
                break;
            }
            if self.notifier.is_none() && !self.open() {
                self.ctx.live.set(Phase::Waiting {
                    why: format!("{} does not exist yet", self.watch.spec.dir),
                });
                self.sleep(LOOK_FOR_DIR);
                continue;
            }
            // Nothing pending: only the stop flag, the owner and the folder to look at.
            let wait = if self.candidates.is_empty() {
                IDLE_TICK
            } else {
                TICK
            };
            match self.rx.recv_timeout(wait) {
                Ok(sig) => {
                    self.hear(sig);
                    while let Ok(sig) = self.rx.try_recv() {
                        self.hear(sig);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if self.notifier.is_none() {
                continue;
            }
            // Gone, or replaced by another folder of the same name, whose changes the
            // old watch would never hear.
            if identity(&self.dir) != Some(self.opened) {
                self.log.line(&format!(
                    "{} is gone or was replaced; waiting for it",
                    self.watch.spec.dir
                ));
                self.notifier = None;
                self.candidates.clear();
                continue;
            }
            self.next();
        }
        self.ctx.live.set(Phase::Stopped);
    }

    fn sleep(&self, d: Duration) {
        let until = Instant::now() + d;
        while !self.stopping() && Instant::now() < until {
            std::thread::sleep(TICK.min(until - Instant::now()));
        }
    }

    fn owner_gone(&mut self) -> bool {
        let Some(owner) = &self.watch.owner else {
            return false;
        };
        if self.owner_checked.elapsed() < OWNER_CHECK {
            return false;
        }
        self.owner_checked = Instant::now();
        owner.gone()
    }

    /// Starts following the folder once it exists, and takes stock of what is there.
    fn open(&mut self) -> bool {
        if !self.dir.is_dir() {
            return false;
        }
        let (Ok(canon), Some(opened)) = (self.dir.canonicalize(), identity(&self.dir)) else {
            return false;
        };
        self.canon = canon;
        self.opened = opened;
        let forced = self.watch.spec.poll.then(|| "--poll was given".to_string());
        match notifier::start(&self.canon, forced, self.settle, self.tx.clone()) {
            Ok((n, mode)) => self.use_notifier(n, mode),
            Err(e) => {
                self.ctx.live.set(Phase::Failed {
                    reason: e.clone(),
                    retry_secs: LOOK_FOR_DIR.as_secs_f64(),
                });
                self.log.line(&format!("cannot follow changes: {e}"));
                return false;
            }
        }
        self.take_stock();
        true
    }

    fn use_notifier(&mut self, n: Notifier, mode: Mode) {
        if let Mode::Polling { .. } = &mode
            && !self.said_polling
        {
            self.said_polling = true;
            self.log.line(&format!("change events: {mode}"));
            tracing::warn!("watch {}: {mode}", self.watch.id);
        }
        let text = mode.to_string();
        self.ctx.live.update(|s| s.notifier = Some(text));
        self.notifier = Some((n, mode));
    }

    /// Every checkpoint in the folder that is not sealed yet becomes a candidate: the
    /// catch-up after a restart, and the rescan after lost events.
    fn take_stock(&mut self) {
        match self.watch.spec.layout {
            Layout::Flat => self.mark(".", None),
            Layout::Steps => {
                let Ok(entries) = std::fs::read_dir(&self.canon) else {
                    return;
                };
                for e in entries.flatten() {
                    if let Some(name) = e.file_name().to_str() {
                        self.mark(name, None);
                    }
                }
            }
        }
    }

    fn hear(&mut self, sig: Signal) {
        match sig {
            Signal::Changed { paths, at } => {
                for p in paths {
                    if let Some(name) = self.checkpoint_of(&p) {
                        self.mark(&name, Some(at));
                    }
                }
            }
            Signal::Rescan => {
                self.log
                    .line("change events were lost; looking at every checkpoint again");
                self.take_stock();
                for c in self.candidates.values_mut() {
                    c.last_event = Some(Instant::now());
                }
            }
            Signal::Lost => {
                self.log.line(&format!(
                    "{} was removed or renamed; watching what is there now",
                    self.watch.spec.dir
                ));
                self.notifier = None;
                self.candidates.clear();
                self.publish_pending();
            }
            Signal::Failed(e) => {
                if matches!(self.notifier, Some((_, Mode::Events))) {
                    let why = format!("inotify failed: {e}");
                    match notifier::start_polling(&self.canon, self.settle, self.tx.clone(), why) {
                        Ok((n, mode)) => {
                            self.use_notifier(n, mode);
                            self.take_stock();
                        }
                        Err(e) => self.log.line(&format!("cannot poll either: {e}")),
                    }
                } else {
                    self.log.line(&format!("change events: {e}"));
                }
            }
        }
    }

    /// The checkpoint a changed path belongs to.
    fn checkpoint_of(&self, p: &Path) -> Option<String> {
        let rel = p.strip_prefix(&self.canon).ok()?;
        match self.watch.spec.layout {
            Layout::Flat => Some(".".into()),
            Layout::Steps => {
                let first = rel.components().next()?;
                first.as_os_str().to_str().map(str::to_string)
            }
        }
    }

    /// Notes that checkpoint `name` was written to at `at` (or found, when `None`).
    fn mark(&mut self, name: &str, at: Option<Instant>) {
        let path = if name == "." {
            self.canon.clone()
        } else {
            self.canon.join(name)
        };
        let step = match self.watch.spec.layout {
            Layout::Flat => None,
            Layout::Steps => {
                if is_temporary(name) {
                    return;
                }
                let Some(step) = step_of(name) else { return };
                if !path.is_dir() {
                    // Renamed away or deleted: what was sealed of it stays sealed.
                    self.candidates.remove(name);
                    return;
                }
                if let Some(s) = self.watch.sealed(name) {
                    if at.is_some() && self.noted.insert(name.to_string()) {
                        self.log.line(&format!(
                            "{name} changed after it was sealed as {}; a checkpoint is pushed once",
                            s.digest
                        ));
                    }
                    return;
                }
                Some(step)
            }
        };
        let now = Instant::now();
        let c = self
            .candidates
            .entry(name.to_string())
            .or_insert(Candidate {
                path,
                step,
                last_event: None,
                not_before: now,
                stable: None,
                blocked: false,
            });
        if let Some(at) = at {
            c.last_event = Some(c.last_event.map_or(at, |t| t.max(at)));
            c.not_before = now;
            c.stable = None;
            c.blocked = false;
        }
        self.publish_pending();
    }

    fn publish_pending(&self) {
        let mut order: Vec<(&Option<u64>, &String)> =
            self.candidates.iter().map(|(n, c)| (&c.step, n)).collect();
        order.sort();
        let pending: Vec<String> = order.into_iter().map(|(_, n)| n.clone()).collect();
        self.ctx.live.update(|s| s.pending = pending);
    }

    /// Looks at the next checkpoint in step order; pushes it if it has settled.
    fn next(&mut self) {
        let next = self
            .candidates
            .iter()
            .filter(|(_, c)| !c.blocked)
            .min_by_key(|(n, c)| (c.step, (*n).clone()))
            .map(|(n, _)| n.clone());
        let Some(name) = next else {
            if !matches!(self.live_phase(), Some(Phase::Failed { .. })) {
                self.ctx.live.set(Phase::Idle);
            }
            return;
        };
        if let Some(fp) = self.settled(&name) {
            self.push(&name, fp);
        }
    }

    fn live_phase(&self) -> Option<Phase> {
        self.ctx
            .live
            .inner
            .lock()
            .ok()
            .and_then(|s| s.phase.clone())
    }

    /// The checkpoint's fingerprint if it has settled; otherwise says why not.
    fn settled(&mut self, name: &str) -> Option<Fingerprint> {
        let settle = self.settle;
        let now = Instant::now();
        let c = self.candidates.get_mut(name)?;
        if now < c.not_before {
            return None;
        }
        if !c.path.is_dir() {
            // Deleted or renamed away before it was sealed: nothing to push.
            self.candidates.remove(name);
            self.publish_pending();
            return None;
        }
        let settling = |left: Duration, why: String| Phase::Settling {
            name: name.to_string(),
            left_secs: left.as_secs_f64(),
            why,
        };
        if let Some(t) = c.last_event {
            let quiet = now.saturating_duration_since(t);
            if quiet < settle {
                self.ctx
                    .live
                    .set(settling(settle - quiet, "written to".into()));
                c.not_before = now + (settle - quiet).min(TICK);
                return None;
            }
        }
        let fp = match Fingerprint::of(&c.path) {
            Ok(fp) => fp,
            Err(e) if e.kind() == ErrorKind::Invalid => {
                let reason = e.to_string();
                c.blocked = true;
                self.record_failure(name, Outcome::Failed, &e);
                self.log.line(&format!(
                    "{name} cannot be sealed as it is: {reason}; waiting for it to change"
                ));
                return None;
            }
            Err(_) => {
                // A file vanished between listing and reading: still being written.
                c.not_before = now + TICK;
                return None;
            }
        };
        if fp.files == 0 {
            // A folder made before its files are written (a trainer gathering state
            // first) is no checkpoint yet, however long it stays empty.
            self.ctx
                .live
                .set(settling(settle, "no file in it yet".into()));
            c.not_before = now + WRITER_CHECK;
            return None;
        }
        match fp.quiet_for(SystemTime::now()) {
            Some(q) if q < settle => {
                self.ctx.live.set(settling(
                    settle - q,
                    format!(
                        "a file changed {} ago",
                        humantime::format_duration(round(q))
                    ),
                ));
                c.not_before = now + (settle - q);
                c.stable = None;
                return None;
            }
            Some(_) => {}
            None => match &c.stable {
                // Stamps from a clock ahead of ours: settled once nothing changed
                // for the whole period.
                Some((old, since)) if *old == fp && now.duration_since(*since) >= settle => {}
                Some((old, since)) if *old == fp => {
                    let left = settle - now.duration_since(*since);
                    self.ctx
                        .live
                        .set(settling(left, "stamps are ahead of this clock".into()));
                    c.not_before = now + left.min(TICK);
                    return None;
                }
                _ => {
                    c.stable = Some((fp, now));
                    self.ctx
                        .live
                        .set(settling(settle, "stamps are ahead of this clock".into()));
                    c.not_before = now + TICK;
                    return None;
                }
            },
        }
        if let Some(w) = writer_under(&c.path) {
            self.ctx.live.set(settling(WRITER_CHECK, w.to_string()));
            c.not_before = now + WRITER_CHECK;
            return None;
        }
        Some(fp)
    }

    fn tags_for(&self, step: Option<u64>) -> Result<Vec<Name>> {
        // A tag that moves (`latest`) follows the newest step, not a late straggler.
        let newest = match (step, self.watch.top_step()) {
            (Some(s), Some(top)) => s >= top,
            _ => true,
        };
        self.templates
            .iter()
            .filter(|t| t.per_step() || newest)
            .map(|t| t.expand(step))
            .collect()
    }

    fn push(&mut self, name: &str, fp: Fingerprint) {
        let Some(c) = self.candidates.get(name) else {
            return;
        };
        let (path, step) = (c.path.clone(), c.step);
        let tags = match self.tags_for(step) {
            Ok(t) => t,
            Err(e) => {
                self.fail(name, &e);
                return;
            }
        };
        let bytes_total = fp.bytes;
        let newest_ns = fp.newest_ns;
        self.ctx.live.set(Phase::Pushing {
            name: name.to_string(),
            bytes_done: 0,
            bytes_total,
        });
        let guard = Guard {
            dir: path.clone(),
            canon: self.canon.clone(),
            layout: self.watch.spec.layout,
            name: name.to_string(),
            fingerprint: fp,
            rx: &self.rx,
            heard: Mutex::new(Vec::new()),
        };
        let progress = Gauge {
            live: self.ctx.live,
            name: name.to_string(),
            total: std::sync::atomic::AtomicU64::new(bytes_total),
            done: std::sync::atomic::AtomicU64::new(0),
        };
        let started = Instant::now();
        let result = push::push(
            self.ctx.repo,
            &path,
            &self.volume,
            &tags,
            &PushOptions {
                source: None,
                stat_cache: Some(self.ctx.db),
                progress: &progress,
                cancel: Some(self.ctx.stop),
                guard: Some(&guard),
            },
        );
        let heard = guard.heard.into_inner().unwrap_or_default();
        for sig in heard {
            self.hear(sig);
        }
        match result {
            Ok(report) => {
                self.backoff = FIRST_BACKOFF;
                self.sealed(name, step, &report, started, newest_ns, &tags);
            }
            Err(e) if e.kind() == ErrorKind::Cancelled && self.stopping() => {}
            Err(e) if e.kind() == ErrorKind::Changed => {
                self.log.line(&format!(
                    "{name} changed while it was pushed; nothing sealed, tried again once it settles ({e})"
                ));
                self.record_failure(name, Outcome::Abandoned, &e);
                if let Some(c) = self.candidates.get_mut(name) {
                    c.last_event = Some(Instant::now());
                    c.not_before = Instant::now();
                }
                self.ctx.live.set(Phase::Settling {
                    name: name.to_string(),
                    left_secs: self.settle.as_secs_f64(),
                    why: "changed while it was pushed".into(),
                });
            }
            Err(e) if e.kind() == ErrorKind::Invalid => {
                self.log.line(&format!(
                    "{name} cannot be sealed as it is: {e}; waiting for it to change"
                ));
                self.record_failure(name, Outcome::Failed, &e);
                if let Some(c) = self.candidates.get_mut(name) {
                    c.blocked = true;
                }
            }
            Err(e) => self.fail(name, &e),
        }
    }

    /// A push that failed for a reason outside the checkpoint (the repository, the
    /// disk): tried again after a growing pause.
    fn fail(&mut self, name: &str, e: &Error) {
        let reason = crate::agent::reason(e);
        self.log.line(&format!("{name}: push failed: {reason}"));
        self.record_failure(name, Outcome::Failed, e);
        self.ctx.live.set(Phase::Failed {
            reason,
            retry_secs: self.backoff.as_secs_f64(),
        });
        if let Some(c) = self.candidates.get_mut(name) {
            c.not_before = Instant::now() + self.backoff;
        }
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn record_failure(&mut self, name: &str, outcome: Outcome, e: &Error) {
        let step = self.candidates.get(name).and_then(|c| c.step);
        let rec = PushRecord {
            at: now_rfc3339(),
            name: name.to_string(),
            step,
            outcome,
            digest: None,
            bytes_total: 0,
            bytes_new: 0,
            files_read: 0,
            files_unchanged: 0,
            push_secs: 0.0,
            latency_secs: None,
            tags: Vec::new(),
            trashed: Vec::new(),
            reason: Some(crate::agent::reason(e)),
        };
        self.save(|w| {
            w.push_record(rec);
            Ok(())
        });
    }

    fn sealed(
        &mut self,
        name: &str,
        step: Option<u64>,
        report: &PushReport,
        started: Instant,
        newest_ns: i128,
        tags: &[Name],
    ) {
        let digest = report.digest.to_string();
        let now_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        let latency_secs =
            (newest_ns > 0 && now_ns > newest_ns).then(|| (now_ns - newest_ns) as f64 / 1e9);
        // A flat folder that settled with the files of its last version: nothing new.
        let repeat = self.watch.spec.layout == Layout::Flat
            && self.watch.last_sealed().is_some_and(|s| s.digest == digest);
        let outcome = if report.sealed_new {
            Outcome::Sealed
        } else {
            Outcome::Unchanged
        };
        let mut rec = PushRecord {
            at: now_rfc3339(),
            name: name.to_string(),
            step,
            outcome,
            digest: Some(digest.clone()),
            bytes_total: report.stats.bytes,
            bytes_new: report.stats.new_bytes,
            files_read: report.stats.files - report.files_unchanged,
            files_unchanged: report.files_unchanged,
            push_secs: started.elapsed().as_secs_f64(),
            latency_secs,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            trashed: Vec::new(),
            reason: None,
        };
        self.log.line(&format!(
            "{name}: {} {} ({} new of {} bytes, {:.3} s)",
            if report.sealed_new {
                "sealed"
            } else {
                "already sealed as"
            },
            report.pinned_ref(),
            rec.bytes_new,
            rec.bytes_total,
            rec.push_secs
        ));
        self.candidates.remove(name);
        let sealed = SealedCheckpoint {
            name: name.to_string(),
            step,
            digest,
            sealed_at: now_rfc3339(),
            trashed: false,
        };
        self.save(|w| {
            if !repeat {
                w.sealed.push(sealed);
            }
            Ok(())
        });
        rec.trashed = self.retain();
        self.save(|w| {
            w.push_record(rec);
            Ok(())
        });
        self.publish_pending();
        self.ctx.live.set(Phase::Idle);
    }

    /// Moves what the retention rules let go to the trash; returns their digests.
    fn retain(&mut self) -> Vec<String> {
        let mut trashed = Vec::new();
        for i in retention::doomed(&self.watch) {
            let s = self.watch.sealed[i].clone();
            match retention::trash_one(
                self.ctx.repo,
                &self.volume,
                &self.templates,
                s.step,
                &s.digest,
            ) {
                Ok(Kept::Trashed) => {
                    self.log.line(&format!(
                        "retention: {} ({}) moved to the trash",
                        s.name, s.digest
                    ));
                    trashed.push(s.digest.clone());
                    self.mark_trashed(&s.digest);
                }
                Ok(Kept::Gone) => self.mark_trashed(&s.digest),
                Ok(Kept::Held(why)) => {
                    tracing::debug!("retention keeps {}: {why}", s.name);
                }
                Err(e) => {
                    self.log
                        .line(&format!("retention: cannot trash {}: {e}", s.name));
                }
            }
        }
        trashed
    }

    fn mark_trashed(&mut self, digest: &str) {
        self.save(|w| {
            for s in w.sealed.iter_mut().filter(|s| s.digest == digest) {
                s.trashed = true;
            }
            Ok(())
        });
    }

    /// Changes the record in the database and keeps the runner's copy in step.
    fn save(&mut self, f: impl FnOnce(&mut Watch) -> Result<()>) {
        match self.ctx.db.update_watch(self.watch.id, f) {
            Ok(w) => self.watch = w,
            Err(e) => tracing::error!("watch {}: cannot update its record: {e}", self.watch.id),
        }
    }
}

/// A folder's (device, inode), if it is a folder.
fn identity(dir: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir).ok()?;
    m.is_dir().then(|| (m.dev(), m.ino()))
}

fn round(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64 / 100 * 100)
}

/// The watch's side of a push: temporary files left out, and a last look before the
/// seal that abandons it when the checkpoint changed while it was read.
struct Guard<'a> {
    dir: PathBuf,
    canon: PathBuf,
    layout: Layout,
    name: String,
    fingerprint: Fingerprint,
    rx: &'a Receiver<Signal>,
    /// Signals taken off the channel meanwhile, for the runner to hear afterwards.
    heard: Mutex<Vec<Signal>>,
}

impl Guard<'_> {
    fn touches(&self, sig: &Signal) -> bool {
        match sig {
            Signal::Rescan | Signal::Lost => true,
            Signal::Failed(_) => false,
            Signal::Changed { paths, .. } => paths.iter().any(|p| {
                let Ok(rel) = p.strip_prefix(&self.canon) else {
                    return false;
                };
                match self.layout {
                    Layout::Flat => true,
                    Layout::Steps => rel
                        .components()
                        .next()
                        .is_some_and(|c| c.as_os_str() == self.name.as_str()),
                }
            }),
        }
    }
}

impl SealGuard for Guard<'_> {
    fn skip(&self, path: &str) -> bool {
        has_temporary(path)
    }

    fn still_settled(&self) -> Result<()> {
        let changed = || {
            Error::new(
                ErrorKind::Changed,
                format!("{} changed while it was being pushed", self.dir.display()),
            )
        };
        let mut touched = false;
        if let Ok(mut heard) = self.heard.lock() {
            while let Ok(sig) = self.rx.try_recv() {
                touched |= self.touches(&sig);
                heard.push(sig);
            }
        }
        if touched || Fingerprint::of(&self.dir).ok().as_ref() != Some(&self.fingerprint) {
            return Err(changed());
        }
        Ok(())
    }
}

/// A push's progress as the watch's phase.
struct Gauge<'a> {
    live: &'a Live,
    name: String,
    total: std::sync::atomic::AtomicU64,
    done: std::sync::atomic::AtomicU64,
}

impl Progress for Gauge<'_> {
    fn begin(&self, _phase: &str, bytes: u64, _files: u64) {
        self.total.store(bytes, Ordering::Relaxed);
        self.done.store(0, Ordering::Relaxed);
        self.show();
    }

    fn advance(&self, bytes: u64) {
        self.done.fetch_add(bytes, Ordering::Relaxed);
        self.show();
    }
}

impl Gauge<'_> {
    fn show(&self) {
        self.live.set(Phase::Pushing {
            name: self.name.clone(),
            bytes_done: self.done.load(Ordering::Relaxed),
            bytes_total: self.total.load(Ordering::Relaxed),
        });
    }
}
