//! Damage through the engine, on the in-memory store: for each kind, verify names
//! exactly the versions and files it breaks, computed from the objects themselves; a
//! push of the same bytes or `repair` heals it; what was not damaged still reads back
//! byte for byte. The CLI's report of the same (text, JSON, exit codes, hints), repair
//! killed mid-way and repair beside running pushes are tested through the binary
//! (`tests/damage.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sealvol_core::digest::{Entry, Hash};
use sealvol_core::objects::{PackEntry, PackId};
use sealvol_core::progress::Quiet;
use sealvol_core::pull::pull;
use sealvol_core::push::{PushOptions, PushReport, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::{Name, Ref, VolumeName};
use sealvol_core::repair::{RepairOptions, RepairReport, repair};
use sealvol_core::repo::Kind;
use sealvol_core::store::{MemoryStore, ObjectStore};
use sealvol_core::testutil::{folder, noise};
use sealvol_core::verify::{ReadData, VerifyReport, survey_all};
use sealvol_core::{Digest, Repository};

/// Two volumes: `t/base` (four files, one pack, tag prod) and `t/other` (tag prod).
struct Fixture {
    repo: Repository,
    mem: Arc<MemoryStore>,
    base_src: PathBuf,
    base: Digest,
    other_src: PathBuf,
    other: Digest,
    /// The pack `t/base` was written to.
    base_pack: PackId,
    tmp: tempfile::TempDir,
}

fn volume(name: &str) -> VolumeName {
    VolumeName::parse(name).unwrap()
}

fn packs(mem: &MemoryStore) -> BTreeSet<String> {
    mem.keys()
        .into_iter()
        .filter(|k| k.starts_with("packs/"))
        .collect()
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let mem = Arc::new(MemoryStore::new().unwrap());
    let repo = Repository::open(Box::new(Arc::clone(&mem)), "memory".into(), true).unwrap();
    let prod = [Name::parse("tag", "prod").unwrap()];
    let other_src = folder(
        tmp.path(),
        "other-src",
        &[
            ("o.bin", noise(1 << 20, 70)),
            ("p.txt", b"other\n".to_vec()),
        ],
    );
    let quiet = PushOptions::new(&Quiet);
    let other = push(&repo, &other_src, &volume("t/other"), &prod, &quiet)
        .unwrap()
        .digest;
    let before = packs(&mem);
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
    let base = push(&repo, &base_src, &volume("t/base"), &prod, &quiet)
        .unwrap()
        .digest;
    let new: Vec<String> = packs(&mem).difference(&before).cloned().collect();
    assert_eq!(new.len(), 1, "t/base went into one pack: {new:?}");
    let hex = new[0].rsplit('/').next().unwrap();
    Fixture {
        base_pack: Hash::parse_hex(hex).unwrap(),
        repo,
        mem,
        base_src,
        base,
        other_src,
        other,
        tmp,
    }
}

/// Version → files verify says cannot be read back (`*` for the whole version).
fn damaged(report: &VerifyReport) -> BTreeMap<String, BTreeSet<String>> {
    report
        .damaged_versions
        .iter()
        .map(|a| {
            let files = match a.whole {
                true => BTreeSet::from(["*".to_string()]),
                false => a.files.iter().cloned().collect(),
            };
            (a.version.clone().unwrap_or_default(), files)
        })
        .collect()
}

fn pinned(vol: &str, d: &Digest) -> String {
    format!("vol:{vol}@{d}")
}

impl Fixture {
    fn pack_key(&self) -> String {
        Kind::Pack.name(&self.base_pack)
    }

    fn verify(&self) -> VerifyReport {
        survey_all(&self.repo, ReadData::All, None, false, &Quiet)
            .unwrap()
            .report()
    }

    fn assert_verifies(&self) {
        let r = self.verify();
        assert!(
            r.problems.is_empty() && r.damaged_versions.is_empty(),
            "{:?}",
            r.problems
        );
    }

    fn push_base(&self) -> PushReport {
        let prod = [Name::parse("tag", "prod").unwrap()];
        push(
            &self.repo,
            &self.base_src,
            &volume("t/base"),
            &prod,
            &PushOptions::new(&Quiet),
        )
        .unwrap()
    }

    fn repair(&mut self) -> RepairReport {
        let opts = RepairOptions {
            dry_run: false,
            read_data: true,
            from: None,
            progress: &Quiet,
        };
        repair(&mut self.repo, &opts).unwrap()
    }

    /// A second handle on the same objects, for a reader (`Tiers` owns its repository).
    fn reader(&self) -> Tiers {
        let r = Repository::open(Box::new(Arc::clone(&self.mem)), "memory".into(), false).unwrap();
        Tiers::new(Arc::new(r), None)
    }

    /// Pulls `d` of `vol` and compares it with `src`, byte for byte.
    fn pulls(&self, vol: &str, d: &Digest, src: &Path) {
        let out = self
            .tmp
            .path()
            .join(format!("pull-{}", Hash::of(d.to_string().as_bytes()).hex()));
        let _ = std::fs::remove_dir_all(&out);
        pull(&self.reader(), &volume(vol), d, &out, false, &Quiet).unwrap();
        for entry in std::fs::read_dir(src).unwrap() {
            let name = entry.unwrap().file_name();
            assert_eq!(
                std::fs::read(out.join(&name)).unwrap(),
                std::fs::read(src.join(&name)).unwrap(),
                "{name:?}"
            );
        }
    }

    /// Everything not damaged still lists and reads back.
    fn others_still_work(&self) {
        let vols = self.repo.volumes(None).unwrap();
        assert_eq!(vols.len(), 2, "{vols:?}");
        self.repo.versions(&volume("t/other")).unwrap();
        self.pulls("t/other", &self.other, &self.other_src);
        let prod = Ref::parse("t/other:prod").unwrap();
        assert_eq!(self.repo.resolve(&prod).unwrap(), self.other);
    }

    /// The files of `t/base` whose chunk lists name a copy in the base pack for which
    /// `broken` holds: what verify must report, from the objects themselves.
    fn expected(&self, broken: impl Fn(&PackEntry) -> bool) -> BTreeSet<String> {
        let m = self.repo.manifest(&volume("t/base"), &self.base).unwrap();
        let small = m.small_files();
        let mut out = BTreeSet::new();
        for e in &m.entries {
            let Entry::File {
                path, hash, size, ..
            } = e
            else {
                continue;
            };
            let obj = self.repo.file_list(hash, *size, &small).unwrap();
            if obj
                .chunks
                .iter()
                .any(|c| obj.packs[c.pack as usize] == self.base_pack && broken(&c.entry))
            {
                out.insert(path.clone());
            }
        }
        out
    }

    fn base_entries(&self) -> Vec<PackEntry> {
        self.repo.index(&self.base_pack).unwrap().unwrap()
    }

    fn pack_bytes(&self) -> Vec<u8> {
        self.mem.get(&self.pack_key()).unwrap().unwrap()
    }
}

#[test]
fn a_flipped_byte_breaks_one_file_a_push_heals_it_and_repair_keeps_every_other_chunk() {
    let mut f = fixture();
    let entries = f.base_entries();
    let victim = entries[entries.len() / 2];
    let mut bytes = f.pack_bytes();
    bytes[(victim.offset + 10) as usize] ^= 0x55;
    f.mem.overwrite(&f.pack_key(), &bytes);
    let want = f.expected(|e| *e == victim);
    assert_eq!(want.len(), 1, "one chunk belongs to one file here");

    let report = f.verify();
    assert_eq!(
        damaged(&report),
        BTreeMap::from([(pinned("t/base", &f.base), want)])
    );
    let p = &report.problems[0];
    assert_eq!(p.object, f.pack_key());
    assert!(p.problem.contains(&victim.hash.hex()), "{p:?}");
    assert_eq!(p.affects[0].tags, vec!["t/base:prod".to_string()]);
    f.others_still_work();

    // A push of the same bytes writes a fresh copy of that chunk, and only that one.
    let pushed = f.push_base();
    assert_eq!(pushed.stats.new_chunks, 1, "{:?}", pushed.stats);
    assert_eq!(pushed.files_healed, 1);
    f.pulls("t/base", &f.base, &f.base_src.clone());

    // The damaged pack still holds the only copy of the other chunks: repair copies
    // them out, then quarantines it.
    f.repair();
    f.assert_verifies();
    assert!(
        f.mem.get(&f.pack_key()).unwrap().is_none(),
        "the pack is gone"
    );
    assert!(
        f.mem.keys().iter().any(|k| k.starts_with("quarantine/")),
        "it was kept in quarantine"
    );
    f.pulls("t/base", &f.base, &f.base_src.clone());
    f.others_still_work();
}

#[test]
fn a_truncated_pack_breaks_only_the_files_past_the_cut_and_a_push_and_repair_heal_it() {
    let mut f = fixture();
    let bytes = f.pack_bytes();
    // Cut inside the last chunk: the objects say which file that breaks.
    let last = f
        .base_entries()
        .into_iter()
        .max_by_key(|e| e.offset)
        .unwrap();
    let cut = last.offset + 1;
    f.mem.overwrite(&f.pack_key(), &bytes[..cut as usize]);
    let want = f.expected(|e| e.offset + e.stored_len as u64 > cut);
    assert_eq!(want.len(), 1, "the cut breaks one file: {want:?}");
    assert_eq!(
        damaged(&f.verify()),
        BTreeMap::from([(pinned("t/base", &f.base), want.clone())])
    );
    // Structure alone shows it: no chunk data needs reading.
    let structure = survey_all(&f.repo, ReadData::None, None, false, &Quiet)
        .unwrap()
        .report();
    assert_eq!(structure.bytes, 0);
    assert_eq!(
        damaged(&structure),
        BTreeMap::from([(pinned("t/base", &f.base), want)])
    );
    f.others_still_work();
    f.push_base();
    f.repair();
    f.assert_verifies();
    f.pulls("t/base", &f.base, &f.base_src.clone());
    f.others_still_work();
}

#[test]
fn a_deleted_pack_breaks_every_file_in_it_and_a_push_writes_them_all_again() {
    let f = fixture();
    f.mem.delete(&f.pack_key()).unwrap();
    f.mem.delete(&Kind::Index.name(&f.base_pack)).unwrap();
    let report = f.verify();
    let all = ["a.bin", "b.bin", "c.txt", "d.json"].map(String::from);
    assert_eq!(
        damaged(&report),
        BTreeMap::from([(pinned("t/base", &f.base), BTreeSet::from(all))])
    );
    assert!(
        report.problems[0].problem.contains("missing"),
        "{:?}",
        report.problems
    );
    f.others_still_work();
    let pushed = f.push_base();
    assert_eq!(pushed.chunks_reused, 0, "nothing to reuse");
    // The same chunks in the same order make the same pack, under the same name, so
    // the version's lists and small packs hold again.
    assert_eq!(pushed.stats.new_bytes, pushed.stats.bytes);
    f.assert_verifies();
    f.pulls("t/base", &f.base, &f.base_src.clone());
}

#[test]
fn a_deleted_index_breaks_nothing_and_repair_writes_it_again() {
    let mut f = fixture();
    let key = Kind::Index.name(&f.base_pack);
    let before = f.mem.get(&key).unwrap().unwrap();
    f.mem.delete(&key).unwrap();
    assert!(damaged(&f.verify()).is_empty());
    f.pulls("t/base", &f.base, &f.base_src.clone());
    f.repair();
    assert_eq!(f.mem.get(&key).unwrap().unwrap(), before);
    f.assert_verifies();
}

#[test]
fn a_cut_manifest_breaks_its_version_alone_and_repair_quarantines_it() {
    let mut f = fixture();
    let key = f
        .mem
        .keys()
        .into_iter()
        .find(|k| k.starts_with("manifests/t/base/"))
        .unwrap();
    let bytes = f.mem.get(&key).unwrap().unwrap();
    f.mem.overwrite(&key, &bytes[..bytes.len() / 2]);
    assert_eq!(
        damaged(&f.verify()),
        BTreeMap::from([(pinned("t/base", &f.base), BTreeSet::from(["*".to_string()]))])
    );
    f.others_still_work();
    let report = f.repair();
    assert!(
        report
            .actions
            .iter()
            .any(|a| a.action == "quarantine" && a.object == key),
        "{:?}",
        report.actions
    );
    assert!(f.mem.get(&key).unwrap().is_none());
    // A push of the same folder seals the same digest again.
    assert_eq!(f.push_base().digest, f.base);
    f.pulls("t/base", &f.base, &f.base_src.clone());
}
