//! Repair on a local repository, damaged the way the outside world damages files: a
//! reader holding a chunk list from before a repair still reads it from the salvaged
//! copies; repair refuses while a push writes (a dry run does not need to wait); a
//! missing or wrong summary and a missing or damaged listing are written again, byte
//! for byte, and a summary whose version is gone is collected; a tag cut mid-history
//! or pointing at no version is put back, a stray file quarantined, and a deleted pack
//! whose chunks have a copy elsewhere relinked by a push or by repair. What `verify` and
//! `repair` print of the same, and repair killed mid-way, are tested through the
//! binary (`tests/damage.rs`).

use std::path::{Path, PathBuf};

use sealvol_core::digest::Hash;
use sealvol_core::objects::{self, FileObject, PackEntry};
use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::pull::pull;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Tiers;
use sealvol_core::read::{Chunks, Origin};
use sealvol_core::refs::{Name, Ref, VolumeName};
use sealvol_core::repair::{RepairOptions, RepairReport, repair};
use sealvol_core::testutil::{folder, noise};
use sealvol_core::verify::{ReadData, survey_all};
use sealvol_core::{Digest, Repository};

/// Two volumes: `t/other`, then `t/base` (four files, one pack of its own).
struct Fixture {
    root: PathBuf,
    base_src: PathBuf,
    base: Digest,
    other: Digest,
    /// The pack `t/base` was written to.
    base_pack: PathBuf,
    _tmp: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("repo");
    let repo = Repository::open_local(&root, true, false).unwrap();
    let prod = [Name::parse("tag", "prod").unwrap()];
    let opts = PushOptions::new(&Quiet);
    let other_src = folder(
        tmp.path(),
        "other-src",
        &[
            ("o.bin", noise(1 << 20, 70)),
            ("p.txt", b"other\n".to_vec()),
        ],
    );
    let v = |n: &str| VolumeName::parse(n).unwrap();
    let other = push(&repo, &other_src, &v("t/other"), &prod, &opts)
        .unwrap()
        .digest;
    let before = sealvol_testkit::files::under(&root.join("packs"));
    let base_src = folder(
        tmp.path(),
        "base-src",
        &[
            ("a.bin", noise(3 << 20, 71)),
            ("b.bin", noise(3 << 19, 72)),
            ("c.txt", b"c\n".to_vec()),
            ("d.json", b"{\"d\": 1}\n".to_vec()),
        ],
    );
    let base = push(&repo, &base_src, &v("t/base"), &prod, &opts)
        .unwrap()
        .digest;
    let mut new: Vec<PathBuf> = sealvol_testkit::files::under(&root.join("packs"))
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(new.len(), 1, "t/base went into one pack");
    Fixture {
        root,
        base_src,
        base,
        other,
        base_pack: new.remove(0),
        _tmp: tmp,
    }
}

impl Fixture {
    fn repo(&self) -> Repository {
        Repository::open_local(&self.root, false, false).unwrap()
    }

    /// `repair [--dry-run] [--read-data]`: its report, and whether nothing remains.
    fn repair(&self, dry_run: bool, read_data: bool) -> (bool, RepairReport) {
        let opts = RepairOptions {
            dry_run,
            read_data,
            from: None,
            progress: &Quiet,
        };
        let r = repair(&mut self.repo(), &opts).unwrap();
        (r.remaining.is_empty(), r)
    }

    fn file_object(&self, name: &str) -> FileObject {
        let bytes = std::fs::read(self.base_src.join(name)).unwrap();
        self.repo().file_object(&Hash::of(&bytes)).unwrap()
    }

    fn resolve(&self, r: &str) -> sealvol_core::error::Result<Digest> {
        self.repo().resolve(&Ref::parse(r).unwrap())
    }

    /// Everything not damaged still lists and reads, by digest and by tag.
    fn others_still_work(&self) {
        let repo = self.repo();
        let names: Vec<String> = repo
            .volumes(None)
            .unwrap()
            .iter()
            .map(|v| v.to_string())
            .collect();
        assert!(names.contains(&"t/other".into()) && names.contains(&"t/base".into()));
        let other = VolumeName::parse("t/other").unwrap();
        repo.versions(&other).unwrap();
        repo.tags(&other).unwrap();
        assert_eq!(self.resolve("t/other:prod").unwrap(), self.other);
        let out = self._tmp.path().join("pulled-other");
        let _ = std::fs::remove_dir_all(&out);
        let tiers = Tiers::new(std::sync::Arc::new(repo), None);
        pull(&tiers, &other, &self.other, &out, false, &Quiet).unwrap();
        assert_eq!(sealvol_core::walk::digest_dir(&out).unwrap(), self.other);
    }

