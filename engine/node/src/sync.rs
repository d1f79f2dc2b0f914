//! The sync runner: a job's source becomes a sealed version. Objects stream from the
//! source straight into the push pipeline (no local copy), a batch at a time; after
//! each batch its files' chunk lists are durable and the state database remembers
//! (source, key, version) → file hash. A sync killed at any moment therefore resumes by
//! skipping every object of the batches it finished: the unit of resume is a batch of
//! files (and a repeated sync of an unchanged source reads nothing at all).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::progress::Progress;
use sealvol_core::push::{self, PushReport, StreamFile};
use sealvol_core::refs::{Name, VolumeName};
use sealvol_core::registry::{Provenance, now_rfc3339, whoami};
use sealvol_core::repo::Repository;

use crate::jobs::JobSpec;
use crate::state::StateDb;
use sealvol_source::secrets;
use sealvol_source::{Access, Connector, Filter, Notes, Object, SourceUrl};

/// Bytes per batch: what a killed sync may have to fetch again.
pub const DEFAULT_BATCH: u64 = 1 << 30;
/// Ranged reads in flight.
pub const DEFAULT_STREAMS: usize = 8;

/// Whose jobs an agent runs: which decides where a job's secret is found, and what a
/// job that names none may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trust {
    /// This machine's own: its secrets (`sealvol secret set`), and the credentials
    /// this process finds when a job names none.
    #[default]
    Machine,
    /// A server's, for the holders of its keys: the secret of the volume's namespace
    /// by that name, and, when a job names none, no credentials at all unless the
    /// operator lets jobs use the server's own (`ambient`).
    Server { ambient: bool },
}

impl Trust {
    /// Where `spec`'s secret is kept.
    pub fn shelf(self, state: &Path, spec: &JobSpec) -> Result<secrets::Shelf> {
        match self {
            Trust::Machine => Ok(secrets::Shelf::machine(state)),
            Trust::Server { .. } => {
                let volume = VolumeName::parse(&spec.volume)?;
                Ok(secrets::Shelf::namespace(state, &volume.namespace))
            }
        }
    }

    /// A refusal of a server's job that named no secret: the hint says how to give the
    /// server one, not to set variables in an environment the caller does not own.
    fn explain(self, e: Error, spec: &JobSpec) -> Error {
        match (self, &spec.secret, e.kind()) {
            (Trust::Server { ambient: false }, None, ErrorKind::Denied) => {
                let ns = spec.volume.split_once('/').map_or("NS", |(ns, _)| ns);
                e.hint(format!(
                    "the server's jobs use no credentials of its own: store one for namespace {ns} with `sealvol --remote URL secret set NAME --namespace {ns}` and pass --secret NAME"
                ))
            }
            _ => e,
        }
    }

    /// What a connection may use when the job names no secret.
    fn without_secret(self) -> Access<'static> {
        match self {
            Trust::Machine | Trust::Server { ambient: true } => Access::Ambient,
            Trust::Server { ambient: false } => Access::Anonymous,
        }
    }
}

pub struct SyncOptions<'a> {
    /// The state directory, where secrets live.
    pub state_dir: &'a Path,
    pub trust: Trust,
    pub batch_bytes: u64,
    pub streams: usize,
    pub progress: &'a dyn Progress,
    pub cancel: Arc<AtomicBool>,
    /// How remote sources are reached; without one, only local folders sync.
    pub connector: Option<&'a dyn Connector>,
    /// The job's slot on its agent, given up while the sync only waits out retries.
    pub slot: Option<Arc<dyn sealvol_source::pace::Slot>>,
    /// Who watches the job's files go by, if anyone does (a Hub mirror's clients).
    pub tap: Option<Arc<dyn sealvol_source::Tap>>,
}

/// Who watches which jobs' files go by (`SyncOptions::tap`): an agent asks it for each
/// sync it runs (a Hub mirror watches the jobs it started, to stream their files).
pub trait TapFor: Send + Sync + std::fmt::Debug {
    /// The tap for `spec`'s files, if they are watched.
    fn tap_for(&self, spec: &JobSpec) -> Option<Arc<dyn sealvol_source::Tap>>;
}

/// Checks a job's inputs before it is queued: a bad one is refused with nothing
/// recorded.
pub fn check_spec(spec: &JobSpec, state_dir: &Path, trust: Trust) -> Result<()> {
    SourceUrl::parse(&spec.source)?;
    VolumeName::parse(&spec.volume)?;
    for t in &spec.tags {
        Name::parse("tag", t)?;
    }
    Filter::new(&spec.include, &spec.exclude)?;
    if let Some(name) = &spec.secret {
        trust.shelf(state_dir, spec)?.get(name)?;
    }
    Ok(())
}

