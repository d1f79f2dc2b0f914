//! One watch at work, on its own thread: waits for the folder, follows its change
//! events, and pushes each checkpoint once it has settled, in step order. A push is
//! abandoned (nothing sealed) when the checkpoint changes while it is read, and tried
//! again after the next settle. After each seal: the record, then retention.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::live::Live;
use super::names::{TagTemplate, is_temporary, step_of};
use super::notifier::{self, Mode, Notifier, Signal};
use super::settle::{Fingerprint, writer_under};
use super::{Layout, Outcome, Phase, Watch, WatchState};
use crate::log::JobLog;
use sealvol_core::error::{ErrorKind, Result};
use sealvol_core::refs::VolumeName;
use sealvol_core::repo::Repository;

/// How often the runner looks at its checkpoints when nothing happens.
pub(super) const TICK: Duration = Duration::from_millis(250);
/// How often the runner wakes when no checkpoint is pending.
const IDLE_TICK: Duration = Duration::from_secs(1);
/// How often a missing folder is looked for.
const LOOK_FOR_DIR: Duration = Duration::from_secs(1);
/// How often the open files of other processes are read for one checkpoint.
const WRITER_CHECK: Duration = Duration::from_secs(1);
/// A failed push is tried again after this, doubling up to `MAX_BACKOFF`.
pub(super) const FIRST_BACKOFF: Duration = Duration::from_secs(5);
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How often the process that owns a foreground watch is checked for.
const OWNER_CHECK: Duration = Duration::from_secs(1);

pub struct Context<'a> {
    pub repo: &'a Repository,
    pub db: &'a dyn super::Records,
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

pub(super) struct Candidate {
    pub(super) path: PathBuf,
    pub(super) step: Option<u64>,
    /// The newest change event seen for it.
    pub(super) last_event: Option<Instant>,
    /// Not looked at again before this.
    pub(super) not_before: Instant,
    /// Its stamps could not tell (a clock ahead): the fingerprint and since when it held.
    pub(super) stable: Option<(Fingerprint, Instant)>,
    /// It cannot be sealed as it is (a socket inside, say): left until it changes.
    pub(super) blocked: bool,
}

pub(super) struct Runner<'a> {
    pub(super) ctx: &'a Context<'a>,
    pub(super) watch: Watch,
    pub(super) volume: VolumeName,
    pub(super) templates: Vec<TagTemplate>,
    pub(super) dir: PathBuf,
    pub(super) settle: Duration,
    pub(super) log: JobLog,
    pub(super) tx: Sender<Signal>,
    pub(super) rx: Receiver<Signal>,
    pub(super) notifier: Option<(Notifier, Mode)>,
    /// The folder as the kernel names it (events and `/proc` use it).
    pub(super) canon: PathBuf,
    /// Which folder that was when it was opened: (device, inode).
    pub(super) opened: (u64, u64),
    pub(super) candidates: BTreeMap<String, Candidate>,
    pub(super) backoff: Duration,
    /// When this runner sealed each checkpoint it sealed.
    pub(super) sealed_here: std::collections::HashMap<String, Instant>,
    /// Sealed checkpoints found changed afterwards, said once each.
    pub(super) noted: std::collections::HashSet<String>,
    pub(super) said_polling: bool,
    pub(super) owner_checked: Instant,
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
            sealed_here: Default::default(),
            noted: Default::default(),
            said_polling: false,
            owner_checked: Instant::now(),
        })
    }

    pub(super) fn stopping(&self) -> bool {
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
                let _ = self.ctx.db.update_watch(self.watch.id, &mut |w| {
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

    pub(super) fn hear(&mut self, sig: Signal) {
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
                    // An event from before this runner sealed it is one the seal saw.
                    let after_seal = at.is_some_and(|t| {
                        self.sealed_here.get(name).is_none_or(|sealed| t > *sealed)
                    });
                    if after_seal && self.noted.insert(name.to_string()) {
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

    pub(super) fn publish_pending(&self) {
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
            if !matches!(self.ctx.live.phase(), Some(Phase::Failed { .. })) {
                self.ctx.live.set(Phase::Idle);
            }
            return;
        };
        if let Some((fp, at)) = self.settled(&name) {
            self.push(&name, fp, at);
        }
    }

    /// The checkpoint's fingerprint if it has settled; otherwise says why not.
    /// Also returns when its listing was taken: a change event from before then is one
    /// that listing already shows.
    fn settled(&mut self, name: &str) -> Option<(Fingerprint, Instant)> {
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
        let listed = Instant::now();
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
        Some((fp, listed))
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
