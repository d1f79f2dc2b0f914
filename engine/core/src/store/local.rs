//! A repository in a local directory (the embedded default).
//!
//! Create-if-absent is "write a temporary file, then hard-link it into place": `link(2)`
//! fails if the name exists, so a reader never sees a partial object and two writers of
//! the same object cannot clobber each other. Compare-and-swap takes an exclusive
//! `flock` on a lock file, which the kernel drops if the process dies, so a `kill -9`
//! can never leave a tag locked.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::object_store::{ETag, ObjectInfo, ObjectStore, Page, Stamp, WriterGuard};
use super::staging::{clean_staging_dir, unique_temp_name};
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::paths::is_clean_relative;

/// Temporary files live here, inside the repository, so that publishing is a link on
/// one file system. Anything left by a killed process is garbage and safe to delete.
const TMP: &str = "tmp";

pub struct LocalStore {
    root: PathBuf,
    /// fsync objects before they become visible, so a power cut cannot leave a published
    /// name pointing at unwritten blocks.
    durable: bool,
    /// Objects published since the last `sync`, not yet fsynced.
    unsynced: std::sync::Mutex<Vec<PathBuf>>,
}

/// Up to this many unsynced objects are fsynced one by one at a barrier; beyond it one
/// `syncfs` is cheaper, even though it also flushes other processes' dirty pages.
const FSYNC_ONE_BY_ONE: usize = 256;

impl LocalStore {
    pub fn new(root: &Path, durable: bool) -> Result<LocalStore> {
        fs::create_dir_all(root.join(TMP)).ctx("cannot create repository directory", root)?;
        Ok(LocalStore {
            root: root.to_path_buf(),
            durable,
            unsynced: std::sync::Mutex::new(Vec::new()),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Reads `buf.len()` bytes of `key` from `offset`; hands back the open file.
    fn read_range(&self, key: &str, offset: u64, buf: &mut [u8]) -> Result<(File, PathBuf)> {
        let p = self.path(key)?;
        let f = File::open(&p).ctx("cannot open", &p)?;
        let len = buf.len();
        match f.read_exact_at(buf, offset) {
            Ok(()) => Ok((f, p)),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(Error::corrupt(format!(
                "{} is shorter than expected (wanted {len} bytes at {offset})",
                p.display()
            ))),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        if !is_clean_relative(key) {
            return Err(Error::new(
                ErrorKind::Invalid,
                format!("invalid object key {key:?}"),
            ));
        }
        Ok(self.root.join(key))
    }

    fn temp_path(&self) -> PathBuf {
        self.root.join(TMP).join(unique_temp_name())
    }

    /// Moves a finished temporary file to `dest` unless `dest` exists (then the temp is
    /// removed). With `sync`, the file and its new directory entry are made durable.
    fn publish(&self, tmp: &Path, dest: &Path, sync: bool) -> Result<bool> {
        if sync && let Err(e) = File::open(tmp).and_then(|f| f.sync_all()) {
            let _ = fs::remove_file(tmp);
            return Err(Error::io("cannot sync", tmp, e));
        }
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).ctx("cannot create directory", parent)?;
        }
        let created = match rename_noreplace(tmp, dest) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let _ = fs::remove_file(tmp);
                false
            }
            Err(e) => {
                let _ = fs::remove_file(tmp);
                return Err(Error::io("cannot publish", dest, e));
            }
        };
        if created && sync {
            sync_dir(dest.parent().unwrap_or(&self.root));
        }
        Ok(created)
    }

    fn write_temp(&self, data: &[u8]) -> Result<PathBuf> {
        let tmp = self.temp_path();
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .ctx("cannot create", &tmp)?;
        f.write_all(data).ctx("cannot write", &tmp)?;
        Ok(tmp)
    }

    fn lock_path(&self, key: &str) -> PathBuf {
        let h = blake3::hash(key.as_bytes());
        self.root
            .join(TMP)
            .join(format!("lock-{}", &h.to_hex()[..32]))
    }
}

