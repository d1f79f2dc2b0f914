//! A job's events, numbered, for however many followers it has: one poller per job
//! reads the agent's live view about four times a second while anyone follows, and
//! every follower reads the same numbered events (docs/JSON.md, "Job events").
//!
//! Two kinds: a `state` event when the job changes state (or starts another attempt),
//! and a `progress` event when only its figures move. A feed keeps every state event
//! and the latest progress event, so a follower that comes back with the id of the
//! last event it saw gets each state change it missed, in order, then where the job
//! is now: never a stale figure, never a missed end. Ids are `STAMP.SEQ`; a follower
//! with no id, or an id from another feed (a server that restarted, a feed forgotten),
//! starts at the job's current state.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sealvol_core::error::Error;
use sealvol_node::jobs::{JobEvent, JobState, JobsApi};

/// How often a followed job's live view is read.
pub const TICK: std::time::Duration = sealvol_node::agent::TICK;
/// State events one feed keeps (a job retried many times keeps its latest ones).
const KEEP_STATES: usize = 64;
/// Feeds kept once nobody follows them; older ones are forgotten first.
const KEEP_FEEDS: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    State,
    Progress,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::State => "state",
            Kind::Progress => "progress",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Numbered {
    pub seq: u64,
    pub kind: Kind,
    pub event: Arc<JobEvent>,
}

/// Every job's feed on this server.
pub struct Feeds {
    api: Arc<dyn JobsApi>,
    /// This server process, in event ids: a restarted server's ids are not this one's.
    run: u64,
    made: AtomicU64,
    map: Mutex<HashMap<u64, Arc<Feed>>>,
    /// Open streams by key name (`STREAMS_PER_KEY`).
    streams: Arc<Mutex<HashMap<String, usize>>>,
}

pub struct Feed {
    job: u64,
    stamp: String,
    log: Mutex<Log>,
    changed: tokio::sync::watch::Sender<u64>,
    polling: AtomicBool,
    /// The poller's last failure to read the job (it was removed, say).
    failure: Mutex<Option<Error>>,
}

#[derive(Default)]
struct Log {
    next: u64,
    states: std::collections::VecDeque<Numbered>,
    latest: Option<Numbered>,
    /// The state and attempt of the last state event.
    last: Option<(JobState, u32)>,
}

/// One open stream of a key, counted while it lives.
pub struct StreamTurn {
    key: String,
    streams: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for StreamTurn {
    fn drop(&mut self) {
        let mut s = sealvol_core::lock(&self.streams);
        if let Some(n) = s.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                s.remove(&self.key);
            }
        }
    }
}

impl Feeds {
    pub fn new(api: Arc<dyn JobsApi>) -> Feeds {
        let mut run = [0u8; 8];
        let _ = getrandom::fill(&mut run);
        Feeds {
            api,
            run: u64::from_le_bytes(run),
            made: AtomicU64::new(0),
            map: Mutex::new(HashMap::new()),
            streams: Arc::default(),
        }
    }

    /// A turn for one more stream of `key`, unless it holds `max` already.
    pub fn turn(&self, key: &str, max: usize) -> Option<StreamTurn> {
        let mut s = sealvol_core::lock(&self.streams);
        let n = s.entry(key.to_string()).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(StreamTurn {
            key: key.to_string(),
            streams: Arc::clone(&self.streams),
        })
    }

