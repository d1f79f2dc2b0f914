//! The trash through the engine, on the in-memory store: delete and restore give back
//! the same version, tags protect a version, a digest prefix must name one version, the
//! window ends, a purge is final, and untag is a move that can be undone. The CLI's
//! wording of the same is tested through the binary (`tests/trash.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sealvol_core::digest::{Entry, Hash, version_digest};
use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::{Name, Ref, VolumeName};
use sealvol_core::store::MemoryStore;
use sealvol_core::testutil::{folder, noise};
use sealvol_core::{Digest, ErrorKind, Repository};

fn vol() -> VolumeName {
    VolumeName::parse("t/v").unwrap()
}

fn tag(name: &str) -> Name {
    Name::parse("tag", name).unwrap()
}

/// A repository on a memory store, and the store, to open it again or list its keys.
fn repository() -> (Repository, Arc<MemoryStore>) {
    let mem = Arc::new(MemoryStore::new().unwrap());
    let repo = Repository::open(Box::new(Arc::clone(&mem)), "memory".into(), true).unwrap();
    (repo, mem)
}

fn push_as(repo: &Repository, dir: &Path, tags: &[Name]) -> Digest {
    push(repo, dir, &vol(), tags, &PushOptions::new(&Quiet))
        .unwrap()
        .digest
}

/// `t/v@<the first n hex digits of d>`.
fn prefix(d: &Digest, n: usize) -> Ref {
    let hex = d.to_string();
    let hex = hex.strip_prefix("b3:").unwrap_or(&hex).to_string();
    Ref::parse(&format!("t/v@{}", &hex[..n])).unwrap()
}

fn pinned(d: &Digest) -> Ref {
    Ref::parse(&format!("t/v@{d}")).unwrap()
}

/// Two versions of `t/v`: `old` (tag prod) and `new` (tag canary).
struct Two {
    repo: Repository,
    mem: Arc<MemoryStore>,
    old_src: PathBuf,
    old: Digest,
    new: Digest,
    tmp: tempfile::TempDir,
}

fn two() -> Two {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let old_src = folder(
        tmp.path(),
        "old",
        &[("w.bin", noise(2 << 20, 1)), ("c.json", b"{}\n".to_vec())],
    );
    let new_src = folder(
        tmp.path(),
        "new",
        &[("w.bin", noise(2 << 20, 2)), ("c.json", b"{}\n".to_vec())],
    );
    let old = push_as(&repo, &old_src, &[tag("prod")]);
    let new = push_as(&repo, &new_src, &[tag("canary")]);
    Two {
        repo,
        mem,
        old_src,
        old,
        new,
        tmp,
    }
}

fn live(repo: &Repository) -> Vec<String> {
    repo.versions(&vol())
        .unwrap()
        .into_iter()
        .map(|v| v.digest)
        .collect()
}