    /// The problems a quick verify finds (nothing recorded).
    fn problems(&self) -> sealvol_core::verify::VerifyReport {
        survey_all(&self.repo(), ReadData::None, None, false, &Quiet)
            .unwrap()
            .report()
    }

    fn verifies(&self) {
        let r = survey_all(&self.repo(), ReadData::All, None, false, &Quiet)
            .unwrap()
            .report();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
    }
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x55;
    std::fs::write(path, &b).unwrap();
}

#[test]
fn a_reader_holding_a_chunk_list_from_before_a_repair_still_reads_it() {
    let f = fixture();
    // a.bin's first chunk goes bad; b.bin lives in the same pack and is healthy.
    let a = f.file_object("a.bin");
    flip(&f.base_pack, a.chunks[0].entry.offset + 2);
    let hash = Hash::of(&std::fs::read(f.base_src.join("b.bin")).unwrap());
    // What a mount that opened b.bin before the repair holds.
    let old = f.file_object("b.bin");
    let (ok, r) = f.repair(false, true);
    assert!(!ok, "a.bin has no other copy: {r:?}");
    assert!(!f.base_pack.exists(), "the damaged pack went to quarantine");
    let repo = f.repo();
    let mut whole = blake3::Hasher::new();
    Origin(&repo)
        .for_each(&old, 0..old.chunks.len(), &mut |c| {
            whole.update(c);
            Ok(())
        })
        .expect("the old chunk list still reads, from the salvaged copies");
    assert_eq!(whole.finalize().as_bytes(), &hash.0);
    assert_ne!(
        repo.file_object(&hash).unwrap(),
        old,
        "the stored list was relinked"
    );
}

#[test]
fn repair_waits_for_no_one_and_refuses_while_a_push_writes() {
    let f = fixture();
    let a = f.file_object("a.bin");
    flip(&f.base_pack, a.chunks[0].entry.offset + 2);
    // `verify --read-data` finds it and writes it down.
    survey_all(&f.repo(), ReadData::All, None, true, &Quiet).unwrap();
    let repo = f.repo();
    let writing = repo.writers_lock(false).unwrap();
    let opts = RepairOptions {
        dry_run: false,
        read_data: false,
        from: None,
        progress: &Quiet,
    };
    let e = repair(&mut f.repo(), &opts).unwrap_err();
    let said = format!("{e} {}", e.hint_text().unwrap_or(""));
    assert!(
        said.contains("writing to this repository") && said.contains("--dry-run"),
        "{said}"
    );
    // A dry run needs no lock.
    let (_, plan) = f.repair(true, false);
    assert!(!plan.actions.is_empty(), "{plan:?}");
    assert!(f.base_pack.exists(), "nothing moved");
    drop(writing);
    let (_, r) = f.repair(false, false);
    assert!(!r.actions.is_empty());
}