/// Syncs `spec`'s source into a sealed version.
pub fn run(
    repo: &Repository,
    db: &StateDb,
    spec: &JobSpec,
    opts: &SyncOptions,
) -> Result<PushReport> {
    // Retries happen on the runtime's threads; a thread of this scope hands what they
    // say to the job's log as it happens.
    let (log, lines) = crossbeam_channel::unbounded::<String>();
    std::thread::scope(|s| {
        s.spawn(move || {
            for line in lines {
                opts.progress.note(&line);
            }
        });
        // `log` and every clone of it are dropped by the time this returns, which
        // ends the thread above.
        let mut attempt = 1;
        let result = loop {
            let mut notes = Notes::new(log.clone()).pacing(opts.slot.clone());
            if let Some(tap) = &opts.tap {
                notes = notes.tapped(Arc::clone(tap));
            }
            match run_logged(repo, db, spec, opts, notes) {
                // A garbage collection removed something this run reused: what is still
                // stored is skipped again, the rest fetched anew.
                Err(e) if e.kind() == ErrorKind::Collected && attempt < push::COLLECTED_RETRIES => {
                    opts.progress.note(&format!("{e}; running the sync again"));
                    attempt += 1;
                }
                r => break r,
            }
        };
        drop(log);
        result.map_err(|e| opts.trust.explain(e, spec))
    })
}

fn run_logged(
    repo: &Repository,
    db: &StateDb,
    spec: &JobSpec,
    opts: &SyncOptions,
    log: Notes,
) -> Result<PushReport> {
    let started = Instant::now();
    let url = SourceUrl::parse(&spec.source)?;
    let volume = VolumeName::parse(&spec.volume)?;
    let tags = spec
        .tags
        .iter()
        .map(|t| Name::parse("tag", t))
        .collect::<Result<Vec<_>>>()?;
    let filter = Filter::new(&spec.include, &spec.exclude)?;
    if let SourceUrl::Local(dir) = &url {
        if !spec.include.is_empty() || !spec.exclude.is_empty() {
            return Err(
                Error::invalid("--include and --exclude apply to remote sources")
                    .hint("for a local folder, push a folder that holds only what you want"),
            );
        }
        let push_opts = push::PushOptions {
            cancel: Some(opts.cancel.as_ref()),
            ..push::PushOptions::new(opts.progress)
        };
        return push::push(repo, dir, &volume, &tags, &push_opts);
    }
    let shown = url.to_string();
    let mut remote = connect(&url, spec, opts, log)?;
    let listed = now_rfc3339();
    let listing = remote.list(&filter)?;
    if listing.objects.is_empty() {
        return Err(Error::not_found(format!(
            "{shown} holds nothing to sync ({} object(s) left out by filters)",
            listing.excluded
        ))
        .hint("check the prefix and the --include/--exclude patterns"));
    }
    let objects = &listing.objects;
    // The same bucket name at another endpoint is another source.
    let source_id = match &spec.endpoint.url {
        Some(u) => format!("{shown} at {u}"),
        None => shown.clone(),
    };

    let mut index = push::index_after_recovery(repo)?;
    let (mut files, mut checked) = already_stored(repo, db, &source_id, objects, &index)?;
    let mut todo = announce(opts.progress, &listing, &shown, &files);
    if opts.tap.is_some() {
        // A tapped sync's files are read by clients while they come (a server's Hub
        // mirror): the small ones (configs, indexes, tokenizers) are what loaders ask
        // for first, and must not wait behind the shards. Smallest first, then by
        // name; what is sealed is the same whatever the order.
        todo.sort_by_key(|&i| (objects[i].size, i));
    }
    let mut fetched = Fetched::default();
    let all = batches(&todo, |i| objects[i].size, opts.batch_bytes);
    // A namespace with a quota: each batch is refused before it is fetched if its
    // bytes (before deduplication: at most what it adds) would pass it.
    let mut allowance = repo.allowance(&volume.namespace)?;
    for (n, batch) in all.iter().enumerate() {
        if opts.cancel.load(Ordering::Relaxed) {
            return Err(Error::cancelled());
        }
        if let Some(a) = allowance.as_mut() {
            a.take(batch.iter().map(|&i| objects[i].size).sum())?;
        }
        let (got, checks) = fetch_checked(repo, &mut index, &*remote, objects, batch, opts)?;
        let mut remember = Vec::with_capacity(batch.len());
        for (j, &i) in batch.iter().enumerate() {
            let (hash, chunks) = got.files.get(&j).copied().ok_or_else(|| {
                Error::new(ErrorKind::Io, format!("{} was not read", objects[i].path))
            })?;
            files.insert(i, (hash, chunks));
            let passed = checks.get(j).cloned().unwrap_or_default();
            checked.insert(i, passed.clone());
            remember.push((&objects[i], hash, passed));
        }
        db.synced_remember(&source_id, &remember)?;
        opts.progress.note(&format!(
            "batch {}/{} stored: {} file(s), {} bytes, {} new chunk(s)",
            n + 1,
            all.len(),
            batch.len(),
            got.bytes_read,
            got.new_chunks
        ));
        fetched.add(&got);
    }
    if opts.cancel.load(Ordering::Relaxed) {
        return Err(Error::cancelled());
    }

    opts.progress.sealing();
    let listing_files: Vec<StreamFile> = objects.iter().map(Object::stream_file).collect();
    let provenance = Provenance {
        source: shown,
        revision: listing.revision.clone(),
        pushed_by: whoami(),
        listed: Some(listed),
        objects: objects
            .iter()
            .map(|o| (o.path.clone(), o.version.clone()))
            .collect(),
        labels: Default::default(),
        checked: objects
            .iter()
            .enumerate()
            .map(|(i, o)| (o.path.clone(), checked.remove(&i).unwrap_or_default()))
            .collect(),
    };
    let (sealed, stats) = push::seal_listing(
        repo,
        &volume,
        &tags,
        &listing_files,
        &push::StoredFiles {
            files: &files,
            new_bytes: fetched.new_bytes,
            new_chunks: fetched.new_chunks,
            index: &index,
        },
        provenance,
    )?;
    opts.progress.finish();
    Ok(PushReport {
        volume,
        digest: sealed.digest,
        sealed_new: sealed.new,
        tags: sealed.tags,
        stats,
        bytes_read: fetched.bytes_read,
        chunks_reused: fetched.chunks_reused,
        files_healed: fetched.files_healed,
        files_unchanged: (objects.len() - todo.len()) as u64,
        elapsed: started.elapsed(),
    })
}

