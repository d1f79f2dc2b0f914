//! A verified chunk's bytes: a slice of a shared buffer, so one range read of many
//! chunks is handed on without a copy per chunk.

use std::ops::Range;
use std::sync::Arc;

use crate::recycled::Buffer;

/// A verified chunk: a slice of a shared buffer, so a range read of many chunks is
/// never copied chunk by chunk.
#[derive(Clone)]
pub struct ChunkBytes {
    pub(super) buf: Arc<Buffer>,
    pub(super) start: usize,
    pub(super) end: usize,
}

impl ChunkBytes {
    /// Bytes `range` of a shared buffer (one range read holding many chunks).
    pub fn slice(buf: &Arc<Buffer>, range: Range<usize>) -> ChunkBytes {
        ChunkBytes {
            buf: Arc::clone(buf),
            start: range.start,
            end: range.end.max(range.start),
        }
    }

    /// Bytes `range` of these bytes, sharing their buffer.
    pub fn sub(&self, range: Range<usize>) -> ChunkBytes {
        let end = (self.start + range.end).min(self.end);
        ChunkBytes {
            buf: Arc::clone(&self.buf),
            start: (self.start + range.start).min(end),
            end,
        }
    }

    pub fn whole(v: impl Into<Buffer>) -> ChunkBytes {
        let v = v.into();
        let end = v.len();
        ChunkBytes {
            buf: Arc::new(v),
            start: 0,
            end,
        }
    }
}

impl ChunkBytes {
    /// The buffer these bytes are a slice of, as (identity, length): memory is held by
    /// buffers, so a bound on memory counts each one once, whole, however many chunks
    /// of it are kept.
    pub fn buffer(&self) -> (usize, usize) {
        (Arc::as_ptr(&self.buf) as usize, self.buf.capacity())
    }
}

impl AsRef<[u8]> for ChunkBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::ops::Deref for ChunkBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }
}
