//! Process-local state in an embedded redb database (`state.redb` in the state
//! directory): the stat cache, (path, size, mtime, ctime, inode, device) → file hash,
//! which lets a re-push skip reading files that did not change; what syncs stored; and
//! sync job and watch records.
//!
//! redb lets one process open the database at a time. The stat cache is an
//! accelerator, so a push that finds the database busy works without it; job records
//! belong to the one process that hosts the agent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use redb::{Database, DatabaseError, ReadableDatabase, ReadableTable, TableDefinition};

use crate::jobs::{Job, JobProgress, JobSpec, JobState};
use crate::watch::Watch;
use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::registry::now_rfc3339;
use sealvol_core::walk::Stamp;
use sealvol_source::listing::Object;

const STAT_CACHE: TableDefinition<&str, &[u8]> = TableDefinition::new("stat_cache");
const STAMP_LEN: usize = 8 + 16 + 16 + 8 + 8;
const JOBS: TableDefinition<u64, &[u8]> = TableDefinition::new("jobs");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const SYNCED: TableDefinition<&str, &[u8]> = TableDefinition::new("synced");
const WATCHES: TableDefinition<u64, &[u8]> = TableDefinition::new("watches");

pub struct StateDb {
    db: Database,
}

impl StateDb {
    /// Opens (or creates) the database. Returns `None` if another process holds it,
    /// after waiting `patience` for it to be released.
    pub fn open(dir: &Path, patience: Duration) -> Result<Option<StateDb>> {
        sealvol_core::private::dir(dir)?;
        let path = dir.join("state.redb");
        let deadline = std::time::Instant::now() + patience;
        let mut recreated = false;
        loop {
            match Database::create(&path) {
                Ok(db) => {
                    sealvol_core::private::restrict(&path, 0o600)?;
                    return Ok(Some(StateDb { db }));
                }
                Err(DatabaseError::DatabaseAlreadyOpen) => {
                    if std::time::Instant::now() >= deadline {
                        return Ok(None);
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) if !recreated && never_written(&path) => {
                    // Created where the disk was full (or killed before its header was
                    // written): it holds nothing, so a new one loses nothing. While the
                    // disk is still full it is removed, not left to fail the next run.
                    std::fs::remove_file(&path)
                        .map_err(|io| Error::io("cannot remove", &path, io))?;
                    if disk_full(&e) {
                        return Err(db_error(&path, e));
                    }
                    tracing::warn!(
                        "state database {} was never completely written ({e}); made a new one",
                        path.display()
                    );
                    recreated = true;
                }
                Err(e) => return Err(db_error(&path, e)),
            }
        }
    }

    /// Cached hashes for these paths whose stamps still match exactly.
    pub fn lookup(&self, items: &[(PathBuf, Stamp)]) -> Result<Vec<Option<Hash>>> {
        let txn = self.db.begin_read().map_err(|e| db_error_s(&e))?;
        let table = match txn.open_table(STAT_CACHE) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![None; items.len()]),
            Err(e) => return Err(db_error_s(&e)),
        };
        items
            .iter()
            .map(|(path, stamp)| {
                let Some(key) = path.to_str() else {
                    return Ok(None);
                };
                let Some(v) = table.get(key).map_err(|e| db_error_s(&e))? else {
                    return Ok(None);
                };
                Ok(decode(v.value())
                    .filter(|(s, _)| s == stamp)
                    .map(|(_, h)| h))
            })
            .collect()
    }

    pub fn remember(&self, items: &[(PathBuf, Stamp, Hash)]) -> Result<()> {
        let txn = self.db.begin_write().map_err(|e| db_error_s(&e))?;
        {
            let mut table = txn.open_table(STAT_CACHE).map_err(|e| db_error_s(&e))?;
            for (path, stamp, hash) in items {
                if let Some(key) = path.to_str() {
                    table
                        .insert(key, encode(stamp, hash).as_slice())
                        .map_err(|e| db_error_s(&e))?;
                }
            }
        }
        txn.commit().map_err(|e| db_error_s(&e))?;
        Ok(())
    }
}

/// The stat cache of a state directory, as a push uses it. The database is opened for
/// the lookup and again for the update, never held in between, so an agent or another
/// push may hold it meanwhile; when it stays busy the push reads every file instead.
pub struct StatCacheDir<'a>(pub &'a Path);

