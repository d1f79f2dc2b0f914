//! What a namespace stores, as its quota counts it (docs/SEMANTICS.md, "Quotas"): the
//! distinct chunks its versions reference, live and in the trash, at the bytes they
//! take in the packs, and the signatures stored beside those versions.
//!
//! A chunk several namespaces hold counts for each of them. Content is stored once for
//! all, so a shared chunk costs the repository its bytes once; but a team can then
//! predict its usage from its own versions alone, and no other team's deletion can
//! push it over its quota.
//!
//! A quota (`RepoConfig::quotas`, `sealvol settings --quota NS=SIZE`) is kept when a
//! version is sealed: a seal that would take its namespace past it is refused, and
//! nothing is sealed. Seals of one namespace are checked one at a time in a process, so
//! two pushes racing for its last bytes cannot both pass. A server also refuses the
//! packs of a push past it before it reads them (`sealvol_serve::quota`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use crate::digest::{Entry, Hash};
use crate::error::{Error, ErrorKind, Result};
use crate::manifest::Manifest;
use crate::refs::{Name, VolumeName};
use crate::repo::Repository;

/// A namespace's usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// Stored bytes: its distinct chunks (as stored, compressed or not) and signatures.
    pub bytes: u64,
    pub chunks: u64,
    /// Versions counted, live and in the trash.
    pub versions: u64,
}

/// A usage being counted: what was seen, so a chunk counts once.
#[derive(Default)]
struct Count {
    usage: Usage,
    files: HashSet<Hash>,
    chunks: HashSet<Hash>,
}

impl Count {
    /// Adds version `m`'s files' chunks not counted yet.
    fn add(&mut self, repo: &Repository, m: &Manifest) -> Result<()> {
        self.usage.versions += 1;
        let small = m.small_files();
        for e in &m.entries {
            let Entry::File { hash, size, .. } = e else {
                continue;
            };
            if *size == 0 || !self.files.insert(*hash) {
                continue;
            }
            for c in repo.file_list(hash, *size, &small)?.chunks {
                if self.chunks.insert(c.entry.hash) {
                    self.usage.bytes += u64::from(c.entry.stored_len);
                }
            }
        }
        Ok(())
    }

    fn done(mut self) -> Usage {
        self.usage.chunks = self.chunks.len() as u64;
        self.usage
    }
}

impl Repository {
    /// What namespace `ns`'s versions, live and in the trash, store. A version whose
    /// manifest is damaged counts nothing (`volume verify` names it).
    pub fn namespace_usage(&self, ns: &Name) -> Result<Usage> {
        Ok(self.count(ns)?.done())
    }

