//! Files on their way in from a Hub upstream, for the pull-through mirror (issue 63):
//! each written once, in order, by the sync job's tap (`sealvol_source::Tap`) into a
//! file of the server's own, and read meanwhile by any number of clients at once, each
//! up to what was written. A whole-file hash proves nothing until the last byte, so the
//! file's last `HOLD` bytes are held back until the source's hash held: no client gets
//! the whole file before then, and when it fails, every reader gets an error (its
//! download is cut short and its resume asks again), never the last bytes. A reader
//! that waits longer than its patience for bytes that do not come is told so.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The bytes at a file's end no reader gets before the file's hash held.
pub const HOLD: u64 = 64 << 10;

/// What a reader is told when it cannot have bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unread {
    /// The file will not be whole: why (its hash did not hold, the job stopped).
    Failed(String),
    /// Nothing new came within the reader's patience.
    Stalled(Duration),
    /// The range asked for is not within the file.
    Outside { size: u64 },
}

#[derive(Default)]
struct State {
    /// Bytes written so far, from the start.
    written: u64,
    /// How it ended: verified, or why not.
    end: Option<Result<(), String>>,
}

/// One file on its way in.
pub struct Incoming {
    path: PathBuf,
    file: File,
    pub size: u64,
    state: Mutex<State>,
    changed: Condvar,
}

impl Incoming {
    /// How far readers may read now.
    fn readable(&self, s: &State) -> u64 {
        match s.end {
            Some(Ok(())) => s.written,
            _ => s.written.min(self.size.saturating_sub(HOLD)),
        }
    }

