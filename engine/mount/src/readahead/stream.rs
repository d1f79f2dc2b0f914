//! One open file's read pattern: reads that follow each other double the window (up
//! to a bound); a jump resets it.

use std::ops::Range;

use crate::layout::Layout;

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
