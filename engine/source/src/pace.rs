//! A job's slot on its agent, given up while the job only waits out retries.
//!
//! An agent bounds how many jobs run at once (`sealvol_node::agent::schedule`). A job
//! whose source fails for a while spends most of its time asleep in a retry's backoff;
//! holding its slot then would let a few unreachable buckets stall everyone's jobs. So
//! while every request of the job (each task run under `retry::logged`) waits out a
//! backoff, the job gives its slot back, and the first request whose wait ends takes a
//! slot again before it goes on. A request that is still reading or waiting for an
//! answer keeps the slot: the job is then working, however slowly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the agent lends a job: a place among the jobs that run at once.
pub trait Slot: Send + Sync {
    /// The job stops counting against the agent's bounds.
    fn give_up(&self);
    /// Asks for a slot again: true once the agent granted one and the job counts
    /// again. Asked again every `GRANT_POLL` until it is.
    fn take_back(&self) -> bool;
}

/// How often a job that asked for its slot back looks whether it got it.
pub const GRANT_POLL: Duration = Duration::from_millis(50);

/// One job's requests, counted, and the slot they share.
pub struct Pacer {
    slot: Arc<dyn Slot>,
    counts: Mutex<Counts>,
    /// One request takes the slot back; the others that woke with it wait for it.
    regain: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct Counts {
    /// Requests of the job under way (tasks under `retry::logged`).
    active: usize,
    /// Of those, the ones asleep in a backoff.
    waiting: usize,
    given_up: bool,
}

impl Pacer {
    pub fn new(slot: Arc<dyn Slot>) -> Pacer {
        Pacer {
            slot,
            counts: Mutex::new(Counts::default()),
            regain: tokio::sync::Mutex::new(()),
        }
    }

    /// Counts a request as under way until the guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> Active {
        self.change(|c| c.active += 1);
        Active(Arc::clone(self))
    }

    /// Sleeps `d` as one request's backoff, the slot given up if every request of the
    /// job is asleep too, and taken back before this returns.
    pub(crate) async fn backoff(self: &Arc<Self>, d: Duration) {
        {
            let _asleep = Asleep::new(self);
            tokio::time::sleep(d).await;
        }
        let _one = self.regain.lock().await;
        let given_up = self.counts.lock().map(|c| c.given_up).unwrap_or(false);
        if given_up {
            while !self.slot.take_back() {
                tokio::time::sleep(GRANT_POLL).await;
            }
            self.change(|c| c.given_up = false);
        }
    }

    /// Applies `f`, then gives the slot up if every request now waits.
    fn change(&self, f: impl FnOnce(&mut Counts)) {
        let Ok(mut c) = self.counts.lock() else {
            return;
        };
        f(&mut c);
        if c.active > 0 && c.waiting == c.active && !c.given_up {
            c.given_up = true;
            drop(c);
            self.slot.give_up();
        }
    }
}

/// A request under way; dropped when its task ends.
pub(crate) struct Active(Arc<Pacer>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.change(|c| c.active = c.active.saturating_sub(1));
    }
}

/// A request asleep in a backoff (also when its task is dropped mid-sleep: cancelled).
struct Asleep<'a>(&'a Pacer);

impl<'a> Asleep<'a> {
    fn new(p: &'a Pacer) -> Asleep<'a> {
        p.change(|c| c.waiting += 1);
        Asleep(p)
    }
}

impl Drop for Asleep<'_> {
    fn drop(&mut self) {
        if let Ok(mut c) = self.0.counts.lock() {
            c.waiting = c.waiting.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    /// Counts what the pacer does; a slot is granted once the test sets `grant`.
    #[derive(Default)]
    struct Counted {
        given_up: AtomicUsize,
        asked: AtomicUsize,
        grant: AtomicBool,
    }

    impl Slot for Counted {
        fn give_up(&self) {
            self.given_up.fetch_add(1, Ordering::SeqCst);
        }
        fn take_back(&self) -> bool {
            self.asked.fetch_add(1, Ordering::SeqCst);
            self.grant.load(Ordering::SeqCst)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_slot_goes_only_when_every_request_sleeps_and_comes_back_once() {
        let slot = Arc::new(Counted::default());
        let pacer = Arc::new(Pacer::new(slot.clone()));
        let a = pacer.enter();
        let b = pacer.enter();
        // One request sleeps while the other works: the job keeps its slot.
        let p = pacer.clone();
        let first = tokio::spawn(async move { p.backoff(Duration::from_secs(1)).await });
        tokio::task::yield_now().await;
        assert_eq!(slot.given_up.load(Ordering::SeqCst), 0);
        // The working one sleeps too: now the slot goes, once.
        let p = pacer.clone();
        let second = tokio::spawn(async move { p.backoff(Duration::from_secs(2)).await });
        tokio::task::yield_now().await;
        assert_eq!(slot.given_up.load(Ordering::SeqCst), 1);
        // Both wake; the first asks for the slot, the second waits behind it.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let asked = slot.asked.load(Ordering::SeqCst);
        assert!(asked > 0);
        assert!(!first.is_finished() && !second.is_finished());
        slot.grant.store(true, Ordering::SeqCst);
        first.await.unwrap();
        second.await.unwrap();
        // Granted once: the second request found the slot taken back and asked nothing.
        let after = slot.asked.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(slot.asked.load(Ordering::SeqCst), after);
        drop((a, b));
        assert_eq!(slot.given_up.load(Ordering::SeqCst), 1);
    }
}
