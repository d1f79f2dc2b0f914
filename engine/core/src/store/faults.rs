//! A store that fails on cue: a decorator over any `ObjectStore` for tests of what the
//! engine does when its store misbehaves the ways real ones do.
//!
//! A test says which call (`Call`), which occurrence (`When`) and what goes wrong
//! (`Fault`): the call fails before it reaches the store, or after (the write landed
//! but its answer was lost), a read comes back cut short, a conditional write loses
//! its race to another writer, a listing answers as it was earlier (stale), or the call
//! waits at a gate the test opens, so an interleaving is chosen, never hoped for. Every
//! call is counted by kind.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::object_store::{ETag, ObjectInfo, ObjectStore, Page, Requests, Stamp, WriterGuard};
use crate::error::{Error, ErrorKind, Result};

/// The kinds of store call a fault can be tied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Call {
    Get,
    GetRange,
    Size,
    PutIfAbsent,
    PutFile,
    GetVersioned,
    PutIfMatch,
    List,
    Delete,
    Put,
    Move,
    Sync,
}

/// Which calls of a kind a rule takes, counted from 1 over the calls that match it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Only the nth.
    Nth(u64),
    /// The nth and every one after it.
    From(u64),
    Every,
}

/// What goes wrong.
#[derive(Clone)]
pub enum Fault {
    /// The call fails with this kind of error and does nothing.
    Fail(ErrorKind),
    /// The call is done, then fails with this kind: a write whose answer was lost.
    FailAfter(ErrorKind),
    /// A read (`get`, `get_range`) returns only its first n bytes.
    CutShort(usize),
    /// A conditional write (`put_if_match`) finds that another writer wrote these bytes
    /// to its key a moment before.
    LoseRaceTo(Vec<u8>),
    /// A listing answers with what was there when the rule was made.
    Stale(Arc<Vec<ObjectInfo>>),
    /// The call waits until the gate is opened, then goes on.
    Wait(Gate),
}

/// A gate a test opens: calls waiting at it go on. `arrived` tells how many reached it.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<(bool, u64)>, Condvar)>);

impl Gate {
    pub fn open(&self) {
        crate::locks::lock(&self.0.0).0 = true;
        self.0.1.notify_all();
    }

    /// How many calls have reached the gate.
    pub fn arrived(&self) -> u64 {
        crate::locks::lock(&self.0.0).1
    }

    /// Blocks until `n` calls have reached the gate.
    pub fn wait_for(&self, n: u64) {
        let mut g = crate::locks::lock(&self.0.0);
        while g.1 < n {
            g = crate::locks::wait(&self.0.1, g);
        }
    }

    fn pass(&self) {
        let mut g = crate::locks::lock(&self.0.0);
        g.1 += 1;
        self.0.1.notify_all();
        while !g.0 {
            g = crate::locks::wait(&self.0.1, g);
        }
    }
}

struct Rule {
    call: Call,
    when: When,
    /// Only calls on keys that start with this.
    prefix: String,
    fault: Fault,
    seen: u64,
}

pub struct Faulty<S> {
    inner: S,
    rules: Mutex<Vec<Rule>>,
    calls: Mutex<HashMap<Call, u64>>,
    fired: AtomicU64,
}