    fn count(&self, ns: &Name) -> Result<Count> {
        let mut count = Count::default();
        for vol in self.volumes(Some(ns))? {
            for digest in self.version_digests(&vol)? {
                let m = match self.manifest(&vol, &digest) {
                    Ok(m) => m,
                    Err(e) if e.kind() == ErrorKind::Corrupt => {
                        tracing::warn!("usage of {ns}: {e}; not counted");
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                count.add(self, &m)?;
                count.usage.bytes += self.signature_bytes(&vol, &digest)?;
            }
        }
        Ok(count)
    }

    /// Namespace `ns`'s quota, as the repository's settings say now (read afresh: a
    /// quota set by another process counts at once).
    pub fn quota(&self, ns: &str) -> Result<Option<u64>> {
        let config = match self.current_config() {
            Ok(c) => c,
            // A damaged settings file is `repair`'s business; the settings this process
            // opened with still say what the quota was.
            Err(e) if e.kind() == ErrorKind::Corrupt => {
                tracing::warn!("{e}; quotas as they were when the repository was opened");
                self.config().clone()
            }
            Err(e) => return Err(e),
        };
        Ok(config.quotas.get(ns).copied())
    }

    /// Refuses version `m` of `vol` when sealing it would take its namespace past its
    /// quota. The guard keeps other seals of the namespace (in this process) waiting
    /// until the seal is done, so each is checked with the one before counted.
    pub(crate) fn keep_quota(&self, vol: &VolumeName, m: &Manifest) -> Result<QuotaGuard> {
        let ns = vol.namespace.to_string();
        let Some(quota) = self.quota(&ns)? else {
            return Ok(QuotaGuard(None));
        };
        let guard = QuotaGuard::enter(seal_gate(self.location(), &ns));
        let mut count = self.count(&vol.namespace)?;
        let before = count.usage.bytes;
        count.add(self, m)?;
        let after = count.usage.bytes;
        if after > quota {
            return Err(over_quota(&ns, quota, before, after - before));
        }
        Ok(guard)
    }
}

impl Repository {
    /// Refuses `adding` bytes more (a signature) in `vol`'s namespace past its quota;
    /// the guard as `keep_quota`'s.
    pub(crate) fn keep_quota_adding(&self, vol: &VolumeName, adding: u64) -> Result<QuotaGuard> {
        let ns = vol.namespace.to_string();
        let Some(quota) = self.quota(&ns)? else {
            return Ok(QuotaGuard(None));
        };
        let guard = QuotaGuard::enter(seal_gate(self.location(), &ns));
        let used = self.namespace_usage(&vol.namespace)?.bytes;
        if used + adding > quota {
            return Err(over_quota(&ns, quota, used, adding));
        }
        Ok(guard)
    }
}

/// A namespace with a quota, and what it stores.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct QuotaUsage {
    pub namespace: String,
    pub quota: u64,
    pub usage: Usage,
}

impl Repository {
    /// Each quota with what its namespace stores now: through a server, those of the
    /// namespaces the key sees.
    pub fn quotas(&self) -> Result<Vec<QuotaUsage>> {
        let mut out = Vec::new();
        for (ns, quota) in &self.current_config()?.quotas {
            match self.namespace_usage(&Name::parse("namespace", ns)?) {
                Ok(usage) => out.push(QuotaUsage {
                    namespace: ns.clone(),
                    quota: *quota,
                    usage,
                }),
                Err(e) if e.kind() == ErrorKind::Denied => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// A writer's account against its namespace's quota: what the namespace stored when
/// the writer began, and what the writer has said it adds since. It refuses what would
/// pass the quota before those bytes are fetched or stored; the seal checks again.
#[derive(Debug)]
pub struct Allowance {
    ns: String,
    quota: u64,
    used: u64,
}

impl Allowance {
    /// Counts `bytes` more, or refuses them past the quota.
    pub fn take(&mut self, bytes: u64) -> Result<()> {
        if self.used.saturating_add(bytes) > self.quota {
            return Err(over_quota(&self.ns, self.quota, self.used, bytes));
        }
        self.used += bytes;
        Ok(())
    }
}

impl Repository {
    /// The account of a writer of namespace `ns`, if it has a quota; none through a
    /// server (which keeps the quota itself).
    pub fn allowance(&self, ns: &Name) -> Result<Option<Allowance>> {
        self.owner().allowance(ns)
    }

    /// `allowance` by the quota in the repository's own settings.
    pub(crate) fn allowance_here(&self, ns: &Name) -> Result<Option<Allowance>> {
        let Some(quota) = self.quota(ns.as_str())? else {
            return Ok(None);
        };
        Ok(Some(Allowance {
            ns: ns.to_string(),
            quota,
            used: self.namespace_usage(ns)?.bytes,
        }))
    }
}

/// One namespace's seals in this process, one at a time.
#[derive(Default)]
struct Gate {
    busy: Mutex<bool>,
    freed: Condvar,
}

/// The seal gate of namespace `ns` of the repository at `location`.
fn seal_gate(location: &str, ns: &str) -> Arc<Gate> {
    static GATES: OnceLock<Mutex<HashMap<String, Arc<Gate>>>> = OnceLock::new();
    let mut all = GATES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    Arc::clone(all.entry(format!("{location}\0{ns}")).or_default())
}

/// Held while a seal of a namespace with a quota is checked and written.
pub struct QuotaGuard(Option<Arc<Gate>>);

impl QuotaGuard {
    fn enter(gate: Arc<Gate>) -> QuotaGuard {
        let mut busy = gate.busy.lock().unwrap_or_else(|p| p.into_inner());
        while *busy {
            busy = gate.freed.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
        *busy = true;
        drop(busy);
        QuotaGuard(Some(gate))
    }
}

impl Drop for QuotaGuard {
    fn drop(&mut self) {
        if let Some(g) = &self.0 {
            *g.busy.lock().unwrap_or_else(|p| p.into_inner()) = false;
            g.freed.notify_one();
        }
    }
}

/// The refusal of `adding` bytes to namespace `ns`, which stores `used` of `quota`.
pub fn over_quota(ns: &str, quota: u64, used: u64, adding: u64) -> Error {
    Error::new(
        ErrorKind::Quota,
        format!(
            "namespace {ns} would pass its quota of {}: it stores {} and this adds {}",
            shown(quota),
            shown(used),
            shown(adding)
        ),
    )
    .hint(format!(
        "delete versions it no longer needs (`sealvol volume delete`), then `sealvol volume gc`: its usage falls once gc has purged them from the trash (after the retention; `sealvol settings --retention` shortens it); or raise the quota (`sealvol settings --quota {ns}=SIZE`)"
    ))
}

/// Bytes in binary units, for the refusal's one line.
fn shown(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    match u {
        0 => format!("{bytes} B"),
        _ => format!("{v:.1} {}", UNITS[u]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Quiet;
    use crate::push::{PushOptions, push};
    use crate::refs::Ref;
    use crate::testutil::{folder, noise};

    fn repo() -> (tempfile::TempDir, Repository) {
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
        (tmp, repo)
    }

    fn push_one(repo: &Repository, tmp: &std::path::Path, vol: &str, seed: u64) -> Result<Digest> {
        let dir = folder(
            tmp,
            &format!("src-{vol}-{seed}").replace('/', "-"),
            &[("w.bin", noise(1 << 20, seed))],
        );
        let vol = VolumeName::parse(vol).unwrap();
        push(repo, &dir, &vol, &[], &PushOptions::new(&Quiet)).map(|r| r.digest)
    }

    fn ns(s: &str) -> Name {
        Name::parse("namespace", s).unwrap()
    }

    use crate::refs::Digest;

    #[test]
    fn a_chunk_counts_for_each_namespace_that_holds_it_and_the_trash_counts() {
        let (tmp, repo) = repo();
        push_one(&repo, tmp.path(), "a/m", 1).unwrap();
        let a = repo.namespace_usage(&ns("a")).unwrap();
        assert!(a.bytes >= 1 << 20 && a.bytes < (1 << 20) + 4096, "{a:?}");
        assert_eq!(a.versions, 1);
        // The same bytes in b: stored once, counted for both.
        push_one(&repo, tmp.path(), "b/m", 1).unwrap();
        assert_eq!(repo.namespace_usage(&ns("b")).unwrap().bytes, a.bytes);
        assert_eq!(repo.namespace_usage(&ns("a")).unwrap(), a);
        // A second version of a's with the same bytes adds none.
        let d = push_one(&repo, tmp.path(), "a/other", 1).unwrap();
        assert_eq!(repo.namespace_usage(&ns("a")).unwrap().bytes, a.bytes);
        // Deleted: still counted (restorable) until gc purges it.
        push_one(&repo, tmp.path(), "a/big", 2).unwrap();
        let with = repo.namespace_usage(&ns("a")).unwrap();
        let r = Ref::parse(&format!("a/other@{d}")).unwrap();
        repo.delete_version(&r, true).unwrap();
        assert_eq!(repo.namespace_usage(&ns("a")).unwrap(), with);
    }

    #[test]
    fn a_seal_past_the_quota_is_refused_and_nothing_is_sealed() {
        let (tmp, mut repo) = repo();
        push_one(&repo, tmp.path(), "a/m", 1).unwrap();
        let used = repo.namespace_usage(&ns("a")).unwrap().bytes;
        repo.change_settings(|c| {
            c.quotas.insert("a".into(), used + (512 << 10));
        })
        .unwrap();
        let e = push_one(&repo, tmp.path(), "a/m", 2).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Quota);
        assert!(
            e.message().starts_with("namespace a would pass its quota of 1.5 MiB: it stores 1.0 MiB and this adds 1.0 MiB"),
            "{e}"
        );
        assert!(e.hint_text().unwrap().contains("sealvol volume gc"));
        let vol = VolumeName::parse("a/m").unwrap();
        assert_eq!(repo.version_digests(&vol).unwrap().len(), 1);
        // Other namespaces have no quota; the same bytes again add nothing to a's.
        push_one(&repo, tmp.path(), "b/m", 2).unwrap();
        push_one(&repo, tmp.path(), "a/copy", 1).unwrap();
        // Lowered below the usage: new bytes are refused, what is stored still reads.
        repo.change_settings(|c| {
            c.quotas.insert("a".into(), 1000);
        })
        .unwrap();
        assert_eq!(
            push_one(&repo, tmp.path(), "a/m", 3).unwrap_err().kind(),
            ErrorKind::Quota
        );
        let d = repo.version_digests(&vol).unwrap()[0];
        assert!(repo.manifest(&vol, &d).is_ok());
    }

    #[test]
    fn two_pushes_racing_for_the_last_bytes_of_a_quota_do_not_both_pass() {
        let (tmp, mut repo) = repo();
        push_one(&repo, tmp.path(), "a/m", 1).unwrap();
        let used = repo.namespace_usage(&ns("a")).unwrap().bytes;
        // Room for one more MiB of new bytes, not two.
        repo.change_settings(|c| {
            c.quotas.insert("a".into(), used + (1 << 20) + (256 << 10));
        })
        .unwrap();
        let results: Vec<Result<Digest>> = std::thread::scope(|s| {
            let a = s.spawn(|| push_one(&repo, tmp.path(), "a/x", 10));
            let b = s.spawn(|| push_one(&repo, tmp.path(), "a/y", 11));
            vec![a.join().unwrap(), b.join().unwrap()]
        });
        let passed = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(passed, 1, "{results:?}");
        let refused = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        assert_eq!(refused.kind(), ErrorKind::Quota);
        assert!(repo.namespace_usage(&ns("a")).unwrap().bytes <= used + (1 << 20) + (256 << 10));
    }
}
