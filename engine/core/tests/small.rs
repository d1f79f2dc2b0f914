//! Small files without chunk lists (docs/FORMAT.md, "Small files"), on the in-memory
//! store: a push of many tiny files writes a handful of objects however many files
//! there are, and every reader finds them through the version's small packs: pull,
//! verify, diff, garbage collection (which keeps them, and gives them lists when it
//! moves their chunks), mirror. Nothing the small packs say is trusted: a crafted
//! entry never yields other bytes, and a pack that lost a file falls back to any copy.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sealvol_core::objects::PackEntry;
use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::pull::pull;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::{Ref, VolumeName};
use sealvol_core::repo::Kind;
use sealvol_core::store::{MemoryStore, ObjectStore};
use sealvol_core::testutil::noise;
use sealvol_core::verify::{ReadData, survey_all, survey_version};
use sealvol_core::{Digest, Repository};

fn vol(name: &str) -> VolumeName {
    VolumeName::parse(name).unwrap()
}

fn repository() -> (Repository, Arc<MemoryStore>) {
    let mem = Arc::new(MemoryStore::new().unwrap());
    let repo = Repository::open(Box::new(Arc::clone(&mem)), "memory".into(), true).unwrap();
    (repo, mem)
}

/// `n` tiny files in folders of 100, each its number as text.
fn tiny_files(root: &Path, n: usize) -> PathBuf {
    for i in 0..n {
        let d = root.join(format!("part-{:02}", i / 100));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("row-{i:04}.txt")), format!("{i}\n")).unwrap();
    }
    root.to_path_buf()
}

fn kinds(mem: &MemoryStore) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for k in mem.keys() {
        *out.entry(k.split('/').next().unwrap_or("").to_string())
            .or_default() += 1;
    }
    out
}

fn reader(mem: &Arc<MemoryStore>) -> Tiers {
    let r = Repository::open(Box::new(Arc::clone(mem)), "memory".into(), false).unwrap();
    Tiers::new(Arc::new(r), None)
}

/// Every file under `root`, relative, with its bytes.
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn push_dir(repo: &Repository, dir: &Path, v: &str) -> Digest {
    push(repo, dir, &vol(v), &[], &PushOptions::new(&Quiet))
        .unwrap()
        .digest
}

#[test]
fn a_push_of_many_tiny_files_writes_a_handful_of_objects_and_pulls_back_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let src = tiny_files(&tmp.path().join("src"), 2000);
    // One large file beside them keeps its chunk list.
    std::fs::write(src.join("weights.bin"), noise(2 << 20, 5)).unwrap();
    let d = push_dir(&repo, &src, "t/tiny");
    assert_eq!(d, sealvol_core::walk::digest_dir(&src).unwrap());
    let k = kinds(&mem);
    assert_eq!(
        k.get("files"),
        Some(&1),
        "one chunk list, the large file's: {k:?}"
    );
    assert_eq!(k.get("packs"), Some(&1), "{k:?}");
    let m = repo.manifest(&vol("t/tiny"), &d).unwrap();
    assert_eq!(m.format, 2, "a manifest naming small packs is format 2");
    assert_eq!(m.small_packs.len(), 1);
    let summary = repo.summary(&vol("t/tiny"), &d).unwrap().unwrap();
    assert_eq!(
        summary.small_packs, m.small_packs,
        "the summary carries them for mounts"
    );

    let out = tmp.path().join("out");
    pull(&reader(&mem), &vol("t/tiny"), &d, &out, false, &Quiet).unwrap();
    assert_eq!(tree(&out), tree(&src));

    // Pushed again, nothing is written and the stat cache is not needed to know it.
    let before = mem.keys();
    let again = push(&repo, &src, &vol("t/tiny"), &[], &PushOptions::new(&Quiet)).unwrap();
    assert!(!again.sealed_new);
    assert_eq!(again.stats.new_chunks, 0);
    assert_eq!(mem.keys(), before, "a second push wrote objects");

    // verify reads every one of them and finds nothing wrong.
    let report = survey_all(&repo, ReadData::All, None, false, &Quiet)
        .unwrap()
        .report();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn a_flipped_byte_in_a_small_file_is_named_by_verify_and_refused_by_pull() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let src = tiny_files(&tmp.path().join("src"), 50);
    let d = push_dir(&repo, &src, "t/tiny");
    let m = repo.manifest(&vol("t/tiny"), &d).unwrap();
    let pack = sealvol_core::digest::Hash::parse_hex(&m.small_packs[0]).unwrap();
    let entries = repo.index(&pack).unwrap().unwrap();
    // row-0007.txt is "7\n": find its chunk by content.
    let victim = entries
        .iter()
        .find(|e| e.hash == sealvol_core::digest::Hash::of(b"7\n"))
        .copied()
        .unwrap();
    let key = Kind::Pack.name(&pack);
    let mut bytes = mem.get(&key).unwrap().unwrap();
    bytes[victim.offset as usize] ^= 0x55;
    mem.overwrite(&key, &bytes);

    let report = survey_all(&repo, ReadData::All, None, false, &Quiet)
        .unwrap()
        .report();
    let files: Vec<&String> = report
        .damaged_versions
        .iter()
        .flat_map(|a| a.files.iter())
        .collect();
    assert_eq!(files, vec!["part-00/row-0007.txt"], "{:?}", report.problems);
    // `verify REF` says the same of the one version.
    let one = survey_version(&repo, &vol("t/tiny"), &d, &Quiet)
        .unwrap()
        .report();
    let files: Vec<&String> = one
        .damaged_versions
        .iter()
        .flat_map(|a| a.files.iter())
        .collect();
    assert_eq!(files, vec!["part-00/row-0007.txt"], "{:?}", one.problems);
    let out = tmp.path().join("out");
    let e = pull(&reader(&mem), &vol("t/tiny"), &d, &out, false, &Quiet).unwrap_err();
    assert!(
        e.to_string().contains("row-0007") || e.message().contains("hash"),
        "{e}"
    );
    assert!(
        !out.join("part-00/row-0007.txt").exists(),
        "a bad file was written"
    );
}

