//! Push and pull through the engine, on the in-memory store: a second push of the same
//! folder writes nothing, empty folders and empty files come back, a manifest whose
//! path climbs out of the target is refused before anything is written, and a pull
//! reads through the node cache, which outlives a ruined origin but never serves a
//! chunk that fails its hash. What the CLI prints of the same is tested through the
//! binary (`tests/cli/`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sealvol_core::cache::ChunkCache;
use sealvol_core::digest::{Entry, Hash, version_digest};
use sealvol_core::progress::Quiet;
use sealvol_core::pull::pull;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::{Fill, Tiers};
use sealvol_core::refs::VolumeName;
use sealvol_core::store::{MemoryStore, ObjectStore};
use sealvol_core::testutil::noise;
use sealvol_core::{Digest, Repository};

fn vol() -> VolumeName {
    VolumeName::parse("ns/vol").unwrap()
}

fn repository() -> (Repository, Arc<MemoryStore>) {
    let mem = Arc::new(MemoryStore::new().unwrap());
    let repo = Repository::open(Box::new(Arc::clone(&mem)), "memory".into(), true).unwrap();
    (repo, mem)
}

fn push_dir(repo: &Repository, dir: &Path) -> sealvol_core::push::PushReport {
    push(repo, dir, &vol(), &[], &PushOptions::new(&Quiet)).unwrap()
}

/// A reader over the same objects (`Tiers` owns its repository), with a node cache.
fn tiers(mem: &Arc<MemoryStore>, cache: Option<&Path>) -> Tiers {
    let repo = Repository::open(Box::new(Arc::clone(mem)), "memory".into(), false).unwrap();
    let cache = cache.map(|dir| Arc::new(ChunkCache::open(dir, 1 << 30).unwrap()));
    Tiers::with_fill(Arc::new(repo), cache, Fill::Inline)
}

/// Every file and folder under `root`, relative, with the bytes of each file.
fn tree(root: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if p.is_dir() {
                stack.push(p);
                out.push((rel, None));
            } else {
                out.push((rel, Some(std::fs::read(&p).unwrap())));
            }
        }
    }
    out.sort();
    out
}

fn packs(mem: &MemoryStore) -> u64 {
    mem.keys()
        .iter()
        .filter(|k| k.starts_with("packs/"))
        .map(|k| mem.size(k).unwrap().unwrap_or(0))
        .sum()
}

#[test]
fn a_second_push_of_the_same_folder_writes_nothing_and_seals_the_same_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("weights")).unwrap();
    std::fs::write(src.join("weights/model.bin"), noise(4 << 20, 3)).unwrap();
    std::fs::write(src.join("config.json"), b"{}\n").unwrap();
    let first = push_dir(&repo, &src);
    assert!(first.sealed_new);
    let stored = packs(&mem);
    let second = push_dir(&repo, &src);
    assert_eq!(second.digest, first.digest);
    assert!(!second.sealed_new);
    assert_eq!(second.stats.new_bytes, 0);
    assert_eq!(second.stats.new_chunks, 0);
    assert_eq!(packs(&mem), stored, "a second push stored bytes");
}

/// Several files larger than a block (16 MiB), so each reaches the writer in pieces,
/// one sharing a stretch with another: each gets its own chunks, in order, and the
/// version the digest of the folder.
#[test]
fn files_larger_than_a_block_each_come_back_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    // One shares a stretch with another, so reuse within the push counts.
    let a = noise((16 << 20) + 300_000, 11);
    let mut b = noise((17 << 20) + 5, 12);
    b[1 << 20..5 << 20].copy_from_slice(&a[1 << 20..5 << 20]);
    std::fs::write(src.join("a.bin"), &a).unwrap();
    std::fs::write(src.join("b.bin"), &b).unwrap();
    std::fs::write(src.join("c.json"), b"{}").unwrap();
    std::fs::write(src.join("d.bin"), noise(3 << 20, 13)).unwrap();
    let report = push_dir(&repo, &src);
    assert_eq!(
        report.digest,
        sealvol_core::walk::digest_dir(&src).unwrap(),
        "the sealed digest is the folder's"
    );
    let out = tmp.path().join("out");
    pull(
        &tiers(&mem, None),
        &vol(),
        &report.digest,
        &out,
        false,
        &Quiet,
    )
    .unwrap();
    assert_eq!(tree(&out), tree(&src));
}

