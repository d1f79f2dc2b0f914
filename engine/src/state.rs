//! Process-local state in an embedded redb database (`state.redb` in the state
//! directory). For now it holds the stat cache: (path, size, mtime, ctime, inode,
//! device) → file hash, which lets a re-push skip reading files that did not change.
//!
//! redb lets one process open the database at a time. State is an accelerator, never a
//! source of truth, so a process that finds it busy simply works without it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use redb::{Database, DatabaseError, ReadableDatabase, TableDefinition};

use crate::digest::Hash;
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::walk::Stamp;

const STAT_CACHE: TableDefinition<&str, &[u8]> = TableDefinition::new("stat_cache");
const STAMP_LEN: usize = 8 + 16 + 16 + 8 + 8;

pub struct StateDb {
    db: Database,
}

impl StateDb {
    /// Opens (or creates) the database. Returns `None` if another process holds it,
    /// after waiting `patience` for it to be released.
    pub fn open(dir: &Path, patience: Duration) -> Result<Option<StateDb>> {
        std::fs::create_dir_all(dir).ctx("cannot create state directory", dir)?;
        let path = dir.join("state.redb");
        let deadline = std::time::Instant::now() + patience;
        loop {
            match Database::create(&path) {
                Ok(db) => return Ok(Some(StateDb { db })),
                Err(DatabaseError::DatabaseAlreadyOpen) => {
                    if std::time::Instant::now() >= deadline {
                        return Ok(None);
                    }
                    std::thread::sleep(Duration::from_millis(20));
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

fn db_error(path: &Path, e: DatabaseError) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("cannot open state database {}: {e}", path.display()),
    )
    .hint("the state directory holds only caches: delete state.redb if it is damaged")
}

fn db_error_s(e: &dyn std::fmt::Display) -> Error {
    Error::new(ErrorKind::Io, format!("state database: {e}"))
        .hint("the state directory holds only caches: delete state.redb if it is damaged")
}

#[cfg(test)]
mod tests {
    use super::*;

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
