//! Engine progress drawn as an indicatif bar on stderr, only when stderr is a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sealvol_core::progress::{Progress, Quiet};

pub struct Bar {
    bar: ProgressBar,
    /// The phase counts objects (files done), not bytes.
    counting: std::sync::atomic::AtomicBool,
}

impl Progress for Bar {
    fn begin(&self, phase: &str, bytes: u64, files: u64) {
        let counting = bytes == 0 && files > 0;
        self.counting
            .store(counting, std::sync::atomic::Ordering::Relaxed);
        // A phase that counts objects (gc's mark and sweep) or waits (gc's grace
        // period, in milliseconds) is not a byte transfer.
        let template = match (phase, counting) {
            ("wait", _) => "{prefix:>6} [{bar:30}] grace period, {eta} left",
            (_, true) => "{prefix:>6} [{bar:30}] {pos}/{len}",
            _ => BYTES,
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            self.bar.set_style(style.progress_chars("=> "));
        }
        self.bar.set_length(if counting { files } else { bytes });
        self.bar.set_position(0);
        self.bar.set_prefix(phase.to_string());
    }

    fn advance(&self, bytes: u64) {
        if !self.counting.load(std::sync::atomic::Ordering::Relaxed) {
            self.bar.inc(bytes);
        }
    }

    fn file_done(&self) {
        if self.counting.load(std::sync::atomic::Ordering::Relaxed) {
            self.bar.inc(1);
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// A bar if stderr is a terminal and the user did not ask for quiet; otherwise nothing.
pub fn for_terminal(quiet: bool) -> Box<dyn Progress> {
    if quiet || !std::io::stderr().is_terminal() {
        return Box::new(Quiet);
    }
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(BYTES)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    Box::new(Bar {
        bar,
        counting: Default::default(),
    })
}

const BYTES: &str = "{prefix:>6} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}";