impl<S: ObjectStore> Faulty<S> {
    pub fn new(inner: S) -> Faulty<S> {
        Faulty {
            inner,
            rules: Mutex::new(Vec::new()),
            calls: Mutex::new(HashMap::new()),
            fired: AtomicU64::new(0),
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Adds a rule: `fault` on the calls of kind `call`, on keys under `prefix`, that
    /// `when` takes.
    pub fn inject(&self, call: Call, prefix: &str, when: When, fault: Fault) {
        crate::locks::lock(&self.rules).push(Rule {
            call,
            when,
            prefix: prefix.to_string(),
            fault,
            seen: 0,
        });
    }

    /// A listing of `prefix` that stays as it is now, whatever is written after.
    pub fn stale_listings(&self, prefix: &str, when: When) -> Result<()> {
        let now = Arc::new(self.inner.list(prefix)?);
        self.inject(Call::List, prefix, when, Fault::Stale(now));
        Ok(())
    }

    /// A gate the calls `when` takes wait at.
    pub fn gate(&self, call: Call, prefix: &str, when: When) -> Gate {
        let g = Gate::default();
        self.inject(call, prefix, when, Fault::Wait(g.clone()));
        g
    }

    /// Removes every rule (calls already waiting at a gate still wait for it).
    pub fn heal(&self) {
        crate::locks::lock(&self.rules).clear();
    }

    /// Calls of a kind made so far.
    pub fn calls(&self, call: Call) -> u64 {
        crate::locks::lock(&self.calls)
            .get(&call)
            .copied()
            .unwrap_or(0)
    }

    /// Faults that have fired so far.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    /// Counts the call and returns the faults that take it.
    fn faults(&self, call: Call, key: &str) -> Vec<Fault> {
        *crate::locks::lock(&self.calls).entry(call).or_default() += 1;
        let mut out = Vec::new();
        for r in crate::locks::lock(&self.rules).iter_mut() {
            if r.call != call || !key.starts_with(&r.prefix) {
                continue;
            }
            r.seen += 1;
            let takes = match r.when {
                When::Nth(n) => r.seen == n,
                When::From(n) => r.seen >= n,
                When::Every => true,
            };
            if takes {
                out.push(r.fault.clone());
            }
        }
        self.fired.fetch_add(out.len() as u64, Ordering::Relaxed);
        out
    }

    /// Runs `op` under the faults that take this call: gates first, then a failure
    /// before, the call itself, then a failure after.
    fn run<T>(&self, call: Call, key: &str, op: impl FnOnce(&[Fault]) -> Result<T>) -> Result<T> {
        let faults = self.faults(call, key);
        for f in &faults {
            if let Fault::Wait(g) = f {
                g.pass();
            }
        }
        if let Some(kind) = faults.iter().find_map(|f| match f {
            Fault::Fail(k) => Some(*k),
            _ => None,
        }) {
            return Err(injected(kind, call, key));
        }
        let out = op(&faults)?;
        if let Some(kind) = faults.iter().find_map(|f| match f {
            Fault::FailAfter(k) => Some(*k),
            _ => None,
        }) {
            return Err(injected(kind, call, key));
        }
        Ok(out)
    }
}

fn injected(kind: ErrorKind, call: Call, key: &str) -> Error {
    Error::new(kind, format!("injected fault: {call:?} of {key}"))
}

fn cut(faults: &[Fault], mut bytes: Vec<u8>) -> Vec<u8> {
    for f in faults {
        if let Fault::CutShort(n) = f {
            bytes.truncate(*n);
        }
    }
    bytes
}

impl<S: ObjectStore> ObjectStore for Faulty<S> {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        self.run(Call::Get, key, |f| {
            Ok(self.inner.get(key)?.map(|b| cut(f, b)))
        })
    }

    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.run(Call::GetRange, key, |f| {
            Ok(cut(f, self.inner.get_range(key, offset, len)?))
        })
    }

    fn get_range_into(&self, key: &str, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        *buf = self.get_range(key, offset, buf.len() as u64)?;
        Ok(())
    }

    fn size(&self, key: &str) -> Result<Option<u64>> {
        self.run(Call::Size, key, |_| self.inner.size(key))
    }

    fn put_if_absent(&self, key: &str, data: &[u8]) -> Result<bool> {
        self.run(Call::PutIfAbsent, key, |_| {
            self.inner.put_if_absent(key, data)
        })
    }

    fn put_file_if_absent(&self, key: &str, file: &Path) -> Result<bool> {
        self.run(Call::PutFile, key, |_| {
            self.inner.put_file_if_absent(key, file)
        })
    }

    fn staging_path(&self) -> Result<PathBuf> {
        self.inner.staging_path()
    }

    fn concurrency(&self) -> usize {
        self.inner.concurrency()
    }

