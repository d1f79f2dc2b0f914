//! Standard output for the commands: plain-text tables for people, JSON for programs,
//! and lines written so that a failed write (a full disk, a closed file) is an error
//! the command returns, never a panic. (A closed pipe ends the process quietly, by
//! SIGPIPE, as for every Unix tool: `stdout_failed`.) Standard error likewise: a note
//! that cannot be written is lost, the command goes on, and the process exits 1
//! (`errln!`, `StderrWriter` for the log).

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

pub use sealvol_core::paths::shown;
use sealvol_core::{Error, Result};
pub use sealvol_views::format::{name, size, when};

/// `println!` that returns the write's failure as an `Error` instead of panicking.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}

/// `errln!` that never panics: a line on standard error, and an exit code of 1 for
/// the process if it cannot be written (`note`).
macro_rules! errln {
    () => {
        $crate::output::note(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::note(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// The exit code of a command that succeeded but has something to say by it
/// (`volume diff --exit-code`: 1 when the versions differ).
static EXIT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

pub fn exit_with(code: u8) {
    EXIT.store(code, std::sync::atomic::Ordering::Relaxed);
}

pub fn exit_code() -> u8 {
    EXIT.load(std::sync::atomic::Ordering::Relaxed)
}

/// Text on standard error. A failed write cannot be reported where errors go, so the
/// process exits 1 when it is done (unless it already has a code of its own).
pub fn note(args: std::fmt::Arguments) {
    let text = pasteable(&args.to_string());
    let mut err = std::io::stderr().lock();
    if err
        .write_all(text.as_bytes())
        .and_then(|()| err.flush())
        .is_err()
    {
        stderr_failed();
    }
}

/// The remote engine this process works on (`--remote`, `SEALVOL_REMOTE`), once known.
static REMOTE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Says that this process works on the remote engine at `url`: from here on, every
/// command a note or an error offers is printed as it must be pasted (`pasteable`).
pub fn set_remote(url: &str) {
    let _ = REMOTE.set(url.to_string());
}

/// The commands that run where the repository is, never through a server: a hint
/// naming one keeps it as it is.
const LOCAL_ONLY: [&str; 6] = ["key", "serve", "csi", "init", "completions", "digest"];

/// `text` with each command it offers made runnable as printed in a session on a remote
/// engine: `` `sealvol volume …` `` gets `--remote URL` (the key stays in
/// SEALVOL_API_KEY, never printed), and a server's own `sealvol --remote URL …` (it
/// cannot know the address its clients use) gets the address this process used. Text
/// without a remote, and commands that never run through a server, are left as they are.
pub fn pasteable(text: &str) -> String {
    match REMOTE.get() {
        Some(url) => with_remote(text, url),
        None => text.to_string(),
    }
}

fn with_remote(text: &str, url: &str) -> String {
    let text = text.replace("sealvol --remote URL ", &format!("sealvol --remote {url} "));
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text.as_str();
    while let Some(at) = rest.find("`sealvol ") {
        let (before, from) = rest.split_at(at + "`sealvol ".len());
        out.push_str(before);
        let word = from.split_whitespace().next().unwrap_or("");
        if !word.starts_with("--remote") && !LOCAL_ONLY.contains(&word.trim_end_matches('`')) {
            out.push_str(&format!("--remote {url} "));
        }
        rest = from;
    }
    out.push_str(rest);
    out
}

fn stderr_failed() {
    let _ = EXIT.compare_exchange(
        0,
        1,
        std::sync::atomic::Ordering::Relaxed,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// Standard error for the log: a write that fails sets the exit code as `note` does,
/// rather than making the log print a complaint (to standard error, which panics).
/// While the console owns the terminal, the log goes to a file instead (`divert_log`):
/// a line written over the screen would garble it.
pub struct StderrWriter;

static DIVERTED: std::sync::Mutex<Option<std::fs::File>> = std::sync::Mutex::new(None);

/// Sends the log to `file` (appended) until `restore_log`; if it cannot be opened the
/// log is dropped, never drawn over the console.
pub fn divert_log(file: &Path) {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .or_else(|_| std::fs::OpenOptions::new().write(true).open("/dev/null"));
    *sealvol_core::lock(&DIVERTED) = f.ok();
}

pub fn restore_log() {
    *sealvol_core::lock(&DIVERTED) = None;
}

impl Write for StderrWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(f) = sealvol_core::lock(&DIVERTED).as_mut() {
            return f.write(buf);
        }
        std::io::stderr()
            .write(buf)
            .inspect_err(|_| stderr_failed())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(f) = sealvol_core::lock(&DIVERTED).as_mut() {
            return f.flush();
        }
        std::io::stderr().flush().inspect_err(|_| stderr_failed())
    }
}

/// One line on standard output.
pub fn line(args: std::fmt::Arguments) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .map_err(stdout_failed)
}

/// A failed write to standard output as the command's error; when its reader has gone
/// away (`… | head`), the process ends by SIGPIPE instead, as any Unix tool does.
/// (SIGPIPE is otherwise ignored, so that sockets report a cut connection: see main.)
fn stdout_failed(e: std::io::Error) -> Error {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        // SAFETY: restores the default disposition and raises the signal, which ends
        // the process; nothing runs after it.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::raise(libc::SIGPIPE);
        }
    }
    Error::io("cannot write to", Path::new("standard output"), e)
}

/// Prints rows as left-aligned columns under a header; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> Result<()> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let n = cells.len();
        let mut s = String::new();
        for (i, (cell, w)) in cells.into_iter().zip(&widths).enumerate() {
            if i + 1 == n {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  "));
            }
        }
        outln!("{}", s.trim_end())
    };
    line(header.to_vec())?;
    for row in rows {
        line(row.iter().map(String::as_str).collect())?;
    }
    Ok(())
}