/// How long a push waits for the database before it goes without the stat cache.
const STAT_CACHE_PATIENCE: Duration = Duration::from_millis(200);

impl sealvol_core::push::StatCache for StatCacheDir<'_> {
    fn lookup(&self, files: &[(PathBuf, Stamp)]) -> Result<Vec<Option<Hash>>> {
        match StateDb::open(self.0, STAT_CACHE_PATIENCE)? {
            Some(db) => db.lookup(files),
            None => Ok(vec![None; files.len()]),
        }
    }

    fn remember(&self, files: &[(PathBuf, Stamp, Hash)]) {
        // The cache only speeds up the next push; failing to update it is not an error.
        match StateDb::open(self.0, STAT_CACHE_PATIENCE) {
            Ok(Some(db)) => {
                if let Err(e) = db.remember(files) {
                    tracing::warn!("stat cache not updated: {e}");
                }
            }
            Ok(None) => tracing::debug!("state database busy; stat cache not updated"),
            Err(e) => tracing::warn!("stat cache not updated: {e}"),
        }
    }
}

/// What a sync already stored: (source, key, version, size) → file hash. It lets a
/// resumed or repeated sync skip the objects whose bytes are already in the repository.
impl StateDb {
    /// Each object's file hash if a sync stored it before, with the checks of the
    /// source's hashes its bytes passed then (empty when none, or stored by a sealvol
    /// that did not check).
    pub fn synced_lookup(
        &self,
        source: &str,
        objects: &[Object],
    ) -> Result<Vec<Option<(Hash, String)>>> {
        let txn = self.db.begin_read().map_err(|e| db_error_s(&e))?;
        let table = match txn.open_table(SYNCED) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(vec![None; objects.len()]),
            Err(e) => return Err(db_error_s(&e)),
        };
        objects
            .iter()
            .map(|o| {
                let v = table
                    .get(synced_key(source, o).as_str())
                    .map_err(|e| db_error_s(&e))?;
                // The hash's 32 bytes, then the checks' names.
                Ok(v.and_then(|v| {
                    let v = v.value();
                    let hash: [u8; 32] = v.get(..32)?.try_into().ok()?;
                    let checks = String::from_utf8_lossy(&v[32..]).into_owned();
                    Some((Hash(hash), checks))
                }))
            })
            .collect()
    }

    pub fn synced_remember(&self, source: &str, items: &[(&Object, Hash, String)]) -> Result<()> {
        let txn = self.db.begin_write().map_err(|e| db_error_s(&e))?;
        {
            let mut table = txn.open_table(SYNCED).map_err(|e| db_error_s(&e))?;
            for (o, h, checks) in items {
                let mut value = h.0.to_vec();
                value.extend_from_slice(checks.as_bytes());
                table
                    .insert(synced_key(source, o).as_str(), value.as_slice())
                    .map_err(|e| db_error_s(&e))?;
            }
        }
        txn.commit().map_err(|e| db_error_s(&e))?;
        Ok(())
    }
}

fn synced_key(source: &str, o: &Object) -> String {
    // NUL cannot occur in a source address or a mapped key.
    format!("{source}\0{}\0{}\0{}", o.key, o.version, o.size)
}

/// Sync job records (see `jobs`).
impl StateDb {
    pub fn add_job(&self, spec: JobSpec) -> Result<Job> {
        let now = now_rfc3339();
        self.add_record(JOBS, "next_job", |id| Job {
            id,
            spec,
            state: JobState::Queued,
            created: now.clone(),
            updated: now,
            attempts: 0,
            reason: None,
            error: None,
            sealed: None,
            checks: Default::default(),
            progress: JobProgress::default(),
        })
    }

    pub fn job(&self, id: u64) -> Result<Job> {
        self.record(JOBS, id, "job")?
            .ok_or_else(|| crate::jobs::not_found(id))
    }

    /// Every job, newest first.
    pub fn jobs(&self) -> Result<Vec<Job>> {
        let mut jobs: Vec<Job> = self.records(JOBS, "job")?;
        jobs.reverse();
        Ok(jobs)
    }