#[test]
fn a_restore_gives_back_the_version_as_sealed_and_its_bytes() {
    let t = two();
    let repo = &t.repo;
    let before = serde_json::to_value(repo.manifest(&vol(), &t.old).unwrap()).unwrap();

    let deleted = repo.delete_version(&pinned(&t.old), true).unwrap();
    assert_eq!(deleted.untagged, vec!["prod".to_string()]);
    assert!(!live(repo).contains(&t.old.to_string()));
    let e = repo.resolve(&pinned(&t.old)).unwrap_err();
    assert!(e.message().contains("trash"), "{e}");
    let trash = repo.trash(Some(&vol())).unwrap();
    assert_eq!(trash.len(), 1);
    assert_eq!(trash[0].tags, vec!["prod".to_string()]);

    // A prefix of 12 hex digits names it in the trash.
    let restored = repo.restore_version(&prefix(&t.old, 12)).unwrap();
    assert_eq!(restored.digest, t.old.to_string());
    assert_eq!(restored.tags, vec!["prod".to_string()]);
    assert!(repo.trash(None).unwrap().is_empty());
    let after = serde_json::to_value(repo.manifest(&vol(), &t.old).unwrap()).unwrap();
    assert_eq!(after, before);

    let target = t.tmp.path().join("pulled");
    // `Tiers` owns its repository: a second handle on the same objects.
    let reader = Repository::open(Box::new(Arc::clone(&t.mem)), "memory".into(), false).unwrap();
    let tiers = Tiers::new(Arc::new(reader), None);
    sealvol_core::pull::pull(&tiers, &vol(), &t.old, &target, false, &Quiet).unwrap();
    for f in ["w.bin", "c.json"] {
        assert_eq!(
            std::fs::read(target.join(f)).unwrap(),
            std::fs::read(t.old_src.join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn a_tagged_version_is_kept_until_untagged_and_the_removal_is_in_the_history() {
    let t = two();
    let repo = &t.repo;
    let e = repo.delete_version(&pinned(&t.old), false).unwrap_err();
    assert!(
        e.message().contains("prod") && e.hint_text().is_some_and(|h| h.contains("--untag")),
        "{e}"
    );
    assert!(live(repo).contains(&t.old.to_string()));
    // The same through the tag itself.
    let canary = Ref::parse("t/v:canary").unwrap();
    assert!(repo.delete_version(&canary, false).is_err());
    repo.delete_version(&canary, true).unwrap();
    assert!(repo.tags(&vol()).unwrap().iter().all(|f| f.tag != "canary"));
    let tags = repo.tags_with_removed(&vol()).unwrap();
    let c = tags.iter().find(|f| f.tag == "canary").unwrap();
    assert!(c.removed(), "{c:?}");
    assert_eq!(c.history.last().unwrap().to, "");
    assert!(!live(repo).contains(&t.new.to_string()));
}

/// Two one-file folders whose versions' digests share their first 8 hex digits.
fn colliding_pair() -> (Vec<u8>, Vec<u8>) {
    let mut seen: std::collections::HashMap<[u8; 4], u64> = Default::default();
    for n in 0u64.. {
        let content = n.to_le_bytes().to_vec();
        let d = version_digest(&[Entry::File {
            path: "x".into(),
            size: 8,
            hash: Hash::of(&content),
            exec: false,
        }]);
        let key = [d.0[0], d.0[1], d.0[2], d.0[3]];
        if let Some(m) = seen.insert(key, n) {
            return (m.to_le_bytes().to_vec(), content);
        }
    }
    unreachable!()
}

#[test]
fn a_digest_prefix_that_names_two_versions_is_refused_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, mem) = repository();
    let (x, y) = colliding_pair();
    let a = push_as(&repo, &folder(tmp.path(), "a", &[("x", x)]), &[]);
    let b = push_as(&repo, &folder(tmp.path(), "b", &[("x", y)]), &[]);
    assert_ne!(a, b);
    let shared = prefix(&a, 8);
    assert_eq!(shared.to_string(), prefix(&b, 8).to_string());
    let before = mem.keys();

    let e = repo.delete_version(&shared, false).unwrap_err();
    assert!(e.message().contains("matches 2 versions"), "{e}");
    assert_eq!(mem.keys(), before);

    // One in the trash: the prefix names one live version and one trashed one, so it
    // is no longer ambiguous for either.
    repo.delete_version(&pinned(&a), false).unwrap();
    assert_eq!(repo.resolve(&shared).unwrap(), b);
    repo.delete_version(&pinned(&b), false).unwrap();
    let e = repo.restore_version(&shared).unwrap_err();
    assert!(
        e.message().contains("matches 2 versions") && e.message().contains("in the trash"),
        "{e}"
    );
    assert_eq!(
        repo.restore_version(&prefix(&b, 64)).unwrap().digest,
        b.to_string()
    );
    assert_eq!(repo.restore_version(&shared).unwrap().digest, a.to_string());
}

#[test]
fn after_the_window_a_restore_is_refused_and_a_collection_purges_for_good() {
    let mut t = two();
    // A window of nothing: every deleted version is already past it.
    t.repo
        .change_settings(|c| c.retention = std::time::Duration::ZERO)
        .unwrap();
    let repo = &t.repo;
    repo.delete_version(&pinned(&t.old), true).unwrap();
    let e = repo.restore_version(&prefix(&t.old, 12)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.message().contains("restore window"), "{e}");

    let report = repo
        .collect(
            &GcOptions {
                dry_run: false,
                wait: false,
                progress: &Quiet,
            },
            &sealvol_gc::Here,
        )
        .unwrap();
    let purged: Vec<&str> = report.purged.iter().map(|p| p.digest.as_str()).collect();
    assert_eq!(purged, vec![t.old.to_string().as_str()]);
    assert!(repo.in_trash(&vol(), &t.old).unwrap().is_none());
    let e = repo.restore_version(&prefix(&t.old, 12)).unwrap_err();
    assert!(e.message().contains("no version"), "{e}");
    // The other version is untouched.
    assert_eq!(live(repo), vec![t.new.to_string()]);
}

#[test]
fn an_untag_is_a_move_to_nothing_that_a_tag_undoes() {
    let t = two();
    let repo = &t.repo;
    let prod = Ref::parse("t/v:prod").unwrap();
    repo.remove_tag(&vol(), &tag("prod"), None).unwrap();
    let e = repo.resolve(&prod).unwrap_err();
    assert!(e.message().contains("was removed"), "{e}");
    let e = repo.remove_tag(&vol(), &tag("prod"), None).unwrap_err();
    assert!(e.message().contains("already removed"), "{e}");
    assert!(repo.remove_tag(&vol(), &tag("nosuchtag"), None).is_err());

    // Undo: point it back; the history holds the move, the removal and the move back.
    assert!(repo.tags(&vol()).unwrap().iter().all(|f| f.tag != "prod"));
    repo.move_tag(&vol(), &tag("prod"), &t.old, None).unwrap();
    assert_eq!(repo.resolve(&prod).unwrap(), t.old);
    let tags = repo.tags(&vol()).unwrap();
    let history = &tags.iter().find(|f| f.tag == "prod").unwrap().history;
    let moves: Vec<(Option<&str>, &str)> = history
        .iter()
        .map(|m| (m.from.as_deref(), m.to.as_str()))
        .collect();
    let old = t.old.to_string();
    assert_eq!(
        moves,
        vec![
            (None, old.as_str()),
            (Some(old.as_str()), ""),
            (None, old.as_str())
        ]
    );
}

#[test]
fn pushing_a_trashed_version_again_brings_it_back() {
    let t = two();
    let repo = &t.repo;
    repo.delete_version(&pinned(&t.old), true).unwrap();
    let again = push_as(repo, &t.old_src, &[]);
    assert_eq!(again, t.old);
    assert!(live(repo).contains(&t.old.to_string()));
    assert!(repo.trash(None).unwrap().is_empty());
}

/// `move_tag_until`: a tag with an expiry resolves until then, and after it resolves
/// to nothing, says when it expired, and keeps its history; a move without an expiry
/// makes it permanent again. An expiry that has passed is refused, nothing written.
#[test]
fn a_tag_that_expires_resolves_until_then_and_keeps_its_history() {
    use sealvol_core::store::ObjectStore as _;
    let t = two();
    let prod = tag("prod");
    let at = |secs: i64| {
        let now = sealvol_core::stamp::now();
        let when = match secs >= 0 {
            true => now + std::time::Duration::from_secs(secs as u64),
            false => now - std::time::Duration::from_secs((-secs) as u64),
        };
        humantime::format_rfc3339_millis(when).to_string()
    };
    let until = at(86_400);
    let moved = t
        .repo
        .move_tag_until(&vol(), &prod, &t.new, None, Some(until.clone()))
        .unwrap();
    assert!(moved.moved);
    assert_eq!(moved.file.expires.as_deref(), Some(until.as_str()));
    let r = Ref::parse("t/v:prod").unwrap();
    assert_eq!(t.repo.resolve(&r).unwrap(), t.new);

    // The day has passed: the file as it is then (its expiry behind the clock).
    let key = "tags/t/v/prod";
    let (bytes, etag) = t.mem.get_versioned(key).unwrap().unwrap();
    let text = String::from_utf8(bytes).unwrap().replace(&until, &at(-60));
    t.mem
        .put_if_match(key, text.as_bytes(), Some(&etag))
        .unwrap();
    let e = t.repo.resolve(&r).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.message().contains("expired at"), "{e}");
    let file = t.repo.tag(&vol(), &prod).unwrap().unwrap();
    assert_eq!(file.history.len(), 2, "the history stays");

    // In the past, or not a time: refused, the tag as it was.
    let e = t
        .repo
        .move_tag_until(&vol(), &prod, &t.old, None, Some(at(-1)))
        .unwrap_err();
    assert!(e.message().contains("has passed"), "{e}");
    assert_eq!(t.repo.tag(&vol(), &prod).unwrap().unwrap().history.len(), 2);
    let e = t
        .repo
        .move_tag_until(&vol(), &prod, &t.old, None, Some("soon".into()))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid);

    // Moved again without an expiry: permanent.
    let moved = t.repo.move_tag(&vol(), &prod, &t.old, None).unwrap();
    assert_eq!(moved.file.expires, None);
    assert_eq!(t.repo.resolve(&r).unwrap(), t.old);
}

