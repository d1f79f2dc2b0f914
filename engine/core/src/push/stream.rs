//! Sealing from streams: the files of a listing, read straight into the pipeline
//! from wherever they come (a sync's source), with no local copy. Same bytes at the
//! same paths seal the same digest as a push of a directory holding them.

use std::collections::HashMap;
use std::time::Instant;

use super::inputs::Inputs;
use super::pipeline::run_pipeline;
use super::report::PushReport;
use super::stored::index_after_recovery;
use crate::chunk_index::ChunkIndex;
use crate::digest::{Entry, Hash};
use crate::error::{Error, ErrorKind, Result};
use crate::outcomes::{Provenance, VersionStats};
use crate::progress::Progress;
use crate::refs::{Name, VolumeName};
use crate::repo::Repository;

/// One file of a streamed listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFile {
    /// A clean relative path (see `paths`).
    pub path: String,
    pub size: u64,
    pub exec: bool,
}

/// Seals a version from streams: the files of `listing`, read through `inputs` (file
/// `i` is `listing[i]`) straight into the chunker, with no local copy. Same bytes at the
/// same paths give the same digest as a push of a directory holding them.
pub fn seal_streams(
    repo: &Repository,
    volume: &VolumeName,
    tags: &[Name],
    listing: &[StreamFile],
    inputs: &dyn Inputs,
    provenance: Provenance,
    progress: &dyn Progress,
) -> Result<PushReport> {
    let started = Instant::now();
    check_stream_listing(listing)?;
    let mut index = index_after_recovery(repo)?;
    let total: u64 = listing.iter().map(|f| f.size).sum();
    progress.begin("sync", total, listing.len() as u64);
    let got = ingest(repo, &mut index, listing, inputs, progress)?;
    progress.finish();
    let (sealed, stats) = seal_listing(
        repo,
        volume,
        tags,
        listing,
        &StoredFiles {
            files: &got.files,
            new_bytes: got.new_bytes,
            new_chunks: got.new_chunks,
            index: &index,
        },
        provenance,
    )?;
    Ok(PushReport {
        volume: volume.clone(),
        digest: sealed.digest,
        sealed_new: sealed.new,
        tags: sealed.tags,
        stats,
        bytes_read: got.bytes_read,
        chunks_reused: got.chunks_reused,
        files_healed: got.files_healed,
        files_unchanged: 0,
        elapsed: started.elapsed(),
    })
}

/// Refuses a streamed listing with unclean, repeated or clashing paths.
pub fn check_stream_listing(listing: &[StreamFile]) -> Result<()> {
    crate::paths::check_listing(listing.iter().map(|f| f.path.as_str()))?;
    for f in listing {
        if !crate::paths::is_clean_relative(&f.path) {
            return Err(Error::invalid(format!(
                "{:?} is not a clean relative path",
                f.path
            )));
        }
    }
    Ok(())
}

/// What one pass of the pipeline over streamed files stored.
pub struct Ingested {
    /// By listing index: the file's content hash and chunk count.
    pub files: HashMap<usize, (Hash, u64)>,
    pub bytes_read: u64,
    pub new_bytes: u64,
    pub new_chunks: u64,
    pub chunks_reused: u64,
    pub files_healed: u64,
}

/// Reads every file of `listing` through `inputs` into packs, and stores their chunk
/// lists: when it returns, each file can be named by its hash in a manifest.
pub fn ingest(
    repo: &Repository,
    index: &mut ChunkIndex,
    listing: &[StreamFile],
    inputs: &dyn Inputs,
    progress: &dyn Progress,
) -> Result<Ingested> {
    let to_read: Vec<(usize, u64)> = listing
        .iter()
        .enumerate()
        .map(|(i, f)| (i, f.size))
        .collect();
    let outcome = run_pipeline(repo, index, &to_read, inputs, progress)?;
    Ok(Ingested {
        files: outcome
            .files
            .iter()
            .map(|(i, hf)| (*i, (hf.hash, hf.chunks.len() as u64)))
            .collect(),
        bytes_read: outcome.bytes_read,
        new_bytes: outcome.new_bytes,
        new_chunks: outcome.new_chunks,
        chunks_reused: outcome.chunks_reused,
        files_healed: outcome.files_healed,
    })
}

/// The files of a listing, all stored, as a seal needs them.
pub struct StoredFiles<'a> {
    /// Each file's hash and chunk count, by listing index.
    pub files: &'a HashMap<usize, (Hash, u64)>,
    /// What this version added to the repository.
    pub new_bytes: u64,
    pub new_chunks: u64,
    /// The writer's chunk index: when it was loaded (`Repository::seal`), where the
    /// small files are (`small.rs`).
    pub index: &'a ChunkIndex,
}