/// `rename(2)` that fails with `AlreadyExists` instead of replacing `dest`: atomic
/// create-if-absent. Unlike link-then-unlink it deletes no inode, which matters on
/// ext4, where allocating next to many recently deleted inodes gets slower and slower
/// (it made a push of 100,000 small files spend 84% of its time in the allocator).
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: two valid NUL-terminated paths; renameat2 reads them only.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        // File systems without RENAME_NOREPLACE: link(2) gives the same guarantee.
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            fs::hard_link(from, to)?;
            let _ = fs::remove_file(from);
            Ok(())
        }
        _ => Err(err),
    }
}

fn sync_dir(dir: &Path) {
    // Best effort: a directory fsync makes the new name durable; failure only weakens
    // durability against power loss, never correctness.
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

fn etag_of(data: &[u8]) -> ETag {
    ETag(blake3::hash(data).to_hex()[..32].to_string())
}

impl ObjectStore for LocalStore {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let p = self.path(key)?;
        match fs::read(&p) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        self.get_range_into(key, offset, &mut buf)?;
        Ok(buf)
    }

    fn get_range_into(&self, key: &str, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        self.read_range(key, offset, buf).map(|_| ())
    }

    fn get_range_stamped_into(
        &self,
        key: &str,
        offset: u64,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Stamp>> {
        let (f, p) = self.read_range(key, offset, buf)?;
        // Taken after the read, from the file read: a write before or during the read
        // shows in it.
        let m = f.metadata().ctx("cannot read", &p)?;
        use std::os::unix::fs::MetadataExt;
        let ns = |s: i64, n: i64| s as i128 * 1_000_000_000 + n as i128;
        Ok(Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: ns(m.ctime(), m.ctime_nsec()),
        }))
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        let p = self.path(key)?;
        match fs::metadata(&p) {
            Ok(m) => Ok(Some(m.len())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("cannot read", &p, e)),
        }
    }

    fn put_if_absent(&self, key: &str, data: &[u8]) -> Result<bool> {
        let dest = self.path(key)?;
        if dest.exists() {
            return Ok(false);
        }
        let tmp = self.write_temp(data)?;
        // Small objects are made durable together at the next `sync` barrier: one fsync
        // each as they are written would make a push of many small files crawl.
        let created = self.publish(&tmp, &dest, false)?;
        if created && self.durable {
            crate::locks::lock(&self.unsynced).push(dest);
        }
        Ok(created)
    }

    fn put_file_if_absent(&self, key: &str, file: &Path) -> Result<bool> {
        let dest = self.path(key)?;
        self.publish(file, &dest, self.durable)
    }

    fn staging_path(&self) -> Result<PathBuf> {
        Ok(self.temp_path())
    }

    fn get_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        Ok(self.get(key)?.map(|b| {
            let e = etag_of(&b);
            (b, e)
        }))
    }

    fn put_if_match(&self, key: &str, data: &[u8], expected: Option<&ETag>) -> Result<()> {
        self.path(key)?;
        let lock_path = self.lock_path(key);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .ctx("cannot open lock", &lock_path)?;
        lock.lock().ctx("cannot lock", &lock_path)?;
        let current = self.get(key)?.map(|b| etag_of(&b));
        if current.as_ref() != expected {
            return Err(Error::new(
                ErrorKind::Race,
                format!("{key} was changed by someone else at the same time"),
            )
            .hint("look at the current state and try again"));
        }
        self.put(key, data)?;
        drop(lock);
        Ok(())
    }

    fn list_page(&self, prefix: &str, after: Option<&str>) -> Result<Page> {
        let base = self.root.join(prefix.trim_end_matches('/'));
        let mut objects = Vec::new();
        let mut stack = vec![(base, prefix.trim_end_matches('/').to_string())];
        while let Some((dir, rel)) = stack.pop() {
            let rd = match fs::read_dir(&dir) {
                Ok(rd) => rd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io("cannot list", &dir, e)),
            };
            for item in rd {
                let item = item.ctx("cannot list", &dir)?;
                let name = item.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.starts_with('.') {
                    continue;
                }
                let key = if rel.is_empty() {
                    name.to_string()
                } else {
                    format!("{rel}/{name}")
                };
                let meta = match item.metadata() {
                    Ok(m) => m,
                    // Deleted since the directory was read.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(Error::io("cannot read", &item.path(), e)),
                };
                if meta.is_dir() {
                    stack.push((item.path(), key));
                } else if after.is_none_or(|a| key.as_str() > a) {
                    objects.push(ObjectInfo {
                        key,
                        size: meta.len(),
                        modified: meta.modified().ok(),
                    });
                }
            }
        }
        objects.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        // Listing a directory is cheap: one page holds everything.
        Ok(Page {
            objects,
            next: None,
        })
    }

    fn sync(&self) -> Result<()> {
        if !self.durable {
            return Ok(());
        }
        let pending = std::mem::take(&mut *crate::locks::lock(&self.unsynced));
        if pending.len() <= FSYNC_ONE_BY_ONE {
            let mut dirs = std::collections::BTreeSet::new();
            for p in &pending {
                match File::open(p).and_then(|f| f.sync_all()) {
                    Ok(()) => {}
                    // Deleted since (a garbage collection removed an index this process
                    // re-wrote for a condemned pack): nothing is left to make durable,
                    // and whether anything needed it is the collection's protocol's
                    // business (docs/GC.md), not the barrier's.
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(Error::io("cannot sync", p, e)),
                }
                if let Some(d) = p.parent() {
                    dirs.insert(d.to_path_buf());
                }
            }
            for d in dirs {
                sync_dir(&d);
            }
            return Ok(());
        }
        let dir = File::open(&self.root).ctx("cannot open", &self.root)?;
        // SAFETY: syncfs only reads the descriptor, which stays open for the call.
        let rc = unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&dir)) };
        if rc != 0 {
            return Err(Error::io(
                "cannot sync",
                &self.root,
                io::Error::last_os_error(),
            ));
        }
        Ok(())
    }

    fn put(&self, key: &str, data: &[u8]) -> Result<()> {
        let dest = self.path(key)?;
        let tmp = self.write_temp(data)?;
        if self.durable {
            File::open(&tmp)
                .and_then(|f| f.sync_all())
                .ctx("cannot sync", &tmp)?;
        }
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).ctx("cannot create directory", parent)?;
        }
        if let Err(e) = fs::rename(&tmp, &dest) {
            let _ = fs::remove_file(&tmp);
            return Err(Error::io("cannot replace", &dest, e));
        }
        if self.durable {
            sync_dir(dest.parent().unwrap_or(&self.root));
        }
        Ok(())
    }

    fn move_object(&self, from: &str, to: &str) -> Result<()> {
        let (src, dest) = (self.path(from)?, self.path(to)?);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).ctx("cannot create directory", parent)?;
        }
        rename_noreplace(&src, &dest).map_err(|e| Error::io("cannot move", &src, e))?;
        if self.durable {
            sync_dir(dest.parent().unwrap_or(&self.root));
            sync_dir(src.parent().unwrap_or(&self.root));
        }
        Ok(())
    }

    fn writers_lock(&self, exclusive: bool) -> Result<Option<WriterGuard>> {
        let path = self.root.join(TMP).join("lock-writers");
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ctx("cannot open lock", &path)?;
        if exclusive {
            match f.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(Error::new(
                        ErrorKind::Conflict,
                        "another sealvol process is writing to this repository (a push or a sync)",
                    )
                    .hint("run this again when it has finished; `--dry-run` works meanwhile"));
                }
                Err(fs::TryLockError::Error(e)) => return Err(Error::io("cannot lock", &path, e)),
            }
        } else {
            match f.try_lock_shared() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => {
                    tracing::warn!("waiting for a repair of {} to finish", self.root.display());
                    f.lock_shared().ctx("cannot lock", &path)?;
                }
                Err(fs::TryLockError::Error(e)) => return Err(Error::io("cannot lock", &path, e)),
            }
        }
        Ok(Some(WriterGuard(Box::new(f))))
    }

    fn clean_staging(&self) -> Result<(u64, u64)> {
        clean_staging_dir(&self.root.join(TMP))
    }

    fn delete(&self, key: &str) -> Result<()> {
        let p = self.path(key)?;
        match fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io("cannot delete", &p, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_read_says_which_file_it_read_and_a_write_changes_that() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::new(dir.path(), false).unwrap();
        s.put("packs/ab/abcd", b"0123456789").unwrap();
        let path = dir.path().join("packs/ab/abcd");
        // Written long ago, as a pack is: the write below moves its modified time
        // however coarse the filesystem's clock.
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let mut buf = vec![0; 4];
        let first = s
            .get_range_stamped_into("packs/ab/abcd", 2, &mut buf)
            .unwrap();
        assert_eq!(buf, b"2345");
        let again = s
            .get_range_stamped_into("packs/ab/abcd", 6, &mut buf)
            .unwrap();
        assert!(
            first.is_some() && first == again,
            "an unchanged file, the same stamp"
        );
        // Written to in place, same length: another stamp (its times moved).
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(b"X", 3).unwrap();
        drop(f);
        let later = s
            .get_range_stamped_into("packs/ab/abcd", 2, &mut buf)
            .unwrap();
        assert_eq!(buf, b"2X45");
        assert_ne!(later, first);
        // Replaced by another file of the same bytes: another stamp (its inode).
        let other = dir.path().join("other");
        std::fs::write(&other, b"0123456789").unwrap();
        std::fs::rename(&other, &path).unwrap();
        let replaced = s
            .get_range_stamped_into("packs/ab/abcd", 2, &mut buf)
            .unwrap();
        assert_ne!(replaced, later);
        // A read past the end is refused as before, stamp or not.
        let mut long = vec![0; 20];
        assert!(
            s.get_range_stamped_into("packs/ab/abcd", 0, &mut long)
                .is_err()
        );
    }

    #[test]
    fn stale_staging_files_go_and_live_ones_stay() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::new(dir.path(), false).unwrap();
        let tmp = dir.path().join(TMP);
        // Ours, being written: kept.
        let mine = tmp.join(crate::store::unique_temp_name());
        std::fs::write(&mine, b"mine").unwrap();
        // A pid that cannot exist (above the kernel's pid_max limit of 2^22).
        std::fs::write(
            tmp.join(format!("{}-4194400-0.tmp", crate::store::host())),
            b"x",
        )
        .unwrap();
        std::fs::write(tmp.join("4194401-3.tmp"), b"old name").unwrap();
        // Our pid, but written before this process started: a dead namesake's.
        let namesake = tmp.join(crate::store::unique_temp_name());
        std::fs::write(&namesake, b"y").unwrap();
        let f = File::options().write(true).open(&namesake).unwrap();
        f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
            .unwrap();
        // Locks are never removed.
        std::fs::write(tmp.join("lock-abc"), b"").unwrap();
        // Another machine's, recent: kept (we cannot see its owner).
        std::fs::write(tmp.join("elsewhere-1-0.tmp"), b"z").unwrap();
        assert_eq!(s.clean_staging().unwrap(), (3, 1 + 8 + 1));
        let mut left: Vec<String> = std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mine = mine.file_name().unwrap().to_str().unwrap().to_string();
        let mut want = vec!["elsewhere-1-0.tmp".to_string(), "lock-abc".into(), mine];
        want.sort();
        assert_eq!(left, want);
    }

    #[test]
    fn create_if_absent_and_cas() {
        let dir = tempfile::tempdir().unwrap();
        let s = LocalStore::new(dir.path(), false).unwrap();
        assert!(s.put_if_absent("a/b", b"one").unwrap());
        assert!(!s.put_if_absent("a/b", b"two").unwrap());
        assert_eq!(s.get("a/b").unwrap().unwrap(), b"one");
        assert!(s.get("a/c").unwrap().is_none());

        s.put_if_match("t/x", b"v1", None).unwrap();
        let (_, etag) = s.get_versioned("t/x").unwrap().unwrap();
        assert_eq!(
            s.put_if_match("t/x", b"v2", None).unwrap_err().kind(),
            ErrorKind::Race
        );
        s.put_if_match("t/x", b"v2", Some(&etag)).unwrap();
        assert_eq!(
            s.put_if_match("t/x", b"v3", Some(&etag))
                .unwrap_err()
                .kind(),
            ErrorKind::Race
        );
        s.put_if_absent("a/c/d", b"four").unwrap();
        let keys: Vec<(String, u64)> = s
            .list("a/")
            .unwrap()
            .into_iter()
            .map(|o| (o.key, o.size))
            .collect();
        assert_eq!(keys, [("a/b".to_string(), 3), ("a/c/d".to_string(), 4)]);
        let rest = s.list_page("a/", Some("a/b")).unwrap();
        assert_eq!(rest.objects.len(), 1, "a page starts after the key given");
        assert_eq!(rest.objects[0].key, "a/c/d");
        assert!(s.get("../etc/passwd").is_err());
    }
}
