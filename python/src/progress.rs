//! Long calls (pull, push) as Python expects them: a `progress(done, total)` callback
//! at most ten times a second, and `Ctrl-C` honoured within a second: the work runs on
//! a thread of its own while the caller's thread waits without the GIL, looking for a
//! signal every 100 ms; on one, the work is told to stop (a push seals nothing, a pull
//! leaves no file half-written under its name), and the signal's exception is raised.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use sealvol_core::progress::Progress;

/// How often the caller's thread looks for a signal, and the callback is called.
const TICK: Duration = Duration::from_millis(100);

pub struct PyProgress {
    callback: Option<Py<PyAny>>,
    pub cancel: Arc<AtomicBool>,
    done: AtomicU64,
    total: AtomicU64,
    last: Mutex<Option<Instant>>,
}

impl PyProgress {
    pub fn new(callback: Option<Py<PyAny>>) -> PyProgress {
        PyProgress {
            callback,
            cancel: Arc::new(AtomicBool::new(false)),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            last: Mutex::new(None),
        }
    }

    fn report(&self, force: bool) {
        let Some(cb) = &self.callback else { return };
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if !force && last.is_some_and(|t| t.elapsed() < TICK) {
                return;
            }
            *last = Some(Instant::now());
        }
        let (done, total) = (
            self.done.load(Ordering::Relaxed),
            self.total.load(Ordering::Relaxed),
        );
        Python::attach(|py| {
            // A callback that raises stops the work, as a Ctrl-C would.
            if let Err(e) = cb.call1(py, (done, total)) {
                e.print(py);
                self.cancel.store(true, Ordering::Relaxed);
            }
        });
    }
}

impl Progress for PyProgress {
    fn begin(&self, _phase: &str, bytes: u64, _files: u64) {
        self.total.store(bytes, Ordering::Relaxed);
        self.report(true);
    }

    fn advance(&self, bytes: u64) {
        self.done.fetch_add(bytes, Ordering::Relaxed);
        self.report(false);
    }

    fn finish(&self) {
        self.report(true);
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// Runs `work` on a thread of its own, the GIL let go, honouring signals every
/// `TICK`: on one, `progress.cancel` is set, the work's end awaited, and the signal's
/// exception raised.
pub fn interruptible<T: Send>(
    py: Python<'_>,
    progress: &PyProgress,
    work: impl FnOnce() -> sealvol_core::Result<T> + Send,
) -> PyResult<T> {
    std::thread::scope(|s| {
        let (tx, mut rx) = std::sync::mpsc::channel();
        s.spawn(move || {
            let _ = tx.send(work());
        });
        loop {
            // The receiver goes with the wait and comes back (it is not Sync).
            let (back, got) = py.detach(move || {
                let got = rx.recv_timeout(TICK);
                (rx, got)
            });
            rx = back;
            match got {
                Ok(result) => return result.map_err(crate::errors::raise),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        progress.cancel.store(true, Ordering::Relaxed);
                        let _ = py.detach(move || rx.recv());
                        return Err(signal);
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(crate::errors::raise(sealvol_core::Error::new(
                        sealvol_core::error::ErrorKind::Io,
                        "the work stopped without an answer",
                    )));
                }
            }
        }
    })
}