    fn get_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        self.run(Call::GetVersioned, key, |_| self.inner.get_versioned(key))
    }

    fn put_if_match(&self, key: &str, data: &[u8], expected: Option<&ETag>) -> Result<()> {
        self.run(Call::PutIfMatch, key, |f| {
            for fault in f {
                if let Fault::LoseRaceTo(winner) = fault {
                    self.inner.put(key, winner)?;
                }
            }
            self.inner.put_if_match(key, data, expected)
        })
    }

    fn list_page(&self, prefix: &str, after: Option<&str>) -> Result<Page> {
        self.run(Call::List, prefix, |f| {
            let stale = f.iter().rev().find_map(|x| match x {
                Fault::Stale(then) => Some(then),
                _ => None,
            });
            let Some(then) = stale else {
                return self.inner.list_page(prefix, after);
            };
            let objects = then
                .iter()
                .filter(|o| o.key.starts_with(prefix))
                .filter(|o| after.is_none_or(|a| o.key.as_str() > a))
                .cloned()
                .collect();
            Ok(Page {
                objects,
                next: None,
            })
        })
    }

    fn delete(&self, key: &str) -> Result<()> {
        self.run(Call::Delete, key, |_| self.inner.delete(key))
    }

    fn writers_lock(&self, exclusive: bool) -> Result<Option<WriterGuard>> {
        self.inner.writers_lock(exclusive)
    }

    fn clean_staging(&self) -> Result<(u64, u64)> {
        self.inner.clean_staging()
    }

    fn requests(&self) -> Option<Requests> {
        self.inner.requests()
    }

    fn clean_abandoned(&self) -> Result<()> {
        self.inner.clean_abandoned()
    }

    fn put(&self, key: &str, data: &[u8]) -> Result<()> {
        self.run(Call::Put, key, |_| self.inner.put(key, data))
    }

    fn move_object(&self, from: &str, to: &str) -> Result<()> {
        self.run(Call::Move, from, |_| self.inner.move_object(from, to))
    }

    fn now(&self) -> Result<std::time::SystemTime> {
        self.inner.now()
    }

    fn sync(&self) -> Result<()> {
        self.run(Call::Sync, "", |_| self.inner.sync())
    }
}