/// A job's or a watch's log: as it is, or as `{"id", "lines"}` with `--json`.
pub fn log(id: u64, text: &str, as_json: bool) -> Result<()> {
    if as_json {
        let lines: Vec<&str> = text.lines().collect();
        return json(&serde_json::json!({ "id": id, "lines": lines }));
    }
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(stdout_failed)
}

pub fn json(value: &impl serde::Serialize) -> Result<()> {
    // Through a `Value`, whose maps are sorted: keys come out in alphabetical order
    // for structs too (docs/JSON.md).
    let text = serde_json::to_value(value)
        .and_then(|v| serde_json::to_string_pretty(&v))
        .map_err(|e| {
            Error::new(
                sealvol_core::ErrorKind::Io,
                format!("cannot encode JSON: {e}"),
            )
        })?;
    outln!("{text}")
}

/// Asks `question` on the terminal; without one, refuses (a script passes `--yes`, as
/// `yes_hint` says). A "no" is `declined`, with nothing changed.
pub fn ask(yes_hint: &str, declined: &str, question: &str) -> Result<()> {
    if !std::io::stdin().is_terminal() {
        return Err(Error::new(
            sealvol_core::ErrorKind::Usage,
            "standard input is not a terminal, so there is no one to ask",
        )
        .hint(yes_hint.to_string()));
    }
    note(format_args!("{question} [y/N] "));
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Error::io("cannot read", Path::new("standard input"), e))?;
    match answer.trim() {
        "y" | "Y" | "yes" => Ok(()),
        _ => Err(
            Error::new(sealvol_core::ErrorKind::Cancelled, declined.to_string())
                .hint("nothing was changed"),
        ),
    }
}

/// `arg` as a shell reads it back: quoted where it must be (a label with a space in a
/// hint to paste); one the shell cannot take (a NUL) is shown as Rust would debug it.
pub fn quoted(arg: &str) -> String {
    shlex::try_quote(arg).map_or_else(|_| format!("{arg:?}"), |q| q.into_owned())
}

#[cfg(test)]
mod tests {
    use super::with_remote;

    #[test]
    fn offered_commands_carry_the_remote_and_local_ones_stay_local() {
        let url = "http://h:7420";
        for (text, want) in [
            (
                "undo: `sealvol volume restore t/m@b3:ab`",
                "undo: `sealvol --remote http://h:7420 volume restore t/m@b3:ab`",
            ),
            (
                "with `sealvol --remote URL secret set NAME --namespace t`",
                "with `sealvol --remote http://h:7420 secret set NAME --namespace t`",
            ),
            (
                "store it with: sealvol --remote URL secret set k --namespace t < FILE",
                "store it with: sealvol --remote http://h:7420 secret set k --namespace t < FILE",
            ),
            (
                "`sealvol --remote http://other jobs ls`",
                "`sealvol --remote http://other jobs ls`",
            ),
            (
                "make one with `sealvol key create ci`",
                "make one with `sealvol key create ci`",
            ),
            (
                "`sealvol jobs ls`, `sealvol serve`",
                "`sealvol --remote http://h:7420 jobs ls`, `sealvol serve`",
            ),
            ("no command here", "no command here"),
        ] {
            assert_eq!(with_remote(text, url), want);
        }
    }
}