    /// Changes a job in one transaction; `f` sees the current record and may refuse.
    pub fn update_job(&self, id: u64, f: impl FnOnce(&mut Job) -> Result<()>) -> Result<Job> {
        self.update_record(JOBS, id, "job", |job: &mut Job| {
            f(job)?;
            job.updated = now_rfc3339();
            Ok(())
        })?
        .ok_or_else(|| crate::jobs::not_found(id))
    }

    /// Moves a job to `to`, if that move is allowed from where it is now.
    pub fn move_job(&self, id: u64, to: JobState, reason: Option<String>) -> Result<Job> {
        self.update_job(id, |job| {
            if !job.state.can_become(to) {
                return Err(crate::jobs::bad_move(job, to));
            }
            if to == JobState::Running {
                job.attempts += 1;
            }
            if to == JobState::Queued {
                job.reason = None;
                job.error = None;
            }
            if reason.is_some() {
                job.reason = reason;
            }
            job.state = to;
            Ok(())
        })
    }

    /// A job that ended FAILED or CANCELLED with `error`: its state, its one-line
    /// reason and the error itself in one transaction, so that no reader ever sees the
    /// end without why.
    pub fn job_failed(
        &self,
        id: u64,
        to: JobState,
        error: &sealvol_core::error::Error,
    ) -> Result<Job> {
        let reason = crate::log::one_line(error);
        let wire = sealvol_core::error::WireError::from(error);
        self.update_job(id, |job| {
            if !job.state.can_become(to) {
                return Err(crate::jobs::bad_move(job, to));
            }
            job.state = to;
            job.reason = Some(reason);
            job.error = Some(wire);
            Ok(())
        })
    }

    /// A sealed job: SEALING → READY with its pinned ref and the checks its files
    /// passed.
    pub fn job_ready(
        &self,
        id: u64,
        pinned_ref: String,
        checks: std::collections::BTreeMap<String, u64>,
    ) -> Result<Job> {
        self.update_job(id, |job| {
            if !job.state.can_become(JobState::Ready) {
                return Err(crate::jobs::bad_move(job, JobState::Ready));
            }
            job.state = JobState::Ready;
            job.sealed = Some(pinned_ref);
            job.checks = checks.clone();
            Ok(())
        })
    }

    /// Queues again the jobs a dead agent left RUNNING or SEALING; returns their ids.
    pub fn requeue_interrupted(&self) -> Result<Vec<u64>> {
        let ids: Vec<u64> = self
            .jobs()?
            .into_iter()
            .filter(|j| matches!(j.state, JobState::Running | JobState::Sealing))
            .map(|j| j.id)
            .collect();
        for id in &ids {
            self.move_job(*id, JobState::Queued, None)?;
        }
        Ok(ids)
    }
}

/// The stat cache of the process that holds the database (the agent's watches).
impl sealvol_core::push::StatCache for StateDb {
    fn lookup(&self, files: &[(PathBuf, Stamp)]) -> Result<Vec<Option<Hash>>> {
        StateDb::lookup(self, files)
    }

    fn remember(&self, files: &[(PathBuf, Stamp, Hash)]) {
        if let Err(e) = StateDb::remember(self, files) {
            tracing::warn!("stat cache not updated: {e}");
        }
    }
}

/// Watch records (see `watch`).
impl StateDb {
    /// Stores a new watch, made by `make` from its id and the time.
    pub fn add_watch(&self, make: impl FnOnce(u64, String) -> Watch) -> Result<Watch> {
        let now = now_rfc3339();
        self.add_record(WATCHES, "next_watch", |id| make(id, now))
    }

    pub fn watch(&self, id: u64) -> Result<Watch> {
        self.record(WATCHES, id, "watch")?
            .ok_or_else(|| crate::watch::not_found(id))
    }

    /// Every watch, oldest first.
    pub fn watches(&self) -> Result<Vec<Watch>> {
        self.records(WATCHES, "watch")
    }

    /// Changes a watch in one transaction; `f` sees the current record and may refuse.
    pub fn update_watch(&self, id: u64, f: impl FnOnce(&mut Watch) -> Result<()>) -> Result<Watch> {
        self.update_record(WATCHES, id, "watch", |w: &mut Watch| {
            f(w)?;
            w.updated = now_rfc3339();
            Ok(())
        })?
        .ok_or_else(|| crate::watch::not_found(id))
    }
}

/// Records kept as JSON by id (jobs, watches): the transactions they share.
type Records = TableDefinition<'static, u64, &'static [u8]>;

