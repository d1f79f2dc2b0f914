//! Push of a local directory: walk it, skip the files the stat cache knows unchanged,
//! read the rest through the pipeline, seal. A file that changes while it is read
//! fails the push; nothing is sealed.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::inputs::Inputs;
use super::pipeline::run_pipeline;
use super::report::PushReport;
use super::stored::{ASK_AT_ONCE, COLLECTED_RETRIES, index_after_recovery, stored_files};
use crate::chunk_index::HashedFile;
use crate::digest::Hash;
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::outcomes::{Provenance, VersionStats};
use crate::progress::Progress;
use crate::refs::{Name, VolumeName};
use crate::repo::Repository;
use crate::stamp::whoami;
use crate::walk::{Stamp, WalkKind, walk};

/// A file modified this close to the start of a push is not put in the stat cache: a
/// second write within the file system's timestamp granularity could leave its stamp
/// unchanged (git's "racily clean" problem).
const RACY_WINDOW_NS: i128 = 1_000_000_000;

pub struct PushOptions<'a> {
    /// Provenance source; `file://<absolute dir>` when `None`.
    pub source: Option<String>,
    /// Hashes of files earlier pushes read; none when `None`.
    pub stat_cache: Option<&'a dyn StatCache>,
    pub progress: &'a dyn Progress,
    /// Set by someone who wants the push stopped (a sync job being cancelled): every
    /// read looks at it, so a push of a slow folder ends within a read. Nothing is sealed.
    pub cancel: Option<&'a AtomicBool>,
    /// Set by a watch, whose checkpoint may still be written to while it is pushed.
    pub guard: Option<&'a dyn SealGuard>,
    /// What the pusher says about the version (`--label`), outside its digest.
    pub labels: crate::labels::Labels,
}

impl<'a> PushOptions<'a> {
    /// A plain push: provenance from the folder, no stat cache, no cancel, no guard.
    pub fn new(progress: &'a dyn Progress) -> PushOptions<'a> {
        PushOptions {
            source: None,
            stat_cache: None,
            progress,
            cancel: None,
            guard: None,
            labels: Default::default(),
        }
    }
}

/// What a watch adds to a push of a folder that a trainer may still be writing.
pub trait SealGuard: Sync {
    /// Entries left out of the version, by relative path (temporary files).
    fn skip(&self, path: &str) -> bool;
    /// Called once every file is read and before anything is sealed. An error (the
    /// folder changed meanwhile: a file added, removed or rewritten) abandons the push;
    /// nothing is sealed.
    fn still_settled(&self) -> Result<()>;
}

/// The stat cache: (path, stamp) → content hash of the files earlier pushes read, so a
/// re-push skips reading unchanged files. It only accelerates: a cache that knows
/// nothing, or is busy, makes a push read more, never seal anything else.
pub trait StatCache: Sync {
    /// The cached hash of each file whose stamp still matches exactly.
    fn lookup(&self, files: &[(PathBuf, Stamp)]) -> Result<Vec<Option<Hash>>>;
    /// Remembers these hashes; a failure is logged, never an error of the push.
    fn remember(&self, files: &[(PathBuf, Stamp, Hash)]);
}

/// Pushes `dir` as a version of `volume` and moves `tags` to it. If a garbage
/// collection removes something the push reused before it could seal, the push runs
/// again (the stat cache keeps that cheap) and reads anew only what went.
pub fn push(
    repo: &Repository,
    dir: &Path,
    volume: &VolumeName,
    tags: &[Name],
    opts: &PushOptions,
) -> Result<PushReport> {
    let mut attempt = 1;
    loop {
        match push_once(repo, dir, volume, tags, opts) {
            Err(e) if e.kind() == ErrorKind::Collected && attempt < COLLECTED_RETRIES => {
                tracing::warn!("{e}; pushing again");
                attempt += 1;
            }
            r => return r,
        }
    }
}

fn push_once(
    repo: &Repository,
    dir: &Path,
    volume: &VolumeName,
    tags: &[Name],
    opts: &PushOptions,
) -> Result<PushReport> {
    let started = Instant::now();
    let start_ns = unix_ns(SystemTime::now());
    let dir = dir.canonicalize().ctx("cannot open", dir)?;
    let mut listing = walk(&dir)?;
    if let Some(g) = opts.guard {
        listing.retain(|e| !g.skip(&e.path));
    }

    let mut index = index_after_recovery(repo)?;

    // Files whose stat-cache entry still matches and whose chunk list is stored.
    let files: Vec<(usize, PathBuf, Stamp)> = listing
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e.kind {
            WalkKind::File { stamp, .. } => Some((i, e.abs.clone(), stamp)),
            _ => None,
        })
        .collect();
    // (hash, chunk count) by listing index.
    let mut known: HashMap<usize, (Hash, u64)> = HashMap::new();
    if let Some(cache) = opts.stat_cache {
        let keys: Vec<(PathBuf, Stamp)> = files.iter().map(|(_, p, s)| (p.clone(), *s)).collect();
        let hits: Vec<(usize, Hash)> = files
            .iter()
            .zip(cache.lookup(&keys)?)
            .filter_map(|((i, _, _), hit)| hit.map(|h| (*i, h)))
            .collect();
        for part in hits.chunks(ASK_AT_ONCE) {
            let hashes: Vec<Hash> = part.iter().map(|(_, h)| *h).collect();
            for ((i, h), stored) in part.iter().zip(stored_files(repo, &index, &hashes)?) {
                if let Some(chunks) = stored {
                    known.insert(*i, (*h, chunks));
                }
            }
        }
    }
    let to_read: Vec<(usize, u64)> = files
        .iter()
        .filter(|(i, _, _)| !known.contains_key(i))
        .map(|(i, _, s)| (*i, s.size))
        .collect();
    let inputs = LocalFiles {
        cancel: opts.cancel,
        files: files
            .iter()
            .map(|(i, p, s)| (*i, (p.as_path(), *s)))
            .collect(),
    };
    let read_bytes: u64 = to_read.iter().map(|(_, size)| size).sum();
    opts.progress
        .begin("push", read_bytes, to_read.len() as u64);