    /// Bytes `[offset, offset + len)`, once readers may read them (or as many of them
    /// as may be read by then, at least one): waits up to `patience` for each new
    /// piece. `len` 0 or a range past the end is `Outside`.
    pub fn read_at(&self, offset: u64, len: u64, patience: Duration) -> Result<Vec<u8>, Unread> {
        if len == 0 || offset >= self.size {
            return Err(Unread::Outside { size: self.size });
        }
        let end = (offset + len).min(self.size);
        let mut s = sealvol_core::lock(&self.state);
        let mut deadline = Instant::now() + patience;
        let mut seen = s.written;
        loop {
            let readable = self.readable(&s);
            if readable > offset {
                let to = end.min(readable);
                drop(s);
                let mut buf = vec![0u8; (to - offset) as usize];
                self.file
                    .read_exact_at(&mut buf, offset)
                    .map_err(|e| Unread::Failed(format!("the spool cannot be read: {e}")))?;
                return Ok(buf);
            }
            if let Some(Err(why)) = &s.end {
                return Err(Unread::Failed(why.clone()));
            }
            // Progress restarts the clock: a slow upstream is waited for, a silent one not.
            if s.written > seen {
                seen = s.written;
                deadline = Instant::now() + patience;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Unread::Stalled(patience));
            }
            s = self
                .changed
                .wait_timeout(s, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Whether the file was read whole and its hash held.
    pub fn verified(&self) -> bool {
        matches!(sealvol_core::lock(&self.state).end, Some(Ok(())))
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The files on their way in, by a key of the caller's (repo, commit, path).
pub struct Spool {
    dir: PathBuf,
    files: Mutex<HashMap<String, Arc<Incoming>>>,
    next: std::sync::atomic::AtomicU64,
}

impl Spool {
    /// A spool in `dir` (made if missing; what an earlier process left there is
    /// removed: its readers are gone).
    pub fn open(dir: &Path) -> std::io::Result<Spool> {
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        std::fs::create_dir_all(dir)?;
        Ok(Spool {
            dir: dir.to_path_buf(),
            files: Mutex::default(),
            next: Default::default(),
        })
    }

    /// The file `key` on its way in, if it is.
    pub fn get(&self, key: &str) -> Option<Arc<Incoming>> {
        sealvol_core::lock(&self.files).get(key).cloned()
    }

    /// Starts file `key` of `size` bytes: its writer (the job's tap for it). A file
    /// already on its way in under that key is replaced (its readers keep reading
    /// theirs to its end).
    pub fn start(self: &Arc<Self>, key: &str, size: u64) -> std::io::Result<Writer> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = self.dir.join(format!("{n}.part"));
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .read(true)
            .write(true)
            .open(&path)?;
        let incoming = Arc::new(Incoming {
            path,
            file: file.try_clone()?,
            size,
            state: Mutex::default(),
            changed: Condvar::new(),
        });
        sealvol_core::lock(&self.files).insert(key.to_string(), Arc::clone(&incoming));
        Ok(Writer {
            spool: Arc::clone(self),
            key: key.to_string(),
            incoming,
            out: std::io::BufWriter::with_capacity(1 << 20, file),
            pending: 0,
            failed: None,
        })
    }

    /// Forgets file `key` once it is sealed (readers holding it read on; its file goes
    /// when the last lets go).
    pub fn forget(&self, key: &str) {
        sealvol_core::lock(&self.files).remove(key);
    }

    /// Forgets every file whose key starts with `prefix`.
    pub fn forget_prefix(&self, prefix: &str) {
        sealvol_core::lock(&self.files).retain(|k, _| !k.starts_with(prefix));
    }

    /// How many files are on their way in or kept.
    pub fn len(&self) -> usize {
        sealvol_core::lock(&self.files).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl std::fmt::Debug for Spool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Spool({})", self.dir.display())
    }
}

/// The one writer of a file on its way in.
pub struct Writer {
    spool: Arc<Spool>,
    key: String,
    incoming: Arc<Incoming>,
    out: std::io::BufWriter<File>,
    /// Bytes written to `out` and not yet told to readers.
    pending: u64,
    /// The spool's own failure (a full disk): the file then fails.
    failed: Option<String>,
}

/// How many bytes are written before readers are told: a reader wakes per MiB, not per
/// network piece.
const TELL_EVERY: u64 = 1 << 20;

impl Writer {
    pub fn write(&mut self, bytes: &[u8]) {
        if self.failed.is_some() {
            return;
        }
        if let Err(e) = self.out.write_all(bytes) {
            self.failed = Some(format!("the mirror's spool cannot be written: {e}"));
            return;
        }
        self.pending += bytes.len() as u64;
        if self.pending >= TELL_EVERY {
            self.tell();
        }
    }

    fn tell(&mut self) {
        if let Err(e) = self.out.flush() {
            self.failed = Some(format!("the mirror's spool cannot be written: {e}"));
            return;
        }
        let mut s = sealvol_core::lock(&self.incoming.state);
        s.written += self.pending;
        self.pending = 0;
        self.incoming.changed.notify_all();
    }

    /// Read whole, and its hash held: readers may read the rest.
    pub fn verified(mut self) {
        self.tell();
        let outcome = match self.failed.take() {
            None => Ok(()),
            Some(why) => Err(why),
        };
        self.end(outcome);
    }

    /// It will not be whole: readers are told why.
    pub fn failed(mut self, why: &str) {
        self.end(Err(why.to_string()));
    }

    fn end(&mut self, outcome: Result<(), String>) {
        let failed = outcome.is_err();
        let mut s = sealvol_core::lock(&self.incoming.state);
        s.end = Some(outcome);
        self.incoming.changed.notify_all();
        drop(s);
        if failed {
            // A later request starts it again (the job's retry) rather than find this.
            let mut files = sealvol_core::lock(&self.spool.files);
            if files
                .get(&self.key)
                .is_some_and(|f| Arc::ptr_eq(f, &self.incoming))
            {
                files.remove(&self.key);
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let ended = sealvol_core::lock(&self.incoming.state).end.is_some();
        if !ended {
            self.end(Err("the mirror's job stopped before the file's end".into()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spool() -> (tempfile::TempDir, Arc<Spool>) {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(Spool::open(&dir.path().join("spool")).unwrap());
        (dir, s)
    }

    const NOW: Duration = Duration::from_millis(0);
    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn readers_read_what_was_written_but_the_last_bytes_only_once_verified() {
        let (_d, s) = spool();
        let size = 3 << 20;
        let bytes: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let mut w = s.start("f", size as u64).unwrap();
        let f = s.get("f").unwrap();
        assert_eq!(
            f.read_at(0, 10, NOW),
            Err(Unread::Stalled(NOW)),
            "nothing yet"
        );
        w.write(&bytes);
        // Written whole, not yet verified: all but the last HOLD bytes.
        let got = f.read_at(0, size as u64, NOW).unwrap();
        assert_eq!(got.len() as u64, size as u64 - HOLD);
        assert_eq!(got, bytes[..got.len()]);
        assert_eq!(
            f.read_at(size as u64 - 1, 1, NOW),
            Err(Unread::Stalled(NOW))
        );
        w.verified();
        assert!(f.verified());
        assert_eq!(
            f.read_at(size as u64 - HOLD, HOLD, NOW).unwrap(),
            bytes[size - HOLD as usize..]
        );
        assert_eq!(
            f.read_at(size as u64, 1, NOW),
            Err(Unread::Outside { size: size as u64 })
        );
    }

    #[test]
    fn a_reader_waits_for_bytes_being_written_and_a_failure_ends_every_reader() {
        let (_d, s) = spool();
        let size: u64 = 4 << 20;
        let mut w = s.start("f", size).unwrap();
        let f = s.get("f").unwrap();
        let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let f = Arc::clone(&f);
                std::thread::spawn(move || f.read_at(1 << 20, 10, LONG))
            })
            .collect();
        let late = {
            let f = Arc::clone(&f);
            std::thread::spawn(move || {
                gate_rx.recv().unwrap();
                f.read_at(size - 1, 1, LONG)
            })
        };
        w.write(&vec![7u8; 2 << 20]);
        for r in readers {
            assert_eq!(r.join().unwrap().unwrap(), vec![7u8; 10]);
        }
        gate_tx.send(()).unwrap();
        w.failed("model.safetensors: sha256 is ab…, the source said cd…");
        let e = late.join().unwrap().unwrap_err();
        assert!(
            matches!(&e, Unread::Failed(why) if why.contains("sha256")),
            "{e:?}"
        );
        assert!(s.get("f").is_none(), "a failed file is not found again");
        // Bytes written before the failure stay readable to who holds the file.
        assert_eq!(f.read_at(0, 1, NOW), Ok(vec![7u8]));
    }

    #[test]
    fn a_writer_dropped_unfinished_fails_its_readers_and_leaves_no_spool_file() {
        let (d, s) = spool();
        let w = s.start("f", 100).unwrap();
        let f = s.get("f").unwrap();
        drop(w);
        assert!(matches!(f.read_at(0, 1, NOW), Err(Unread::Failed(_))));
        drop(f);
        let left: Vec<_> = std::fs::read_dir(d.path().join("spool")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }
}
