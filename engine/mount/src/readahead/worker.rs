//! The workers: what they take from the queue (stream reads first, then headers,
//! then pieces of plans) and how each fetch reserves its memory in the memo first.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use sealvol_core::error::Result;
use sealvol_core::read::Tiers;
use sealvol_core::safetensors;

use super::plan::{KEPT_PER_TENSOR, MIN_ENTRY, Plan, PlanId, Queue, Task, TensorOrder};
use crate::layout::{Layout, Layouts};
use crate::memo::{Memo, Want};

pub(super) struct Shared {
    pub(super) queue: Mutex<Queue>,
    pub(super) wake: Condvar,
    pub(super) memo: Arc<Memo>,
    pub(super) tiers: Arc<Tiers>,
    pub(super) layouts: Arc<Layouts>,
    pub(super) piece: u64,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Queue> {
        sealvol_core::lock(&self.queue)
    }

    pub(super) fn work(&self) {
        while let Some(task) = self.next_task() {
            // A failed read-ahead is not an error: the read that needs the chunk
            // fetches it again and reports what went wrong.
            if let Err(e) = self.run(task) {
                tracing::debug!("read-ahead failed: {e}");
            }
            self.lock().running -= 1;
        }
    }

    /// The next thing to fetch, waiting for one; `None` once the mount is going away.
    pub(super) fn next_task(&self) -> Option<Task> {
        let mut q = self.lock();
        loop {
            if q.closed {
                return None;
            }
            let wasted = self.memo.take_wasted();
            if !wasted.is_empty() {
                q.plans.retain_mut(|p| {
                    // A tensor plan whose reader is still in its file (in another order
                    // than planned) follows the reader instead of stopping.
                    let following = p
                        .tensors
                        .as_mut()
                        .is_some_and(|t| std::mem::take(&mut t.touched));
                    let keep = p.files.is_disjoint(&wasted) || following;
                    if !keep {
                        tracing::debug!("a read-ahead plan stopped: its reader went elsewhere");
                    }
                    keep
                });
            }
            let task = match q.ahead.pop_front() {
                Some((l, r)) => Some(Task::Ahead(l, r)),
                None => match q.headers.pop_front() {
                    Some((f, opened)) => Some(Task::Header(f, opened)),
                    None => q.take_piece(self.piece),
                },
            };
            if task.is_some() {
                q.running += 1;
                return task;
            }
            q = sealvol_core::locks::wait(&self.wake, q);
        }
    }

    pub(super) fn run(&self, task: Task) -> Result<()> {
        let counters = &self.tiers.counters;
        let capacity = self.memo.capacity();
        match task {
            Task::Ahead(layout, range) => {
                let bytes = self.memo.missing_bytes(&layout, range.clone());
                if bytes == 0 {
                    return Ok(());
                }
                // A stream's reader is reading now, so its room comes back soon; and it
                // goes before plans whose readers may have gone elsewhere.
                if let Some(mut r) = self.memo.reserve(
                    counters,
                    bytes,
                    capacity,
                    Duration::from_secs(1),
                    Some(layout.hash),
                ) {
                    self.memo
                        .get(&self.tiers, &layout, range, Want::Ahead, Some(&mut r))?;
                }
            }
            Task::Header(file, opened) => {
                let layout = self.layouts.get(self.tiers.repo(), &file.hash, file.size)?;
                if let Some(plan) = self.plan(layout, opened)? {
                    self.lock().plans.push(plan);
                    self.wake.notify_all();
                }
            }
            Task::Step(id, step) => {
                let layout = self.layouts.get(self.tiers.repo(), &step.file, step.size)?;
                let first = (step.first as usize).min(layout.len());
                let end = (first + step.count as usize).min(layout.len());
                let pieces = layout.pieces(first..end, self.piece);
                let mut q = self.lock();
                // Steps are taken only once the plan's pieces are out, so appending
                // keeps the profile's order.
                if let Some(p) = q.plans.iter_mut().find(|p| p.id == id) {
                    p.pieces
                        .extend(pieces.into_iter().map(|piece| (Arc::clone(&layout), piece)));
                }
                drop(q);
                self.wake.notify_all();
            }
            Task::Piece(id, layout, range) => {
                let bytes = self.memo.missing_bytes(&layout, range.clone());
                if bytes == 0 {
                    return Ok(());
                }
                match self.memo.reserve(
                    counters,
                    bytes,
                    capacity - capacity / 4,
                    Duration::from_millis(100),
                    None,
                ) {
                    Some(mut r) => {
                        self.memo
                            .get(&self.tiers, &layout, range, Want::Ahead, Some(&mut r))?;
                    }
                    // No room yet: the piece goes back to the front of its plan.
                    None => {
                        let mut q = self.lock();
                        if let Some(p) = q.plans.iter_mut().find(|p| p.id == id) {
                            p.pieces.push_front((layout, range));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads a `.safetensors` header and plans the tensors' chunks in offset order;
    /// `None` when the file is not one, or its header and tables would not fit a quarter
    /// of the bound (it is then read ahead like any other file). The header's bytes and
    /// the tensors it names are counted against the bound while they are parsed, and the
    /// plan's tables while it lives.
    pub(super) fn plan(&self, layout: Arc<Layout>, opened: bool) -> Result<Option<Plan>> {
        let size = layout.obj.size;
        let read = |start: u64, end: u64| -> Result<Vec<u8>> {
            let range = layout.chunks_of(start, end);
            let base = layout.start_of(range.start);
            let chunks = self
                .memo
                .get(&self.tiers, &layout, range, Want::Ahead, None)?;
            let mut out = Vec::with_capacity((end - start) as usize);
            let mut at = base;
            for c in &chunks {
                let c_end = at + c.len() as u64;
                out.extend_from_slice(
                    &c[(start.max(at) - at) as usize..(end.min(c_end) - at) as usize],
                );
                at = c_end;
            }
            Ok(out)
        };
        let skip = |why: String| {
            tracing::debug!("{}: no tensor plan: {why}", layout.hash.hex());
            Ok(None)
        };
        let Some(n) = safetensors::header_len(&read(0, 8.min(size))?, size) else {
            return Ok(None);
        };
        let n = n as usize;
        let share = self.memo.capacity() / 4;
        let per = safetensors::cost_per_tensor(safetensors::Want::Ranges) + KEPT_PER_TENSOR;
        if n >= share {
            return skip(format!("a {n}-byte header is past a quarter of the bound"));
        }
        let limit = (share - n) / per;
        let most = (n / MIN_ENTRY + 1).min(limit);
        let Some(reserved) = self.memo.reserve(
            &self.tiers.counters,
            n + most * per,
            self.memo.capacity(),
            Duration::from_secs(1),
            None,
        ) else {
            return skip("no room in the bound to read its header".into());
        };
        let header = read(8, 8 + n as u64)?;
        let tensors = match safetensors::parse(&header, size, safetensors::Want::Ranges, limit) {
            Ok(t) => t,
            Err(e) => return skip(e.to_string()),
        };
        drop(header);
        let order = TensorOrder::new(tensors, &layout);
        let held = reserved.keep(&self.memo, order.spans.len() * KEPT_PER_TENSOR);
        Ok(Some(Plan {
            id: PlanId::File(layout.hash),
            files: HashSet::from([layout.hash]),
            asked: vec![false; layout.len()],
            pieces: VecDeque::new(),
            steps: VecDeque::new(),
            opened,
            tensors: Some(order),
            layout: Some(layout),
            _held: Some(held),
        }))
    }
}
