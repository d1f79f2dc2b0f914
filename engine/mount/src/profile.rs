//! The mount's side of read profiles (`sealvol_core::profile`): recording the order in
//! which readers first ask for each chunk, for `volume profile save` to store.
//! Replaying a saved one is a read-ahead plan (`readahead::Prefetcher::replay`).

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Mutex;

use sealvol_core::digest::Hash;
use sealvol_core::profile::Step;

use crate::layout::Layout;

/// Chunks recorded at most (about 32 GiB of reads): the start-up order is recorded long
/// before, and the set of chunks seen stays a few MiB, outside the memory bound.
const MAX_CHUNKS: usize = 256 << 10;

#[derive(Default)]
struct Recording {
    seen: HashSet<(Hash, u32)>,
    steps: Vec<Step>,
    changed: bool,
}

/// The order of first reads, in runs of chunks of one file.
#[derive(Default)]
pub struct Recorder {
    inner: Mutex<Recording>,
}

impl Recorder {
    /// Notes that a reader asked for chunks `range` of a file.
    pub fn note(&self, layout: &Layout, range: Range<usize>) {
        let mut r = sealvol_core::lock(&self.inner);
        if r.seen.len() >= MAX_CHUNKS {
            return;
        }
        for i in range {
            let i = i as u32;
            if !r.seen.insert((layout.hash, i)) {
                continue;
            }
            r.changed = true;
            match r.steps.last_mut() {
                Some(s) if s.file == layout.hash && s.first + s.count == i => s.count += 1,
                _ => r.steps.push(Step {
                    file: layout.hash,
                    size: layout.obj.size,
                    first: i,
                    count: 1,
                }),
            }
        }
    }

    /// The recording, if it changed since the last call.
    pub fn take_changed(&self) -> Option<Vec<Step>> {
        let mut r = sealvol_core::lock(&self.inner);
        if !r.changed {
            return None;
        }
        r.changed = false;
        Some(r.steps.clone())
    }
}