/// A crafted manifest can name any pack as a small pack: an entry of another file, or
/// of the right hash at the wrong length, never becomes the file.
#[test]
fn small_packs_that_do_not_hold_a_file_never_yield_other_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _mem) = repository();
    let src = tiny_files(&tmp.path().join("src"), 10);
    let d = push_dir(&repo, &src, "t/tiny");
    let m = repo.manifest(&vol("t/tiny"), &d).unwrap();
    let small = m.small_files();
    let h3 = sealvol_core::digest::Hash::of(b"3\n");
    // The right file at its size is found; at another size, or another file, not.
    assert!(repo.file_list(&h3, 2, &small).is_ok());
    assert!(small.list(&repo, &h3, 3).is_none());
    let other = sealvol_core::digest::Hash::of(b"not stored\n");
    let e = repo.file_list(&other, 11, &small).unwrap_err();
    assert!(e.message().contains("missing"), "{e}");
    // Names that are not pack ids, and packs that do not exist, hold nothing.
    let junk = sealvol_core::small::SmallFiles::parse(&[
        "not-a-pack".into(),
        "00".repeat(32),
        "../../etc/passwd".into(),
    ]);
    assert_eq!(junk.packs().len(), 1);
    // A small file the named packs lost is read from any copy the index knows.
    let found = repo.file_list(&h3, 2, &junk).unwrap();
    assert_eq!(found.chunks[0].entry.hash, h3);
    let e = repo.file_list(&other, 11, &junk).unwrap_err();
    assert!(e.message().contains("missing"), "{e}");
}