    let outcome = match run_pipeline(repo, &mut index, &to_read, &inputs, opts.progress) {
        Err(_) if opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) => {
            return Err(Error::cancelled());
        }
        r => r?,
    };
    opts.progress.finish();

    let mut entries = Vec::with_capacity(listing.len());
    let mut stats = VersionStats {
        new_bytes: outcome.new_bytes,
        new_chunks: outcome.new_chunks,
        ..VersionStats::default()
    };
    for (i, e) in listing.iter().enumerate() {
        let mut hash = Hash([0; 32]);
        if let WalkKind::File { stamp, .. } = &e.kind {
            let chunks;
            (hash, chunks) = match outcome.files.get(&i) {
                Some(hf) => (hf.hash, hf.chunks.len() as u64),
                None => known[&i],
            };
            stats.bytes += stamp.size;
            stats.files += 1;
            stats.chunks += chunks;
        }
        entries.push(e.to_entry(hash));
    }
    let provenance = Provenance {
        source: opts
            .source
            .clone()
            .unwrap_or_else(|| format!("file://{}", dir.display())),
        revision: None,
        pushed_by: whoami(),
        listed: None,
        objects: Default::default(),
        labels: opts.labels.clone(),
        checked: Default::default(),
    };
    if let Some(g) = opts.guard {
        g.still_settled()?;
    }
    let (sealed, small_healed) =
        crate::small::seal_stored(repo, &index, volume, tags, entries, stats, provenance)?;

    if let Some(cache) = opts.stat_cache {
        remember_hashes(cache, &files, &outcome.files, start_ns);
    }

    Ok(PushReport {
        volume: volume.clone(),
        digest: sealed.digest,
        sealed_new: sealed.new,
        tags: sealed.tags,
        stats,
        bytes_read: outcome.bytes_read,
        chunks_reused: outcome.chunks_reused,
        files_healed: outcome.files_healed + small_healed,
        files_unchanged: known.len() as u64,
        elapsed: started.elapsed(),
    })
}

