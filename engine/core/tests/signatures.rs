//! Signatures beside a version, on the in-memory store: they stay through a delete and
//! a restore, go with the version when it is purged, are collected when their version
//! is gone, and travel with a mirror (with the SHA-256s kept for them). What a
//! signature says is sealvol-sign's; here they are opaque bytes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use sealvol_core::mirror::mirror;
use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::{Ref, VolumeName};
use sealvol_core::store::{MemoryStore, ObjectStore};
use sealvol_core::testutil::{folder, noise};
use sealvol_core::{Digest, Repository};

fn vol() -> VolumeName {
    VolumeName::parse("t/v").unwrap()
}

fn repository() -> (Repository, Arc<MemoryStore>) {
    named("memory")
}

fn named(location: &str) -> (Repository, Arc<MemoryStore>) {
    let mem = Arc::new(MemoryStore::new().unwrap());
    let repo = Repository::open(Box::new(Arc::clone(&mem)), location.into(), true).unwrap();
    (repo, mem)
}

fn version(repo: &Repository, tmp: &std::path::Path, seed: u64) -> Digest {
    let dir = folder(tmp, &format!("v{seed}"), &[("w.bin", noise(1 << 20, seed))]);
    push(repo, &dir, &vol(), &[], &PushOptions::new(&Quiet))
        .unwrap()
        .digest
}

fn sums() -> BTreeMap<String, String> {
    BTreeMap::from([("w.bin".to_string(), "ab".repeat(32))])
}

fn gc(repo: &Repository) -> sealvol_core::gc::GcReport {
    repo.collect(
        &GcOptions {
            dry_run: false,
            wait: false,
            progress: &Quiet,
        },
        &sealvol_gc::Here,
    )
    .unwrap()
}

fn signature_keys(mem: &MemoryStore) -> Vec<String> {
    mem.keys()
        .into_iter()
        .filter(|k| k.starts_with("signatures/") || k.starts_with("sha256/"))
        .collect()
}

#[test]
fn signatures_stay_through_delete_and_restore_and_go_with_a_purge() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut repo, mem) = repository();
    let d = version(&repo, tmp.path(), 1);
    let (_, new) = repo.put_signature(&vol(), &d, b"first signer").unwrap();
    assert!(new);
    let (_, new) = repo.put_signature(&vol(), &d, b"first signer").unwrap();
    assert!(!new, "the same bytes are one signature");
    repo.put_signature(&vol(), &d, b"second signer").unwrap();
    repo.put_sha256s(&vol(), &d, sums()).unwrap();
    assert_eq!(repo.signatures(&vol(), &d).unwrap().len(), 2);

    let pinned = Ref::pinned(vol(), d);
    repo.delete_version(&pinned, true).unwrap();
    // In the trash, still beside it (a signature may be added there too).
    assert_eq!(repo.signatures(&vol(), &d).unwrap().len(), 2);
    repo.restore_version(&pinned).unwrap();
    let kept: Vec<Vec<u8>> = repo
        .signatures(&vol(), &d)
        .unwrap()
        .into_iter()
        .map(|s| s.bytes)
        .collect();
    assert!(kept.contains(&b"first signer".to_vec()) && kept.contains(&b"second signer".to_vec()));
    assert_eq!(repo.sha256s(&vol(), &d).unwrap().unwrap().files, sums());

    // Deleted again with no window: the purge takes them with the version.
    repo.change_settings(|c| c.retention = Duration::ZERO)
        .unwrap();
    repo.delete_version(&pinned, true).unwrap();
    let report = gc(&repo);
    assert_eq!(report.purged.len(), 1);
    assert_eq!(signature_keys(&mem), Vec::<String>::new());
}

#[test]
fn signatures_whose_version_is_gone_are_collected_after_the_grace_period() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let d = version(&repo, tmp.path(), 2);
    repo.put_signature(&vol(), &d, b"kept").unwrap();
    // Left by a signer that raced a purge: the version it names is gone.
    let gone = "0".repeat(64);
    mem.put(&format!("signatures/t/v/{gone}/{}", "1".repeat(64)), b"x")
        .unwrap();
    mem.put(&format!("sha256/t/v/{gone}"), b"{}").unwrap();
    // Within the grace period a signer may still be sealing: kept.
    gc(&repo);
    assert_eq!(signature_keys(&mem).len(), 3);
    mem.advance(Duration::from_secs(7 * 24 * 3600));
    gc(&repo);
    let left = signature_keys(&mem);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].contains(&d.hex()), "{left:?}");
}

#[test]
fn a_mirror_carries_the_signatures_and_kept_sha256s() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, _) = named("memory-a");
    let (b, _) = named("memory-b");
    let d = version(&a, tmp.path(), 3);
    a.put_signature(&vol(), &d, b"one").unwrap();
    a.put_signature(&vol(), &d, b"two").unwrap();
    a.put_sha256s(&vol(), &d, sums()).unwrap();
    let r = Ref::pinned(vol(), d);
    let report = mirror(&a, &b, &r, &Quiet).unwrap();
    assert_eq!(report.signatures_copied, 2);
    assert_eq!(b.signatures(&vol(), &d).unwrap().len(), 2);
    assert_eq!(b.sha256s(&vol(), &d).unwrap().unwrap().files, sums());
    // Again: the version and both signatures are there already.
    a.put_signature(&vol(), &d, b"three").unwrap();
    let again = mirror(&a, &b, &r, &Quiet).unwrap();
    assert!(!again.new);
    assert_eq!(again.signatures_copied, 1);
}