impl StateDb {
    /// Stores the record `make` builds from the next id of `counter`.
    fn add_record<T: serde::Serialize>(
        &self,
        table: Records,
        counter: &str,
        make: impl FnOnce(u64) -> T,
    ) -> Result<T> {
        let txn = self.db.begin_write().map_err(|e| db_error_s(&e))?;
        let record = {
            let mut meta = txn.open_table(META).map_err(|e| db_error_s(&e))?;
            let id = meta
                .get(counter)
                .map_err(|e| db_error_s(&e))?
                .map_or(1, |v| v.value());
            meta.insert(counter, id + 1).map_err(|e| db_error_s(&e))?;
            let record = make(id);
            let mut t = txn.open_table(table).map_err(|e| db_error_s(&e))?;
            t.insert(id, to_bytes(&record)?.as_slice())
                .map_err(|e| db_error_s(&e))?;
            record
        };
        txn.commit().map_err(|e| db_error_s(&e))?;
        Ok(record)
    }

    fn record<T: serde::de::DeserializeOwned>(
        &self,
        table: Records,
        id: u64,
        what: &str,
    ) -> Result<Option<T>> {
        let txn = self.db.begin_read().map_err(|e| db_error_s(&e))?;
        let t = match txn.open_table(table) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(db_error_s(&e)),
        };
        match t.get(id).map_err(|e| db_error_s(&e))? {
            Some(v) => from_bytes(v.value(), what).map(Some),
            None => Ok(None),
        }
    }

    /// Every record, by id (oldest first).
    fn records<T: serde::de::DeserializeOwned>(
        &self,
        table: Records,
        what: &str,
    ) -> Result<Vec<T>> {
        let txn = self.db.begin_read().map_err(|e| db_error_s(&e))?;
        let t = match txn.open_table(table) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(db_error_s(&e)),
        };
        let mut out = Vec::new();
        for item in t.iter().map_err(|e| db_error_s(&e))? {
            let (_, v) = item.map_err(|e| db_error_s(&e))?;
            out.push(from_bytes(v.value(), what)?);
        }
        Ok(out)
    }

    /// Changes record `id` in one transaction; `None` if there is none.
    fn update_record<T: serde::Serialize + serde::de::DeserializeOwned>(
        &self,
        table: Records,
        id: u64,
        what: &str,
        f: impl FnOnce(&mut T) -> Result<()>,
    ) -> Result<Option<T>> {
        let txn = self.db.begin_write().map_err(|e| db_error_s(&e))?;
        let record = {
            let mut t = txn.open_table(table).map_err(|e| db_error_s(&e))?;
            let mut record: T = match t.get(id).map_err(|e| db_error_s(&e))? {
                Some(v) => from_bytes(v.value(), what)?,
                None => return Ok(None),
            };
            f(&mut record)?;
            t.insert(id, to_bytes(&record)?.as_slice())
                .map_err(|e| db_error_s(&e))?;
            record
        };
        txn.commit().map_err(|e| db_error_s(&e))?;
        Ok(Some(record))
    }
}

fn to_bytes<T: serde::Serialize>(v: &T) -> Result<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| Error::new(ErrorKind::Io, format!("record: {e}")))
}

fn from_bytes<T: serde::de::DeserializeOwned>(b: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(b)
        .map_err(|e| Error::corrupt(format!("a {what} record is damaged: {e}")))
}

fn encode(s: &Stamp, h: &Hash) -> Vec<u8> {
    let mut v = Vec::with_capacity(STAMP_LEN + 32);
    v.extend_from_slice(&s.size.to_le_bytes());
    v.extend_from_slice(&s.mtime_ns.to_le_bytes());
    v.extend_from_slice(&s.ctime_ns.to_le_bytes());
    v.extend_from_slice(&s.ino.to_le_bytes());
    v.extend_from_slice(&s.dev.to_le_bytes());
    v.extend_from_slice(&h.0);
    v
}

fn decode(b: &[u8]) -> Option<(Stamp, Hash)> {
    if b.len() != STAMP_LEN + 32 {
        return None;
    }
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    let i128_at = |i: usize| i128::from_le_bytes(b[i..i + 16].try_into().unwrap_or_default());
    let stamp = Stamp {
        size: u64_at(0),
        mtime_ns: i128_at(8),
        ctime_ns: i128_at(24),
        ino: u64_at(40),
        dev: u64_at(48),
    };
    let mut h = [0u8; 32];
    h.copy_from_slice(&b[STAMP_LEN..]);
    Some((stamp, Hash(h)))
}