/// Reads `entries` (files of a walk) into the repository without sealing anything: their
/// chunk lists are stored, and a stored one that names damaged copies is replaced
/// (`repair --from`). Returns each file's content hash, in order.
pub fn store_files(
    repo: &Repository,
    entries: &[&crate::walk::WalkEntry],
    progress: &dyn Progress,
) -> Result<Vec<Hash>> {
    let mut index = index_after_recovery(repo)?;
    let mut files = HashMap::new();
    let mut to_read = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if let WalkKind::File { stamp, .. } = e.kind {
            files.insert(i, (e.abs.as_path(), stamp));
            to_read.push((i, stamp.size));
        }
    }
    let inputs = LocalFiles {
        files,
        cancel: None,
    };
    progress.begin(
        "heal",
        to_read.iter().map(|(_, s)| s).sum(),
        to_read.len() as u64,
    );
    let outcome = run_pipeline(repo, &mut index, &to_read, &inputs, progress)?;
    progress.finish();
    to_read
        .iter()
        .map(|(i, _)| {
            outcome.files.get(i).map(|hf| hf.hash).ok_or_else(|| {
                Error::new(ErrorKind::Io, format!("{} was not read", entries[*i].path))
            })
        })
        .collect()
}

/// Local files of a push, checked against the stamps they had when listed.
struct LocalFiles<'a> {
    files: HashMap<usize, (&'a Path, Stamp)>,
    cancel: Option<&'a AtomicBool>,
}

/// A file read that fails once the push is cancelled.
struct Cancellable<'a> {
    file: File,
    cancel: &'a AtomicBool,
}

impl Read for Cancellable<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.cancel.load(Ordering::Relaxed) {
            // Not `Interrupted`, which readers retry.
            return Err(std::io::Error::other("cancelled"));
        }
        self.file.read(buf)
    }
}

impl LocalFiles<'_> {
    fn get(&self, i: usize) -> Result<(&Path, &Stamp)> {
        self.files
            .get(&i)
            .map(|(p, s)| (*p, s))
            .ok_or_else(|| Error::new(ErrorKind::Io, format!("no file {i} in this push")))
    }
}

impl Inputs for LocalFiles<'_> {
    fn open(&self, i: usize) -> Result<Box<dyn Read + Send + '_>> {
        let (path, stamp) = self.get(i)?;
        let f = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(changed(path)),
            Err(e) => return Err(Error::io("cannot read", path, e)),
        };
        same_stamp(&f, path, stamp)?;
        Ok(match self.cancel {
            Some(cancel) => Box::new(Cancellable { file: f, cancel }),
            None => Box::new(f),
        })
    }

    fn name(&self, i: usize) -> String {
        self.get(i)
            .map(|(p, _)| p.display().to_string())
            .unwrap_or_default()
    }

    fn finished(&self, i: usize, total: u64) -> Result<()> {
        let (path, stamp) = self.get(i)?;
        // A version must never seal bytes that differ from what its digest says.
        let now = std::fs::symlink_metadata(path).map(|m| Stamp::of(&m));
        if total != stamp.size || now.ok().as_ref() != Some(stamp) {
            return Err(changed(path));
        }
        Ok(())
    }
}

fn same_stamp(f: &File, path: &Path, stamp: &Stamp) -> Result<()> {
    let meta = f.metadata().ctx("cannot read", path)?;
    if Stamp::of(&meta) != *stamp {
        return Err(changed(path));
    }
    Ok(())
}

fn changed(path: &Path) -> Error {
    Error::new(
        ErrorKind::Changed,
        format!("{} changed while it was being pushed", path.display()),
    )
    .hint("push again once writing has finished; nothing was sealed")
}

fn remember_hashes(
    cache: &dyn StatCache,
    files: &[(usize, PathBuf, Stamp)],
    hashed: &HashMap<usize, HashedFile>,
    start_ns: i128,
) {
    let items: Vec<(PathBuf, Stamp, Hash)> = files
        .iter()
        .filter(|(_, _, s)| {
            s.mtime_ns < start_ns - RACY_WINDOW_NS && s.ctime_ns < start_ns - RACY_WINDOW_NS
        })
        .filter_map(|(i, p, s)| hashed.get(i).map(|hf| (p.clone(), *s, hf.hash)))
        .collect();
    if !items.is_empty() {
        cache.remember(&items);
    }
}

fn unix_ns(t: SystemTime) -> i128 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}
