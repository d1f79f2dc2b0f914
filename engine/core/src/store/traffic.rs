//! Requests and bytes a store has exchanged with its service, so that a push or a read
//! can say how many requests each GiB cost (object stores bill and throttle by request).

use std::sync::atomic::{AtomicU64, Ordering};

use super::object_store::Requests;

#[derive(Default)]
pub struct Traffic {
    gets: AtomicU64,
    puts: AtomicU64,
    lists: AtomicU64,
    heads: AtomicU64,
    deletes: AtomicU64,
    received: AtomicU64,
    sent: AtomicU64,
}

fn bump(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

impl Traffic {
    pub fn get(&self) {
        bump(&self.gets, 1);
    }
    pub fn received(&self, bytes: u64) {
        bump(&self.received, bytes);
    }
    /// One write request carrying `bytes` (0 for the requests around a multipart upload).
    pub fn put(&self, bytes: u64) {
        bump(&self.puts, 1);
        bump(&self.sent, bytes);
    }
    pub fn list(&self) {
        bump(&self.lists, 1);
    }
    pub fn head(&self) {
        bump(&self.heads, 1);
    }
    pub fn delete(&self) {
        bump(&self.deletes, 1);
    }

    pub fn counts(&self) -> Requests {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Requests {
            gets: l(&self.gets),
            puts: l(&self.puts),
            lists: l(&self.lists),
            heads: l(&self.heads),
            deletes: l(&self.deletes),
            bytes_received: l(&self.received),
            bytes_sent: l(&self.sent),
        }
    }
}
