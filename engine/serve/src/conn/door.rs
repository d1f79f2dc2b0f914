//! The connections open now, oldest first, and which of them wait for a request.
//!
//! A connection holds a place from the moment it is accepted. When every place is
//! taken, the oldest connection that waits for a request (a kept-alive one between
//! requests, or one whose request head has not come yet: an idle or keyless client)
//! is closed to make room, so idle connections, however many, never keep a caller
//! out. Only when every connection has a request under way does a new one wait, and
//! each key's requests under way are bounded (`shares`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, oneshot};

pub struct Door {
    max: usize,
    rooms: Mutex<Rooms>,
    /// Told when a place may have come free: a connection ended or went idle.
    freed: Notify,
}

#[derive(Default)]
struct Rooms {
    next: u64,
    /// By age: the smallest id is the oldest.
    open: BTreeMap<u64, Room>,
}

struct Room {
    busy: bool,
    /// Asks the connection to close once its request (if any) is answered.
    close: Option<oneshot::Sender<()>>,
}

/// A connection's place; it is freed when this is dropped.
pub struct Place {
    door: Arc<Door>,
    id: u64,
}

impl Door {
    pub fn new(max: usize) -> Arc<Door> {
        Arc::new(Door {
            max: max.max(1),
            rooms: Mutex::new(Rooms::default()),
            freed: Notify::new(),
        })
    }

    fn rooms(&self) -> std::sync::MutexGuard<'_, Rooms> {
        // A count and a map: nothing a panic could leave half-changed matters.
        self.rooms.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place for a connection just accepted, closing the oldest idle one if every
    /// place is taken, or waiting until one is free; and the signal to close it.
    pub async fn enter(self: &Arc<Self>) -> (Place, oneshot::Receiver<()>) {
        loop {
            if let Some(entered) = self.try_enter() {
                return entered;
            }
            self.freed.notified().await;
        }
    }

    fn try_enter(self: &Arc<Self>) -> Option<(Place, oneshot::Receiver<()>)> {
        let mut rooms = self.rooms();
        if rooms.open.len() >= self.max {
            let oldest_idle = rooms
                .open
                .iter()
                .find(|(_, r)| !r.busy && r.close.is_some())
                .map(|(id, _)| *id)?;
            if let Some(room) = rooms.open.remove(&oldest_idle)
                && let Some(close) = room.close
            {
                let _ = close.send(());
            }
        }
        let id = rooms.next;
        rooms.next += 1;
        let (close, closed) = oneshot::channel();
        rooms.open.insert(
            id,
            Room {
                busy: false,
                close: Some(close),
            },
        );
        Some((
            Place {
                door: Arc::clone(self),
                id,
            },
            closed,
        ))
    }

    /// Connections open now, and how many of them have a request under way.
    pub fn counts(&self) -> (usize, usize) {
        let rooms = self.rooms();
        let busy = rooms.open.values().filter(|r| r.busy).count();
        (rooms.open.len(), busy)
    }
}

impl Place {
    /// The connection's request is under way (`true`) or answered (`false`).
    pub fn busy(&self, busy: bool) {
        if let Some(room) = self.door.rooms().open.get_mut(&self.id) {
            room.busy = busy;
        }
        if !busy {
            self.door.freed.notify_one();
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.door.rooms().open.remove(&self.id);
        self.door.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_door_closes_the_oldest_idle_connection_and_waits_when_all_are_busy() {
        let door = Door::new(2);
        let (a, mut a_closed) = door.enter().await;
        let (b, mut b_closed) = door.enter().await;
        b.busy(true);
        // Full: the oldest idle one (a) is asked to close; b has a request under way.
        let (c, _c_closed) = door.enter().await;
        assert!(a_closed.try_recv().is_ok());
        assert!(b_closed.try_recv().is_err());
        assert_eq!(door.counts(), (2, 1));
        // All busy: the next waits until one is answered.
        c.busy(true);
        let d = tokio::spawn({
            let door = Arc::clone(&door);
            async move { door.enter().await }
        });
        tokio::task::yield_now().await;
        assert!(!d.is_finished());
        b.busy(false);
        let _d = d.await.unwrap();
        assert!(b_closed.try_recv().is_ok(), "b, idle again, made room");
        drop(a);
        assert_eq!(door.counts(), (2, 1));
    }
}
