//! What a running watch is doing, shared between its runner and whoever asks
//! (`watch show`, the console), and the view of a watch that no runner runs.

use std::sync::Mutex;

use super::{Phase, Watch, WatchState, WatchView};

/// What a running watch is doing, shared with whoever asks (`watch show`, the console).
#[derive(Default)]
pub struct Live {
    inner: Mutex<LiveState>,
}

#[derive(Default)]
pub(super) struct LiveState {
    pub(super) phase: Option<Phase>,
    pub(super) notifier: Option<String>,
    pub(super) pending: Vec<String>,
}

impl Live {
    pub(super) fn set(&self, phase: Phase) {
        if let Ok(mut s) = self.inner.lock() {
            s.phase = Some(phase);
        }
    }

    pub(super) fn update(&self, f: impl FnOnce(&mut LiveState)) {
        if let Ok(mut s) = self.inner.lock() {
            f(&mut s);
        }
    }

    /// What the runner last said it does.
    pub(super) fn phase(&self) -> Option<Phase> {
        self.inner.lock().ok().and_then(|s| s.phase.clone())
    }

    /// The record with what its runner is doing now.
    pub fn view(&self, watch: Watch) -> WatchView {
        let s = self.inner.lock().ok();
        let phase = s
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or(Phase::Idle);
        WatchView {
            now: phase,
            notifier: s.as_ref().and_then(|s| s.notifier.clone()),
            pending: s.map(|s| s.pending.clone()).unwrap_or_default(),
            watch,
        }
    }
}

/// A record with no runner: stopped, or waiting for an agent.
pub fn still(watch: Watch) -> WatchView {
    let phase = match watch.state {
        WatchState::Stopped => Phase::Stopped,
        WatchState::Active => Phase::Waiting {
            why: "no agent runs it yet".into(),
        },
    };
    WatchView {
        watch,
        now: phase,
        notifier: None,
        pending: Vec::new(),
    }
}
