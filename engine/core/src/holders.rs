//! Which processes hold files under a folder: read from `/proc/<pid>/fd`, `fdinfo`
//! and `cwd`, for the processes this one may inspect (its own user's, or all as root;
//! the others are skipped). A watch waits while a checkpoint's file is open for
//! writing; an unmount that the kernel calls busy names who keeps it so.

use std::fs;
use std::path::{Path, PathBuf};

/// A process holding `path` (a file under the folder asked about, or the folder or a
/// subfolder as its working directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Its command name (`/proc/<pid>/comm`).
    pub command: String,
    pub path: PathBuf,
    /// Whether it holds the file open for writing.
    pub writing: bool,
    /// Whether it is the process's working directory rather than an open file.
    pub cwd: bool,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let how = match (self.cwd, self.writing) {
            (true, _) => "is the working directory of",
            (false, true) => "is open for writing by",
            (false, false) => "is open in",
        };
        write!(
            f,
            "{} {how} pid {} ({})",
            self.path.display(),
            self.pid,
            self.command
        )
    }
}

/// Every process (but this one) holding something under `dir` (a canonical path), at
/// most `limit` of them, in pid order.
pub fn under(dir: &Path, limit: usize) -> Vec<Holder> {
    scan(dir, limit, |_| true)
}

/// The first process found holding a file under `dir` open for writing.
pub fn writer_under(dir: &Path) -> Option<Holder> {
    scan(dir, 1, |h| h.writing).pop()
}

/// Up to `limit` processes, in pid order, each with the first thing under `dir` it
/// holds that `want` takes (its working directory first, then its open files).
fn scan(dir: &Path, limit: usize, want: impl Fn(&Holder) -> bool) -> Vec<Holder> {
    let me = std::process::id();
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = procs
        .flatten()
        .filter_map(|p| p.file_name().to_str().and_then(|s| s.parse().ok()))
        .filter(|pid| *pid != me)
        .collect();
    pids.sort_unstable();
    let mut out = Vec::new();
    for pid in pids {
        if out.len() >= limit {
            break;
        }
        let proc = PathBuf::from(format!("/proc/{pid}"));
        let holder = |path: PathBuf, writing: bool, cwd: bool| Holder {
            pid,
            command: fs::read_to_string(proc.join("comm"))
                .map(|c| c.trim().to_string())
                .unwrap_or_default(),
            path,
            writing,
            cwd,
        };
        if let Ok(cwd) = fs::read_link(proc.join("cwd"))
            && cwd.starts_with(dir)
        {
            let h = holder(cwd, false, true);
            if want(&h) {
                out.push(h);
                continue;
            }
        }
        let Ok(fds) = fs::read_dir(proc.join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = fs::read_link(fd.path()) else {
                continue;
            };
            if !target.starts_with(dir) {
                continue;
            }
            let info = proc.join("fdinfo").join(fd.file_name());
            let h = holder(
                target,
                writable(&fs::read_to_string(info).unwrap_or_default()),
                false,
            );
            if want(&h) {
                out.push(h);
                break;
            }
        }
    }
    out
}

/// Whether an `fdinfo` text says the descriptor was opened for writing.
fn writable(fdinfo: &str) -> bool {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        .is_some_and(|flags| {
            let mode = flags & libc::O_ACCMODE as u32;
            mode == libc::O_WRONLY as u32 || mode == libc::O_RDWR as u32
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A shell that runs `script` with the folder as `$1`, once it said ready.
    fn holding(dir: &Path, script: &str) -> std::process::Child {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("sh")
            .arg(dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        child
    }

    #[test]
    fn a_file_open_for_writing_in_another_process_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        fs::write(dir.join("done.bin"), b"x").unwrap();
        assert_eq!(writer_under(&dir), None);
        // A real writer in another process: this process is skipped by design.
        let mut child = holding(&dir, "exec 3>>\"$1/part.bin\"; echo ready; read _");
        let w = writer_under(&dir).expect("the shell holds part.bin open");
        assert_eq!((w.pid, w.path.clone()), (child.id(), dir.join("part.bin")));
        assert!(w.to_string().contains("open for writing"), "{w}");
        writeln!(child.stdin.take().unwrap()).unwrap();
        child.wait().unwrap();
        assert_eq!(writer_under(&dir), None, "closed when the writer ended");
    }

    #[test]
    fn readers_and_working_directories_are_holders_too() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path().canonicalize().unwrap();
        fs::create_dir(dir.join("sub")).unwrap();
        fs::write(dir.join("w.bin"), b"x").unwrap();
        let mut reader = holding(&dir, "exec 3<\"$1/w.bin\"; echo ready; read _");
        let mut inside = holding(&dir, "cd \"$1/sub\"; echo ready; read _");
        let found = under(&dir, 10);
        let mine: Vec<&Holder> = found
            .iter()
            .filter(|h| h.pid == reader.id() || h.pid == inside.id())
            .collect();
        assert_eq!(mine.len(), 2, "{found:?}");
        let r = mine.iter().find(|h| h.pid == reader.id()).unwrap();
        assert!(!r.writing && !r.cwd && r.path == dir.join("w.bin"));
        assert!(r.to_string().contains("is open in pid"), "{r}");
        let c = mine.iter().find(|h| h.pid == inside.id()).unwrap();
        assert!(c.cwd && c.to_string().contains("working directory"), "{c}");
        for c in [&mut reader, &mut inside] {
            writeln!(c.stdin.take().unwrap()).unwrap();
            c.wait().unwrap();
        }
        assert!(under(&dir, 10).is_empty());
    }

    #[test]
    fn fdinfo_flags_are_read_as_octal() {
        assert!(writable("pos:\t0\nflags:\t0100001\nmnt_id:\t1\n"));
        assert!(writable("flags:\t02102002\n"));
        assert!(!writable("pos:\t0\nflags:\t0100000\n"));
        assert!(!writable(""));
    }
}
