//! Read-ahead: what a mount fetches before readers ask, into the memory tier (`memo`).
//!
//! - `Stream` is one open file's read pattern: reads that follow each other double the
//!   window (up to a bound); a jump resets it, so a reader that seeks around gets
//!   little read ahead.
//! - A **plan** reads a file whole, in an order its format gives: a `.safetensors`
//!   file's tensors, read from its header, just ahead of its reader in the order the
//!   reader follows (by name or by offset: `TensorOrder`), so a loader that maps the
//!   file finds its page faults answered from memory. Opening one shard plans its
//!   siblings in the same directory too, fetched once the open ones have nothing left.
//!   A plan whose chunks are dropped unread (the reader went elsewhere) stops.
//! - A saved **read profile** is a plan too, over many files: the order in which the
//!   version's readers first asked for its chunks on another mount (less the
//!   `.safetensors` files, which have plans of their own).
//! - Workers take reads of streams first, then headers, then pieces of plans, and every
//!   fetch reserves its memory in the memo first, so read-ahead stays within the
//!   mount's one bound (`--prefetch-memory`). Plans leave a quarter of it to streams.

mod plan;
mod stream;
mod worker;

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex};

use sealvol_core::digest::Hash;
use sealvol_core::profile::Step;
use sealvol_core::read::Tiers;

use crate::layout::{Layout, Layouts};
use crate::memo::Memo;
use plan::*;
use worker::*;

pub use plan::{FileRef, Order};
pub use stream::{MIN_WINDOW, Stream};

/// The read-ahead workers of one mount; they stop when this is dropped.
pub struct Prefetcher {
    shared: Arc<Shared>,
}

/// Stream reads queued beyond this are dropped: the reader fetches them itself.
const MAX_QUEUED: usize = 64;

impl Prefetcher {
    /// Starts `threads` workers fetching pieces of at most `piece` bytes.
    pub fn start(
        threads: usize,
        piece: u64,
        memo: Arc<Memo>,
        tiers: Arc<Tiers>,
        layouts: Arc<Layouts>,
    ) -> Prefetcher {
        let shared = Arc::new(Shared {
            queue: Mutex::default(),
            wake: Condvar::new(),
            // A piece larger than a quarter of memory would crowd out everything else.
            piece: piece.min(memo.capacity() as u64 / 4).max(1),
            memo,
            tiers,
            layouts,
        });
        for i in 0..threads {
            let shared = Arc::clone(&shared);
            let _ = std::thread::Builder::new()
                .name(format!("sealvol-prefetch-{i}"))
                .spawn(move || shared.work());
        }
        Prefetcher { shared }
    }

    /// Queues chunks `range` of a file that a stream will read next, in pieces; drops
    /// what does not fit in the queue rather than make a read wait.
    pub fn ahead(&self, layout: &Arc<Layout>, range: Range<usize>) {
        let pieces = layout.pieces(range, self.shared.piece);
        let mut q = self.shared.lock();
        for p in pieces {
            if q.ahead.len() >= MAX_QUEUED {
                break;
            }
            q.ahead.push_back((Arc::clone(layout), p));
        }
        drop(q);
        self.shared.wake.notify_all();
    }

    /// Plans `file`, a `.safetensors` file a reader opened, and its `siblings`; a file
    /// planned before is only marked open.
    pub fn plan_tensors(&self, file: FileRef, siblings: &[FileRef]) {
        let mut q = self.shared.lock();
        if !q.planned.insert(file.hash) {
            if let Some(p) = q.plans.iter_mut().find(|p| p.id == PlanId::File(file.hash)) {
                p.opened = true;
            }
            for h in q.headers.iter_mut().filter(|h| h.0.hash == file.hash) {
                h.1 = true;
            }
        } else {
            q.headers.push_front((file, true));
        }
        for s in siblings {
            if q.planned.insert(s.hash) {
                q.headers.push_back((*s, false));
            }
        }
        drop(q);
        self.shared.wake.notify_all();
    }

