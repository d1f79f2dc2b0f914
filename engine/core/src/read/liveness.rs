//! Whether a server of the ring is asked, and how long it is waited for. A server that
//! accepts connections and never answers (frozen, swapping, a half-open network) must
//! cost a read no more than a little over what that server usually takes, never the
//! request timeout:
//!
//! - each server's recent answers give its latency bound: `factor` times the slowest
//!   of the last `SAMPLES`, within `floor..ceiling`; before it has answered, the same of
//!   the ring's other servers but never under `fresh` (1 s: its first answers may be
//!   cold reads from the origin), or `first` when none has;
//! - a request not answered within the bound is *hedged*: the next server in the
//!   segment's order is asked too, the first good answer wins, and the late server is
//!   passed over (its request goes on in the background; an answer, late or not,
//!   brings it back and teaches the bound);
//! - a server passed over is not asked by any read until it answers a probe, sent in
//!   the background after 1 s, 2 s, 4 s … up to 30 s while it keeps failing, so a
//!   server that stays down costs reads nothing at all.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// How many recent answers a server's latency bound is taken from.
const SAMPLES: usize = 32;
/// The first probe of a server passed over; each failed one doubles the wait.
const PROBE_FIRST: Duration = Duration::from_secs(1);
/// The longest wait between two probes of a server that stays down.
const PROBE_MAX: Duration = Duration::from_secs(30);

/// How long a server is waited for before the next is asked too.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hedging {
    /// Never sooner than this, however fast the server usually answers: a busy node
    /// (or a busy server) must not ask every run twice.
    pub floor: Duration,
    /// Never later than this, however slow its answers were.
    pub ceiling: Duration,
    /// Before a server has answered anything, and no other server of the ring has.
    pub first: Duration,
    /// Before a server has answered anything, the least it is waited for however fast
    /// the ring's others answer: its first answers may be cold reads from the origin.
    pub fresh: Duration,
    /// The bound is this many times its slowest recent answer.
    pub factor: u32,
}

impl Default for Hedging {
    fn default() -> Hedging {
        Hedging {
            floor: Duration::from_millis(250),
            ceiling: Duration::from_secs(10),
            first: Duration::from_secs(2),
            fresh: Duration::from_secs(1),
            factor: 3,
        }
    }
}

impl Hedging {
    /// Never hedged: a server is waited for until it answers or fails (tests that
    /// count which server was asked for what, on a machine that may be busy).
    pub fn never() -> Hedging {
        Hedging {
            floor: Duration::from_secs(3600),
            ceiling: Duration::from_secs(3600),
            first: Duration::from_secs(3600),
            fresh: Duration::from_secs(3600),
            factor: 1,
        }
    }
}

/// One server's state: up or passed over, why, its recent answers.
pub struct Liveness {
    hedging: Hedging,
    up: AtomicBool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Failures since its last good answer: how long probes wait.
    failures: u32,
    /// A probe thread runs for this server.
    probing: bool,
    /// Durations of its recent good answers, oldest overwritten first.
    samples: Vec<Duration>,
    next: usize,
}

/// How a server is probed: asks it something cheap within a bound; Ok when it answers.
pub type ProbeFn = Arc<dyn Fn() -> crate::error::Result<()> + Send + Sync>;

