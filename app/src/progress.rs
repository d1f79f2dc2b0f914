//! Engine progress drawn as an indicatif bar on stderr, only when stderr is a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sealvol_core::progress::{Progress, Quiet};

pub struct Bar {
    bar: ProgressBar,
}

impl Progress for Bar {
    fn begin(&self, phase: &str, bytes: u64, _files: u64) {
        self.bar.set_length(bytes);
        self.bar.set_position(0);
        self.bar.set_prefix(phase.to_string());
    }

    fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
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
    let style = ProgressStyle::with_template(
        "{prefix:>6} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
    )
    .map(|s| s.progress_chars("=> "))
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    Box::new(Bar { bar })
}
