//! The filesystem core, called directly (no kernel): what a mount would answer.

mod readahead;

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::fs::{Errno, Kind, VolumeFs};
use super::{MountOptions, open_fs};
use sealvol_core::cache::ChunkCache;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Chunks;
use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::repo::Repository;
use sealvol_core::testutil::noise;

struct Fixture {
    _dir: tempfile::TempDir,
    src: std::path::PathBuf,
    repo: Arc<Repository>,
    vol: VolumeName,
    digest: Digest,
    cache_dir: std::path::PathBuf,
}

fn fixture() -> Fixture {
    fixture_with(|src| {
        fs::create_dir_all(src.join("a/b/c/d/e/f")).unwrap();
        fs::create_dir_all(src.join("empty-dir")).unwrap();
        fs::write(src.join("zero"), b"").unwrap();
        fs::write(src.join("small.txt"), b"hello").unwrap();
        fs::write(src.join("a/b/c/d/e/f/deep.bin"), noise(300_000, 1)).unwrap();
        fs::write(src.join("big.bin"), noise(3 << 20, 2)).unwrap();
        std::os::unix::fs::symlink("small.txt", src.join("link")).unwrap();
        fs::write(src.join("run.sh"), b"#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(src.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    })
}

/// A repository holding one version of what `make` writes into an empty folder.
fn fixture_with(make: impl FnOnce(&Path)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::create_dir_all(&src).unwrap();
    make(&src);
    let repo = Arc::new(Repository::open_local(&dir.path().join("repo"), true, false).unwrap());
    let vol = VolumeName::parse("t/mnt").unwrap();
    let report = push(&repo, &src, &vol, &[], &PushOptions::new(&Quiet)).unwrap();
    Fixture {
        cache_dir: dir.path().join("cache"),
        _dir: dir,
        src,
        repo,
        vol,
        digest: report.digest,
    }
}

impl Fixture {
    fn fs(&self, cache: Option<Arc<ChunkCache>>) -> VolumeFs {
        self.fs_with(cache, super::Limits::default())
    }

    fn fs_with(&self, cache: Option<Arc<ChunkCache>>, limits: super::Limits) -> VolumeFs {
        let opts = MountOptions {
            cache,
            limits,
            ..MountOptions::default()
        };
        open_fs(Arc::clone(&self.repo), &self.vol, &self.digest, &opts).unwrap()
    }

    /// The filesystem as a mount whose origin is a server or a bucket sees it: what the
    /// origin gives is kept in the node cache (over a local repository, as `open_fs`
    /// builds it here, it is not: the packs can be read again).
    fn fs_as_if_remote(&self, cache: Option<Arc<ChunkCache>>) -> VolumeFs {
        let tiers = sealvol_core::read::Tiers::new(Arc::clone(&self.repo), cache);
        super::open_fs_over(
            Arc::new(tiers),
            &self.vol,
            &self.digest,
            super::Limits::default(),
            false,
        )
        .unwrap()
    }

    fn cache(&self) -> Arc<ChunkCache> {
        Arc::new(ChunkCache::open(&self.cache_dir, 1 << 30).unwrap())
    }
}

fn resolve(fs: &VolumeFs, path: &str) -> Result<u64, Errno> {
    let mut ino = super::tree::ROOT;
    for part in path.split('/') {
        ino = fs.lookup(ino, part.as_bytes())?.ino;
    }
    Ok(ino)
}

fn read_all(fs: &VolumeFs, path: &str, piece: u32) -> Vec<u8> {
    let fh = fs
        .open(resolve(fs, path).unwrap(), libc::O_RDONLY)
        .unwrap()
        .fh;
    let mut out = Vec::new();
    loop {
        let d = fs.read(fh, out.len() as u64, piece).unwrap();
        if d.as_ref().is_empty() {
            break;
        }
        out.extend_from_slice(d.as_ref());
    }
    fs.release(fh);
    out
}

#[test]
fn every_file_reads_back_byte_identical() {
    let f = fixture();
    let fs = f.fs(None);
    for path in [
        "zero",
        "small.txt",
        "a/b/c/d/e/f/deep.bin",
        "big.bin",
        "run.sh",
    ] {
        let want = fs::read(f.src.join(path)).unwrap();
        for piece in [4096, 128 << 10, 1 << 20] {
            assert_eq!(
                read_all(&fs, path, piece),
                want,
                "{path} in pieces of {piece}"
            );
        }
        let a = fs.getattr(resolve(&fs, path).unwrap()).unwrap();
        assert_eq!((a.kind, a.size), (Kind::File, want.len() as u64));
    }
    assert_eq!(
        fs.getattr(resolve(&fs, "run.sh").unwrap()).unwrap().perm,
        0o555
    );
    assert_eq!(
        fs.getattr(resolve(&fs, "small.txt").unwrap()).unwrap().perm,
        0o444
    );
    assert_eq!(
        fs.readlink(resolve(&fs, "link").unwrap()).unwrap(),
        b"small.txt"
    );
    let empty = resolve(&fs, "empty-dir").unwrap();
    assert_eq!(fs.getattr(empty).unwrap().kind, Kind::Dir);
    assert_eq!(fs.readdir(empty, 0).unwrap().count(), 2, "only . and ..");
}

#[test]
fn random_reads_across_chunk_boundaries() {
    let f = fixture();
    let fs = f.fs(None);
    let want = fs::read(f.src.join("big.bin")).unwrap();
    let fh = fs
        .open(resolve(&fs, "big.bin").unwrap(), libc::O_RDONLY)
        .unwrap()
        .fh;
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = x % (want.len() as u64 + 1000);
        let len = (x >> 32) % 700_000;
        let got = fs.read(fh, off, len as u32).unwrap();
        let s = (off as usize).min(want.len());
        let e = (off as usize + len as usize).min(want.len());
        assert_eq!(got.as_ref(), &want[s..e], "read {len} at {off}");
    }
}

#[test]
fn errors_are_errnos() {
    let f = fixture();
    let fs = f.fs(None);
    let small = resolve(&fs, "small.txt").unwrap();
    assert_eq!(fs.lookup(1, b"missing").unwrap_err(), Errno::NOENT);
    assert_eq!(fs.lookup(small, b"x").unwrap_err(), Errno::NOTDIR);
    assert_eq!(fs.open(small, libc::O_WRONLY).unwrap_err(), Errno::ROFS);
    assert_eq!(fs.open(small, libc::O_RDWR).unwrap_err(), Errno::ROFS);
    assert_eq!(
        fs.open(small, libc::O_RDONLY | libc::O_TRUNC).unwrap_err(),
        Errno::ROFS
    );
    assert_eq!(fs.open(1, libc::O_RDONLY).unwrap_err(), Errno::ISDIR);
    assert_eq!(fs.readlink(small).unwrap_err(), Errno::INVAL);
    assert_eq!(fs.readdir(small, 0).err(), Some(Errno::NOTDIR));
    assert_eq!(fs.getattr(999_999).unwrap_err(), Errno::NOENT);
    assert!(matches!(fs.read(12345, 0, 10), Err(Errno::BADF)));
}

#[test]
fn readdir_continues_from_an_offset() {
    let f = fixture();
    let fs = f.fs(None);
    let all: Vec<_> = fs.readdir(1, 0).unwrap().collect();
    let names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(
        names,
        [
            ".",
            "..",
            "a",
            "big.bin",
            "empty-dir",
            "link",
            "run.sh",
            "small.txt",
            "zero"
        ]
    );
    let rest: Vec<_> = fs.readdir(1, all[3].next).unwrap().collect();
    assert_eq!(rest[0].name, "empty-dir");
    assert!(fs.readdir(1, 100).unwrap().next().is_none());
}

#[test]
fn adjacent_chunks_are_fetched_with_one_range_read() {
    let f = fixture();
    let fs = f.fs(None);
    let obj = f.file_object(&fs, "big.bin");
    let got = fs.tiers().fetch(&obj, 0..obj.chunks.len()).unwrap();
    assert_eq!(
        got.iter()
            .flat_map(|c| c.iter().copied())
            .collect::<Vec<u8>>(),
        fs::read(f.src.join("big.bin")).unwrap()
    );
    let s = fs.tiers().counters.snapshot();
    assert!(s.origin_chunks >= 10, "{s:?}");
    assert_eq!(s.origin_requests, 1, "{s:?}");
}

#[test]
fn a_sequential_reader_gets_the_next_chunks_fetched_ahead() {
    let f = fixture();
    let fs = f.fs(None);
    let fh = fs
        .open(resolve(&fs, "big.bin").unwrap(), libc::O_RDONLY)
        .unwrap()
        .fh;
    fs.read(fh, 0, 128 << 10).unwrap();
    fs.read(fh, 128 << 10, 128 << 10).unwrap();
    // No further reads: whatever arrives now was fetched ahead.
    let mut s = fs.tiers().counters.snapshot();
    for _ in 0..500 {
        if s.origin_bytes >= 2 << 20 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        s = fs.tiers().counters.snapshot();
    }
    assert!(
        s.origin_bytes >= 2 << 20,
        "read-ahead fetched the next window: {s:?}"
    );
    let before = s.memory_hits;
    fs.read(fh, 256 << 10, 1 << 20).unwrap();
    assert!(
        fs.tiers().counters.snapshot().memory_hits > before,
        "the next read is served from memory"
    );
}

fn damage_packs(repo_dir: &Path) {
    for sub in fs::read_dir(repo_dir.join("packs")).unwrap() {
        for p in fs::read_dir(sub.unwrap().path()).unwrap() {
            let p = p.unwrap().path();
            let mut b = fs::read(&p).unwrap();
            for i in (0..b.len().saturating_sub(4096)).step_by(4096) {
                b[i] ^= 0xff;
            }
            fs::write(&p, b).unwrap();
        }
    }
}

#[test]
fn a_bad_origin_chunk_fails_the_read_with_eio_never_wrong_bytes() {
    let f = fixture();
    damage_packs(&f.repo_dir());
    let fs = f.fs(None);
    let fh = fs
        .open(resolve(&fs, "big.bin").unwrap(), libc::O_RDONLY)
        .unwrap()
        .fh;
    assert_eq!(fs.read(fh, 0, 4096).err(), Some(Errno::IO));
    assert!(fs.tiers().counters.snapshot().errors >= 1);
}

impl Fixture {
    /// The chunk list of the file at `path` in the mounted version.
    fn file_object(&self, fs: &VolumeFs, path: &str) -> sealvol_core::objects::FileObject {
        match &fs.tree().get(resolve(fs, path).unwrap()).unwrap().kind {
            super::tree::NodeKind::File { hash, .. } => self.repo.file_object(hash).unwrap(),
            _ => unreachable!("{path} is a file"),
        }
    }

    fn repo_dir(&self) -> std::path::PathBuf {
        self._dir.path().join("repo")
    }
}

/// Waits until the cache holds every chunk of `path`: by name, not by the bytes it
/// counts, which the cache's own measuring of what it found on disk may count twice
/// while a fill is under way. The deadline only fails a cache that never fills.
fn wait_for_cache(f: &Fixture, fs: &VolumeFs, cache: &ChunkCache, path: &str) {
    let obj = f.file_object(fs, path);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let missing = obj
            .chunks
            .iter()
            .filter(|c| !cache.contains(&c.entry.hash))
            .count();
        if missing == 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cache still misses {missing} of {path}'s {} chunks",
            obj.chunks.len()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Over a local repository a mount keeps nothing in the node cache that it can read
/// again from the repository's packs: no chunk of what it read. (A large file read
/// whole is still kept whole, for passthrough: tested through the kernel.)
#[test]
fn a_mount_over_a_local_repository_caches_no_chunk_it_read_from_it() {
    let f = fixture();
    let cache = f.cache();
    let fs = f.fs(Some(Arc::clone(&cache)));
    assert_eq!(
        read_all(&fs, "big.bin", 1 << 20),
        fs::read(f.src.join("big.bin")).unwrap()
    );
    assert!(fs.tiers().counters.snapshot().origin_chunks > 0);
    // Dropped, its fill thread finishes what was queued and lets go of the cache.
    drop(fs);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while Arc::strong_count(&cache) > 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the fill thread never ended"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(cache.chunks(), vec![]);
    // The same read through tiers that keep origin reads fills the cache: the check
    // above can fail.
    let kept = f.fs_as_if_remote(Some(Arc::clone(&cache)));
    assert_eq!(
        read_all(&kept, "big.bin", 1 << 20),
        fs::read(f.src.join("big.bin")).unwrap()
    );
    wait_for_cache(&f, &kept, &cache, "big.bin");
}

#[test]
fn the_node_cache_serves_heals_and_outlives_the_origin() {
    let f = fixture();
    let want = fs::read(f.src.join("big.bin")).unwrap();
    let cache = f.cache();
    {
        let fs = f.fs_as_if_remote(Some(Arc::clone(&cache)));
        assert_eq!(read_all(&fs, "big.bin", 1 << 20), want);
        wait_for_cache(&f, &fs, &cache, "big.bin");
    }

    // A damaged cached chunk is dropped and fetched again from the origin.
    let (seg, offset, _) = cache.locate(&cache.chunks()[0]).unwrap();
    let mut b = fs::read(&seg).unwrap();
    b[offset as usize] ^= 1;
    fs::write(&seg, b).unwrap();
    let fs2 = f.fs_as_if_remote(Some(Arc::clone(&cache)));
    assert_eq!(read_all(&fs2, "big.bin", 1 << 20), want);
    let s = fs2.tiers().counters.snapshot();
    assert_eq!(
        s.origin_chunks, 1,
        "only the damaged chunk came from the origin: {s:?}"
    );
    assert!(s.cache_hits > 10, "{s:?}");
    // ... and the mount's metrics count it.
    let info = super::metrics::MountInfo {
        volume: "t/mnt".into(),
        digest: f.digest.to_string(),
        dir: "/m".into(),
    };
    let held = sealvol_core::prometheus::CacheState::of(&cache);
    let text = super::metrics::mount_text(&info, &s, Some(held));
    let row = text
        .lines()
        .find(|l| l.starts_with("sealvol_mount_cache_damaged_chunks_total{"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.ends_with(" 1"), "{row}");
    wait_for_cache(&f, &fs2, &cache, "big.bin");

    // With the origin ruined, a fresh mount still reads every byte from the cache.
    damage_packs(&f.repo_dir());
    let fs3 = f.fs_as_if_remote(Some(cache));
    assert_eq!(read_all(&fs3, "big.bin", 1 << 20), want);
    assert_eq!(fs3.tiers().counters.snapshot().origin_chunks, 0);
}

#[test]
fn a_version_mounts_from_its_listing_and_else_from_its_manifest() {
    let f = fixture();
    let hex = f.digest.hex();
    let listing = f.repo_dir().join("listings/t/mnt").join(&hex);
    let manifest = f.repo_dir().join("manifests/t/mnt").join(&hex);
    assert!(
        listing.exists(),
        "a seal writes the listing beside the manifest"
    );
    let names = |fs: &VolumeFs| -> Vec<String> {
        fs.readdir(super::tree::ROOT, 0)
            .unwrap()
            .map(|e| e.name)
            .collect()
    };
    let want = names(&f.fs(None));

    // The listing is what is read: the manifest's bytes are not (only its size).
    let good_manifest = fs::read(&manifest).unwrap();
    let mut scrambled = good_manifest.clone();
    scrambled[1] = b'!';
    fs::write(&manifest, &scrambled).unwrap();
    let fs1 = f.fs(None);
    assert_eq!(names(&fs1), want);
    assert_eq!(read_all(&fs1, "small.txt", 4096), b"hello");
    fs::write(&manifest, &good_manifest).unwrap();
    // A manifest cut short is damage: no mount from the listing then.
    fs::write(&manifest, &good_manifest[..10]).unwrap();
    let opts = MountOptions::default();
    assert!(open_fs(Arc::clone(&f.repo), &f.vol, &f.digest, &opts).is_err());
    fs::write(&manifest, &good_manifest).unwrap();

    // A damaged or missing listing: the manifest instead.
    let mut bad = fs::read(&listing).unwrap();
    let n = bad.len();
    bad[n - 1] ^= 1;
    fs::write(&listing, &bad).unwrap();
    assert_eq!(names(&f.fs(None)), want);
    fs::remove_file(&listing).unwrap();
    assert_eq!(names(&f.fs(None)), want);
    assert_eq!(
        read_all(&f.fs(None), "big.bin", 1 << 20),
        fs::read(f.src.join("big.bin")).unwrap()
    );
}

/// Only the digest is trusted: a chunk list replaced on disk by one that carries the
/// file's own proof over another file's chunks (of the same size) is never served,
/// not even one page of a cold file read at random; the read fails with `EIO` and the
/// list is recorded as failing its proof, which stops garbage collection.
#[test]
fn a_forged_chunk_list_is_never_served_by_a_mount() {
    let mine = noise(3 << 20, 21);
    let theirs = noise(3 << 20, 22);
    let f = fixture_with(|src| {
        fs::write(src.join("mine.bin"), &mine).unwrap();
        fs::write(src.join("theirs.bin"), &theirs).unwrap();
    });
    let hash = |b: &[u8]| sealvol_core::digest::Hash::of(b);
    let (hm, ht) = (hash(&mine), hash(&theirs));
    let real = f.repo.file_object(&hm).unwrap();
    let other = f.repo.file_object(&ht).unwrap();
    let forged = sealvol_core::objects::FileObject::new(
        hm,
        real.size,
        other.packs.clone(),
        other.chunks.clone(),
        real.proof.outboard().cloned(),
    );
    let hex = hm.hex();
    let key = f._dir.path().join("repo/files").join(&hex[..2]).join(&hex);
    fs::write(&key, forged.encode()).unwrap();

    let fs = f.fs(None);
    let fh = fs
        .open(resolve(&fs, "mine.bin").unwrap(), libc::O_RDONLY)
        .unwrap()
        .fh;
    // One page deep in the cold file, then the start of it.
    for at in [(2 << 20) + 12288, 0] {
        match fs.read(fh, at, 4096) {
            Err(e) => assert_eq!(e, Errno::IO),
            Ok(d) => panic!("served {} bytes of another file's chunks", d.as_ref().len()),
        }
    }
    let recorded = f.repo.list_damage().unwrap();
    assert!(recorded.iter().any(|(h, _)| *h == hm), "{recorded:?}");
    // The other file reads as ever.
    assert!(read_all(&fs, "theirs.bin", 1 << 20) == theirs);
}

/// A cache far smaller than the file evicts as it fills and never serves wrong bytes.
/// (Moved from the binary's `tests/mount.rs`; `--cache-size` is only how the CLI says
/// the bound.)
#[test]
fn a_tiny_cache_evicts_and_keeps_serving_correct_bytes() {
    let f = fixture_with(|src| fs::write(src.join("w.bin"), noise(12 << 20, 4)).unwrap());
    let want = fs::read(f.src.join("w.bin")).unwrap();
    let cache = Arc::new(ChunkCache::open(&f.cache_dir, 1 << 20).unwrap());
    for round in 0..2 {
        // A fresh filesystem each round, as a second mount: through the tiers again.
        let fs = f.fs(Some(Arc::clone(&cache)));
        assert!(read_all(&fs, "w.bin", 1 << 20) == want, "round {round}");
    }
    let held: u64 = fs::read_dir(f.cache_dir.join("packs"))
        .unwrap()
        .map(|e| e.unwrap().metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    assert!(
        held <= (1 << 20) + (512 << 10),
        "the cache holds {held} bytes"
    );
}

/// A damaged manifest and a damaged tag of another volume, and a damaged version of
/// the same volume, stop no other version from opening; the damaged one is refused
/// with the word. (Moved from the binary's `tests/mount.rs`.)
#[test]
fn a_damaged_manifest_or_tag_elsewhere_does_not_stop_a_mount() {
    use sealvol_core::refs::{Name, Ref};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    let repo = Arc::new(Repository::open_local(&root, true, false).unwrap());
    let src = dir.path().join("src");
    fs::create_dir_all(&src).unwrap();
    let seal = |text: &[u8], vol: &str, tag: &str| {
        fs::write(src.join("model.txt"), text).unwrap();
        let tags = [Name::parse("tag", tag).unwrap()];
        push(
            &repo,
            &src,
            &VolumeName::parse(vol).unwrap(),
            &tags,
            &PushOptions::new(&Quiet),
        )
        .unwrap()
        .digest
    };
    let good = seal(b"good", "t/good", "prod");
    let bad = seal(b"bad", "t/bad", "prod");
    seal(b"sibling", "t/bad", "next");
    fs::write(
        root.join("manifests/t/bad").join(bad.hex()),
        b"{\"format\":",
    )
    .unwrap();
    fs::write(root.join("tags/t/bad/next"), b"").unwrap();
    let opts = MountOptions::default();
    let open = |r: &str| -> sealvol_core::error::Result<VolumeFs> {
        let r = Ref::parse(r)?;
        let d = repo.resolve(&r)?;
        open_fs(Arc::clone(&repo), &r.volume, &d, &opts)
    };
    let g = open("t/good:prod").unwrap();
    assert_eq!(read_all(&g, "model.txt", 4096), b"good");
    assert_eq!(
        repo.resolve(&Ref::parse("t/good:prod").unwrap()).unwrap(),
        good
    );
    // The damaged volume's newest readable version still opens by name.
    let latest = open("t/bad").unwrap();
    assert_eq!(read_all(&latest, "model.txt", 4096), b"sibling");
    let Err(e) = open("t/bad:prod") else {
        panic!("a damaged version opened");
    };
    assert!(e.to_string().contains("damaged"), "{e}");
}