#[test]
fn a_missing_summary_lists_from_the_manifest_and_repair_writes_it_again() {
    let f = fixture();
    let hex = f.base.hex();
    let summary = f.root.join("summaries/t/base").join(&hex);
    let written = std::fs::read(&summary).expect("a seal writes the summary");
    let s: serde_json::Value = serde_json::from_slice(&written).unwrap();
    let manifest = f.root.join("manifests/t/base").join(&hex);
    assert_eq!(
        s["manifest_bytes"],
        std::fs::metadata(&manifest).unwrap().len(),
        "{s}"
    );
    let base = VolumeName::parse("t/base").unwrap();
    let listed = serde_json::to_string(&f.repo().versions(&base).unwrap()).unwrap();

    // Gone: the listing reads the manifest and shows the same.
    std::fs::remove_file(&summary).unwrap();
    assert_eq!(
        serde_json::to_string(&f.repo().versions(&base).unwrap()).unwrap(),
        listed
    );
    let (ok, plan) = f.repair(true, false);
    assert!(ok, "{plan:?}");
    assert!(
        plan.actions
            .iter()
            .any(|a| a.action == "write summary" && a.object.ends_with(&hex)),
        "{plan:?}"
    );
    assert!(!summary.exists(), "a dry run writes nothing");
    let (ok, done) = f.repair(false, false);
    assert!(ok, "{done:?}");
    assert_eq!(std::fs::read(&summary).unwrap(), written);

    // A summary that disagrees with its manifest is written anew.
    let mut wrong = s.clone();
    wrong["stats"]["bytes"] = 1.into();
    std::fs::write(&summary, serde_json::to_vec(&wrong).unwrap()).unwrap();
    let (ok, _) = f.repair(false, false);
    assert!(ok);
    assert_eq!(std::fs::read(&summary).unwrap(), written);

    // A summary whose version is gone is removed by gc once older than the grace period.
    let orphan = f.root.join("summaries/t/base").join("0".repeat(64));
    std::fs::write(&orphan, &written).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&orphan)
        .unwrap()
        .set_modified(old)
        .unwrap();
    f.repo().versions(&base).unwrap();
    let opts = GcOptions {
        dry_run: false,
        wait: true,
        progress: &Quiet,
    };
    let gc = sealvol_gc::collect(&f.repo(), &opts).unwrap();
    assert!(
        gc.notes
            .iter()
            .any(|n| n.contains("removed 1 summary, listing and profile object(s)")),
        "{gc:?}"
    );
    assert!(!orphan.exists());
    assert!(summary.exists());

    // A listing (what mounts read) that is missing or damaged is written again by
    // repair, byte for byte: it is the listing the digest hashes.
    let listing = f.root.join("listings/t/base").join(&hex);
    let good = std::fs::read(&listing).expect("a seal writes the listing");
    std::fs::remove_file(&listing).unwrap();
    let (ok, done) = f.repair(false, false);
    assert!(ok, "{done:?}");
    assert!(
        done.actions.iter().any(|a| a.action == "write listing"),
        "{done:?}"
    );
    assert_eq!(std::fs::read(&listing).unwrap(), good);
    let mut bad = good.clone();
    let n = bad.len();
    bad[n / 2] ^= 1;
    std::fs::write(&listing, &bad).unwrap();
    let (ok, _) = f.repair(false, false);
    assert!(ok);
    assert_eq!(std::fs::read(&listing).unwrap(), good);
    f.verifies();
}

#[test]
fn a_tag_cut_mid_history_is_restored_from_its_history() {
    let f = fixture();
    let v2 = f._tmp.path().join("v2");
    std::fs::create_dir_all(&v2).unwrap();
    std::fs::write(v2.join("a.bin"), b"two").unwrap();
    let prod = Name::parse("tag", "prod").unwrap();
    let base = VolumeName::parse("t/base").unwrap();
    let second = push(
        &f.repo(),
        &v2,
        &base,
        std::slice::from_ref(&prod),
        &PushOptions::new(&Quiet),
    )
    .unwrap()
    .digest;
    f.repo().move_tag(&base, &prod, &f.base, None).unwrap();
    // Three moves: base, second, base. Cut inside the third.
    let tag = f.root.join("tags/t/base/prod");
    let text = std::fs::read_to_string(&tag).unwrap();
    let third = text.rfind("\"from\"").unwrap();
    std::fs::write(&tag, &text[..third + 10]).unwrap();
    let (ok, r) = f.repair(false, false);
    assert!(ok, "{r:?}");
    assert_eq!(
        f.resolve("t/base:prod").unwrap(),
        second,
        "the newest complete move"
    );
    let tags = f.repo().tags(&base).unwrap();
    assert_eq!(
        tags[0].history.len(),
        3,
        "two salvaged moves and the repair's"
    );
    f.verifies();
}

#[test]
fn a_tag_pointing_at_a_missing_digest_is_moved_back_by_repair() {
    let f = fixture();
    let tag = f.root.join("tags/t/base/prod");
    let text = std::fs::read_to_string(&tag).unwrap();
    let bogus = format!("b3:{}", "ab".repeat(32));
    let edited = text.replacen(
        &format!("\"digest\": \"{}\"", f.base),
        &format!("\"digest\": \"{bogus}\""),
        1,
    );
    assert_ne!(edited, text);
    std::fs::write(&tag, edited).unwrap();
    let v = f.problems();
    assert!(v.problems[0].problem.contains("not a version"), "{v:?}");
    assert!(
        v.damaged_versions.iter().all(|a| a.version.is_none()),
        "no version is broken: {v:?}"
    );
    let e = f.resolve("t/base:prod").unwrap_err();
    assert!(e.to_string().contains("not a version"), "{e}");
    f.others_still_work();
    let (ok, r) = f.repair(false, false);
    assert!(ok, "{r:?}");
    assert_eq!(f.resolve("t/base:prod").unwrap(), f.base);
    f.verifies();
}

#[test]
fn a_stray_file_is_named_and_quarantined() {
    let f = fixture();
    let stray = f.root.join("packs/zz/not-a-pack");
    std::fs::create_dir_all(stray.parent().unwrap()).unwrap();
    std::fs::write(&stray, b"junk").unwrap();
    assert_eq!(f.problems().problems[0].object, "packs/zz/not-a-pack");
    let (ok, _) = f.repair(false, false);
    assert!(ok);
    assert!(!stray.exists());
    f.verifies();
}

