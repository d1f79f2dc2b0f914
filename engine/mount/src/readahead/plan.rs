//! Plans: a file read whole in the order its format gives (a `.safetensors` file's
//! tensors, in its reader's order), or a saved read profile's steps; and how the queue
//! hands out their pieces.

use std::collections::{HashSet, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use sealvol_core::digest::Hash;
use sealvol_core::profile::Step;
use sealvol_core::safetensors;

use crate::layout::Layout;
use crate::memo::Held;

/// A file the manifest names: enough to load its chunk list when a plan needs it.
#[derive(Clone, Copy)]
pub struct FileRef {
    pub hash: Hash,
    pub size: u64,
}

/// What a plan reads ahead: one file by its format, or a saved read profile.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum PlanId {
    File(Hash),
    Profile,
}

pub(super) struct Plan {
    pub(super) id: PlanId,
    /// The file of a tensor plan.
    pub(super) layout: Option<Arc<Layout>>,
    /// The files it reads: chunks of one dropped unread stop it.
    pub(super) files: HashSet<Hash>,
    pub(super) pieces: VecDeque<(Arc<Layout>, Range<usize>)>,
    /// A profile's steps whose chunk lists are not loaded yet.
    pub(super) steps: VecDeque<Step>,
    /// A file plan's chunks a reader has asked for: the plan skips them (it fell
    /// behind its reader).
    pub(super) asked: Vec<bool>,
    /// A reader has the file open (else it is a sibling of an open file, or a saved
    /// profile): opened plans go first.
    pub(super) opened: bool,
    /// A `.safetensors` file's tensors, read ahead in the order its reader follows.
    pub(super) tensors: Option<TensorOrder>,
    /// The memory its tables take, counted against the bound until the plan is dropped.
    pub(super) _held: Option<Held>,
}

/// The two orders a loader reads a `.safetensors` file's tensors in: by name (what
/// `safe_open(...).keys()` gives, and so torch, transformers and vLLM) or by offset (a
/// walk of the header). The plan starts by name, counts which order the reader's steps
/// from tensor to tensor follow, and keeps just ahead of the reader in that order: when
/// the file is larger than the memory bound, reading ahead in the wrong order only
/// fetches what gets dropped before it is read.
pub(super) struct TensorOrder {
    /// Each tensor's chunks, in offset order.
    pub(super) spans: Vec<Range<usize>>,
    /// Tensor indices in name order, and each tensor's place in it.
    pub(super) by_name: Vec<usize>,
    pub(super) name_rank: Vec<usize>,
    pub(super) by_offset: bool,
    pub(super) votes: (u32, u32),
    /// The place (in the current order) of the next tensor to read ahead.
    pub(super) cursor: usize,
    /// The tensor the reader was last in.
    pub(super) last: Option<usize>,
    /// The reader asked for some of the file since read-ahead was last found dropped.
    pub(super) touched: bool,
}

/// The order a plan follows its reader in (`Prefetcher::note_read`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// By offset: the reader reads on through the file.
    Offset,
    /// Another (by name, or not known yet).
    Other,
}

/// How many tensors forward one read may pass over and still count as a step.
pub(super) const STEP: usize = 4;

/// What a plan keeps per tensor: its span of chunks and its place in each order.
pub(super) const KEPT_PER_TENSOR: usize =
    std::mem::size_of::<Range<usize>>() + 2 * std::mem::size_of::<usize>();

/// The fewest header bytes that name one tensor: `"":{"data_offsets":[0,0]},`.
pub(super) const MIN_ENTRY: usize = 25;

impl TensorOrder {
    /// The non-empty tensors of `layout`'s file, in offset order; names are kept only
    /// to sort by.
    pub(super) fn new(tensors: Vec<safetensors::Tensor>, layout: &Layout) -> TensorOrder {
        let mut tensors: Vec<safetensors::Tensor> = tensors
            .into_iter()
            .filter(|t| !t.range.is_empty())
            .collect();
        tensors.sort_by_key(|t| t.range.start);
        let mut by_name: Vec<usize> = (0..tensors.len()).collect();
        by_name.sort_by(|&a, &b| tensors[a].name.cmp(&tensors[b].name));
        let spans: Vec<Range<usize>> = tensors
            .iter()
            .map(|t| layout.chunks_of(t.range.start, t.range.end))
            .collect();
        drop(tensors);
        let mut name_rank = vec![0; spans.len()];
        for (rank, &t) in by_name.iter().enumerate() {
            name_rank[t] = rank;
        }
        TensorOrder {
            spans,
            by_name,
            name_rank,
            by_offset: false,
            votes: (0, 0),
            cursor: 0,
            last: None,
            touched: false,
        }
    }

    pub(super) fn at(&self, place: usize) -> usize {
        if self.by_offset {
            place
        } else {
            self.by_name[place]
        }
    }

    pub(super) fn place_of(&self, t: usize) -> usize {
        if self.by_offset { t } else { self.name_rank[t] }
    }

    /// The tensor `next` would give.
    pub(super) fn peek(&self) -> Option<usize> {
        (self.cursor < self.spans.len()).then(|| self.at(self.cursor))
    }

    /// The next tensor to read ahead, if any.
    pub(super) fn next(&mut self) -> Option<usize> {
        let t = (self.cursor < self.spans.len()).then(|| self.at(self.cursor))?;
        self.cursor += 1;
        Some(t)
    }

