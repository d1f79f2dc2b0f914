//! A record that cannot be read stops nothing but what it is about: a damaged trash
//! record keeps its version (hidden, whole) while garbage collection goes on for the
//! rest; verify names it, and repair writes it anew.

use sealvol_core::Repository;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::{Ref, VolumeName};
use sealvol_core::testutil::noise;

#[test]
fn a_damaged_trash_record_keeps_its_version_and_stops_no_collection() {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("repo");
    let repo = Repository::open_local(&path, true, false).unwrap();
    let src = t.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("w.bin"), noise(1 << 20, 5)).unwrap();
    let opts = PushOptions::new(&Quiet);
    let vol = VolumeName::parse("team-a/model").unwrap();
    let d = push(&repo, &src, &vol, &[], &opts).unwrap().digest;
    repo.delete_version(&Ref::pinned(vol.clone(), d), false)
        .unwrap();
    let record = path.join("trash/team-a/model").join(d.hex());
    std::fs::write(&record, b"garbage").unwrap();

    let gc = |repo: &Repository| {
        repo.collect(
            &sealvol_core::gc::GcOptions {
                dry_run: false,
                wait: false,
                progress: &Quiet,
            },
            &sealvol_gc::Here,
        )
    };
    let report = gc(&repo).unwrap();
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("is damaged") && n.contains("sealvol repair")),
        "{:?}",
        report.notes
    );
    assert!(report.purged.is_empty());
    // Hidden still, and whole: its manifest is kept.
    assert!(repo.resolve(&Ref::pinned(vol.clone(), d)).is_err());
    assert!(repo.manifest(&vol, &d).is_ok());

    let found = sealvol_core::verify::survey_all(
        &repo,
        sealvol_core::verify::ReadData::None,
        None,
        false,
        &Quiet,
    )
    .unwrap()
    .report();
    let key = format!("trash/team-a/model/{}", d.hex());
    assert!(
        found.problems.iter().any(|p| p.object == key),
        "{:?}",
        found.problems
    );

    let mut repo = Repository::open_local(&path, false, false).unwrap();
    let repaired = sealvol_core::repair::repair(
        &mut repo,
        &sealvol_core::repair::RepairOptions {
            dry_run: false,
            read_data: false,
            from: None,
            progress: &Quiet,
        },
    )
    .unwrap();
    assert!(
        repaired
            .actions
            .iter()
            .any(|a| a.action == "rewrite trash record"),
        "{:?}",
        repaired.actions
    );
    let restored = repo.restore_version(&Ref::pinned(vol.clone(), d)).unwrap();
    assert_eq!(restored.digest, d.to_string());
    assert!(
        gc(&repo)
            .unwrap()
            .notes
            .iter()
            .all(|n| !n.contains("is damaged"))
    );
}
