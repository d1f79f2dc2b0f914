//! The watches running in the agent, each on a thread of its own: stopped one by one
//! or all at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::watch::live::Live;

impl Watches {
    /// True while any watch runs.
    pub(super) fn any(&self) -> bool {
        self.running
            .lock()
            .map(|r| {
                r.values()
                    .any(|w| w.thread.as_ref().is_some_and(|t| !t.is_finished()))
            })
            .unwrap_or(false)
    }

    /// Stops every runner (the agent is stopping); records stay as they are.
    pub(super) fn halt(&self) {
        let taken: Vec<Running> = match self.running.lock() {
            Ok(mut r) => r.drain().map(|(_, w)| w).collect(),
            Err(_) => return,
        };
        for w in &taken {
            w.stop.store(true, Ordering::SeqCst);
        }
        for mut w in taken {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }

    pub(super) fn live(&self, id: u64) -> Option<Arc<Live>> {
        let r = self.running.lock().ok()?;
        r.get(&id)
            .filter(|w| w.thread.as_ref().is_some_and(|t| !t.is_finished()))
            .map(|w| w.live.clone())
    }
}

pub(super) struct Running {
    pub(super) live: Arc<Live>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
pub(super) struct Watches {
    pub(super) running: Mutex<HashMap<u64, Running>>,
}
