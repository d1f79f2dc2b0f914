//! The registry through the engine API: a tag move guarded by what a person saw (the
//! console's confirmation) must fail if the tag moved meanwhile, and history is kept.

use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::{Name, Ref, VolumeName};
use sealvol_core::{ErrorKind, Repository};

fn version(repo: &Repository, dir: &std::path::Path, content: &[u8]) -> sealvol_core::Digest {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("f"), content).unwrap();
    let vol = VolumeName::parse("ns/vol").unwrap();
    let opts = PushOptions::new(&Quiet);
    push(repo, dir, &vol, &[], &opts).unwrap().digest
}

#[test]
fn guarded_tag_moves_fail_if_the_tag_moved_meanwhile() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
    let a = version(&repo, &tmp.path().join("a"), b"a");
    let b = version(&repo, &tmp.path().join("b"), b"b");
    let c = version(&repo, &tmp.path().join("c"), b"c");
    let vol = VolumeName::parse("ns/vol").unwrap();
    let prod = Name::parse("tag", "prod").unwrap();

    // Create only if absent.
    repo.move_tag(&vol, &prod, &a, Some(None)).unwrap();
    let e = repo.move_tag(&vol, &prod, &b, Some(None)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Race);

    // A person saw prod at `a` and confirmed a -> b; someone else moves it to c first.
    repo.move_tag(&vol, &prod, &c, None).unwrap();
    let e = repo.move_tag(&vol, &prod, &b, Some(Some(a))).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Race);
    assert!(e.message().contains("now points at"), "{e}");
    assert_eq!(
        repo.resolve(&Ref::parse("ns/vol:prod").unwrap()).unwrap(),
        c
    );

    // Confirmed against the right state, it goes through and is recorded.
    let t = repo.move_tag(&vol, &prod, &b, Some(Some(c))).unwrap();
    let moves: Vec<(Option<String>, String)> = t
        .file
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
        ]
    );
    // A tag can only point at a version that exists.
    let missing = sealvol_core::Digest([7; 32]);
    assert_eq!(
        repo.move_tag(&vol, &prod, &missing, None)
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn concurrent_unguarded_moves_all_land_in_the_history() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
    let digests: Vec<_> = (0..4)
        .map(|i| version(&repo, &tmp.path().join(format!("v{i}")), &[i]))
        .collect();
    let vol = VolumeName::parse("ns/vol").unwrap();
    let tag = Name::parse("tag", "t").unwrap();
    std::thread::scope(|s| {
        for d in &digests {
            let (repo, vol, tag) = (&repo, &vol, &tag);
            s.spawn(move || {
                for _ in 0..5 {
                    repo.move_tag(vol, tag, d, None).unwrap();
                }
            });
        }
    });
    let t = repo.tag(&vol, &tag).unwrap().unwrap();
    // Every recorded move starts where the previous one ended: no lost update.
    for pair in t.history.windows(2) {
        assert_eq!(pair[1].from.as_deref(), Some(pair[0].to.as_str()));
    }
    assert_eq!(t.history.last().unwrap().to, t.digest);
}
