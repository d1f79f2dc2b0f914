//! A mount's guard: a small child process that unmounts the mount point (lazily) once
//! the process serving it is gone and the kernel calls the mount dead, so a mount
//! killed with -9 leaves no dead mount point behind.
//!
//! Why not fusermount3's `auto_unmount`: once the socket it watches closes, it opens
//! the mount point once and unmounts only on `ENOTCONN`. A killed process's
//! descriptors are released one after another; when that socket goes before the last
//! `/dev/fuse` descriptor, fusermount3's `open` reaches a connection that is still
//! alive and is then aborted (`ECONNABORTED`), so it leaves the dead mount in place
//! (seen once in a few dozen suite runs). The guard also takes `ECONNABORTED` as dead.
//!
//! The guard is forked, not executed: it needs nothing but a few system calls, all
//! prepared before the fork, and it holds no descriptor of the mount's (it closes
//! everything but its pipe at once).

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The write end of the guard's pipe. Dropping it, or the end of this process, wakes
/// the guard; `Drop` waits for it.
pub struct Guard {
    pipe: Option<OwnedFd>,
    pid: libc::pid_t,
}

/// Starts the guard of the mount at `dir`.
pub fn start(dir: &Path) -> std::io::Result<Guard> {
    let invalid = |what| std::io::Error::new(std::io::ErrorKind::InvalidInput, what);
    let dir_c =
        CString::new(dir.as_os_str().as_bytes()).map_err(|_| invalid("a NUL in the path"))?;
    let dev_null = c"/dev/null";
    // Not root: only the setuid fusermount3 may unmount. Found before the fork, since
    // searching PATH allocates.
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let fusermount = if root {
        None
    } else {
        find_in_path("fusermount3")
    };
    let (dash_u, dash_z, dashes) = (c"-u", c"-z", c"--");
    let argv: Option<[*const libc::c_char; 6]> = fusermount.as_ref().map(|f| {
        [
            f.as_ptr(),
            dash_u.as_ptr(),
            dash_z.as_ptr(),
            dashes.as_ptr(),
            dir_c.as_ptr(),
            std::ptr::null(),
        ]
    });

    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 just made these two descriptors; each is owned once.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };

    // SAFETY: the child calls only async-signal-safe functions (setsid, prctl, signal,
    // dup2, open, close, read, umount2, execv, _exit) on data prepared above, as a fork of a
    // multi-threaded process must.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        unsafe {
            // Out of the mount's session: a ctrl-c meant for a foreground mount does
            // not reach its guard.
            libc::setsid();
            libc::prctl(libc::PR_SET_NAME, c"sealvol-guard".as_ptr());
            // The mount's own signal handlers (a clean unmount on SIGTERM) mean nothing
            // here: a plain SIGTERM ends the guard.
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            let r = read.as_raw_fd();
            if r != 3 && libc::dup2(r, 3) != 3 {
                libc::_exit(1);
            }
            let null = libc::open(dev_null.as_ptr(), libc::O_RDWR);
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            // Nothing of the mount's stays open here: not its /dev/fuse descriptors
            // (which would keep a dead mount alive), not a caller's pipes.
            libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32);
            let mut byte = 0u8;
            loop {
                let n = libc::read(3, (&raw mut byte).cast(), 1);
                if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                    break;
                }
            }
            // Alive (answered), or no longer a mount: nothing to do.
            let fd = libc::open(dir_c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            if fd >= 0 {
                libc::close(fd);
                libc::_exit(0);
            }
            let e = *libc::__errno_location();
            if e != libc::ENOTCONN && e != libc::ECONNABORTED {
                libc::_exit(0);
            }
            if root {
                libc::umount2(dir_c.as_ptr(), libc::MNT_DETACH);
            } else if let Some(argv) = argv {
                libc::execv(argv[0], argv.as_ptr());
            }
            libc::_exit(0);
        }
    }
    drop(read);
    Ok(Guard {
        pipe: Some(write),
        pid,
    })
}

impl Drop for Guard {
    fn drop(&mut self) {
        // The guard wakes, finds the mount point answering or gone, and exits at once;
        // reaped here so that a long-lived process (serve, the CSI driver) that mounts
        // again and again keeps no zombies. Bounded: a guard that hangs is left behind
        // rather than hang an unmount.
        drop(self.pipe.take());
        for _ in 0..200 {
            let mut status = 0;
            // SAFETY: our own child; an error (reaped elsewhere) ends the wait too.
            match unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } {
                0 => std::thread::sleep(std::time::Duration::from_millis(10)),
                _ => return,
            }
        }
    }
}

fn find_in_path(name: &str) -> Option<CString> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .and_then(|p| CString::new(p.as_os_str().as_bytes()).ok())
}
