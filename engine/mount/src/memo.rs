//! The mount's memory tier: chunks read recently or ahead of the readers, under one
//! bound (`--prefetch-memory`) on the memory they hold.
//!
//! - Memory is held by buffers (one range read is one buffer, shared by its chunks), so
//!   the bound counts each buffer once, whole, while any chunk of it is kept.
//! - Read-ahead reserves its bytes before it fetches, and waits while the bound is
//!   reached: it never holds more than the bound, however fast the origin and however
//!   slow the reader. The peak is published (`memory_peak`) so tests and the Mounts
//!   screen can see it.
//! - Chunks readers have had are let go of beyond the newest eighth of the bound
//!   (`keep_read_bytes`), room short or not: the kernel's page cache holds what it was
//!   served, and their buffers go back to the read path's pool for the next range read
//!   instead of each range read taking fresh pages.
//! - When read-ahead needs room, the last few chunks readers had are kept (a reader in
//!   the middle of one asks for it again), unless the buffers only such chunks hold
//!   take more than a quarter of the bound: each can hold a whole range read, and a
//!   few of them once filled a small bound while read-ahead waited.
//! - Chunks read ahead and not asked for yet ("unread") are dropped last; dropping one
//!   counts as read-ahead wasted, and the file it was read for is reported, so a plan
//!   that runs ahead of a reader who went elsewhere stops.
//! - The memo knows which chunks are being fetched, so a chunk is never fetched twice
//!   at once: a second reader waits for the first fetch.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sealvol_core::digest::Hash;
use sealvol_core::error::Result;
use sealvol_core::read::{ChunkBytes, Chunks, Counters, Tiers, add};

use crate::layout::Layout;

/// Chunks readers asked for last, kept when read-ahead needs room: two per MiB of the
/// bound, 4 to 16 (a small bound cannot spare 16 chunks to readers' leftovers).
fn keep_asked(capacity: usize) -> usize {
    (capacity >> 19).clamp(4, 16)
}

/// Bytes of chunks readers have had that are kept whatever the room: an eighth of the
/// bound, 8 to 64 MiB. Readers' requests overlap (the kernel reads ahead up to 4 MiB in
/// requests served out of order, and a block's proof reaches into the chunk before), so
/// fewer made a chunk come from the origin twice.
fn keep_read_bytes(capacity: usize) -> usize {
    (capacity / 8).clamp(8 << 20, 64 << 20)
}

/// Why chunks are fetched.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// A reader is waiting for them.
    Demand,
    /// Read ahead; no reader asked yet.
    Ahead,
}

struct Slot {
    bytes: ChunkBytes,
    tick: u64,
    /// Read ahead for this file and not asked for since.
    unread_for: Option<Hash>,
}

/// One range read's buffer: its length and how many of its chunks are kept, and of
/// those, read ahead and not asked for yet.
struct Buffer {
    len: usize,
    chunks: u32,
    unread: u32,
}

#[derive(Default)]
struct Inner {
    ready: HashMap<Hash, Slot>,
    /// Use tick → chunk, oldest first: chunks a reader asked for, and chunks read ahead.
    asked: BTreeMap<u64, Hash>,
    /// Bytes of the chunks in `asked`.
    asked_bytes: usize,
    unread: BTreeMap<u64, Hash>,
    tick: u64,
    buffers: HashMap<usize, Buffer>,
    /// Bytes of the buffers kept, and of fetches reserved and under way.
    held: usize,
    /// Bytes of the buffers whose kept chunks readers have all had: what readers'
    /// leftovers hold (`make_room`).
    read_held: usize,
    reserved: usize,
    pending: HashSet<Hash>,
    /// Files whose read-ahead was dropped unread since the last look.
    wasted_for: HashSet<Hash>,
    /// Bumped whenever memory is given back; `stuck` counts the reservations that found
    /// no room since the last bump, so a waiter woken but not yet running is not stuck.
    room_given: u64,
    stuck: usize,
}

pub struct Memo {
    inner: Mutex<Inner>,
    /// A fetch finished.
    done: Condvar,
    /// Memory was given back (a reservation ended, unread chunks were asked for).
    room: Condvar,
    capacity: usize,
}

/// Bytes set aside for one read-ahead fetch; given back when the fetch ends (its chunks
/// are then counted as kept instead).
pub struct Reservation<'a> {
    memo: &'a Memo,
    bytes: usize,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            let mut g = self.memo.lock();
            g.reserved -= self.bytes;
            g.give_room();
            drop(g);
            self.bytes = 0;
            self.memo.room.notify_all();
        }
    }
}

