//! The logs of jobs and watches, `<state>/jobs/<id>.log` and `<state>/watches/<id>.log`:
//! what happened to each in words, one line each, kept after it ends (`sealvol jobs logs
//! ID`, `sealvol watch logs ID`). Never a secret's value: only what the work chooses to
//! say. And the one-line form of a failure that such lines and records carry.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sealvol_core::error::{Error, Result};

/// A failure as one line, with its hint.
pub fn one_line(e: &Error) -> String {
    match e.hint_text() {
        Some(h) => format!("{e} ({h})"),
        None => e.to_string(),
    }
}
use sealvol_core::registry::now_rfc3339;

#[derive(Debug, Clone)]
pub struct JobLog {
    path: PathBuf,
}

pub fn path(state: &Path, id: u64) -> PathBuf {
    state.join("jobs").join(format!("{id}.log"))
}

impl JobLog {
    pub fn new(state: &Path, id: u64) -> JobLog {
        JobLog {
            path: path(state, id),
        }
    }

    /// The log of watch `id`, `<state>/watches/<id>.log`.
    pub fn watch(state: &Path, id: u64) -> JobLog {
        JobLog {
            path: watch_path(state, id),
        }
    }

    /// Appends a line; a log that cannot be written is reported, never fatal.
    pub fn line(&self, text: &str) {
        let write = || -> std::io::Result<()> {
            if let Some(dir) = self.path.parent() {
                sealvol_core::private::dir(dir).map_err(std::io::Error::other)?;
            }
            let mut f = sealvol_core::private::append(&self.path)?;
            writeln!(f, "{} {text}", now_rfc3339())
        };
        if let Err(e) = write() {
            tracing::warn!("cannot write {}: {e}", self.path.display());
        }
    }
}

pub fn watch_path(state: &Path, id: u64) -> PathBuf {
    state.join("watches").join(format!("{id}.log"))
}

/// The log of watch `id`, for `sealvol watch logs`.
pub fn read_watch(state: &Path, id: u64) -> Result<String> {
    let p = watch_path(state, id);
    match fs::read_to_string(&p) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::not_found(format!("watch {id} has no log"))
                .hint("`sealvol watch ls` lists the watches; a watch logs once it starts"))
        }
        Err(e) => Err(Error::io("cannot read", &p, e)),
    }
}

/// The log of job `id`, for `sealvol jobs logs`.
pub fn read(state: &Path, id: u64) -> Result<String> {
    let p = path(state, id);
    match fs::read_to_string(&p) {
        Ok(s) => Ok(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::not_found(format!("job {id} has no log"))
                .hint("`sealvol jobs ls` lists the jobs; a job logs once it starts"))
        }
        Err(e) => Err(Error::io("cannot read", &p, e)),
    }
}
