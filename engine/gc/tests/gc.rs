//! Garbage collection through the engine, on the in-memory store, with time moved by
//! the store's clock (`MemoryStore::advance`) and a retention window of nothing, never
//! by sleeping: a dry run changes no object, a version within its window keeps its
//! bytes, a purged one's own bytes go while what it shared stays, and what is left
//! reads back whole. Killing a collection and collections beside pushes from other
//! processes are process tests (`tests/gc.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sealvol_core::gc::GcReport;
use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::pull::pull;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::{Ref, VolumeName};
use sealvol_core::store::{MemoryStore, ObjectStore};
use sealvol_core::testutil::noise;
use sealvol_core::{Digest, Repository};

fn vol() -> VolumeName {
    VolumeName::parse("t/v").unwrap()
}

struct Three {
    repo: Repository,
    mem: Arc<MemoryStore>,
    versions: Vec<(PathBuf, Digest)>,
    tmp: tempfile::TempDir,
}

/// Three versions, each with 3 MiB of its own and 1 MiB shared; the middle one is
/// deleted. With `expired`, its window is already over.
fn three_one_deleted(expired: bool) -> Three {
    let tmp = tempfile::tempdir().unwrap();
    let mem = Arc::new(MemoryStore::new().unwrap());
    let mut repo = Repository::open(Box::new(Arc::clone(&mem)), "memory".into(), true).unwrap();
    if expired {
        repo.change_settings(|c| c.retention = Duration::ZERO)
            .unwrap();
    }
    let mut versions = Vec::new();
    for i in 0..3u64 {
        let src = tmp.path().join(format!("src{i}"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("own.bin"), noise(3 << 20, 10 + i)).unwrap();
        std::fs::write(src.join("shared.bin"), noise(1 << 20, 99)).unwrap();
        let d = push(&repo, &src, &vol(), &[], &PushOptions::new(&Quiet))
            .unwrap()
            .digest;
        versions.push((src, d));
    }
    let middle = Ref::parse(&format!("t/v@{}", versions[1].1)).unwrap();
    repo.delete_version(&middle, false).unwrap();
    // Everything written so far is older than the grace period.
    mem.advance(repo.config().gc_grace + Duration::from_secs(1));
    Three {
        repo,
        mem,
        versions,
        tmp,
    }
}

fn snapshot(mem: &MemoryStore) -> BTreeMap<String, Vec<u8>> {
    mem.keys()
        .into_iter()
        .map(|k| {
            let bytes = mem.get(&k).unwrap().unwrap_or_default();
            (k, bytes)
        })
        .collect()
}

/// Bytes of packs in the store.
fn pack_bytes(mem: &MemoryStore) -> u64 {
    snapshot(mem)
        .iter()
        .filter(|(k, _)| k.starts_with("packs/"))
        .map(|(_, b)| b.len() as u64)
        .sum()
}

fn gc(repo: &Repository, dry_run: bool) -> GcReport {
    let opts = GcOptions {
        dry_run,
        wait: false,
        progress: &Quiet,
    };
    repo.collect(&opts, &sealvol_gc::Here).unwrap()
}

#[test]
fn a_dry_run_changes_no_object_and_counts_what_a_run_would_free() {
    let t = three_one_deleted(true);
    let before = snapshot(&t.mem);
    let report = gc(&t.repo, true);
    assert_eq!(snapshot(&t.mem), before, "a dry run changed the repository");
    assert!(report.dry_run);
    let purged: Vec<&str> = report.purged.iter().map(|p| p.digest.as_str()).collect();
    assert_eq!(purged, vec![t.versions[1].1.to_string().as_str()]);
    // Its own 3 MiB are in one pack with nothing else alive: condemned or rewritten.
    let reclaim = report.condemned_bytes + report.repacked_bytes;
    assert!(reclaim >= 3 << 20, "{report:?}");
    assert_eq!(report.bytes_freed, 0);
}

#[test]
fn a_version_within_its_window_keeps_every_byte() {
    let t = three_one_deleted(false);
    let before = pack_bytes(&t.mem);
    let dry = gc(&t.repo, true);
    assert!(dry.purged.is_empty(), "{dry:?}");
    assert_eq!(dry.in_trash, 1);
    let run = gc(&t.repo, false);
    assert_eq!(run.condemned_packs, 0, "{run:?}");
    t.mem
        .advance(t.repo.config().gc_grace + Duration::from_secs(1));
    let again = gc(&t.repo, false);
    assert_eq!(again.bytes_freed, 0, "{again:?}");
    assert_eq!(pack_bytes(&t.mem), before);
}

#[test]
fn a_purged_version_s_own_bytes_go_and_the_others_read_back_whole() {
    let t = three_one_deleted(true);
    let before = pack_bytes(&t.mem);
    // The purge and the round; the sweep a grace period later, by the store's clock.
    let first = gc(&t.repo, false);
    assert_eq!(first.purged.len(), 1, "{first:?}");
    assert!(first.sweep_pending, "{first:?}");
    t.mem
        .advance(t.repo.config().gc_grace + Duration::from_secs(1));
    let swept = gc(&t.repo, false);
    assert!(swept.rounds_swept >= 1, "{swept:?}");
    assert!(swept.bytes_freed >= 3 << 20, "{swept:?}");
    let after = pack_bytes(&t.mem);
    assert!(after + (3 << 20) <= before, "{before} -> {after}");

    let reader = Repository::open(Box::new(Arc::clone(&t.mem)), "memory".into(), false).unwrap();
    let tiers = Tiers::new(Arc::new(reader), None);
    for (i, (src, d)) in t.versions.iter().enumerate() {
        let out = t.tmp.path().join(format!("out{i}"));
        let pulled = pull(&tiers, &vol(), d, &out, false, &Quiet);
        if i == 1 {
            assert!(pulled.is_err(), "the purged version still reads");
            continue;
        }
        pulled.unwrap();
        for f in ["own.bin", "shared.bin"] {
            assert_same(&src.join(f), &out.join(f));
        }
    }
    // A further run has nothing left to do.
    t.mem
        .advance(t.repo.config().gc_grace + Duration::from_secs(1));
    let again = gc(&t.repo, false);
    assert_eq!(again.bytes_freed, 0, "{again:?}");
    assert_eq!(again.condemned_packs, 0, "{again:?}");
}

fn assert_same(a: &Path, b: &Path) {
    assert!(
        std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
        "{} and {} differ",
        a.display(),
        b.display()
    );
}