impl Liveness {
    pub fn new(hedging: Hedging) -> Liveness {
        Liveness {
            hedging,
            up: AtomicBool::new(true),
            state: Mutex::default(),
        }
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// How long a request to it is waited for before the next server is asked too.
    pub fn bound(&self) -> Duration {
        self.bound_beside(None)
    }

    /// [`bound`](Self::bound), for a server that has not answered yet taken from how
    /// `others` (the slowest recent answer of the ring's other servers) answer: a node
    /// that has just started must not wait `first` on a frozen server while the rest of
    /// the ring answers in milliseconds.
    pub fn bound_beside(&self, others: Option<Duration>) -> Duration {
        let h = &self.hedging;
        let own = crate::locks::lock(&self.state)
            .samples
            .iter()
            .max()
            .copied();
        match (own, others) {
            (Some(slowest), _) => (slowest * h.factor).clamp(h.floor, h.ceiling),
            (None, Some(theirs)) => {
                (theirs * h.factor).clamp(h.floor.max(h.fresh), h.ceiling.max(h.fresh))
            }
            (None, None) => h.first,
        }
    }

    /// Its slowest recent answer.
    pub fn slowest(&self) -> Option<Duration> {
        crate::locks::lock(&self.state)
            .samples
            .iter()
            .max()
            .copied()
    }

    /// A good answer that took `took`: counted in its bound, and it is up again.
    pub fn answered(&self, took: Duration, name: &str) {
        let mut s = crate::locks::lock(&self.state);
        if s.samples.len() < SAMPLES {
            s.samples.push(took);
        } else {
            let at = s.next;
            s.samples[at] = took;
        }
        s.next = (s.next + 1) % SAMPLES;
        s.failures = 0;
        if !self.up.swap(true, Ordering::Relaxed) {
            tracing::info!("peer {name} answers again");
        }
    }

    /// Not asked by any read until it answers `probe` (in the background) or a late
    /// answer comes; said once per outage.
    pub fn pass_over(self: &Arc<Self>, name: &str, why: &str, probe: impl FnOnce() -> ProbeFn) {
        let start_probe = {
            let mut s = crate::locks::lock(&self.state);
            s.failures = s.failures.saturating_add(1);
            if self.up.swap(false, Ordering::Relaxed) {
                tracing::warn!("peer {name}: {why}; passed over until it answers a probe");
            }
            !std::mem::replace(&mut s.probing, true)
        };
        if start_probe && !spawn_prober(Arc::downgrade(self), name.to_string(), probe()) {
            // Nothing would ever probe it: asked again by the next read instead.
            crate::locks::lock(&self.state).probing = false;
            self.up.store(true, Ordering::Relaxed);
        }
    }

    /// Why a request not answered within `bound` was given up on.
    pub fn late_reason(&self, bound: Duration) -> String {
        let usual = match self.slowest() {
            Some(d) => format!("its recent answers took at most {} ms", d.as_millis()),
            None => "it had not answered yet".to_string(),
        };
        format!(
            "did not answer within {} ms ({usual}); the next tier was asked",
            bound.as_millis()
        )
    }

    /// How long the prober waits before its next probe.
    fn probe_wait(&self) -> Duration {
        let failures = crate::locks::lock(&self.state).failures.max(1);
        PROBE_FIRST
            .saturating_mul(1 << (failures - 1).min(5))
            .min(PROBE_MAX)
    }
}

/// Probes a server while it stays passed over; ends when it is up (by its probe or
/// by a late answer) or the ring let go of it. False when no thread could be started.
fn spawn_prober(liveness: Weak<Liveness>, name: String, probe: ProbeFn) -> bool {
    let said = name.clone();
    let spawned = std::thread::Builder::new()
        .name("peer-probe".into())
        .spawn(move || {
            loop {
                let Some(wait) = liveness.upgrade().map(|l| l.probe_wait()) else {
                    return;
                };
                std::thread::sleep(wait);
                let Some(l) = liveness.upgrade() else { return };
                let asked = Instant::now();
                // Up already (a late answer came): nothing to probe.
                let answered = l.is_up() || probe().is_ok();
                let mut s = crate::locks::lock(&l.state);
                if answered {
                    // Under the lock that `pass_over` takes: a pass-over from now on
                    // starts a prober of its own.
                    s.probing = false;
                    if !l.up.swap(true, Ordering::Relaxed) {
                        tracing::info!(
                            "peer {name} answers its probe ({} ms): asked again",
                            asked.elapsed().as_millis()
                        );
                    }
                    return;
                }
                s.failures = s.failures.saturating_add(1);
            }
        });
    match spawned {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!("cannot start a thread to probe peer {said}: {e}");
            false
        }
    }
}

/// What [`ask`] got: the answer, or nothing within the bound (the request goes on).
pub enum Asked<T> {
    Answer(T),
    /// Not answered within this bound.
    Late(Duration),
}

/// How often a wait on a server looks at its bound again (which may shrink as the
/// ring's other servers answer).
const LOOK_AGAIN: Duration = Duration::from_millis(25);