/// redb's file signature, which its header begins with once it is written.
const REDB_MAGIC: &[u8; 9] = b"redb\x1a\x0a\xa9\x0d\x0a";

/// Whether the database file exists but never had its header written: empty, short, or
/// zeros where the signature goes (redb sizes the file before it writes the header, so
/// a full disk leaves such a file behind).
fn never_written(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 9];
    match std::fs::File::open(path) {
        Ok(mut f) => match f.read_exact(&mut head) {
            Ok(()) => &head != REDB_MAGIC,
            Err(_) => true,
        },
        Err(_) => false,
    }
}

fn disk_full(e: &DatabaseError) -> bool {
    matches!(e, DatabaseError::Storage(redb::StorageError::Io(io))
        if io.raw_os_error() == Some(libc::ENOSPC))
}

fn db_error(path: &Path, e: DatabaseError) -> Error {
    let full = disk_full(&e);
    let err = Error::new(
        ErrorKind::Io,
        format!("cannot open state database {}: {e}", path.display()),
    );
    match full {
        true => err.hint(format!(
            "free some space on the disk of {} and run this again",
            path.parent().unwrap_or(path).display()
        )),
        false => err.hint("if state.redb is damaged, delete it: that loses the stat cache and job records, never repository data"),
    }
}

fn db_error_s(e: &dyn std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, format!("state database: {e}"))
        .hint("if state.redb is damaged, delete it: that loses the stat cache and job records, never repository data")
}

/// The watches' records, as a watch's runner keeps them (`watch::Records`).
impl crate::watch::Records for StateDb {
    fn watch(&self, id: u64) -> Result<Watch> {
        StateDb::watch(self, id)
    }

    fn update_watch(
        &self,
        id: u64,
        change: &mut dyn FnMut(&mut Watch) -> Result<()>,
    ) -> Result<Watch> {
        StateDb::update_watch(self, id, change)
    }

    fn stat_cache(&self) -> &dyn sealvol_core::push::StatCache {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_never_written_is_made_anew_and_a_damaged_one_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.redb");
        for never in [&b""[..], &[0u8; 1 << 20][..], b"red"] {
            std::fs::write(&path, never).unwrap();
            let db = StateDb::open(dir.path(), Duration::ZERO).unwrap().unwrap();
            db.lookup(&[]).unwrap();
            drop(db);
        }
        // Written once, damaged since: it may hold job records, so it is not replaced.
        let mut damaged = std::fs::read(&path).unwrap();
        damaged[9..4096].fill(0xAB);
        std::fs::write(&path, &damaged).unwrap();
        let err = StateDb::open(dir.path(), Duration::ZERO).err().unwrap();
        assert!(err.hint_text().unwrap_or("").contains("delete it"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), damaged, "left as it was");
    }

    #[test]
    fn a_full_disk_fails_the_open_with_what_to_do_and_leaves_nothing_broken() {
        let dir = tempfile::tempdir().unwrap();
        let Some(fs) = sealvol_core::testutil::Tmpfs::mount(dir.path(), "1M") else {
            eprintln!("SKIPPED: no tmpfs (not root)");
            return;
        };
        let state = fs.path().join("state");
        let fill = fs.path().join("fill");
        fs.fill();
        let err = StateDb::open(&state, Duration::ZERO).err().unwrap();
        assert!(
            err.hint_text().unwrap_or("").contains("free some space"),
            "{err}"
        );
        assert!(
            !state.join("state.redb").exists(),
            "no half-made database left"
        );
        std::fs::remove_file(&fill).unwrap();
        let db = StateDb::open(&state, Duration::ZERO).unwrap().unwrap();
        db.lookup(&[]).unwrap();
    }

    fn spec() -> JobSpec {
        JobSpec {
            mirror_to: None,
            started_by: None,
            source: "s3://bucket/ckpt/".into(),
            volume: "weights/x".into(),
            tags: vec!["prod".into()],
            secret: Some("aws-key".into()),
            include: vec![],
            exclude: vec!["*.tmp".into()],
            endpoint: Default::default(),
        }
    }

