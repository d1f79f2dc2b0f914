//! The handshake between a background mount and the process that started it: a pipe
//! whose write end the child inherits (its descriptor in `SEALVOL_READY_FD`), on which
//! it writes one line, `ready` or `error<TAB>message<TAB>hint`. So the parent returns
//! with a working mount or with the child's reason, never in between.

use std::io::Write;
use std::os::fd::FromRawFd;

use sealvol_core::{Error, ErrorKind};

/// The environment variable that carries the pipe's descriptor to the child.
pub const READY_FD: &str = "SEALVOL_READY_FD";

/// The write end of the parent's pipe, in a background mount's process; in a mount
/// started in the foreground, nothing.
pub struct ReadyPipe(std::cell::RefCell<Option<std::fs::File>>);

impl ReadyPipe {
    pub fn from_env() -> ReadyPipe {
        let fd = std::env::var(READY_FD)
            .ok()
            .and_then(|v| v.parse::<i32>().ok())
            .filter(|fd| *fd > 2);
        // SAFETY: the parent handed us this descriptor for exactly this purpose; it is
        // made close-on-exec again so that helpers we start (fusermount3 stays running
        // for auto-unmount) do not hold the parent's pipe open.
        let file = fd.map(|fd| unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            std::fs::File::from_raw_fd(fd)
        });
        // Not inherited by anything we start.
        // SAFETY: unsetting the variable before any thread of ours reads the environment.
        unsafe { std::env::remove_var(READY_FD) };
        ReadyPipe(std::cell::RefCell::new(file))
    }

    /// Whether a parent waits on this process (a background mount).
    pub fn is_set(&self) -> bool {
        self.0.borrow().is_some()
    }

    pub fn ok(&self) {
        if let Some(mut f) = self.0.borrow_mut().take() {
            let _ = f.write_all(b"ready\n");
        }
    }

    pub fn fail(&self, e: &Error) {
        if let Some(mut f) = self.0.borrow_mut().take() {
            let one_line = |s: &str| s.replace(['\t', '\n'], " ");
            let _ = writeln!(
                f,
                "error\t{}\t{}",
                one_line(&e.to_string()),
                one_line(e.hint_text().unwrap_or(""))
            );
        }
    }
}

/// What the child's line says: `Ok` for ready, else its error (or, with no line, that
/// it ended first, and where its log is).
pub(crate) fn read_answer(line: &str, log: &std::path::Path) -> Result<(), Error> {
    if line.starts_with("ready") {
        return Ok(());
    }
    let mut parts = line.trim_end().splitn(3, '\t');
    let (_, message, hint) = (parts.next(), parts.next(), parts.next());
    let e = match message {
        Some(m) if !m.is_empty() => Error::new(ErrorKind::Io, m.to_string()),
        _ => Error::new(
            ErrorKind::Io,
            "the mount process ended before the mount was ready",
        )
        .hint(format!("see {}", log.display())),
    };
    Err(match hint {
        Some(h) if !h.is_empty() => e.hint(h.to_string()),
        _ => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_s_line_is_read_as_ready_or_its_error() {
        let log = std::path::Path::new("/state/mounts/x.log");
        assert!(read_answer("ready\n", log).is_ok());
        let e = read_answer("error\tno volume a/b\tcheck the name\n", log).unwrap_err();
        assert_eq!(e.message(), "no volume a/b");
        assert_eq!(e.hint_text(), Some("check the name"));
        let e = read_answer("", log).unwrap_err();
        assert!(e.message().contains("ended before"), "{e}");
        assert!(e.hint_text().unwrap_or("").contains("x.log"));
    }
}