/// RFC 3339 `secs` from now (before it when negative), by the records' clock.
fn from_now(secs: i64) -> String {
    let now = sealvol_core::stamp::now();
    let when = match secs >= 0 {
        true => now + std::time::Duration::from_secs(secs as u64),
        false => now - std::time::Duration::from_secs((-secs) as u64),
    };
    humantime::format_rfc3339_millis(when).to_string()
}

/// Rewrites an object's text as if time had passed (`from` → `to`).
fn age(mem: &MemoryStore, key: &str, from: &str, to: &str) {
    use sealvol_core::store::ObjectStore as _;
    let (bytes, etag) = mem.get_versioned(key).unwrap().unwrap();
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains(from), "{key}: {text}");
    mem.put_if_match(key, text.replace(from, to).as_bytes(), Some(&etag))
        .unwrap();
}

#[test]
fn a_restore_points_the_tags_back_unless_they_moved_or_expired() {
    let t = two();
    let repo = &t.repo;
    let until = from_now(86_400);
    repo.move_tag_until(&vol(), &tag("eval"), &t.old, None, Some(until.clone()))
        .unwrap();
    let deleted = repo.delete_version(&pinned(&t.old), true).unwrap();
    assert_eq!(deleted.untagged, ["eval", "prod"]);
    assert!(repo.resolve(&Ref::parse("t/v:prod").unwrap()).is_err());

    // Both point nowhere: both come back, eval with the expiry it had.
    let back = repo.restore_version(&pinned(&t.old)).unwrap();
    assert_eq!(back.retagged, ["eval", "prod"]);
    assert!(back.not_retagged.is_empty());
    assert_eq!(
        repo.resolve(&Ref::parse("t/v:prod").unwrap()).unwrap(),
        t.old
    );
    let eval = repo.tag(&vol(), &tag("eval")).unwrap().unwrap();
    assert_eq!(eval.expires.as_deref(), Some(until.as_str()));

    // Again; meanwhile prod moves on and eval's time passes: neither is touched.
    repo.delete_version(&pinned(&t.old), true).unwrap();
    repo.move_tag(&vol(), &tag("prod"), &t.new, None).unwrap();
    let record = format!("trash/t/v/{}", t.old.hex());
    age(&t.mem, &record, &until, &from_now(-60));
    let back = repo.restore_version(&pinned(&t.old)).unwrap();
    assert!(back.retagged.is_empty(), "{back:?}");
    let why: Vec<(&str, &str)> = back
        .not_retagged
        .iter()
        .map(|l| (l.tag.as_str(), l.why.as_str()))
        .collect();
    assert_eq!(why.len(), 2);
    assert!(
        why[0].0 == "eval" && why[0].1.contains("expired"),
        "{why:?}"
    );
    assert!(
        why[1].0 == "prod" && why[1].1.contains("points at"),
        "{why:?}"
    );
    assert_eq!(
        repo.resolve(&Ref::parse("t/v:prod").unwrap()).unwrap(),
        t.new
    );
    assert!(repo.tag(&vol(), &tag("eval")).unwrap().unwrap().removed());
}