    /// The feed of job `id`, read now (so that a new follower starts from where the job
    /// is, a retried job included) and polled from now on while anyone follows it.
    pub async fn follow(
        &self,
        id: u64,
    ) -> sealvol_core::Result<(Arc<Feed>, tokio::sync::watch::Receiver<u64>)> {
        let feed = {
            let mut map = sealvol_core::lock(&self.map);
            if map.len() >= KEEP_FEEDS {
                map.retain(|_, f| f.changed.receiver_count() > 0);
            }
            let made = &self.made;
            let run = self.run;
            Arc::clone(map.entry(id).or_insert_with(|| {
                let n = made.fetch_add(1, Ordering::Relaxed);
                Arc::new(Feed {
                    job: id,
                    stamp: format!("{run:016x}{n:x}"),
                    log: Mutex::default(),
                    changed: tokio::sync::watch::Sender::new(0),
                    polling: AtomicBool::new(false),
                    failure: Mutex::new(None),
                })
            }))
        };
        let rx = feed.changed.subscribe();
        let api = Arc::clone(&self.api);
        let now = tokio::task::spawn_blocking(move || api.event(id))
            .await
            .map_err(|_| {
                Error::new(
                    sealvol_core::ErrorKind::Io,
                    "the request failed on the server",
                )
            })??;
        feed.publish(now);
        feed.poll(Arc::clone(&self.api));
        Ok((feed, rx))
    }
}

