//! The engine on a store that misbehaves on cue (`MemoryStore` under `Faulty`): tag
//! moves that lose their race, uploads that fail or whose answer is lost, reads cut
//! short, garbage collection on the store's own clock. Each interleaving is chosen by
//! a gate the test opens, never hoped for, so these hold on a busy machine.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::pull::pull;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::{Name, Ref, VolumeName};
use sealvol_core::store::faults::{Call, Fault, When};
use sealvol_core::store::{Faulty, MemoryStore, ObjectStore};
use sealvol_core::testutil::{folder, noise};
use sealvol_core::{Digest, ErrorKind, Repository};

/// A repository over a faulty memory store, and a second one over the same objects
/// that the faults do not reach: another writer.
struct Setup {
    mem: Arc<MemoryStore>,
    faulty: Arc<Faulty<Arc<MemoryStore>>>,
    repo: Repository,
    other: Repository,
    tmp: tempfile::TempDir,
}

fn setup() -> Setup {
    let mem = Arc::new(MemoryStore::new().unwrap());
    let faulty = Arc::new(Faulty::new(Arc::clone(&mem)));
    let repo = Repository::open(Box::new(Arc::clone(&faulty)), "memory".into(), true).unwrap();
    let other = Repository::open(Box::new(Arc::clone(&mem)), "memory".into(), false).unwrap();
    Setup {
        mem,
        faulty,
        repo,
        other,
        tmp: tempfile::tempdir().unwrap(),
    }
}

fn vol() -> VolumeName {
    VolumeName::parse("ns/vol").unwrap()
}

fn push_dir(repo: &Repository, dir: &Path) -> sealvol_core::Result<Digest> {
    let opts = PushOptions::new(&Quiet);
    push(repo, dir, &vol(), &[], &opts).map(|r| r.digest)
}

fn prod() -> Name {
    Name::parse("tag", "prod").unwrap()
}

#[test]
fn a_tag_move_that_loses_its_race_reads_again_and_keeps_both_moves() {
    let s = setup();
    let a = push_dir(
        &s.other,
        &folder(s.tmp.path(), "a", &[("f", b"a".to_vec())]),
    )
    .unwrap();
    let b = push_dir(
        &s.other,
        &folder(s.tmp.path(), "b", &[("f", b"b".to_vec())]),
    )
    .unwrap();
    let c = push_dir(
        &s.other,
        &folder(s.tmp.path(), "c", &[("f", b"c".to_vec())]),
    )
    .unwrap();
    s.other.move_tag(&vol(), &prod(), &a, None).unwrap();

    // Our move has read prod at a and waits at its write; the other writer moves it
    // to c; then ours goes on, finds it changed, reads again and lands.
    let gate = s.faulty.gate(Call::PutIfMatch, "tags/", When::Nth(1));
    std::thread::scope(|t| {
        let mover = t.spawn(|| s.repo.move_tag(&vol(), &prod(), &b, None));
        gate.wait_for(1);
        s.other.move_tag(&vol(), &prod(), &c, None).unwrap();
        gate.open();
        mover.join().unwrap().unwrap();
    });
    let tag = s.other.tag(&vol(), &prod()).unwrap().unwrap();
    let moves: Vec<(Option<String>, String)> = tag
        .history
        .iter()
        .map(|m| (m.from.clone(), m.to.clone()))
        .collect();
    assert_eq!(
        moves,
        vec![
            (None, a.to_string()),
            (Some(a.to_string()), c.to_string()),
            (Some(c.to_string()), b.to_string()),
        ],
        "no move is lost"
    );
    assert!(s.faulty.calls(Call::PutIfMatch) >= 2, "it wrote again");

    // A move confirmed against what a person saw (b) loses to a move made meanwhile,
    // and says where the tag is now.
    let gate = s.faulty.gate(Call::PutIfMatch, "tags/", When::Nth(1));
    std::thread::scope(|t| {
        let mover = t.spawn(|| s.repo.move_tag(&vol(), &prod(), &a, Some(Some(b))));
        gate.wait_for(1);
        s.other.move_tag(&vol(), &prod(), &c, None).unwrap();
        gate.open();
        let e = mover.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Race);
        assert!(e.message().contains("now points at"), "{e}");
    });
    let now = s
        .other
        .resolve(&Ref::parse("ns/vol:prod").unwrap())
        .unwrap();
    assert_eq!(now, c);
}