/// Seals `listing` whose files are all stored.
pub fn seal_listing(
    repo: &Repository,
    volume: &VolumeName,
    tags: &[Name],
    listing: &[StreamFile],
    stored: &StoredFiles,
    provenance: Provenance,
) -> Result<(crate::outcomes::Sealed, VersionStats)> {
    let (files, new_bytes, new_chunks) = (stored.files, stored.new_bytes, stored.new_chunks);
    let mut order: Vec<usize> = (0..listing.len()).collect();
    order.sort_unstable_by(|&a, &b| listing[a].path.cmp(&listing[b].path));
    let mut stats = VersionStats {
        new_bytes,
        new_chunks,
        ..VersionStats::default()
    };
    let mut entries = Vec::with_capacity(listing.len());
    for i in order {
        let f = &listing[i];
        let (hash, chunks) = files
            .get(&i)
            .ok_or_else(|| Error::new(ErrorKind::Io, format!("{} was not read", f.path)))?;
        stats.bytes += f.size;
        stats.files += 1;
        stats.chunks += chunks;
        entries.push(Entry::File {
            path: f.path.clone(),
            size: f.size,
            hash: *hash,
            exec: f.exec,
        });
    }
    let (sealed, _) =
        crate::small::seal_stored(repo, stored.index, volume, tags, entries, stats, provenance)?;
    Ok((sealed, stats))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::progress::Quiet;
    use crate::testutil::noise;

    /// In-memory sources; `short` makes one file end early, like a dropped connection.
    struct Mem {
        files: Vec<(StreamFile, Vec<u8>)>,
        short: Option<usize>,
    }

    impl Inputs for Mem {
        fn open(&self, i: usize) -> Result<Box<dyn Read + Send + '_>> {
            let b = &self.files[i].1;
            let end = if self.short == Some(i) {
                b.len() / 2
            } else {
                b.len()
            };
            Ok(Box::new(&b[..end]))
        }
        fn name(&self, i: usize) -> String {
            self.files[i].0.path.clone()
        }
        fn finished(&self, i: usize, total: u64) -> Result<()> {
            if total != self.files[i].0.size {
                return Err(Error::new(
                    ErrorKind::Changed,
                    format!("{} ended after {total} bytes", self.files[i].0.path),
                ));
            }
            Ok(())
        }
    }

    fn provenance() -> Provenance {
        Provenance {
            source: "test://mem".into(),
            revision: Some("r1".into()),
            pushed_by: "test".into(),
            listed: None,
            objects: Default::default(),
            labels: Default::default(),
            checked: Default::default(),
        }
    }

    #[test]
    fn streams_seal_the_digest_of_the_same_files_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<(StreamFile, Vec<u8>)> = [
            ("model.safetensors", noise(3 << 20, 1)),
            ("1_Pooling/config.json", b"{\"x\": 1}".to_vec()),
            ("empty", Vec::new()),
            ("a/b/c.bin", noise(100_000, 2)),
        ]
        .into_iter()
        .map(|(p, b)| {
            (
                StreamFile {
                    path: p.into(),
                    size: b.len() as u64,
                    exec: false,
                },
                b,
            )
        })
        .collect();
        let disk = dir.path().join("disk");
        for (f, b) in &files {
            let p = disk.join(&f.path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b).unwrap();
        }
        let repo = Repository::open_local(&dir.path().join("repo"), true, false).unwrap();
        let vol = VolumeName::parse("t/stream").unwrap();
        let listing: Vec<StreamFile> = files.iter().map(|(f, _)| f.clone()).collect();
        let mem = Mem {
            files: files.clone(),
            short: None,
        };
        let r = seal_streams(&repo, &vol, &[], &listing, &mem, provenance(), &Quiet).unwrap();
        assert_eq!(r.digest, crate::walk::digest_dir(&disk).unwrap());
        assert_eq!(
            repo.manifest(&vol, &r.digest).unwrap().provenance.revision,
            Some("r1".into())
        );
        // Again: the same digest, and not one new chunk.
        let again = seal_streams(&repo, &vol, &[], &listing, &mem, provenance(), &Quiet).unwrap();
        assert_eq!(again.digest, r.digest);
        assert!(!again.sealed_new);
        assert_eq!(again.stats.new_chunks, 0);
    }

    #[test]
    fn a_stream_that_ends_early_seals_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::open_local(&dir.path().join("repo"), true, false).unwrap();
        let vol = VolumeName::parse("t/short").unwrap();
        let b = noise(1 << 20, 3);
        let f = StreamFile {
            path: "w.bin".into(),
            size: b.len() as u64,
            exec: false,
        };
        let mem = Mem {
            files: vec![(f.clone(), b)],
            short: Some(0),
        };
        let e = seal_streams(&repo, &vol, &[], &[f], &mem, provenance(), &Quiet).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Changed, "{e}");
        assert!(repo.versions(&vol).unwrap_or_default().is_empty());
    }

    #[test]
    fn unsafe_listings_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::open_local(&dir.path().join("repo"), true, false).unwrap();
        let vol = VolumeName::parse("t/bad").unwrap();
        for paths in [vec!["../x"], vec!["a", "a/b"], vec!["d", "d"], vec!["/abs"]] {
            let files: Vec<(StreamFile, Vec<u8>)> = paths
                .iter()
                .map(|p| {
                    (
                        StreamFile {
                            path: p.to_string(),
                            size: 1,
                            exec: false,
                        },
                        vec![1],
                    )
                })
                .collect();
            let listing: Vec<StreamFile> = files.iter().map(|(f, _)| f.clone()).collect();
            let mem = Mem { files, short: None };
            assert!(
                seal_streams(&repo, &vol, &[], &listing, &mem, provenance(), &Quiet).is_err(),
                "{paths:?}"
            );
        }
    }
}