/// Connects to the job's remote source through the agent's connector, with the job's
/// stored secret when it names one.
fn connect(
    url: &SourceUrl,
    spec: &JobSpec,
    opts: &SyncOptions,
    log: Notes,
) -> Result<Box<dyn sealvol_source::Remote>> {
    let secret = match &spec.secret {
        Some(name) => Some(opts.trust.shelf(opts.state_dir, spec)?.get(name)?),
        None => None,
    };
    let access = match &secret {
        Some(s) => Access::Secret(s),
        None => opts.trust.without_secret(),
    };
    let connector = opts.connector.ok_or_else(|| {
        Error::new(
            ErrorKind::Unavailable,
            format!("{url} is a remote source, and this agent was started without any"),
        )
        .hint("run the agent of the sealvol binary, which reaches every kind of source")
    })?;
    connector.connect(url, &spec.endpoint, access, log, opts.cancel.clone())
}

/// What an earlier run of this (or an identical) sync already stored, intact: the
/// listing's index → the file's hash and chunk count; and the checks of the
/// source's hashes each passed when it was read.
#[allow(clippy::type_complexity)]
fn already_stored(
    repo: &Repository,
    db: &StateDb,
    source_id: &str,
    objects: &[Object],
    index: &sealvol_core::chunk_index::ChunkIndex,
) -> Result<(HashMap<usize, (Hash, u64)>, HashMap<usize, String>)> {
    let mut files = HashMap::new();
    let mut checked = HashMap::new();
    for (i, hit) in db
        .synced_lookup(source_id, objects)?
        .into_iter()
        .enumerate()
    {
        if let Some((h, checks)) = hit
            && let Some(chunks) = push::stored_file(repo, index, &h)?
        {
            files.insert(i, (h, chunks));
            checked.insert(i, checks);
        }
    }
    Ok((files, checked))
}