#[test]
fn a_push_whose_upload_fails_seals_nothing_leaves_no_staging_and_the_next_push_finishes() {
    let s = setup();
    let dir = folder(
        s.tmp.path(),
        "src",
        &[("a.bin", noise(3 << 20, 1)), ("b.bin", noise(1 << 20, 2))],
    );
    s.faulty.inject(
        Call::PutFile,
        "packs/",
        When::Nth(1),
        Fault::Fail(ErrorKind::Unavailable),
    );
    let e = push_dir(&s.repo, &dir).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unavailable, "{e}");
    assert!(
        !s.mem.keys().iter().any(|k| k.starts_with("manifests/")),
        "no version sealed: {:?}",
        s.mem.keys()
    );
    let staging = s.mem.staging_path().unwrap();
    let left: Vec<_> = std::fs::read_dir(staging.parent().unwrap())
        .unwrap()
        .collect();
    assert!(left.is_empty(), "staging left behind: {left:?}");

    // The store answers again: the same push seals the version a clean store would.
    let digest = push_dir(&s.repo, &dir).unwrap();
    let clean = setup();
    assert_eq!(push_dir(&clean.repo, &dir).unwrap(), digest);
    let out = s.tmp.path().join("out");
    let tiers = Tiers::new(Arc::new(s.other), None);
    pull(&tiers, &vol(), &digest, &out, false, &Quiet).unwrap();
    assert_eq!(std::fs::read(out.join("a.bin")).unwrap(), noise(3 << 20, 1));
}

#[test]
fn a_seal_whose_answer_is_lost_is_found_sealed_by_the_next_push() {
    let s = setup();
    let dir = folder(s.tmp.path(), "src", &[("a.bin", noise(1 << 20, 3))]);
    // The manifest lands, but the answer to its write is lost.
    s.faulty.inject(
        Call::PutIfAbsent,
        "manifests/",
        When::Nth(1),
        Fault::FailAfter(ErrorKind::Unavailable),
    );
    assert!(push_dir(&s.repo, &dir).is_err());
    let again = push_dir(&s.repo, &dir).unwrap();
    assert_eq!(
        s.other.versions(&vol()).unwrap().len(),
        1,
        "one version, not two"
    );
    assert_eq!(
        s.other.versions(&vol()).unwrap()[0].digest,
        again.to_string()
    );
}

#[test]
fn a_read_cut_short_is_refused_and_never_written_out() {
    let s = setup();
    let bytes = noise(2 << 20, 4);
    let dir = folder(s.tmp.path(), "src", &[("w.bin", bytes.clone())]);
    let digest = push_dir(&s.other, &dir).unwrap();
    // Every ranged read of a pack comes back a byte short.
    let size = s
        .mem
        .keys()
        .iter()
        .filter(|k| k.starts_with("packs/"))
        .count();
    assert!(size >= 1);
    s.faulty
        .inject(Call::GetRange, "packs/", When::Every, Fault::CutShort(1));
    let out = s.tmp.path().join("out");
    let tiers = Tiers::new(Arc::new(s.repo), None);
    let e = pull(&tiers, &vol(), &digest, &out, false, &Quiet).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::Corrupt | ErrorKind::Unavailable | ErrorKind::Io
        ),
        "{e}"
    );
    assert!(
        std::fs::read(out.join("w.bin")).is_err(),
        "no file with bytes that failed their check"
    );
}

#[test]
fn gc_waits_out_the_grace_period_on_the_store_s_clock_and_keeps_every_version_whole() {
    let s = setup();
    let kept = folder(s.tmp.path(), "kept", &[("a.bin", noise(1 << 20, 5))]);
    let lost = folder(s.tmp.path(), "lost", &[("a.bin", noise(1 << 20, 6))]);
    let v = push_dir(&s.repo, &kept).unwrap();
    // A push that dies before its seal leaves a pack and chunk list no version names.
    s.faulty.inject(
        Call::PutIfAbsent,
        "manifests/",
        When::Nth(1),
        Fault::Fail(ErrorKind::Unavailable),
    );
    assert!(push_dir(&s.repo, &lost).is_err());
    s.faulty.heal();
    let opts = GcOptions {
        dry_run: false,
        wait: false,
        progress: &Quiet,
    };
    let grace = s.repo.config().gc_grace;
    // Within the grace period it may still be a running push's: left alone.
    let young = s.repo.collect(&opts, &sealvol_gc::Here).unwrap();
    assert!(young.young_packs >= 1, "{young:?}");
    assert_eq!(young.condemned_packs, 0, "{young:?}");
    // Past it, by the store's clock (no sleep): condemned, then swept a period later.
    s.mem.advance(grace + Duration::from_secs(1));
    let condemned = s.repo.collect(&opts, &sealvol_gc::Here).unwrap();
    assert!(condemned.condemned_packs >= 1, "{condemned:?}");
    s.mem.advance(grace + Duration::from_secs(1));
    let swept = s.repo.collect(&opts, &sealvol_gc::Here).unwrap();
    assert!(swept.deleted_packs >= 1, "{swept:?}");
    // The version is whole.
    let out = s.tmp.path().join("out");
    let tiers = Tiers::new(Arc::new(s.other), None);
    pull(&tiers, &vol(), &v, &out, false, &Quiet).unwrap();
    assert_eq!(std::fs::read(out.join("a.bin")).unwrap(), noise(1 << 20, 5));
}