    #[test]
    fn a_failed_job_is_written_with_its_reason_and_error_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path(), Duration::ZERO).unwrap().unwrap();
        let id = db.add_job(spec()).unwrap().id;
        db.move_job(id, JobState::Running, None).unwrap();
        let e =
            Error::new(ErrorKind::Denied, "s3://b/p/: access denied").hint("pass --secret NAME");
        let failed = db.job_failed(id, JobState::Failed, &e).unwrap();
        // One record holds the end and why: no reader sees FAILED without the error.
        let stored = db.job(id).unwrap();
        for j in [&failed, &stored] {
            assert_eq!(j.state, JobState::Failed);
            assert!(
                j.reason.as_deref().unwrap().contains("access denied"),
                "{j:?}"
            );
            let w = j
                .error
                .as_ref()
                .expect("the error is stored with the state");
            assert_eq!(w.hint.as_deref(), Some("pass --secret NAME"));
        }
        // Only a move the states allow: a FAILED job does not fail again.
        assert!(db.job_failed(id, JobState::Failed, &e).is_err());
    }

    #[test]
    fn jobs_live_through_their_states_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = {
            let db = StateDb::open(dir.path(), Duration::ZERO).unwrap().unwrap();
            let a = db.add_job(spec()).unwrap();
            let b = db.add_job(spec()).unwrap();
            assert_eq!((a.id, b.id, a.state), (1, 2, JobState::Queued));
            db.move_job(a.id, JobState::Running, None).unwrap();
            db.update_job(a.id, |j| {
                j.progress.bytes_done = 42;
                Ok(())
            })
            .unwrap();
            (a.id, b.id)
        };
        // A new agent: the RUNNING job goes back to the queue, its progress kept.
        let db = StateDb::open(dir.path(), Duration::ZERO).unwrap().unwrap();
        assert_eq!(db.requeue_interrupted().unwrap(), vec![a]);
        let ja = db.job(a).unwrap();
        assert_eq!(
            (ja.state, ja.attempts, ja.progress.bytes_done),
            (JobState::Queued, 1, 42)
        );
        db.move_job(a, JobState::Running, None).unwrap();
        db.move_job(a, JobState::Sealing, None).unwrap();
        assert!(
            db.job_ready(b, "vol:weights/x@b3:00".into(), Default::default())
                .is_err(),
            "b is QUEUED"
        );
        let done = db
            .job_ready(a, "vol:weights/x@b3:00".into(), Default::default())
            .unwrap();
        assert_eq!(done.attempts, 2);
        let e = db.move_job(a, JobState::Queued, None).unwrap_err();
        assert!(e.to_string().contains("READY"), "{e}");
        assert!(e.hint_text().unwrap().contains("FAILED or CANCELLED"));
        db.move_job(b, JobState::Cancelled, Some("by ana".into()))
            .unwrap();
        let retried = db.move_job(b, JobState::Queued, None).unwrap();
        assert_eq!(retried.reason, None);
        let ids: Vec<u64> = db.jobs().unwrap().iter().map(|j| j.id).collect();
        assert_eq!(ids, vec![b, a], "newest first");
        assert_eq!(db.job(99).unwrap_err().kind(), ErrorKind::NotFound);
        let stored = std::fs::read(dir.path().join("state.redb")).unwrap();
        assert!(
            String::from_utf8_lossy(&stored).contains("aws-key"),
            "the record names the secret"
        );
    }

    #[test]
    fn remembers_and_rejects_changed_stamps() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path(), Duration::ZERO).unwrap().unwrap();
        let stamp = Stamp {
            size: 5,
            mtime_ns: 1,
            ctime_ns: 2,
            ino: 3,
            dev: 4,
        };
        let p = PathBuf::from("/x/y");
        db.remember(&[(p.clone(), stamp, Hash([7; 32]))]).unwrap();
        assert_eq!(
            db.lookup(&[(p.clone(), stamp)]).unwrap(),
            vec![Some(Hash([7; 32]))]
        );
        let touched = Stamp {
            ctime_ns: 9,
            ..stamp
        };
        assert_eq!(db.lookup(&[(p, touched)]).unwrap(), vec![None]);
        // A second opener in the same process sees it busy and goes without.
        assert!(StateDb::open(dir.path(), Duration::ZERO).unwrap().is_none());
    }
}
