//! Where this server found a chunk's bytes good lately, so that the next request for
//! the same bytes in the same unchanged pack file does not hash them again.
//!
//! Without a chunk cache (`chunks.rs`), every request reads the chunk from the packs
//! again, and four nodes reading one version made the server hash each byte four
//! times (BENCHMARKS.md, "Checked once"). A place is remembered with the pack file's
//! `Stamp` as the read found it: a pack written to since (damaged by hand, repaired,
//! replaced) has another stamp and is hashed again. What this leaves unseen is a disk
//! that rots under an unchanged file within `WINDOW`; the nodes hash every chunk they
//! are sent anyway, so this only changes how soon the server itself notices.
//!
//! Bounded in entries and in age: two generations, turned every third of the window.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sealvol_core::digest::Hash;
use sealvol_core::objects::PackId;
use sealvol_core::store::Stamp;

/// How long a place stays checked.
pub const WINDOW: Duration = Duration::from_secs(30);
/// How many places are remembered at most: at the 128 KiB average chunk, 8 GiB read
/// lately, in about 6 MiB.
pub const ROOM: usize = 1 << 16;

/// A chunk's bytes at one place of one pack file, as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Place {
    pub pack: PackId,
    pub stamp: Stamp,
    pub offset: u64,
    pub len: u32,
    pub hash: Hash,
}

pub struct Checked {
    window: Duration,
    room: usize,
    sets: Mutex<Generations>,
}

struct Generations {
    newer: HashSet<Place>,
    older: HashSet<Place>,
    since: Instant,
}

impl Checked {
    /// Remembering places for `window` from `now`, at most `room` of them.
    pub fn new(window: Duration, room: usize, now: Instant) -> Checked {
        Checked {
            window,
            room: room.max(2),
            sets: Mutex::new(Generations {
                newer: HashSet::new(),
                older: HashSet::new(),
                since: now,
            }),
        }
    }

    /// Whether the bytes at `place` were found good within the window before `now`.
    pub fn holds(&self, place: &Place, now: Instant) -> bool {
        let mut g = sealvol_core::lock(&self.sets);
        self.age(&mut g, now);
        g.newer.contains(place) || g.older.contains(place)
    }

    /// Notes that the bytes at `place` hashed to their name at `now`.
    pub fn note(&self, place: Place, now: Instant) {
        let mut g = sealvol_core::lock(&self.sets);
        self.age(&mut g, now);
        g.newer.insert(place);
    }

    /// How many places are remembered.
    pub fn len(&self) -> usize {
        let g = sealvol_core::lock(&self.sets);
        g.newer.len() + g.older.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Turns the generations every third of the window (and when the newer holds half
    /// the room), dropping both after a pause of two thirds: a place is found at most a
    /// window after it was noted, and at most `room` are remembered.
    fn age(&self, g: &mut Generations, now: Instant) {
        let third = self.window / 3;
        let idle = now.saturating_duration_since(g.since);
        if idle >= third || g.newer.len() >= self.room / 2 {
            g.older = match idle >= third * 2 {
                true => HashSet::new(),
                false => std::mem::take(&mut g.newer),
            };
            g.newer.clear();
            g.since = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(i: u64) -> Place {
        Place {
            pack: Hash([1; 32]),
            stamp: Stamp {
                dev: 1,
                ino: 2,
                size: 3,
                mtime_ns: 4,
                ctime_ns: 5,
            },
            offset: i * 100,
            len: 100,
            hash: Hash([i as u8; 32]),
        }
    }

    #[test]
    fn a_place_is_checked_only_as_it_was_noted() {
        let t = Instant::now();
        let c = Checked::new(WINDOW, ROOM, t);
        assert!(!c.holds(&place(1), t));
        c.note(place(1), t);
        assert!(c.holds(&place(1), t));
        // Another name, length, offset or stamp for the same place is not checked.
        let mut other = place(1);
        other.hash = Hash([9; 32]);
        assert!(!c.holds(&other, t));
        let mut other = place(1);
        other.len = 99;
        assert!(!c.holds(&other, t));
        let mut other = place(1);
        other.stamp.ctime_ns += 1;
        assert!(!c.holds(&other, t));
    }

    #[test]
    fn places_are_forgotten_within_a_window() {
        let w = Duration::from_secs(30);
        let t = Instant::now();
        let c = Checked::new(w, ROOM, t);
        c.note(place(1), t);
        let third = w / 3;
        assert!(c.holds(&place(1), t + third - Duration::from_millis(1)));
        // A third on, it is in the older generation; one more third, gone.
        assert!(c.holds(&place(1), t + third));
        assert!(!c.holds(&place(1), t + third * 2));
        // A pause of two thirds forgets everything at once.
        c.note(place(2), t + w);
        assert!(!c.holds(&place(2), t + w + third * 2));
        assert!(c.is_empty());
    }

    #[test]
    fn the_room_bounds_the_places_remembered() {
        let t = Instant::now();
        let c = Checked::new(WINDOW, 64, t);
        for i in 0..1000 {
            c.note(place(i), t);
            assert!(c.len() <= 64, "{} after {i}", c.len());
        }
        // The latest are still there.
        assert!(c.holds(&place(999), t));
    }
}