/// Runs `job` (a request to one server) on a thread of its own and waits for it until
/// `bound()` has gone by since it was asked (looked at again as it waits). A job still
/// running then is left to finish in the background (it tells the server's state how
/// it ended: an answer nobody waited for still counts). `Late` says the bound it
/// passed.
pub fn ask<T: Send + 'static>(
    bound: impl Fn() -> Duration,
    job: impl FnOnce() -> T + Send + 'static,
) -> Asked<T> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let asked = Instant::now();
    let spawned = std::thread::Builder::new()
        .name("peer-ask".into())
        .spawn(move || {
            let _ = tx.send(job());
        });
    if spawned.is_err() {
        return Asked::Late(Duration::ZERO);
    }
    loop {
        let b = bound();
        let left = b.saturating_sub(asked.elapsed());
        if left.is_zero() {
            return Asked::Late(b);
        }
        match rx.recv_timeout(left.min(LOOK_AGAIN)) {
            Ok(t) => return Asked::Answer(t),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Asked::Late(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_bound_is_a_multiple_of_the_slowest_recent_answer_within_floor_and_ceiling() {
        let h = Hedging {
            floor: 100 * MS,
            ceiling: 2000 * MS,
            first: 700 * MS,
            fresh: 150 * MS,
            factor: 3,
        };
        let l = Liveness::new(h);
        assert_eq!(l.bound(), 700 * MS, "before any answer");
        l.answered(10 * MS, "p");
        assert_eq!(l.bound(), 100 * MS, "never under the floor");
        l.answered(200 * MS, "p");
        assert_eq!(l.bound(), 600 * MS);
        l.answered(5000 * MS, "p");
        assert_eq!(l.bound(), 2000 * MS, "never over the ceiling");
        // One that has not answered yet goes by the rest of the ring when it can.
        let fresh = Liveness::new(h);
        assert_eq!(fresh.bound_beside(Some(60 * MS)), 180 * MS);
        assert_eq!(
            fresh.bound_beside(Some(10 * MS)),
            150 * MS,
            "never under `fresh`"
        );
        assert_eq!(fresh.bound_beside(None), 700 * MS);
        // The slow answer ages out after SAMPLES newer ones.
        for _ in 0..SAMPLES {
            l.answered(20 * MS, "p");
        }
        assert_eq!(l.bound(), 100 * MS);
    }

    #[test]
    fn a_server_passed_over_is_up_again_once_its_probe_answers_and_not_before() {
        let l = Arc::new(Liveness::new(Hedging::default()));
        let probes = Arc::new(AtomicU32::new(0));
        let answers = Arc::new(AtomicBool::new(false));
        let probe: ProbeFn = {
            let (probes, answers) = (Arc::clone(&probes), Arc::clone(&answers));
            Arc::new(move || {
                probes.fetch_add(1, Ordering::Relaxed);
                match answers.load(Ordering::Relaxed) {
                    true => Ok(()),
                    false => Err(crate::error::Error::new(
                        crate::error::ErrorKind::Unavailable,
                        "timed out",
                    )),
                }
            })
        };
        let p = probe.clone();
        l.pass_over("p", "did not answer", move || p);
        assert!(!l.is_up());
        // A second failure while it is probed starts no second prober.
        let p = probe.clone();
        l.pass_over("p", "did not answer", move || p);
        let deadline = Instant::now() + Duration::from_secs(30);
        while probes.load(Ordering::Relaxed) < 1 {
            assert!(Instant::now() < deadline);
            std::thread::sleep(10 * MS);
        }
        assert!(!l.is_up(), "a failed probe keeps it passed over");
        answers.store(true, Ordering::Relaxed);
        while !l.is_up() {
            assert!(Instant::now() < deadline, "never up again");
            std::thread::sleep(10 * MS);
        }
        // Passed over again: a new prober brings it back.
        let p = probe.clone();
        l.pass_over("p", "did not answer", move || p);
        while !l.is_up() {
            assert!(Instant::now() < deadline, "never up again");
            std::thread::sleep(10 * MS);
        }
    }

    #[test]
    fn a_late_answer_brings_a_server_back_and_teaches_its_bound() {
        let l = Arc::new(Liveness::new(Hedging::default()));
        let never: ProbeFn = Arc::new(|| {
            Err(crate::error::Error::new(
                crate::error::ErrorKind::Unavailable,
                "timed out",
            ))
        });
        l.pass_over("p", &l.late_reason(Duration::from_secs(2)), move || never);
        assert!(!l.is_up());
        l.answered(Duration::from_millis(1500), "p");
        assert!(l.is_up());
        assert_eq!(l.bound(), Duration::from_millis(4500));
    }

    #[test]
    fn ask_answers_within_the_bound_or_says_late_and_lets_the_job_finish() {
        match ask(|| Duration::from_secs(30), || 7) {
            Asked::Answer(7) => {}
            _ => panic!("a quick job is answered"),
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let g = Arc::clone(&gate);
        match ask(
            || 10 * MS,
            move || {
                let _open = g.lock();
                let _ = tx.send("finished");
            },
        ) {
            Asked::Late(b) => assert_eq!(b, 10 * MS),
            Asked::Answer(()) => panic!("the job could not have finished"),
        }
        drop(held);
        assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok("finished"));
    }
}