impl Feed {
    /// Starts the poller unless it runs: it reads the live view each tick until the job
    /// ends or nobody follows.
    fn poll(self: &Arc<Feed>, api: Arc<dyn JobsApi>) {
        if self.polling.swap(true, Ordering::SeqCst) {
            return;
        }
        let feed = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                feed.poll_until_idle(&api).await;
                feed.polling.store(false, Ordering::SeqCst);
                // A follower that came as the poller was leaving found it running and
                // did not start another: start again for it.
                if feed.changed.receiver_count() == 0 || feed.polling.swap(true, Ordering::SeqCst) {
                    return;
                }
            }
        });
    }

    async fn poll_until_idle(&self, api: &Arc<dyn JobsApi>) {
        loop {
            let a = Arc::clone(api);
            let id = self.job;
            let read = tokio::task::spawn_blocking(move || a.event(id)).await;
            match read {
                Ok(Ok(ev)) => {
                    if self.publish(ev) {
                        return;
                    }
                }
                Ok(Err(e)) => {
                    *sealvol_core::lock(&self.failure) = Some(e);
                    self.changed.send_modify(|n| *n += 1);
                    return;
                }
                Err(_) => return,
            }
            if self.changed.receiver_count() == 0 {
                return;
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// Numbers `ev` as a state or a progress event (nothing when nothing changed);
    /// true once the job has ended.
    fn publish(&self, ev: JobEvent) -> bool {
        let done = ev.job.state.is_final();
        let mut log = sealvol_core::lock(&self.log);
        let now = (ev.job.state, ev.job.attempts);
        let kind = if log.last != Some(now) {
            Kind::State
        } else if log.latest.as_ref().is_some_and(|l| *l.event == ev) {
            return done;
        } else {
            Kind::Progress
        };
        log.next += 1;
        let n = Numbered {
            seq: log.next,
            kind,
            event: Arc::new(ev),
        };
        if kind == Kind::State {
            log.last = Some(now);
            log.states.push_back(n.clone());
            if log.states.len() > KEEP_STATES {
                log.states.pop_front();
            }
        }
        log.latest = Some(n);
        let seq = log.next;
        drop(log);
        *sealvol_core::lock(&self.failure) = None;
        self.changed.send_replace(seq);
        done
    }

    /// The id of event `seq` of this feed.
    pub fn event_id(&self, seq: u64) -> String {
        format!("{}.{seq}", self.stamp)
    }

    /// The sequence number after which a follower that last saw `id` goes on: a new
    /// follower (no id, or one of another feed) starts at the job's current state, not
    /// at the states of its earlier attempts, which it never followed.
    pub fn after(&self, id: Option<&str>) -> u64 {
        let seen = id
            .and_then(|id| id.split_once('.'))
            .filter(|(stamp, _)| *stamp == self.stamp)
            .and_then(|(_, seq)| seq.parse().ok());
        match seen {
            Some(seq) => seq,
            None => sealvol_core::lock(&self.log)
                .states
                .back()
                .map_or(0, |n| n.seq - 1),
        }
    }

    /// What a follower that saw up to `after` has not seen: state events, then the
    /// latest progress if it is newer, in order.
    pub fn since(&self, after: u64) -> Vec<Numbered> {
        let log = sealvol_core::lock(&self.log);
        let mut out: Vec<Numbered> = log
            .states
            .iter()
            .filter(|n| n.seq > after)
            .cloned()
            .collect();
        if let Some(l) = &log.latest
            && l.seq > after
            && l.kind == Kind::Progress
        {
            out.push(l.clone());
        }
        out
    }

    /// Why the job can no longer be read, if it cannot.
    pub fn failure(&self) -> Option<Error> {
        sealvol_core::lock(&self.failure)
            .as_ref()
            .map(|e| Error::new(e.kind(), e.message().to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealvol_node::jobs::{Job, JobProgress, JobSpec};

    fn feed() -> Feed {
        Feed {
            job: 1,
            stamp: "ab".into(),
            log: Mutex::default(),
            changed: tokio::sync::watch::Sender::new(0),
            polling: AtomicBool::new(false),
            failure: Mutex::new(None),
        }
    }

    fn view(state: JobState, attempts: u32, done: u64) -> JobEvent {
        JobEvent {
            job: Job {
                id: 1,
                spec: JobSpec {
                    source: "hf://o/m".into(),
                    volume: "ns/v".into(),
                    tags: vec![],
                    secret: None,
                    include: vec![],
                    exclude: vec![],
                    endpoint: Default::default(),
                    mirror_to: None,
                    started_by: None,
                },
                state,
                created: String::new(),
                updated: String::new(),
                attempts,
                reason: None,
                error: None,
                sealed: None,
                checks: Default::default(),
                progress: JobProgress {
                    bytes_done: done,
                    ..Default::default()
                },
            },
            rate: 0,
            eta_secs: None,
            rate_history: vec![],
            files: vec![],
            queued_ahead: 0,
        }
    }

    fn seen(f: &Feed, after: u64) -> Vec<(u64, Kind, JobState, u64)> {
        f.since(after)
            .iter()
            .map(|n| {
                let j = &n.event.job;
                (n.seq, n.kind, j.state, j.progress.bytes_done)
            })
            .collect()
    }

    #[test]
    fn a_follower_that_comes_back_gets_every_state_it_missed_then_the_latest_figures() {
        use JobState::*;
        let f = feed();
        assert!(!f.publish(view(Queued, 0, 0)));
        assert!(!f.publish(view(Running, 1, 10)));
        assert!(!f.publish(view(Running, 1, 10)), "nothing new, no event");
        f.publish(view(Running, 1, 20));
        f.publish(view(Running, 1, 30));
        assert_eq!(f.since(0).len(), 3, "two states and the latest figures");
        let id = f.event_id(2);
        assert_eq!(f.after(Some(&id)), 2);
        assert_eq!(seen(&f, 2), vec![(4, Kind::Progress, Running, 30)]);
        // Cancelled, retried, running again: a follower back from seq 4 sees each.
        assert!(f.publish(view(Cancelled, 1, 30)));
        f.publish(view(Queued, 1, 30));
        f.publish(view(Running, 2, 0));
        f.publish(view(Running, 2, 5));
        let back = seen(&f, 4);
        let states: Vec<JobState> = back.iter().map(|s| s.2).collect();
        assert_eq!(states, vec![Cancelled, Queued, Running, Running]);
        assert_eq!(back.last().map(|s| (s.1, s.3)), Some((Kind::Progress, 5)));
        // A new follower, or one with another feed's id, starts at the current state.
        for id in [None, Some("cd.3"), Some("garbage")] {
            let from = f.after(id);
            assert_eq!(
                seen(&f, from).iter().map(|s| s.2).collect::<Vec<_>>(),
                vec![Running, Running],
                "{id:?}"
            );
        }
    }
}
