//! Recycled block buffers for the push pipeline.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

/// Recycled block buffers. `take` waits when every buffer is in flight, which is what
/// bounds a push's memory whatever the size of the input.
pub(super) struct BufferPool {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
    made: AtomicUsize,
    limit: usize,
    /// Set when the writer stops, so a reader waiting for a buffer gives up.
    closed: AtomicBool,
}

impl BufferPool {
    pub(super) fn new(limit: usize) -> BufferPool {
        let (tx, rx) = bounded(limit);
        BufferPool {
            tx,
            rx,
            made: AtomicUsize::new(0),
            limit,
            closed: AtomicBool::new(false),
        }
    }

    pub(super) fn take(&self, capacity: usize) -> Vec<u8> {
        if let Ok(b) = self.rx.try_recv() {
            return b;
        }
        if self.made.fetch_add(1, Ordering::Relaxed) < self.limit {
            return Vec::with_capacity(capacity);
        }
        // Every buffer is in flight; the writers return them as they finish blocks.
        while !self.closed.load(Ordering::Relaxed) {
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(50)) {
                return b;
            }
        }
        // The writer has stopped: the reader's next send fails and it ends.
        Vec::new()
    }

    /// Returns a buffer shared between the ordered writer and the pack writer: exactly
    /// one of the two holders gets it back (`Arc::into_inner` guarantees that).
    pub(super) fn give_back_shared(&self, b: Arc<Vec<u8>>) {
        // Not cleared: its bytes stay initialised, so the next block reads into them
        // without zeroing 16 MiB first (BlockReader::next_block).
        if let Some(b) = Arc::into_inner(b) {
            let _ = self.tx.try_send(b);
        }
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
    }
}
