//! Recycled buffers for the read path. A cold read makes one range read per run of
//! chunks (up to 8 MiB from a local repository, 64 MiB from a bucket), and a fresh
//! buffer of that size comes from the kernel as untouched pages: each one faults in
//! and is zeroed before the pack's bytes are copied over it, which was a fifth of a
//! cold read's time (BENCHMARKS.md, "Read path"). A buffer dropped by its last reader
//! goes back to a small pool instead, with its pages still mapped.
//!
//! The pool holds at most `MAX_POOLED` bytes of idle buffers, outside a mount's memory
//! bound (which counts buffers in use).

use std::sync::Mutex;

/// Idle bytes kept for reuse, at most (what a few range reads under way hold).
const MAX_POOLED: usize = 64 << 20;
/// Buffers smaller than this are not worth keeping: the allocator's own free lists
/// serve them without faults. (A FUSE reply is 128 KiB to 1 MiB.)
const MIN_POOLED: usize = 64 << 10;
/// Idle buffers kept, at most, so that finding one stays quick.
const MAX_IDLE: usize = 64;

/// Idle buffers, each its own allocation.
pub struct Pool {
    idle: Mutex<Vec<Vec<u8>>>,
}

/// The read path's pool.
static POOL: Pool = Pool::new();

/// A buffer of `len` initialised bytes from the read path's pool.
pub fn take(len: usize) -> Buffer {
    POOL.take(len)
}

impl Pool {
    pub const fn new() -> Pool {
        Pool {
            idle: Mutex::new(Vec::new()),
        }
    }

    /// A buffer of `len` initialised bytes, recycled when one fits.
    pub fn take(&'static self, len: usize) -> Buffer {
        let mut v = match len >= MIN_POOLED {
            true => {
                let mut idle = crate::locks::lock(&self.idle);
                // The smallest idle buffer that fits, and not much larger: memory bounds
                // count what a buffer holds, so a small read must not pin a large one.
                let best = (0..idle.len())
                    .filter(|&i| (len..=2 * len).contains(&idle[i].capacity()))
                    .min_by_key(|&i| idle[i].capacity());
                best.map(|i| idle.swap_remove(i)).unwrap_or_default()
            }
            false => Vec::new(),
        };
        if v.capacity() < len {
            // Sizes in a few classes, so that a buffer fits the next read of about
            // its size (runs of chunks differ by a chunk or so).
            v = Vec::with_capacity(class(len));
        }
        // A recycled buffer keeps its old bytes (the read overwrites them); only growth
        // past its last length is zeroed.
        v.resize(len, 0);
        Buffer(v, Some(self))
    }

    fn give(&self, v: Vec<u8>) {
        if v.capacity() < MIN_POOLED {
            return;
        }
        let mut idle = crate::locks::lock(&self.idle);
        // When full, the smallest idle buffers make room for a larger one: a large
        // buffer serves small reads too, never the other way round.
        idle.sort_unstable_by_key(Vec::capacity);
        let mut held: usize = idle.iter().map(Vec::capacity).sum();
        while !idle.is_empty()
            && (held + v.capacity() > MAX_POOLED || idle.len() >= MAX_IDLE)
            && idle[0].capacity() < v.capacity()
        {
            held -= idle.remove(0).capacity();
        }
        if held + v.capacity() <= MAX_POOLED && idle.len() < MAX_IDLE {
            idle.push(v);
        }
    }
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

/// The capacity a fresh buffer of `len` bytes gets: below the pool's minimum `len`, then
/// the next multiple of 64 KiB up to 1 MiB, then of 256 KiB. Memory bounds count capacity, so the rounding stays small.
fn class(len: usize) -> usize {
    match len {
        // Not pooled: exactly what was asked.
        0..MIN_POOLED => len,
        MIN_POOLED..=0x10_0000 => len.div_ceil(64 << 10) << 16,
        _ => len.div_ceil(256 << 10) << 18,
    }
}

/// Bytes that go back to their pool, if they came from one, when dropped.
pub struct Buffer(Vec<u8>, Option<&'static Pool>);

impl Buffer {
    pub fn as_mut_vec(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }

    /// The memory it holds, which may be more than its length.
    pub fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

impl From<Vec<u8>> for Buffer {
    fn from(v: Vec<u8>) -> Buffer {
        Buffer(v, None)
    }
}

impl std::ops::Deref for Buffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(pool) = self.1 {
            pool.give(std::mem::take(&mut self.0));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_buffer_is_handed_out_again_and_small_ones_are_not_kept() {
        static POOL: Pool = Pool::new();
        let a = POOL.take(1 << 20);
        let at = a.as_ptr();
        drop(a);
        let b = POOL.take(768 << 10);
        assert_eq!(b.len(), 768 << 10);
        assert_eq!(b.as_ptr(), at, "the buffer was recycled");
        drop(b);
        let small = POOL.take(4096);
        assert_ne!(
            small.as_ptr(),
            at,
            "a small read does not pin a large buffer"
        );
        drop(small);
        assert_eq!(
            POOL.idle.lock().unwrap().len(),
            1,
            "a small buffer is not kept"
        );
    }

    #[test]
    fn idle_buffers_stay_within_the_bound() {
        static POOL: Pool = Pool::new();
        let held: Vec<Buffer> = (0..10).map(|_| POOL.take(16 << 20)).collect();
        drop(held);
        let idle: usize = POOL.idle.lock().unwrap().iter().map(Vec::capacity).sum();
        assert!(idle <= MAX_POOLED, "{idle} bytes idle");
        assert!(idle >= 16 << 20);
    }

    #[test]
    fn reads_of_about_one_size_share_buffers_and_large_ones_displace_small() {
        static POOL: Pool = Pool::new();
        let a = POOL.take((3 << 20) + 12345);
        assert_eq!(a.capacity(), (3 << 20) + (256 << 10));
        let at = a.as_ptr();
        drop(a);
        let b = POOL.take((3 << 20) + 200_000);
        assert_eq!(b.as_ptr(), at, "a run a little longer fits the same buffer");
        // A full pool of small buffers makes room for a large one.
        let small: Vec<Buffer> = (0..MAX_IDLE).map(|_| POOL.take(64 << 10)).collect();
        drop(small);
        drop(b);
        let idle = POOL.idle.lock().unwrap();
        assert!(idle.len() <= MAX_IDLE);
        assert!(
            idle.iter().any(|v| v.capacity() == (3 << 20) + (256 << 10)),
            "the large buffer was kept"
        );
    }
}
