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

use std::collections::{HashSet, VecDeque};
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use sealvol_core::digest::Hash;
use sealvol_core::error::Result;
use sealvol_core::profile::Step;
use sealvol_core::read::Tiers;

use crate::layout::{Layout, Layouts};
use sealvol_core::safetensors;

use crate::memo::{Held, Memo, Want};

/// One open file's read pattern.
pub struct Stream {
    next: u64,
    window: u64,
    /// Chunks before this index have been asked for already.
    scheduled: usize,
}

pub const MIN_WINDOW: u64 = 1 << 20;

impl Stream {
    pub fn new() -> Stream {
        Stream::starting_at(MIN_WINDOW)
    }

    /// A stream whose first sequential window is `window` (a jump still falls back to
    /// `MIN_WINDOW`, so that random reads do not prefetch much).
    pub fn starting_at(window: u64) -> Stream {
        Stream {
            next: 0,
            window: window.max(MIN_WINDOW),
            scheduled: 0,
        }
    }

    /// Whether a read at `off` carries on from where the last one ended.
    pub fn continues(&self, off: u64) -> bool {
        off == self.next && off > 0
    }

    /// Records a read of `[off, off+len)`; returns the chunks to prefetch, if any.
    pub fn on_read(&mut self, layout: &Layout, off: u64, len: u64, max: u64) -> Range<usize> {
        let sequential = off == self.next && off > 0 || off == 0 && self.next == 0;
        if sequential {
            self.window = (self.window * 2).min(max);
        } else {
            self.window = MIN_WINDOW;
            self.scheduled = 0;
        }
        self.next = off + len;
        let first = layout.chunk_at(off + len).max(self.scheduled);
        // Top the window up only when less than half of it is still ahead, so that
        // prefetches go out as a few large range reads, not one chunk per read.
        let ahead = layout.start_of(first).saturating_sub(off + len);
        if !sequential || ahead >= self.window / 2 {
            return first..first;
        }
        let last = layout.chunk_at(off + len + self.window).min(layout.len());
        if first >= last {
            return first..first;
        }
        self.scheduled = last;
        first..last
    }
}

impl Default for Stream {
    fn default() -> Self {
        Stream::new()
    }
}

/// A file the manifest names: enough to load its chunk list when a plan needs it.
#[derive(Clone, Copy)]
pub struct FileRef {
    pub hash: Hash,
    pub size: u64,
}

/// What a plan reads ahead: one file by its format, or a saved read profile.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PlanId {
    File(Hash),
    Profile,
}

struct Plan {
    id: PlanId,
    /// The file of a tensor plan.
    layout: Option<Arc<Layout>>,
    /// The files it reads: chunks of one dropped unread stop it.
    files: HashSet<Hash>,
    pieces: VecDeque<(Arc<Layout>, Range<usize>)>,
    /// A profile's steps whose chunk lists are not loaded yet.
    steps: VecDeque<Step>,
    /// A file plan's chunks a reader has asked for: the plan skips them (it fell
    /// behind its reader).
    asked: Vec<bool>,
    /// A reader has the file open (else it is a sibling of an open file, or a saved
    /// profile): opened plans go first.
    opened: bool,
    /// A `.safetensors` file's tensors, read ahead in the order its reader follows.
    tensors: Option<TensorOrder>,
    /// The memory its tables take, counted against the bound until the plan is dropped.
    _held: Option<Held>,
}

