//! One way to take a lock: a thread that panicked while holding it leaves data that is
//! still whole for every lock in this project (each is held only across steps that
//! leave it consistent), so its poisoning is passed over rather than spread as a second
//! panic to every thread that comes after.

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, passing over poisoning (see above).
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits on `c` with `g`, passing over poisoning as `lock` does.
pub fn wait<'a, T>(c: &std::sync::Condvar, g: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
    c.wait(g).unwrap_or_else(|p| p.into_inner())
}
