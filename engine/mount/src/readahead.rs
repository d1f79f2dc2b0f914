//! The mount's memory tier and read-ahead.
//!
//! `Memo` holds recently fetched chunks (bounded in bytes, least recently used out) and
//! knows which chunks are being fetched, so a read never fetches a chunk twice: it waits
//! for the fetch already under way. `Stream` is one open file's read pattern: reads that
//! follow each other double the window (up to a bound), a jump resets it. Prefetch
//! jobs run on a small pool so reading the next megabytes overlaps with serving these.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex};

use crossbeam_channel::{Receiver, Sender};

use sealvol_core::digest::Hash;
use sealvol_core::error::Result;
use sealvol_core::objects::FileObject;

use sealvol_core::read::{ChunkBytes, Chunks, Tiers, add};

/// A file's chunk list with the end offset of every chunk, for finding a chunk by offset.
pub struct Layout {
    pub obj: FileObject,
    ends: Vec<u64>,
}

impl Layout {
    pub fn new(obj: FileObject) -> Layout {
        let mut end = 0;
        let ends = obj
            .chunks
            .iter()
            .map(|c| {
                end += c.entry.raw_len as u64;
                end
            })
            .collect();
        Layout { obj, ends }
    }

    /// The chunk holding byte `off`, or the chunk count when `off` is at or past the end.
    pub fn chunk_at(&self, off: u64) -> usize {
        self.ends.partition_point(|&e| e <= off)
    }

    pub fn start_of(&self, i: usize) -> u64 {
        if i == 0 { 0 } else { self.ends[i - 1] }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

#[derive(Default)]
struct MemoInner {
    ready: HashMap<Hash, (ChunkBytes, u64)>,
    /// use tick → chunk, oldest first.
    order: BTreeMap<u64, Hash>,
    tick: u64,
    bytes: usize,
    pending: HashSet<Hash>,
}

pub struct Memo {
    inner: Mutex<MemoInner>,
    done: Condvar,
    capacity: usize,
}

impl Memo {
    pub fn new(capacity: usize) -> Memo {
        Memo {
            inner: Mutex::new(MemoInner::default()),
            done: Condvar::new(),
            capacity,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MemoInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Chunks `range` of a file: from memory, by waiting for a fetch under way, or by
    /// fetching the missing ones (as coalesced runs) through the tiers.
    pub fn get(
        &self,
        tiers: &Tiers,
        layout: &Layout,
        range: Range<usize>,
        demand: bool,
    ) -> Result<Vec<ChunkBytes>> {
        let chunks = &layout.obj.chunks;
        loop {
            let mut g = self.lock();
            let mut out = Vec::with_capacity(range.len());
            let mut waiting = false;
            let mut missing = Vec::new();
            for i in range.clone() {
                let h = chunks[i].entry.hash;
                if let Some(bytes) = g.touch(&h) {
                    out.push(Some(bytes));
                } else {
                    if g.pending.contains(&h) {
                        waiting = true;
                    } else {
                        missing.push(i);
                    }
                    out.push(None);
                }
            }
            if waiting && missing.is_empty() {
                drop(self.done.wait(g).unwrap_or_else(|p| p.into_inner()));
                continue;
            }
            if missing.is_empty() {
                if demand {
                    add(&tiers.counters.memory_hits, range.len() as u64);
                }
                return Ok(out.into_iter().flatten().collect());
            }
            // Claim the missing chunks, fetch them unlocked, in runs of adjacent ones.
            for &i in &missing {
                g.pending.insert(chunks[i].entry.hash);
            }
            drop(g);
            let fetched = self.fetch_runs(tiers, layout, &missing);
            let mut g = self.lock();
            for &i in &missing {
                g.pending.remove(&chunks[i].entry.hash);
            }
            let result = fetched.map(|got| {
                for (i, bytes) in got {
                    g.insert(chunks[i].entry.hash, bytes.clone(), self.capacity);
                    out[i - range.start] = Some(bytes);
                }
            });
            drop(g);
            self.done.notify_all();
            result?;
            if out.iter().all(Option::is_some) {
                return Ok(out.into_iter().flatten().collect());
            }
            // Some chunks were being fetched by someone else: go round for them.
        }
    }

    fn fetch_runs(
        &self,
        tiers: &Tiers,
        layout: &Layout,
        missing: &[usize],
    ) -> Result<Vec<(usize, ChunkBytes)>> {
        let mut got = Vec::with_capacity(missing.len());
        let mut k = 0;
        while k < missing.len() {
            let mut n = 1;
            while k + n < missing.len() && missing[k + n] == missing[k] + n {
                n += 1;
            }
            let run = missing[k]..missing[k] + n;
            for (i, bytes) in run.clone().zip(tiers.fetch(&layout.obj, run)?) {
                got.push((i, bytes));
            }
            k += n;
        }
        Ok(got)
    }
}

impl MemoInner {
    fn touch(&mut self, h: &Hash) -> Option<ChunkBytes> {
        self.tick += 1;
        let tick = self.tick;
        let (bytes, old) = self.ready.get_mut(h)?;
        self.order.remove(old);
        *old = tick;
        self.order.insert(tick, *h);
        Some(bytes.clone())
    }

    fn insert(&mut self, h: Hash, bytes: ChunkBytes, capacity: usize) {
        if self.ready.contains_key(&h) {
            return;
        }
        self.tick += 1;
        self.bytes += bytes.len();
        self.ready.insert(h, (bytes, self.tick));
        self.order.insert(self.tick, h);
        while self.bytes > capacity {
            let Some((_, old)) = self.order.pop_first() else {
                break;
            };
            if let Some((b, _)) = self.ready.remove(&old) {
                self.bytes -= b.len();
            }
        }
    }
}

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

/// A prefetch: chunks of one file to bring into the memo.
pub struct Job {
    pub layout: Arc<Layout>,
    pub range: Range<usize>,
}

/// Starts `n` prefetch workers; they end when every sender is dropped.
pub fn start_pool(n: usize, memo: Arc<Memo>, tiers: Arc<Tiers>) -> Sender<Job> {
    let (tx, rx): (Sender<Job>, Receiver<Job>) = crossbeam_channel::bounded(64);
    for i in 0..n {
        let rx = rx.clone();
        let memo = Arc::clone(&memo);
        let tiers = Arc::clone(&tiers);
        let _ = std::thread::Builder::new()
            .name(format!("sealvol-prefetch-{i}"))
            .spawn(move || {
                for job in rx {
                    // A failed prefetch is not an error: the read that needs the chunk
                    // fetches it again and reports what went wrong.
                    if let Err(e) = memo.get(&tiers, &job.layout, job.range, false) {
                        tracing::debug!("prefetch failed: {e}");
                    }
                }
            });
    }
    tx
}
