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
use sealvol_source::{Connector, Filter, Notes, Object, SourceUrl};

/// Bytes per batch: what a killed sync may have to fetch again.
pub const DEFAULT_BATCH: u64 = 1 << 30;
/// Ranged reads in flight.
pub const DEFAULT_STREAMS: usize = 8;

pub struct SyncOptions<'a> {
    /// The state directory, where secrets live.
    pub state_dir: &'a Path,
    pub batch_bytes: u64,
    pub streams: usize,
    pub progress: &'a dyn Progress,
    pub cancel: Arc<AtomicBool>,
    /// How remote sources are reached; without one, only local folders sync.
    pub connector: Option<&'a dyn Connector>,
}

/// Checks a job's inputs before it is queued: a bad one is refused with nothing
/// recorded.
pub fn check_spec(spec: &JobSpec, state_dir: &Path) -> Result<()> {
    SourceUrl::parse(&spec.source)?;
    VolumeName::parse(&spec.volume)?;
    for t in &spec.tags {
        Name::parse("tag", t)?;
    }
    Filter::new(&spec.include, &spec.exclude)?;
    if let Some(name) = &spec.secret {
        secrets::get(state_dir, name)?;
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
            match run_logged(repo, db, spec, opts, log.clone()) {
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
        result
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
            guard: None,
            source: None,
            stat_cache: None,
            progress: opts.progress,
        };
        return push::push(repo, dir, &volume, &tags, &push_opts);
    }
    let secret = match &spec.secret {
        Some(name) => Some(secrets::get(opts.state_dir, name)?),
        None => None,
    };
    let connector = opts.connector.ok_or_else(|| {
        Error::new(
            ErrorKind::Unavailable,
            format!("{url} is a remote source, and this agent was started without any"),
        )
        .hint("run the agent of the sealvol binary, which reaches every kind of source")
    })?;
    let shown = url.to_string();
    let mut remote = connector.connect(
        &url,
        &spec.endpoint,
        secret.as_ref(),
        log,
        opts.cancel.clone(),
    )?;
    drop(secret);
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
    // What an earlier run of this (or an identical) sync already stored, intact.
    let mut files: HashMap<usize, (Hash, u64)> = HashMap::new();
    for (i, hit) in db
        .synced_lookup(&source_id, objects)?
        .into_iter()
        .enumerate()
    {
        if let Some(h) = hit
            && let Some(chunks) = push::stored_file(repo, &index, &h)?
        {
            files.insert(i, (h, chunks));
        }
    }
    let progress = opts.progress;
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
    let mut kept: Vec<usize> = files.keys().copied().collect();
    kept.sort_unstable();
    let todo: Vec<usize> = (0..objects.len())
        .filter(|i| !files.contains_key(i))
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

    let (mut new_bytes, mut new_chunks, mut bytes_read, mut chunks_reused) = (0, 0, 0, 0);
    let mut files_healed = 0;
    let all_batches = batches(&todo, |i| objects[i].size, opts.batch_bytes);
    let count = all_batches.len();
    for (n, batch) in all_batches.into_iter().enumerate() {
        if opts.cancel.load(Ordering::Relaxed) {
            return Err(Error::cancelled());
        }
        let part: Vec<_> = batch.iter().map(|&i| objects[i].clone()).collect();
        let stream: Vec<StreamFile> = part.iter().map(Object::stream_file).collect();
        let fetch = remote.fetch(part, opts.streams);
        let got = match push::ingest(repo, &mut index, &stream, &*fetch, progress) {
            Ok(got) => got,
            // The pipeline saw an io::Error; the source's own error says more.
            Err(e) => return Err(fetch.take_failure().unwrap_or(e)),
        };
        drop(fetch);
        let mut remember = Vec::with_capacity(batch.len());
        for (j, &i) in batch.iter().enumerate() {
            let (hash, chunks) = got.files.get(&j).copied().ok_or_else(|| {
                Error::new(ErrorKind::Io, format!("{} was not read", objects[i].path))
            })?;
            files.insert(i, (hash, chunks));
            remember.push((&objects[i], hash));
        }
        db.synced_remember(&source_id, &remember)?;
        progress.note(&format!(
            "batch {}/{count} stored: {} file(s), {} bytes, {} new chunk(s)",
            n + 1,
            batch.len(),
            got.bytes_read,
            got.new_chunks
        ));
        new_bytes += got.new_bytes;
        new_chunks += got.new_chunks;
        bytes_read += got.bytes_read;
        chunks_reused += got.chunks_reused;
        files_healed += got.files_healed;
    }
    if opts.cancel.load(Ordering::Relaxed) {
        return Err(Error::cancelled());
    }

    progress.sealing();
    let listing_files: Vec<StreamFile> = objects.iter().map(Object::stream_file).collect();
    let provenance = Provenance {
        source: shown.clone(),
        revision: listing.revision.clone(),
        pushed_by: whoami(),
        listed: Some(listed),
        objects: objects
            .iter()
            .map(|o| (o.path.clone(), o.version.clone()))
            .collect(),
    };
    let (sealed, stats) = push::seal_listing(
        repo,
        &volume,
        &tags,
        &listing_files,
        &push::StoredFiles {
            files: &files,
            new_bytes,
            new_chunks,
            since: index.since,
        },
        provenance,
    )?;
    progress.finish();
    Ok(PushReport {
        volume,
        digest: sealed.digest,
        sealed_new: sealed.new,
        tags: sealed.tags,
        stats,
        bytes_read,
        chunks_reused,
        files_healed,
        files_unchanged: (objects.len() - todo.len()) as u64,
        elapsed: started.elapsed(),
    })
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
