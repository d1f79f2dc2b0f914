//! A watch's push of one settled checkpoint: the tags it gets, the guard that abandons
//! it when the checkpoint changes meanwhile, its progress as the watch's phase, and
//! what follows a seal (the record, then retention).

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Receiver;

use super::live::Live;
use super::names::has_temporary;
use super::notifier::Signal;
use super::retention::{self, Kept};
use super::runner::{FIRST_BACKOFF, MAX_BACKOFF, Runner};
use super::settle::Fingerprint;
use super::{Layout, Outcome, Phase, PushRecord, SealedCheckpoint, Watch};
use crate::log::one_line;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::progress::Progress;
use sealvol_core::push::{self, PushOptions, PushReport, SealGuard};
use sealvol_core::refs::Name;
use sealvol_core::registry::now_rfc3339;

impl Runner<'_> {
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

    pub(super) fn push(&mut self, name: &str, fp: Fingerprint, listed: Instant) {
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
            listed,
            rx: &self.rx,
            heard: Mutex::new(Vec::new()),
        };
        let progress = Gauge {
            live: self.ctx.live,
            name: name.to_string(),
            total: AtomicU64::new(bytes_total),
            done: AtomicU64::new(0),
        };
        let started = Instant::now();
        let result = push::push(
            self.ctx.repo,
            &path,
            &self.volume,
            &tags,
            &PushOptions {
                source: None,
                stat_cache: Some(self.ctx.db.stat_cache()),
                progress: &progress,
                cancel: Some(self.ctx.stop),
                guard: Some(&guard),
                labels: checkpoint_labels(name, step),
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
        let reason = one_line(e);
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

    pub(super) fn record_failure(&mut self, name: &str, outcome: Outcome, e: &Error) {
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
            reason: Some(one_line(e)),
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
        let rec = PushRecord {
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
        self.sealed_here.insert(name.to_string(), Instant::now());
        let sealed = SealedCheckpoint {
            name: name.to_string(),
            step,
            digest,
            sealed_at: now_rfc3339(),
            trashed: false,
        };
        // The seal and its push are one change of the record, so that `watch show`
        // never shows a checkpoint sealed by no push; what retention trashes follows.
        self.save(|w| {
            if !repeat {
                w.sealed.push(sealed);
            }
            w.push_record(rec);
            Ok(())
        });
        let trashed = self.retain();
        if !trashed.is_empty() {
            self.save(|w| {
                if let Some(last) = w.pushes.last_mut() {
                    last.trashed = trashed;
                }
                Ok(())
            });
        }
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
        let mut f = Some(f);
        let mut once = |w: &mut Watch| f.take().map_or(Ok(()), |f| f(w));
        match self.ctx.db.update_watch(self.watch.id, &mut once) {
            Ok(w) => self.watch = w,
            Err(e) => tracing::error!("watch {}: cannot update its record: {e}", self.watch.id),
        }
    }
}

/// The watch's side of a push: temporary files left out, and a last look before the
/// seal that abandons it when the checkpoint changed while it was read.
struct Guard<'a> {
    dir: PathBuf,
    canon: PathBuf,
    layout: Layout,
    name: String,
    fingerprint: Fingerprint,
    /// When that fingerprint's listing began.
    listed: Instant,
    rx: &'a Receiver<Signal>,
    /// Signals taken off the channel meanwhile, for the runner to hear afterwards.
    heard: Mutex<Vec<Signal>>,
}

impl Guard<'_> {
    fn touches(&self, sig: &Signal) -> bool {
        match sig {
            Signal::Rescan | Signal::Lost => true,
            Signal::Failed(_) => false,
            // Heard late (the debouncer holds events a moment): the listing the push
            // settled on already shows it.
            Signal::Changed { at, .. } if *at < self.listed => false,
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
    total: AtomicU64,
    done: AtomicU64,
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

/// What a watch says about each version it seals: the checkpoint's name (when it is a
/// name a label may hold) and its step, as `volume versions` and the console show them.
fn checkpoint_labels(name: &str, step: Option<u64>) -> sealvol_core::labels::Labels {
    let mut l = sealvol_core::labels::Labels::new();
    if name.len() <= sealvol_core::labels::MAX_VALUE && !name.chars().any(char::is_control) {
        l.insert("checkpoint".into(), name.to_string());
    }
    if let Some(s) = step {
        l.insert("step".into(), s.to_string());
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_event_heard_late_is_no_change_but_one_after_the_listing_is() {
        let dir = tempfile::tempdir().unwrap();
        let canon = dir.path().canonicalize().unwrap();
        std::fs::create_dir(canon.join("checkpoint-1")).unwrap();
        std::fs::write(canon.join("checkpoint-1/w.bin"), b"w").unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        let before = Instant::now();
        std::thread::sleep(Duration::from_millis(5));
        let guard = Guard {
            dir: canon.join("checkpoint-1"),
            canon: canon.clone(),
            layout: Layout::Steps,
            name: "checkpoint-1".into(),
            fingerprint: Fingerprint::of(&canon.join("checkpoint-1")).unwrap(),
            listed: Instant::now(),
            rx: &rx,
            heard: Mutex::new(Vec::new()),
        };
        let inside = vec![canon.join("checkpoint-1/w.bin")];
        // The rename that made it, delivered while it was pushed: already listed.
        tx.send(Signal::Changed {
            paths: inside.clone(),
            at: before,
        })
        .unwrap();
        // Another checkpoint's write: not this one's business.
        tx.send(Signal::Changed {
            paths: vec![canon.join("checkpoint-2/w.bin")],
            at: Instant::now(),
        })
        .unwrap();
        assert!(guard.still_settled().is_ok());
        assert_eq!(guard.heard.lock().unwrap().len(), 2, "kept for the runner");
        tx.send(Signal::Changed {
            paths: inside,
            at: Instant::now(),
        })
        .unwrap();
        let e = guard.still_settled().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Changed);
    }
}