/// The two orders a loader reads a `.safetensors` file's tensors in: by name (what
/// `safe_open(...).keys()` gives, and so torch, transformers and vLLM) or by offset (a
/// walk of the header). The plan starts by name, counts which order the reader's steps
/// from tensor to tensor follow, and keeps just ahead of the reader in that order: when
/// the file is larger than the memory bound, reading ahead in the wrong order only
/// fetches what gets dropped before it is read.
struct TensorOrder {
    /// Each tensor's chunks, in offset order.
    spans: Vec<Range<usize>>,
    /// Tensor indices in name order, and each tensor's place in it.
    by_name: Vec<usize>,
    name_rank: Vec<usize>,
    by_offset: bool,
    votes: (u32, u32),
    /// The place (in the current order) of the next tensor to read ahead.
    cursor: usize,
    /// The tensor the reader was last in.
    last: Option<usize>,
    /// The reader asked for some of the file since read-ahead was last found dropped.
    touched: bool,
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
const STEP: usize = 4;

/// What a plan keeps per tensor: its span of chunks and its place in each order.
const KEPT_PER_TENSOR: usize =
    std::mem::size_of::<Range<usize>>() + 2 * std::mem::size_of::<usize>();

/// The fewest header bytes that name one tensor: `"":{"data_offsets":[0,0]},`.
const MIN_ENTRY: usize = 25;

impl TensorOrder {
    /// The non-empty tensors of `layout`'s file, in offset order; names are kept only
    /// to sort by.
    fn new(tensors: Vec<safetensors::Tensor>, layout: &Layout) -> TensorOrder {
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

    fn at(&self, place: usize) -> usize {
        if self.by_offset {
            place
        } else {
            self.by_name[place]
        }
    }

    fn place_of(&self, t: usize) -> usize {
        if self.by_offset { t } else { self.name_rank[t] }
    }

    /// The tensor `next` would give.
    fn peek(&self) -> Option<usize> {
        (self.cursor < self.spans.len()).then(|| self.at(self.cursor))
    }

    /// The next tensor to read ahead, if any.
    fn next(&mut self) -> Option<usize> {
        let t = (self.cursor < self.spans.len()).then(|| self.at(self.cursor))?;
        self.cursor += 1;
        Some(t)
    }

    /// The reader asked for chunks up to `c`: learn its order, and read ahead from the tensor
    /// after the one it is in. Whether the plan moved (its queued pieces are stale).
    fn reader_at(&mut self, c: usize) -> bool {
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
fn coalesce(steps: Vec<Step>) -> Vec<Step> {
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

enum Task {
    Ahead(Arc<Layout>, Range<usize>),
    Header(FileRef, bool),
    Piece(PlanId, Arc<Layout>, Range<usize>),
    Step(PlanId, Step),
}

#[derive(Default)]
struct Queue {
    ahead: VecDeque<(Arc<Layout>, Range<usize>)>,
    headers: VecDeque<(FileRef, bool)>,
    plans: Vec<Plan>,
    /// The next opened plan to take a piece from: open files share the workers.
    turn: usize,
    /// Files planned once already in this mount.
    planned: HashSet<Hash>,
    /// Tasks a worker has taken and not finished: counted under the lock that hands
    /// them out, so `pending` never sees a gap between a queue emptied and its work done.
    running: usize,
    closed: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    memo: Arc<Memo>,
    tiers: Arc<Tiers>,
    layouts: Arc<Layouts>,
    piece: u64,
}

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
            if let Some(t) = &mut p.tensors
                && t.reader_at(last)
            {
                p.pieces.clear();
            }
            return Some(match &p.tensors {
                Some(t) if t.by_offset => Order::Offset,
                _ => Order::Other,
            });
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
}

impl Queue {
    fn plans_left(&self) -> usize {
        self.plans
            .iter()
            .filter(|p| {
                !p.pieces.is_empty()
                    || !p.steps.is_empty()
                    || p.tensors.as_ref().is_some_and(|t| t.cursor < t.spans.len())
            })
            .count()
    }
}

impl Drop for Prefetcher {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.wake.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        sealvol_core::lock(&self.queue)
    }

    fn work(&self) {
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
    fn next_task(&self) -> Option<Task> {
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

    fn run(&self, task: Task) -> Result<()> {
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
                if let Some(mut r) =
                    self.memo
                        .reserve(counters, bytes, capacity, Duration::from_secs(1), true)
                {
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
                    false,
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
    fn plan(&self, layout: Arc<Layout>, opened: bool) -> Result<Option<Plan>> {
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
            false,
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

impl Queue {
    /// A piece (or a step to load) of an opened plan, taking turns between them; else
    /// of the first sibling plan. Finished plans are dropped.
    fn take_piece(&mut self, piece_bytes: u64) -> Option<Task> {
        self.plans.retain(|p| {
            !p.pieces.is_empty()
                || !p.steps.is_empty()
                || p.tensors.as_ref().is_some_and(|t| t.cursor < t.spans.len())
        });
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
        let plan = self.plans.get_mut(i)?;
        if plan.pieces.is_empty()
            && let (Some(order), Some(layout)) = (&mut plan.tensors, &plan.layout)
            && let Some(t) = order.next()
        {
            // The tensors next in the order that follow on in the file join this one,
            // up to a piece: a range read per tensor would cost a round trip per 2 MiB.
            let mut span = order.spans[t].clone();
            while let Some(u) = order.peek()
                && order.spans[u].start <= span.end
                && order.spans[u].end >= span.end
                && layout.start_of(order.spans[u].end) - layout.start_of(span.start) <= piece_bytes
            {
                span.end = order.spans[u].end;
                order.cursor += 1;
            }
            plan.pieces.extend(
                layout
                    .pieces(span, piece_bytes)
                    .into_iter()
                    .map(|p| (Arc::clone(layout), p)),
            );
        }
        while let Some((layout, piece)) = plan.pieces.pop_front() {
            // What a reader asked for already is not read ahead again.
            let skip = match plan.asked.get(piece.clone()) {
                Some(asked) => asked.iter().take_while(|a| **a).count(),
                None => 0,
            };
            if piece.start + skip < piece.end {
                return Some(Task::Piece(plan.id, layout, piece.start + skip..piece.end));
            }
        }
        let step = plan.steps.pop_front()?;
        Some(Task::Step(plan.id, step))
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