impl Reservation<'_> {
    /// Keeps `bytes` of this reservation (the rest is given back) for as long as the
    /// returned `Held` lives: memory its caller keeps apart from chunks, such as a
    /// plan's tables, counted against the bound like chunks are.
    pub fn keep(mut self, memo: &Arc<Memo>, bytes: usize) -> Held {
        debug_assert!(std::ptr::eq(self.memo, Arc::as_ptr(memo)));
        let kept = bytes.min(self.bytes);
        let mut g = self.memo.lock();
        g.reserved -= self.bytes - kept;
        g.give_room();
        drop(g);
        self.bytes = 0;
        self.memo.room.notify_all();
        Held {
            memo: Arc::clone(memo),
            bytes: kept,
        }
    }
}

/// Memory counted against the bound until dropped (`Reservation::keep`).
pub struct Held {
    memo: Arc<Memo>,
    bytes: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.bytes > 0 {
            let mut g = self.memo.lock();
            g.reserved -= self.bytes;
            g.give_room();
            drop(g);
            self.memo.room.notify_all();
        }
    }
}

impl Memo {
    pub fn new(capacity: usize) -> Memo {
        Memo {
            inner: Mutex::new(Inner::default()),
            done: Condvar::new(),
            room: Condvar::new(),
            capacity,
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes of the buffers kept now.
    pub fn held(&self) -> usize {
        self.lock().held
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        sealvol_core::lock(&self.inner)
    }

    /// Sets `bytes` aside for a read-ahead fetch once the memory kept and reserved
    /// leaves room for them under `limit` (at most the capacity), dropping chunks
    /// readers have had (all but the last few, which a reader may be in the middle of)
    /// and, with `over_unread_of_others` naming the file read ahead for, chunks read
    /// ahead for other files; `None` if there is no room within `wait`.
    pub fn reserve(
        &self,
        counters: &Counters,
        bytes: usize,
        limit: usize,
        wait: Duration,
        over_unread_of_others: Option<Hash>,
    ) -> Option<Reservation<'_>> {
        let limit = limit.min(self.capacity);
        let deadline = Instant::now() + wait;
        let mut g = self.lock();
        loop {
            while g.held + g.reserved + bytes > limit
                && g.make_room(over_unread_of_others, self.capacity, counters)
            {}
            if g.held + g.reserved + bytes <= limit {
                g.reserved += bytes;
                note_peak(&g, counters);
                return Some(Reservation { memo: self, bytes });
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            let since = g.room_given;
            g.stuck += 1;
            g = self
                .room
                .wait_timeout(g, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            // Counted stuck at a bump that has not passed: it is not stuck any more.
            if g.room_given == since {
                g.stuck -= 1;
            }
        }
    }

    /// Reservations waiting for memory that nothing has given back since they found
    /// none: with no fetch under way, only a reader can free it.
    pub fn stuck(&self) -> usize {
        self.lock().stuck
    }

    /// Bytes of chunks `range` that are neither kept nor being fetched: what a
    /// read-ahead of them would add.
    pub fn missing_bytes(&self, layout: &Layout, range: Range<usize>) -> usize {
        let g = self.lock();
        layout.obj.chunks[range]
            .iter()
            .filter(|c| !g.ready.contains_key(&c.entry.hash) && !g.pending.contains(&c.entry.hash))
            .map(|c| c.entry.stored_len as usize)
            .sum()
    }

    /// Files whose read-ahead was dropped before anyone read it, since the last call.
    pub fn take_wasted(&self) -> HashSet<Hash> {
        std::mem::take(&mut self.lock().wasted_for)
    }

    /// Chunks `range` of a file: from memory, by waiting for a fetch under way, or by
    /// fetching the missing ones (as coalesced runs) through the tiers. A read-ahead
    /// passes its reservation, which its chunks take over as they are kept.
    /// Chunks `range` if the memory tier holds every one of them now; never fetches
    /// or waits, and does not count as a use. `Err(true)` when some are not held but
    /// are being fetched (a wait for them is short), `Err(false)` otherwise.
    pub fn peek(&self, layout: &Layout, range: Range<usize>) -> Result<Vec<ChunkBytes>, bool> {
        let g = self.lock();
        let mut out = Vec::with_capacity(range.len());
        let mut pending = false;
        let mut absent = false;
        for i in range {
            let h = &layout.obj.chunks[i].entry.hash;
            match g.ready.get(h) {
                Some(s) => out.push(s.bytes.clone()),
                None if g.pending.contains(h) => pending = true,
                None => absent = true,
            }
        }
        match (pending, absent) {
            (false, false) => Ok(out),
            (true, false) => Err(true),
            _ => Err(false),
        }
    }

    pub fn get(
        &self,
        tiers: &Tiers,
        layout: &Layout,
        range: Range<usize>,
        want: Want,
        mut reservation: Option<&mut Reservation<'_>>,
    ) -> Result<Vec<ChunkBytes>> {
        let chunks = &layout.obj.chunks;
        let counters = &tiers.counters;
        loop {
            let mut g = self.lock();
            let mut out = Vec::with_capacity(range.len());
            let mut waiting = false;
            let mut missing = Vec::new();
            let mut woke = false;
            for i in range.clone() {
                let h = chunks[i].entry.hash;
                if let Some((bytes, was_unread)) = g.touch(&h, want) {
                    woke |= was_unread;
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
            if want == Want::Demand && g.let_go_of_read(self.capacity, counters) {
                woke = true;
            }
            if woke {
                g.give_room();
                self.room.notify_all();
            }
            if waiting && missing.is_empty() {
                // Another reader's fetch: wait for it, but not past this read's deadline.
                match sealvol_core::deadline::left() {
                    None => drop(sealvol_core::locks::wait(&self.done, g)),
                    Some(left) if left.is_zero() => {
                        return Err(sealvol_core::deadline::passed("a fetch under way"));
                    }
                    Some(left) => drop(
                        self.done
                            .wait_timeout(g, left)
                            .unwrap_or_else(|p| p.into_inner()),
                    ),
                }
                continue;
            }
            if missing.is_empty() {
                if want == Want::Demand {
                    add(&counters.memory_hits, range.len() as u64);
                }
                return Ok(out.into_iter().flatten().collect());
            }
            // Claim the missing chunks, fetch them unlocked, in runs of adjacent ones.
            for &i in &missing {
                g.pending.insert(chunks[i].entry.hash);
            }
            drop(g);
            let fetched = fetch_runs(tiers, layout, &missing);
            let mut g = self.lock();
            for &i in &missing {
                g.pending.remove(&chunks[i].entry.hash);
            }
            if let Some(r) = reservation.as_deref_mut() {
                g.reserved -= r.bytes;
                r.bytes = 0;
            }
            let unread_for = (want == Want::Ahead).then_some(layout.hash);
            let result = fetched.map(|got| {
                for (i, bytes) in got {
                    if unread_for.is_some() {
                        add(&counters.prefetched_bytes, bytes.len() as u64);
                    }
                    g.insert(chunks[i].entry.hash, bytes.clone(), unread_for);
                    out[i - range.start] = Some(bytes);
                }
            });
            while g.held + g.reserved > self.capacity && g.drop_for_demand(counters) {}
            note_peak(&g, counters);
            g.give_room();
            drop(g);
            self.done.notify_all();
            self.room.notify_all();
            result?;
            if out.iter().all(Option::is_some) {
                return Ok(out.into_iter().flatten().collect());
            }
            // Some chunks were being fetched by someone else: go round for them.
        }
    }
}

fn note_peak(g: &Inner, counters: &Counters) {
    counters
        .memory_peak
        .fetch_max((g.held + g.reserved) as u64, Ordering::Relaxed);
}

fn fetch_runs(
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
        // The blocks wholly inside the run are proven here, on the fetching thread
        // (read-ahead's, often), so that readers find them proven, and the chunks
        // inside them are hashed once, as blocks; blocks reaching into neighbours are
        // proven when a reader asks for them.
        let bytes = tiers.fetch_for_proof(&layout.obj, run.clone())?;
        for (i, bytes) in run.zip(bytes) {
            got.push((i, bytes));
        }
        k += n;
    }
    Ok(got)
}

impl Inner {
    /// Memory was given back (or chunks became droppable): every waiter tries again.
    fn give_room(&mut self) {
        self.room_given += 1;
        self.stuck = 0;
    }

    /// The chunk, now the most recently used; whether a reader's ask ended its being
    /// unread.
    fn touch(&mut self, h: &Hash, want: Want) -> Option<(ChunkBytes, bool)> {
        self.tick += 1;
        let tick = self.tick;
        let slot = self.ready.get_mut(h)?;
        let was_unread = slot.unread_for.is_some() && want == Want::Demand;
        match slot.unread_for {
            Some(_) if want == Want::Ahead => return Some((slot.bytes.clone(), false)),
            Some(_) => {
                self.unread.remove(&slot.tick);
                slot.unread_for = None;
                self.asked_bytes += slot.bytes.len();
            }
            None => {
                self.asked.remove(&slot.tick);
            }
        }
        slot.tick = tick;
        self.asked.insert(tick, *h);
        let bytes = slot.bytes.clone();
        if was_unread {
            let (key, len) = bytes.buffer();
            self.count_in_buffer(key, len, 0, -1);
        }
        Some((bytes, was_unread))
    }

    fn insert(&mut self, h: Hash, bytes: ChunkBytes, unread_for: Option<Hash>) {
        if self.ready.contains_key(&h) {
            return;
        }
        self.tick += 1;
        let (key, len) = bytes.buffer();
        self.count_in_buffer(key, len, 1, unread_for.is_some() as i32);
        match unread_for {
            Some(_) => self.unread.insert(self.tick, h),
            None => {
                self.asked_bytes += bytes.len();
                self.asked.insert(self.tick, h)
            }
        };
        self.ready.insert(
            h,
            Slot {
                bytes,
                tick: self.tick,
                unread_for,
            },
        );
    }

    /// Drops a chunk to make room for a read-ahead: one readers have had, but not one
    /// of the last few (`keep_asked`; a reader moving through a chunk asks for it again)
    /// unless the buffers only readers' chunks hold take more than an eighth of the
    /// bound (each such chunk can hold a whole range read: a few of them filled a small
    /// bound, and read-ahead waited while its reader fetched every chunk itself), else, if `over_unread_of_others` names the file read ahead for, the newest chunk
    /// read ahead for another file (the one its reader needs last). Never one read
    /// ahead for the same file: it lies nearer its reader than what the reservation is
    /// for, and dropping it made a busy reader fetch its chunks twice.
    fn make_room(
        &mut self,
        over_unread_of_others: Option<Hash>,
        capacity: usize,
        counters: &Counters,
    ) -> bool {
        let victim = if self.asked.len() > keep_asked(capacity)
            || (self.asked.len() > 2 && self.read_held > capacity / 4)
        {
            self.asked.pop_first()
        } else if let Some(mine) = over_unread_of_others {
            let key = self
                .unread
                .iter()
                .rev()
                .find(|(_, h)| {
                    self.ready
                        .get(*h)
                        .is_some_and(|s| s.unread_for != Some(mine))
                })
                .map(|(k, _)| *k);
            key.and_then(|k| self.unread.remove_entry(&k))
        } else {
            None
        };
        victim.is_some_and(|(_, h)| {
            self.forget(&h, counters);
            true
        })
    }

    /// Drops the oldest chunks readers have had beyond `keep_read_bytes` (and the last
    /// `keep_asked`), whether or not room is short; whether any went. The kernel keeps
    /// what it was served in its page cache, so a chunk read is seldom asked again;
    /// kept until the bound was reached, every range read of a file's first pass
    /// through the mount took fresh pages (faulted in and zeroed: a sixth of a cold
    /// `dd`'s time), while a buffer let go of goes back to the read path's pool for the
    /// next range read.
    fn let_go_of_read(&mut self, capacity: usize, counters: &Counters) -> bool {
        let mut any = false;
        while self.asked_bytes > keep_read_bytes(capacity)
            && self.asked.len() > keep_asked(capacity)
        {
            let Some((_, h)) = self.asked.pop_first() else {
                break;
            };
            self.forget(&h, counters);
            any = true;
        }
        any
    }

    /// Drops the least recently used chunk readers have had, else the newest chunk
    /// read ahead: the one furthest ahead of its reader, needed last. Dropping the
    /// oldest instead (the next one the reader wants) made a reader that got ahead of
    /// its read-ahead on a busy machine fetch every chunk twice: each miss evicted the
    /// chunk after it (a mount took 1.6x what it read through a peer).
    fn drop_for_demand(&mut self, counters: &Counters) -> bool {
        let victim = self.asked.pop_first().or_else(|| self.unread.pop_last());
        victim.is_some_and(|(_, h)| {
            self.forget(&h, counters);
            true
        })
    }

    /// Removes a chunk already taken out of its order; one never read counts as
    /// read-ahead wasted.
    fn forget(&mut self, h: &Hash, counters: &Counters) {
        let Some(slot) = self.ready.remove(h) else {
            return;
        };
        match slot.unread_for {
            Some(file) => {
                add(&counters.prefetch_wasted_bytes, slot.bytes.len() as u64);
                self.wasted_for.insert(file);
            }
            None => self.asked_bytes -= slot.bytes.len(),
        }
        let (key, len) = slot.bytes.buffer();
        self.count_in_buffer(key, len, -1, -(slot.unread_for.is_some() as i32));
    }

    /// Counts `chunks` more kept chunks of buffer `key` (negative: fewer), `unread` of
    /// them read ahead and not asked for, keeping `held` and `read_held` true.
    fn count_in_buffer(&mut self, key: usize, len: usize, chunks: i32, unread: i32) {
        let b = self.buffers.entry(key).or_insert(Buffer {
            len,
            chunks: 0,
            unread: 0,
        });
        let kept = |b: &Buffer| b.chunks > 0;
        let read = |b: &Buffer| b.chunks > 0 && b.unread == 0;
        let before = (kept(b), read(b));
        b.chunks = b.chunks.saturating_add_signed(chunks);
        b.unread = b.unread.saturating_add_signed(unread);
        let after = (kept(b), read(b));
        let len = b.len;
        if !after.0 {
            self.buffers.remove(&key);
        }
        match before.0.cmp(&after.0) {
            std::cmp::Ordering::Less => self.held += len,
            std::cmp::Ordering::Greater => self.held -= len,
            std::cmp::Ordering::Equal => {}
        }
        match before.1.cmp(&after.1) {
            std::cmp::Ordering::Less => self.read_held += len,
            std::cmp::Ordering::Greater => self.read_held -= len,
            std::cmp::Ordering::Equal => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealvol_core::recycled::Buffer;

    /// A chunk of `len` bytes that is the only one kept of its own `buffer`-byte range
    /// read.
    fn alone_in_its_buffer(len: usize, buffer: usize) -> ChunkBytes {
        ChunkBytes::slice(&Arc::new(Buffer::from(vec![0u8; buffer])), 0..len)
    }

    #[test]
    fn readers_leftovers_never_hold_read_ahead_out_of_a_small_bound() {
        let capacity = 4 << 20;
        let counters = Counters::default();
        let mut g = Inner::default();
        // The last eight chunks readers had (`keep_asked` for this bound), each the one
        // kept chunk of a 512 KiB range read: together they hold the whole bound.
        for i in 0..8 {
            g.insert(
                Hash([i; 32]),
                alone_in_its_buffer(64 << 10, 512 << 10),
                None,
            );
        }
        assert_eq!(keep_asked(capacity), 8);
        assert_eq!((g.held, g.read_held), (capacity, capacity));
        // Read-ahead asks for 1 MiB within its three quarters of the bound.
        let (want, limit) = (1 << 20, capacity - capacity / 4);
        while g.held + want > limit && g.make_room(None, capacity, &counters) {}
        assert!(g.held + want <= limit, "{} bytes still held", g.held);
        assert!(g.asked.len() >= 2, "the newest chunks a reader had stay");
        assert_eq!(g.held, g.read_held);
    }

    #[test]
    fn a_buffer_holding_a_chunk_not_read_yet_is_not_a_readers_leftover() {
        let mut g = Inner::default();
        let buf = Arc::new(Buffer::from(vec![0u8; 1 << 20]));
        g.insert(
            Hash([1; 32]),
            ChunkBytes::slice(&buf, 0..1000),
            Some(Hash([9; 32])),
        );
        g.insert(Hash([2; 32]), ChunkBytes::slice(&buf, 1000..2000), None);
        assert_eq!((g.held, g.read_held), (1 << 20, 0));
        g.touch(&Hash([1; 32]), Want::Demand);
        assert_eq!(g.read_held, 1 << 20, "both chunks have been read now");
        g.forget(&Hash([1; 32]), &Counters::default());
        g.forget(&Hash([2; 32]), &Counters::default());
        assert_eq!((g.held, g.read_held), (0, 0));
        assert!(g.buffers.is_empty());
    }
}