#[test]
fn empty_folders_and_empty_files_come_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("a/b/empty")).unwrap();
    std::fs::write(src.join("zero"), b"").unwrap();
    std::fs::write(src.join("a/zero2"), b"").unwrap();
    let d = push_dir(&repo, &src).digest;
    let out = tmp.path().join("out");
    pull(&tiers(&mem, None), &vol(), &d, &out, false, &Quiet).unwrap();
    assert_eq!(tree(&out), tree(&src));
}

#[test]
fn a_manifest_whose_path_climbs_out_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("f"), b"payload").unwrap();
    push_dir(&repo, &src);
    // A hostile repository: a self-consistent manifest whose path climbs out.
    let entries = vec![Entry::File {
        path: "../escaped".into(),
        size: 7,
        hash: Hash::of(b"payload"),
        exec: false,
    }];
    let digest = version_digest(&entries);
    let manifest = serde_json::json!({
        "format": 1, "volume": "ns/vol", "digest": digest.to_string(),
        "created": "2026-01-01T00:00:00.000Z",
        "provenance": {"source": "evil", "pushed_by": "evil"},
        "stats": {"bytes": 7, "files": 1, "chunks": 1, "new_bytes": 0, "new_chunks": 0},
        "entries": entries,
    });
    mem.overwrite(
        &format!("manifests/ns/vol/{}", digest.hex()),
        serde_json::to_string(&manifest).unwrap().as_bytes(),
    );
    let out = tmp.path().join("out/inner");
    let e = pull(&tiers(&mem, None), &vol(), &digest, &out, false, &Quiet).unwrap_err();
    assert!(e.message().contains("unsafe path"), "{e}");
    assert!(!tmp.path().join("out/escaped").exists());
}

#[test]
fn a_pull_reads_through_the_node_cache_which_outlives_a_ruined_origin_but_never_serves_a_bad_chunk()
{
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("w.bin"), noise(3 << 20, 11)).unwrap();
    std::fs::write(src.join("small.txt"), b"small").unwrap();
    let d: Digest = push_dir(&repo, &src).digest;
    let cache = tmp.path().join("node-cache");
    let out1 = tmp.path().join("out1");
    pull(&tiers(&mem, Some(&cache)), &vol(), &d, &out1, false, &Quiet).unwrap();
    assert_eq!(tree(&out1), tree(&src));
    let cached = ChunkCache::open(&cache, 1 << 30).unwrap().chunks();
    assert!(
        cached.len() >= 10,
        "the pull filled the node cache: {cached:?}"
    );

    // The origin's packs are ruined; a second pull still gets every byte, verified,
    // from the node cache.
    for key in mem.keys().into_iter().filter(|k| k.starts_with("packs/")) {
        let mut b = mem.get(&key).unwrap().unwrap();
        for i in (0..b.len()).step_by(1000) {
            b[i] ^= 0xff;
        }
        mem.overwrite(&key, &b);
    }
    let out2 = tmp.path().join("out2");
    pull(&tiers(&mem, Some(&cache)), &vol(), &d, &out2, false, &Quiet).unwrap();
    assert_eq!(tree(&out2), tree(&src));

    // A damaged cached chunk is not served: with the origin ruined too, the pull fails,
    // names the check that failed, and gives no file its name unless it is whole.
    let (seg, offset, _) = ChunkCache::open(&cache, 1 << 30)
        .unwrap()
        .locate(&cached[0])
        .unwrap();
    let mut b = std::fs::read(&seg).unwrap();
    b[offset as usize] ^= 1;
    std::fs::write(&seg, b).unwrap();
    let out3 = tmp.path().join("out3");
    let e = pull(&tiers(&mem, Some(&cache)), &vol(), &d, &out3, false, &Quiet).unwrap_err();
    assert!(e.message().contains("fails its hash check"), "{e}");
    for (rel, bytes) in tree(&out3) {
        if let Some(bytes) = bytes {
            assert_eq!(
                Some(bytes),
                std::fs::read(src.join(&rel)).ok(),
                "{rel:?}: only complete, verified files get their names"
            );
        }
    }
}
