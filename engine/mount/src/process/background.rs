//! A mount started in the background: the given program (this same binary, re-run
//! with `--foreground`) in a session of its own, so that it outlives the shell and its
//! Ctrl-C, with its output in a log beside the mount records. The caller waits until
//! the child says the mount is ready, or gets the child's reason.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use sealvol_core::{Error, Result};

use super::ready::{READY_FD, read_answer};

/// A background mount that said it is ready.
#[derive(Debug)]
pub struct Started {
    pub pid: u32,
    /// Its output.
    pub log: PathBuf,
}

/// Runs `program args` (a foreground mount of `dir`) in the background with its
/// output in `<records>/<dir as a name>.log`, and waits for its answer.
pub fn start(program: &Path, args: &[OsString], records: &Path, dir: &Path) -> Result<Started> {
    sealvol_core::private::dir(records)?;
    let log_path = records.join(format!("{}.log", log_name(dir)));
    let log = sealvol_core::private::append(&log_path)
        .map_err(|e| Error::io("cannot open log", &log_path, e))?;
    let log2 = log
        .try_clone()
        .map_err(|e| Error::io("cannot open log", &log_path, e))?;
    let (read_end, write_end) = pipe()?;
    let child_fd = write_end.as_raw_fd();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env(READY_FD, child_fd.to_string())
        // A crash point armed for this process is not the mount's.
        .env_remove(sealvol_core::crash::CRASH_AT)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // A new session: the mount outlives this shell and its Ctrl-C.
            libc::setsid();
            // Keep the ready pipe open across exec (it was made close-on-exec).
            if libc::fcntl(child_fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| Error::io("cannot start the mount process", dir, e))?;
    drop(write_end);
    // Killed here, the starter leaves a mount that finishes starting on its own.
    sealvol_core::crash::point("mount-spawned");
    // One line: "ready", or the child's error. EOF without one means it died.
    let mut line = String::new();
    let mut reader = std::io::BufReader::new(std::fs::File::from(read_end));
    let _ = std::io::BufRead::read_line(&mut reader, &mut line);
    let pid = child.id();
    reap_when_it_ends(child);
    read_answer(&line, &log_path)?;
    Ok(Started { pid, log: log_path })
}

/// The mount process is this process's child until it ends: a long-lived starter (the
/// CSI plugin, which mounts for every pod) waits for it on a small thread, or every
/// mount it ever ended would stay a zombie in the process table until the plugin
/// restarts. A starter that exits first (`volume mount`) hands it to init.
fn reap_when_it_ends(mut child: std::process::Child) {
    let spawned = std::thread::Builder::new()
        .name("mount-reaper".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let _ = child.wait();
        });
    if let Err(e) = spawned {
        tracing::debug!("cannot start a thread to reap the mount process: {e}");
    }
}

/// A mount point as a log file's name: `/mnt/a b` → `mnt_a_b`.
fn log_name(dir: &Path) -> String {
    let s: String = dir
        .to_string_lossy()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.trim_start_matches('_').chars().take(150).collect()
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::io(
            "cannot create a pipe",
            Path::new("pipe"),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: both are fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_ends_without_an_answer_is_an_error_naming_its_log() {
        let records = tempfile::tempdir().unwrap();
        let e = start(
            Path::new("/bin/sh"),
            &["-c".into(), "echo starting; exit 3".into()],
            records.path(),
            Path::new("/mnt/a b"),
        )
        .unwrap_err();
        assert!(e.message().contains("ended before"), "{e}");
        let log = records.path().join("mnt_a_b.log");
        assert!(e.hint_text().unwrap_or("").contains("mnt_a_b.log"), "{e}");
        assert_eq!(std::fs::read_to_string(log).unwrap(), "starting\n");
    }

    #[test]
    fn a_child_that_says_ready_is_started() {
        let records = tempfile::tempdir().unwrap();
        let s = start(
            Path::new("/bin/sh"),
            &[
                "-c".into(),
                format!("echo ready > /proc/self/fd/${READY_FD}").into(),
            ],
            records.path(),
            Path::new("/mnt/x"),
        )
        .unwrap();
        assert!(s.pid > 0);
        let e = start(
            Path::new("/bin/sh"),
            &[
                "-c".into(),
                format!(
                    "printf 'error\\tno such volume\\tlist them\\n' > /proc/self/fd/${READY_FD}"
                )
                .into(),
            ],
            records.path(),
            Path::new("/mnt/x"),
        )
        .unwrap_err();
        assert_eq!(e.message(), "no such volume");
        assert_eq!(e.hint_text(), Some("list them"));
    }
}