#[test]
fn garbage_collection_keeps_small_files_and_gives_them_lists_when_it_moves_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut repo, mem) = repository();
    repo.change_settings(|c| c.retention = Duration::ZERO)
        .unwrap();
    // One pack: the tiny files and a large file; a second version holds only the
    // tiny files. Once the first is purged the pack is mostly dead: gc rewrites it.
    let big = tmp.path().join("big");
    tiny_files(&big, 300);
    std::fs::write(big.join("weights.bin"), noise(4 << 20, 9)).unwrap();
    let first = push_dir(&repo, &big, "t/a");
    let small_src = tiny_files(&tmp.path().join("small"), 300);
    let second = push_dir(&repo, &small_src, "t/b");
    assert!(
        kinds(&mem).get("files").is_some_and(|n| *n == 1),
        "{:?}",
        kinds(&mem)
    );
    repo.delete_version(&Ref::parse(&format!("t/a@{first}")).unwrap(), false)
        .unwrap();
    mem.advance(repo.config().gc_grace + Duration::from_secs(1));
    let opts = GcOptions {
        dry_run: false,
        wait: false,
        progress: &Quiet,
    };
    let run = repo.collect(&opts, &sealvol_gc::Here).unwrap();
    assert_eq!(run.purged.len(), 1, "{run:?}");
    mem.advance(repo.config().gc_grace + Duration::from_secs(1));
    let swept = repo.collect(&opts, &sealvol_gc::Here).unwrap();
    assert!(swept.bytes_freed >= 4 << 20, "{swept:?}");
    // The second version reads whole, through lists gc wrote for the moved chunks
    // (its small pack is gone) or through the pack it kept.
    let out = tmp.path().join("out");
    pull(&reader(&mem), &vol("t/b"), &second, &out, false, &Quiet).unwrap();
    assert_eq!(tree(&out), tree(&small_src));
    let report = survey_all(&repo, ReadData::All, None, false, &Quiet)
        .unwrap()
        .report();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // A further run finds nothing to free: the small files' copies are live.
    mem.advance(repo.config().gc_grace + Duration::from_secs(1));
    let again = repo.collect(&opts, &sealvol_gc::Here).unwrap();
    assert_eq!(again.bytes_freed, 0, "{again:?}");
    assert_eq!(again.condemned_packs, 0, "{again:?}");
}

#[test]
fn a_mirror_of_small_files_writes_no_chunk_lists_for_them() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _mem) = repository();
    let src = tiny_files(&tmp.path().join("src"), 500);
    let d = push_dir(&repo, &src, "t/tiny");
    let dest_mem = Arc::new(MemoryStore::new().unwrap());
    let dest = Repository::open(Box::new(Arc::clone(&dest_mem)), "memory-2".into(), true).unwrap();
    let r = Ref::parse(&format!("t/tiny@{d}")).unwrap();
    sealvol_core::mirror::mirror(&repo, &dest, &r, &Quiet).unwrap();
    let k = kinds(&dest_mem);
    assert_eq!(k.get("files"), None, "{k:?}");
    let out = tmp.path().join("out");
    pull(&reader(&dest_mem), &vol("t/tiny"), &d, &out, false, &Quiet).unwrap();
    assert_eq!(tree(&out), tree(&src));
}

/// The entry a reader takes is the one whose hash and length are the file's; a pack
/// entry claiming a file's hash over other bytes fails the bytes' hash check.
#[test]
fn an_index_entry_that_lies_about_its_bytes_is_refused_not_served() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let src = tiny_files(&tmp.path().join("src"), 20);
    let d = push_dir(&repo, &src, "t/tiny");
    let m = repo.manifest(&vol("t/tiny"), &d).unwrap();
    let pack = sealvol_core::digest::Hash::parse_hex(&m.small_packs[0]).unwrap();
    let mut entries: Vec<PackEntry> = repo.index(&pack).unwrap().unwrap();
    // Swap the offsets of "1\n" and "2\n" (same length): each entry now points at
    // the other file's bytes. The index no longer matches its name (its pack's
    // trailer is intact), but a reader given it must still not serve "2\n" as "1\n".
    let a = entries
        .iter()
        .position(|e| e.hash == sealvol_core::digest::Hash::of(b"1\n"))
        .unwrap();
    let b = entries
        .iter()
        .position(|e| e.hash == sealvol_core::digest::Hash::of(b"2\n"))
        .unwrap();
    let (oa, ob) = (entries[a].offset, entries[b].offset);
    entries[a].offset = ob;
    entries[b].offset = oa;
    mem.overwrite(
        &Kind::Index.name(&pack),
        &sealvol_core::objects::encode_index(&entries),
    );
    let out = tmp.path().join("out");
    let pulled = pull(&reader(&mem), &vol("t/tiny"), &d, &out, false, &Quiet);
    match pulled {
        // Refused, or read through the pack's own trailer: never the other's bytes.
        Err(e) => assert!(!e.message().is_empty()),
        Ok(_) => assert_eq!(tree(&out), tree(&src)),
    }
    if out.join("part-00/row-0001.txt").exists() {
        assert_eq!(
            std::fs::read(out.join("part-00/row-0001.txt")).unwrap(),
            b"1\n"
        );
    }
}
