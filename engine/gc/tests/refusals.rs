//! What a collection refuses and what it leaves, on a local repository: a manifest that
//! cannot be read stops it before it deletes anything, and a chunk list younger than
//! the grace period outlives its purged version as garbage (noted by verify, not
//! damage) until the next collection. Two collections at once and kill -9 anywhere in
//! one are tested with processes (`tests/gc.rs`).

use std::path::Path;
use std::time::Duration;

use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::{Ref, VolumeName};
use sealvol_core::testutil::noise;
use sealvol_core::verify::{ReadData, survey_all};
use sealvol_core::{Digest, Repository};

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A local repository whose trash window has passed for whatever is deleted (as eight
/// days later), with a grace period of one second.
fn repository(root: &Path) -> Repository {
    let mut repo = Repository::open_local(root, true, false).unwrap();
    repo.change_settings(|c| {
        c.retention = Duration::ZERO;
        c.gc_grace = Duration::from_secs(1);
    })
    .unwrap();
    repo
}

fn push_dir(repo: &Repository, dir: &Path, v: &str) -> Digest {
    let v = VolumeName::parse(v).unwrap();
    push(repo, dir, &v, &[], &PushOptions::new(&Quiet))
        .unwrap()
        .digest
}

/// `volume gc`, which waits out the grace period to sweep what it condemned.
fn gc(repo: &Repository) -> sealvol_core::error::Result<sealvol_core::outcomes::GcReport> {
    let opts = GcOptions {
        dry_run: false,
        wait: true,
        progress: &Quiet,
    };
    sealvol_gc::collect(repo, &opts)
}

#[test]
fn gc_refuses_to_delete_anything_when_a_manifest_cannot_be_read() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    let repo = repository(&root);
    let mut versions = Vec::new();
    for i in 0..3u64 {
        let src = tmp.path().join(format!("src{i}"));
        write(&src.join("own.bin"), &noise(3 << 20, 10 + i));
        write(&src.join("shared.bin"), &noise(1 << 20, 99));
        versions.push(push_dir(&repo, &src, "t/v"));
    }
    let v = VolumeName::parse("t/v").unwrap();
    repo.delete_version(&Ref::pinned(v, versions[1]), false)
        .unwrap();
    let other = tmp.path().join("other");
    write(&other.join("o"), &noise(1 << 20, 5));
    let d = push_dir(&repo, &other, "t/other");
    std::fs::write(root.join("manifests/t/other").join(d.hex()), b"{ not json").unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let packs = sealvol_testkit::files::under(&root.join("packs"));
    let e = gc(&repo).unwrap_err();
    let said = format!("{e} {}", e.hint_text().unwrap_or(""));
    assert!(
        said.contains("deletes nothing") && said.contains("repair"),
        "{said}"
    );
    assert_eq!(sealvol_testkit::files::under(&root.join("packs")), packs);
}

/// A chunk list younger than the grace period stays when its version is purged, while
/// the older pack it names goes: a relink by an earlier collection's repack refreshes a
/// list's modification time like this, which the test does directly (`set_modified`)
/// because the layout a repack would need is beside the point. Such a list is garbage
/// (no version reads it; a push of its file heals it), so verify notes it, and the next
/// collection removes it.
#[test]
fn a_young_chunk_list_left_by_a_purge_is_garbage_not_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    let repo = repository(&root);
    let src = tmp.path().join("src");
    write(&src.join("a.bin"), &noise(1 << 20, 7));
    let d = push_dir(&repo, &src, "t/y");
    repo.delete_version(&Ref::pinned(VolumeName::parse("t/y").unwrap(), d), false)
        .unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let lists = sealvol_testkit::files::under(&root.join("files"));
    assert_eq!(lists.len(), 1);
    for l in &lists {
        let f = std::fs::OpenOptions::new().write(true).open(l).unwrap();
        f.set_modified(std::time::SystemTime::now()).unwrap();
    }
    let report = gc(&repo).unwrap();
    assert_eq!(report.purged.len(), 1, "{report:?}");
    assert_eq!(report.deleted_packs, 1, "{report:?}");
    assert_eq!(report.young_files, 1, "{report:?}");
    assert_eq!(sealvol_testkit::files::under(&root.join("files")), lists);
    let verified = survey_all(&repo, ReadData::All, None, false, &Quiet)
        .unwrap()
        .report();
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    assert!(
        verified
            .notes
            .iter()
            .any(|n| n.contains("which no version reads, names a pack garbage collection removed")),
        "{:?}",
        verified.notes
    );
    std::thread::sleep(Duration::from_millis(1100));
    gc(&repo).unwrap();
    assert!(sealvol_testkit::files::under(&root.join("files")).is_empty());
    let verified = survey_all(&repo, ReadData::All, None, false, &Quiet)
        .unwrap()
        .report();
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    assert!(
        !verified
            .notes
            .iter()
            .any(|n| n.contains("no version reads")),
        "{:?}",
        verified.notes
    );
}