    /// The reader asked for chunks up to `c`: learn its order, and read ahead from the tensor
    /// after the one it is in. Whether the plan moved (its queued pieces are stale).
    pub(super) fn reader_at(&mut self, c: usize) -> bool {
        self.touched = true;
        let t = self.spans.partition_point(|r| r.end <= c);
        if t >= self.spans.len() || self.last == Some(t) {
            return false;
        }
        // A step forward by a few tensors in one order is a vote for it: the kernel
        // asks for up to a few MiB at once, which can pass over whole tensors.
        let ahead = |from: usize, to: usize| to > from && to - from <= STEP;
        if let Some(last) = self.last {
            if ahead(last, t) {
                self.votes.0 += 1;
            }
            if ahead(self.name_rank[last], self.name_rank[t]) {
                self.votes.1 += 1;
            }
            self.by_offset = self.votes.0 > self.votes.1;
        }
        self.last = Some(t);
        self.cursor = self.place_of(t) + 1;
        true
    }
}

/// Joins runs of one file that follow each other in the profile and touch or overlap
/// (readers on several threads record one stretch as runs out of order), so that
/// they are read ahead with one range read, not one per run.
pub(super) fn coalesce(steps: Vec<Step>) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for s in steps {
        let end = s.first.saturating_add(s.count);
        match out.last_mut() {
            Some(last)
                if last.file == s.file
                    && s.first <= last.first.saturating_add(last.count)
                    && end >= last.first =>
            {
                let lo = last.first.min(s.first);
                let hi = last.first.saturating_add(last.count).max(end);
                (last.first, last.count) = (lo, hi - lo);
            }
            _ => out.push(s),
        }
    }
    out
}

impl Plan {
    /// Whether the plan has anything left to hand out.
    fn has_work(&self) -> bool {
        !self.pieces.is_empty()
            || !self.steps.is_empty()
            || self
                .tensors
                .as_ref()
                .is_some_and(|t| t.cursor < t.spans.len())
    }

    /// The plan's next piece (or step to load); `None` only when it has nothing left,
    /// so that a run of tensors its reader has read already never hides the rest.
    fn next_task(&mut self, piece_bytes: u64) -> Option<Task> {
        loop {
            if self.pieces.is_empty()
                && let (Some(order), Some(layout)) = (&mut self.tensors, &self.layout)
                && let Some(t) = order.next()
            {
                // The tensors next in the order that follow on in the file join this
                // one, up to a piece: a range read per tensor would cost a round trip
                // per 2 MiB.
                let mut span = order.spans[t].clone();
                while let Some(u) = order.peek()
                    && order.spans[u].start <= span.end
                    && order.spans[u].end >= span.end
                    && layout.start_of(order.spans[u].end) - layout.start_of(span.start)
                        <= piece_bytes
                {
                    span.end = order.spans[u].end;
                    order.cursor += 1;
                }
                self.pieces.extend(
                    layout
                        .pieces(span, piece_bytes)
                        .into_iter()
                        .map(|p| (Arc::clone(layout), p)),
                );
            }
            while let Some((layout, piece)) = self.pieces.pop_front() {
                // What a reader asked for already is not read ahead again.
                let skip = match self.asked.get(piece.clone()) {
                    Some(asked) => asked.iter().take_while(|a| **a).count(),
                    None => 0,
                };
                if piece.start + skip < piece.end {
                    return Some(Task::Piece(self.id, layout, piece.start + skip..piece.end));
                }
            }
            if self
                .tensors
                .as_ref()
                .is_some_and(|t| t.cursor < t.spans.len())
            {
                continue;
            }
            return self.steps.pop_front().map(|step| Task::Step(self.id, step));
        }
    }
}

impl Queue {
    pub(super) fn plans_left(&self) -> usize {
        self.plans.iter().filter(|p| p.has_work()).count()
    }

    /// A piece (or a step to load) of an opened plan, taking turns between them; else
    /// of the first sibling plan. Finished plans are dropped.
    pub(super) fn take_piece(&mut self, piece_bytes: u64) -> Option<Task> {
        loop {
            self.plans.retain(Plan::has_work);
            let opened: Vec<usize> = (0..self.plans.len())
                .filter(|&i| self.plans[i].opened)
                .collect();
            let i = match opened.len() {
                0 => 0,
                n => {
                    self.turn = (self.turn + 1) % n;
                    opened[self.turn]
                }
            };
            // A plan that gives nothing has nothing left: the next round drops it.
            if let Some(task) = self.plans.get_mut(i)?.next_task(piece_bytes) {
                return Some(task);
            }
        }
    }
}

pub(super) enum Task {
    Ahead(Arc<Layout>, Range<usize>),
    Header(FileRef, bool),
    Piece(PlanId, Arc<Layout>, Range<usize>),
    Step(PlanId, Step),
}

#[derive(Default)]
pub(super) struct Queue {
    pub(super) ahead: VecDeque<(Arc<Layout>, Range<usize>)>,
    pub(super) headers: VecDeque<(FileRef, bool)>,
    pub(super) plans: Vec<Plan>,
    /// The next opened plan to take a piece from: open files share the workers.
    pub(super) turn: usize,
    /// Files planned once already in this mount.
    pub(super) planned: HashSet<Hash>,
    /// Tasks a worker has taken and not finished: counted under the lock that hands
    /// them out, so `pending` never sees a gap between a queue emptied and its work done.
    pub(super) running: usize,
    pub(super) closed: bool,
}