/// Tells the progress what was listed and what an earlier run already stored (done
/// at once); returns the listing's indexes left to fetch, in order.
fn announce(
    progress: &dyn Progress,
    listing: &sealvol_source::Listing,
    shown: &str,
    stored: &HashMap<usize, (Hash, u64)>,
) -> Vec<usize> {
    let objects = &listing.objects;
    progress.note(&format!(
        "listed {} object(s), {} bytes, from {shown}{}",
        objects.len(),
        listing.bytes(),
        match listing.excluded {
            0 => String::new(),
            n => format!(" ({n} left out by filters)"),
        }
    ));
    progress.begin("sync", listing.bytes(), objects.len() as u64);
    let mut kept: Vec<usize> = stored.keys().copied().collect();
    kept.sort_unstable();
    let todo: Vec<usize> = (0..objects.len())
        .filter(|i| !stored.contains_key(i))
        .collect();
    let plan: Vec<(String, u64)> = kept
        .iter()
        .chain(&todo)
        .map(|&i| (objects[i].path.clone(), objects[i].size))
        .collect();
    progress.plan(&plan, kept.len());
    for &i in &kept {
        progress.advance(objects[i].size);
        progress.file_done();
    }
    if !kept.is_empty() {
        progress.note(&format!(
            "{} of {} object(s) already stored by an earlier run: not fetched again",
            kept.len(),
            objects.len()
        ));
    }
    todo
}

/// How many times a batch whose bytes disagree with the source's own hashes is read
/// again before the job fails: a byte flipped on the way is read right the next time,
/// a source that keeps sending it is damaged.
const CHECK_ATTEMPTS: u32 = 3;

/// Fetches one batch of the listing from the source and stores it, with the checks
/// of the source's hashes each file passed (comma-separated, by its place in the
/// batch). A batch failing a check is read again, then fails.
fn fetch_checked(
    repo: &Repository,
    index: &mut sealvol_core::chunk_index::ChunkIndex,
    remote: &dyn sealvol_source::Remote,
    objects: &[Object],
    batch: &[usize],
    opts: &SyncOptions,
) -> Result<(push::Ingested, Vec<String>)> {
    let mut attempt = 1;
    loop {
        match fetch_batch(repo, index, remote, objects, batch, opts) {
            Err(e) if e.kind() == ErrorKind::Corrupt && attempt < CHECK_ATTEMPTS => {
                opts.progress.note(&format!(
                    "{}; reading the batch again ({attempt}/{CHECK_ATTEMPTS})",
                    e.message()
                ));
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Fetches one batch of the listing from the source and stores it.
fn fetch_batch(
    repo: &Repository,
    index: &mut sealvol_core::chunk_index::ChunkIndex,
    remote: &dyn sealvol_source::Remote,
    objects: &[Object],
    batch: &[usize],
    opts: &SyncOptions,
) -> Result<(push::Ingested, Vec<String>)> {
    let part: Vec<_> = batch.iter().map(|&i| objects[i].clone()).collect();
    let stream: Vec<StreamFile> = part.iter().map(Object::stream_file).collect();
    let fetch = remote.fetch(part, opts.streams);
    match push::ingest(repo, index, &stream, &*fetch, opts.progress) {
        Ok(got) => {
            let checks = (0..batch.len())
                .map(|j| fetch.checked(j).unwrap_or_default().join(","))
                .collect();
            Ok((got, checks))
        }
        // The pipeline saw an io::Error; the source's own error says more.
        Err(e) => Err(fetch.take_failure().unwrap_or(e)),
    }
}

/// What the batches of a sync added up to.
#[derive(Default)]
struct Fetched {
    new_bytes: u64,
    new_chunks: u64,
    bytes_read: u64,
    chunks_reused: u64,
    files_healed: u64,
}

impl Fetched {
    fn add(&mut self, got: &push::Ingested) {
        self.new_bytes += got.new_bytes;
        self.new_chunks += got.new_chunks;
        self.bytes_read += got.bytes_read;
        self.chunks_reused += got.chunks_reused;
        self.files_healed += got.files_healed;
    }
}

/// Splits `items` into runs of at least `target` bytes (the last may be smaller).
fn batches(items: &[usize], size: impl Fn(usize) -> u64, target: u64) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut bytes = 0;
    for &i in items {
        cur.push(i);
        bytes += size(i);
        if bytes >= target {
            out.push(std::mem::take(&mut cur));
            bytes = 0;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::batches;

    #[test]
    fn batches_hold_at_least_the_target_and_keep_order() {
        let sizes = [5u64, 5, 20, 1, 1, 1];
        let b = batches(&[0, 1, 2, 3, 4, 5], |i| sizes[i], 10);
        assert_eq!(b, vec![vec![0, 1], vec![2], vec![3, 4, 5]]);
        assert!(batches(&[], |_| 0, 10).is_empty());
    }
}