    /// Reads ahead in the order of a saved read profile: what readers of this version
    /// asked for first, first.
    pub fn replay(&self, steps: Vec<Step>) {
        let steps = coalesce(steps);
        if steps.is_empty() {
            return;
        }
        let mut q = self.shared.lock();
        q.plans.push(Plan {
            id: PlanId::Profile,
            files: steps.iter().map(|s| s.file).collect(),
            pieces: VecDeque::new(),
            steps: steps.into(),
            asked: Vec::new(),
            // It reads ahead what no reader has opened yet, and yields to the plans of
            // files that are open: their own plans read them in larger pieces.
            opened: false,
            tensors: None,
            layout: None,
            _held: None,
        });
        drop(q);
        self.shared.wake.notify_all();
    }

    /// Notes that a reader asked for chunks `range` of file `hash`, so its plan skips
    /// them; whether a plan reads the file ahead by its format (or is about to), in
    /// which case a stream over it would add nothing.
    pub fn note_read(&self, hash: &Hash, range: Range<usize>) -> Option<Order> {
        let mut q = self.shared.lock();
        if let Some(p) = q.plans.iter_mut().find(|p| p.id == PlanId::File(*hash)) {
            // Where the read ends is where the reader goes on from.
            let last = range.end.saturating_sub(1);
            p.asked[range].iter_mut().for_each(|a| *a = true);
            let moved = p.tensors.as_mut().is_some_and(|t| t.reader_at(last));
            if moved {
                p.pieces.clear();
            }
            let order = match &p.tensors {
                Some(t) if t.by_offset => Order::Offset,
                _ => Order::Other,
            };
            drop(q);
            if moved {
                // The plan has new tensors ahead of its reader: a worker that found it
                // finished is waiting for work.
                self.shared.wake.notify_all();
            }
            return Some(order);
        }
        q.headers
            .iter()
            .any(|h| h.0.hash == *hash)
            .then_some(Order::Other)
    }

    /// Plans with pieces left (tests and the log).
    pub fn plans(&self) -> usize {
        self.shared.lock().plans_left()
    }

    /// Read-ahead not done yet: tasks queued or under way, and plans with pieces left.
    /// Zero means the read-ahead has settled (until a reader asks for more).
    pub fn pending(&self) -> usize {
        let q = self.shared.lock();
        q.running + q.ahead.len() + q.headers.len() + q.plans_left()
    }

    /// Whether read-ahead has done all it can until a reader asks for more: nothing is
    /// pending, or nothing is queued and every task under way waits for memory that
    /// nothing but a reader will give back. Tests wait for this instead of for a quiet
    /// moment, which a busy machine makes at any time.
    pub fn at_rest(&self) -> bool {
        let q = self.shared.lock();
        if !q.ahead.is_empty() || !q.headers.is_empty() {
            return false;
        }
        match q.running {
            0 => q.plans_left() == 0,
            // Queue before memo, as `next_task` takes them.
            running => self.shared.memo.stuck() == running,
        }
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(file: u8, first: u32, count: u32) -> Step {
        Step {
            file: Hash([file; 32]),
            size: 1 << 30,
            first,
            count,
        }
    }

    #[test]
    fn a_profiles_runs_that_touch_in_one_file_are_read_as_one() {
        let got = coalesce(vec![
            step(1, 0, 25),
            step(1, 38, 27),
            // Touches the run before: one stretch recorded out of order.
            step(1, 25, 13),
            step(1, 70, 5),
            // Another file, then back: runs of different files stay apart.
            step(2, 75, 5),
            step(1, 75, 5),
        ]);
        let runs: Vec<(u8, u32, u32)> = got
            .iter()
            .map(|s| (s.file.0[0], s.first, s.count))
            .collect();
        assert_eq!(
            runs,
            vec![(1, 0, 25), (1, 25, 40), (1, 70, 5), (2, 75, 5), (1, 75, 5)]
        );
    }
}
