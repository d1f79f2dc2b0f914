//! SIGINT and SIGTERM for the long-running commands (a foreground mount, the agent):
//! caught from the moment `Signals` is made, so that a signal arriving the instant the
//! work starts ends it cleanly instead of killing the process half-way.

use std::time::Duration;

use sealvol_core::{Error, ErrorKind, Result};
use tokio::signal::unix::{Signal, SignalKind, signal};

pub struct Signals {
    rt: tokio::runtime::Runtime,
    term: Signal,
    int: Signal,
}

impl Signals {
    pub fn catch() -> Result<Signals> {
        let fail =
            |e: std::io::Error| Error::new(ErrorKind::Io, format!("cannot watch for signals: {e}"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(fail)?;
        let (term, int) = {
            let _in_rt = rt.enter();
            (
                signal(SignalKind::terminate()).map_err(fail)?,
                signal(SignalKind::interrupt()).map_err(fail)?,
            )
        };
        Ok(Signals { rt, term, int })
    }

    /// Blocks until SIGTERM or SIGINT, or until `check`, called every `every`, returns
    /// a reason to stop. Returns why it stopped.
    pub fn wait(
        self,
        every: Duration,
        mut check: impl FnMut() -> Option<&'static str>,
    ) -> &'static str {
        let Signals {
            rt,
            mut term,
            mut int,
        } = self;
        rt.block_on(async {
            let mut tick = tokio::time::interval(every);
            loop {
                tokio::select! {
                    _ = term.recv() => return "SIGTERM",
                    _ = int.recv() => return "interrupted",
                    _ = tick.tick() => {
                        if let Some(why) = check() {
                            return why;
                        }
                    }
                }
            }
        })
    }
}