#[test]
fn an_expired_tag_is_marked_where_listed_and_holds_nothing() {
    let mut t = two();
    t.repo.remove_tag(&vol(), &tag("canary"), None).unwrap();
    let until = from_now(86_400);
    t.repo
        .move_tag_until(&vol(), &tag("gone"), &t.new, None, Some(until.clone()))
        .unwrap();
    age(&t.mem, "tags/t/v/gone", &until, &from_now(-60));

    let versions = t.repo.versions(&vol()).unwrap();
    let new = versions
        .iter()
        .find(|v| v.digest == t.new.to_string())
        .unwrap();
    assert!(new.tags.is_empty());
    assert_eq!(new.expired_tags, ["gone"]);
    let info = &t.repo.volume_infos(None).unwrap()[0];
    assert_eq!(info.tags, ["prod"]);
    assert_eq!(info.expired_tags, 1);

    // It blocks neither a delete nor the purge after the window.
    t.repo.delete_version(&pinned(&t.new), false).unwrap();
    t.repo
        .change_settings(|c| c.retention = std::time::Duration::ZERO)
        .unwrap();
    let report = t
        .repo
        .collect(
            &GcOptions {
                dry_run: false,
                wait: false,
                progress: &Quiet,
            },
            &sealvol_gc::Here,
        )
        .unwrap();
    assert_eq!(report.purged.len(), 1, "{report:?}");
}