/// Writes a second pack holding every chunk of `pack` (plus one more, so its name
/// differs), as two pushes racing each other leave the same chunks in two packs.
fn duplicate_pack(repo: &Path, pack: &Path) {
    let id = pack.file_name().unwrap().to_str().unwrap();
    let entries =
        objects::decode_index("i", &std::fs::read(repo.join("index").join(id)).unwrap()).unwrap();
    let src = std::fs::read(pack).unwrap();
    let mut out = objects::PACK_MAGIC.to_vec();
    let mut new = Vec::new();
    let extra = b"one more chunk".to_vec();
    let mut all: Vec<(PackEntry, Vec<u8>)> = entries
        .iter()
        .map(|e| {
            let at = e.offset as usize;
            (*e, src[at..at + e.stored_len as usize].to_vec())
        })
        .collect();
    all.push((
        PackEntry {
            hash: Hash::of(&extra),
            offset: 0,
            stored_len: extra.len() as u32,
            raw_len: extra.len() as u32,
            flags: 0,
        },
        extra.clone(),
    ));
    for (e, bytes) in all {
        new.push(PackEntry {
            offset: out.len() as u64,
            ..e
        });
        out.extend_from_slice(&bytes);
    }
    out.extend_from_slice(&objects::encode_trailer(&new));
    let new_id = objects::pack_id(&new).hex();
    let packs = repo.join("packs").join(&new_id[..2]);
    std::fs::create_dir_all(&packs).unwrap();
    std::fs::write(packs.join(&new_id), &out).unwrap();
    std::fs::write(
        repo.join("index").join(&new_id),
        objects::encode_index(&new),
    )
    .unwrap();
}

impl Fixture {
    fn pack_id(&self) -> String {
        self.base_pack
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    }

    /// The files of each damaged version, as a quick verify names them.
    fn damaged(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        self.problems()
            .damaged_versions
            .into_iter()
            .filter_map(|a| Some((a.version?, a.files)))
            .collect()
    }

    /// A pull of `t/base` to its digest.
    fn base_pulls(&self) {
        let out = self._tmp.path().join("pulled-base");
        let _ = std::fs::remove_dir_all(&out);
        let tiers = Tiers::new(std::sync::Arc::new(self.repo()), None);
        let base = VolumeName::parse("t/base").unwrap();
        pull(&tiers, &base, &self.base, &out, false, &Quiet).unwrap();
        assert_eq!(sealvol_core::walk::digest_dir(&out).unwrap(), self.base);
    }
}

#[test]
fn a_deleted_pack_with_a_copy_elsewhere_is_relinked_by_a_push() {
    let f = fixture();
    duplicate_pack(&f.root, &f.base_pack);
    let id = f.pack_id();
    std::fs::remove_file(&f.base_pack).unwrap();
    std::fs::remove_file(f.root.join("index").join(&id)).unwrap();
    let pinned = format!("vol:t/base@{}", f.base);
    assert_eq!(
        f.damaged().get(&pinned).map(Vec::len),
        Some(4),
        "{:?}",
        f.damaged()
    );
    // A push reuses the healthy copies: it writes nothing, yet the version reads back.
    let base = VolumeName::parse("t/base").unwrap();
    let push = push(
        &f.repo(),
        &f.base_src,
        &base,
        &[],
        &PushOptions::new(&Quiet),
    )
    .unwrap();
    assert_eq!(push.stats.new_chunks, 0, "{push:?}");
    assert_eq!(push.files_healed, 4, "{push:?}");
    assert!(f.damaged().is_empty(), "{:?}", f.damaged());
    f.base_pulls();
}

#[test]
fn repair_relinks_to_a_healthy_copy_without_any_source() {
    let f = fixture();
    duplicate_pack(&f.root, &f.base_pack);
    let id = f.pack_id();
    std::fs::remove_file(&f.base_pack).unwrap();
    let (ok, r) = f.repair(false, false);
    assert!(ok, "{r:?}");
    assert_eq!(
        r.actions.iter().filter(|a| a.action == "relink").count(),
        4,
        "{r:?}"
    );
    assert!(
        r.actions
            .iter()
            .any(|a| a.action == "quarantine" && a.object.ends_with(&id)),
        "the index of the missing pack is quarantined: {r:?}"
    );
    f.verifies();
    f.others_still_work();
    f.base_pulls();
}