/// A shared store is a store: a test keeps one handle to steer the faults and hands
/// the repository another.
impl<S: ObjectStore + ?Sized> ObjectStore for Arc<S> {
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        (**self).get(key)
    }
    fn get_range(&self, key: &str, offset: u64, len: u64) -> Result<Vec<u8>> {
        (**self).get_range(key, offset, len)
    }
    fn get_range_into(&self, key: &str, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        (**self).get_range_into(key, offset, buf)
    }
    fn get_file_range_into(
        &self,
        key: &str,
        offset: u64,
        buf: &mut Vec<u8>,
        file: &crate::digest::Hash,
    ) -> Result<()> {
        (**self).get_file_range_into(key, offset, buf, file)
    }
    fn get_range_stamped_into(
        &self,
        key: &str,
        offset: u64,
        buf: &mut Vec<u8>,
    ) -> Result<Option<Stamp>> {
        (**self).get_range_stamped_into(key, offset, buf)
    }
    fn size(&self, key: &str) -> Result<Option<u64>> {
        (**self).size(key)
    }
    fn put_if_absent(&self, key: &str, data: &[u8]) -> Result<bool> {
        (**self).put_if_absent(key, data)
    }
    fn put_file_if_absent(&self, key: &str, file: &Path) -> Result<bool> {
        (**self).put_file_if_absent(key, file)
    }
    fn staging_path(&self) -> Result<PathBuf> {
        (**self).staging_path()
    }
    fn concurrency(&self) -> usize {
        (**self).concurrency()
    }
    fn get_versioned(&self, key: &str) -> Result<Option<(Vec<u8>, ETag)>> {
        (**self).get_versioned(key)
    }
    fn put_if_match(&self, key: &str, data: &[u8], expected: Option<&ETag>) -> Result<()> {
        (**self).put_if_match(key, data, expected)
    }
    fn list_page(&self, prefix: &str, after: Option<&str>) -> Result<Page> {
        (**self).list_page(prefix, after)
    }
    fn delete(&self, key: &str) -> Result<()> {
        (**self).delete(key)
    }
    fn writers_lock(&self, exclusive: bool) -> Result<Option<WriterGuard>> {
        (**self).writers_lock(exclusive)
    }
    fn clean_staging(&self) -> Result<(u64, u64)> {
        (**self).clean_staging()
    }
    fn requests(&self) -> Option<Requests> {
        (**self).requests()
    }
    fn clean_abandoned(&self) -> Result<()> {
        (**self).clean_abandoned()
    }
    fn put(&self, key: &str, data: &[u8]) -> Result<()> {
        (**self).put(key, data)
    }
    fn move_object(&self, from: &str, to: &str) -> Result<()> {
        (**self).move_object(from, to)
    }
    fn now(&self) -> Result<std::time::SystemTime> {
        (**self).now()
    }
    fn sync(&self) -> Result<()> {
        (**self).sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    #[test]
    fn faults_take_the_calls_they_name() {
        let f = Faulty::new(MemoryStore::new().unwrap());
        f.put("a/1", b"abcdef").unwrap();
        f.inject(
            Call::Get,
            "a/",
            When::Nth(2),
            Fault::Fail(ErrorKind::Unavailable),
        );
        f.inject(Call::GetRange, "", When::Every, Fault::CutShort(2));
        assert!(f.get("a/1").is_ok());
        assert_eq!(f.get("a/1").unwrap_err().kind(), ErrorKind::Unavailable);
        assert!(f.get("a/1").is_ok(), "only the second");
        assert_eq!(f.get_range("a/1", 1, 4).unwrap(), b"bc");
        assert_eq!(f.calls(Call::Get), 3);
        assert_eq!(f.fired(), 2);
    }

    #[test]
    fn a_lost_answer_still_wrote() {
        let f = Faulty::new(MemoryStore::new().unwrap());
        f.inject(
            Call::PutIfAbsent,
            "",
            When::Every,
            Fault::FailAfter(ErrorKind::Unavailable),
        );
        assert!(f.put_if_absent("k", b"v").is_err());
        assert_eq!(f.inner().get("k").unwrap().unwrap(), b"v");
    }

    #[test]
    fn a_race_is_lost_to_the_winner_s_bytes() {
        let f = Faulty::new(MemoryStore::new().unwrap());
        f.put("t", b"old").unwrap();
        let (_, tag) = f.get_versioned("t").unwrap().unwrap();
        f.inject(
            Call::PutIfMatch,
            "t",
            When::Nth(1),
            Fault::LoseRaceTo(b"theirs".to_vec()),
        );
        let e = f.put_if_match("t", b"mine", Some(&tag)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Race);
        assert_eq!(f.get("t").unwrap().unwrap(), b"theirs");
    }

    #[test]
    fn a_stale_listing_misses_what_came_later() {
        let f = Faulty::new(MemoryStore::new().unwrap());
        f.put("p/1", b"x").unwrap();
        f.stale_listings("p/", When::Every).unwrap();
        f.put("p/2", b"x").unwrap();
        assert_eq!(f.list("p/").unwrap().len(), 1);
        f.heal();
        assert_eq!(f.list("p/").unwrap().len(), 2);
    }

    #[test]
    fn a_gate_holds_a_call_until_opened() {
        let f = Arc::new(Faulty::new(MemoryStore::new().unwrap()));
        f.put("k", b"v").unwrap();
        let gate = f.gate(Call::Get, "k", When::Nth(1));
        let f2 = Arc::clone(&f);
        let t = std::thread::spawn(move || f2.get("k").unwrap());
        gate.wait_for(1);
        assert!(!t.is_finished(), "held at the gate");
        gate.open();
        assert_eq!(t.join().unwrap().unwrap(), b"v");
    }
}
