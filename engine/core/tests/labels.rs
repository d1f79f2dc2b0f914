//! Labels changed after a seal, on the in-memory store: set and removed beside the
//! manifest (which never changes) with every change kept, listed in place of the sealed
//! ones, refused for a version in the trash or a key it does not have, safe against a
//! concurrent change, and gone with the version when it is purged. The CLI's words for
//! the same are tested through the binary (`tests/cli/labels.rs`).

use std::sync::Arc;

use sealvol_core::labels::{LabelRequest, Labels};
use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::{Ref, VolumeName};
use sealvol_core::store::{MemoryStore, ObjectStore};
use sealvol_core::testutil::{folder, noise};
use sealvol_core::{Digest, ErrorKind, Repository};

fn vol() -> VolumeName {
    VolumeName::parse("t/v").unwrap()
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn request(d: Digest, set: &[(&str, &str)], remove: &[&str]) -> LabelRequest {
    LabelRequest {
        volume: vol(),
        digest: d,
        set: labels(set),
        remove: remove.iter().map(|s| s.to_string()).collect(),
    }
}

/// A repository with one version sealed with `step=1000`.
fn sealed() -> (Repository, Arc<MemoryStore>, Digest, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let mem = Arc::new(MemoryStore::new().unwrap());
    let repo = Repository::open(Box::new(Arc::clone(&mem)), "memory".into(), true).unwrap();
    let src = folder(tmp.path(), "v", &[("w.bin", noise(1 << 20, 1))]);
    let mut opts = PushOptions::new(&Quiet);
    opts.labels = labels(&[("step", "1000")]);
    let d = push(&repo, &src, &vol(), &[], &opts).unwrap().digest;
    (repo, mem, d, tmp)
}

fn listed(repo: &Repository) -> Labels {
    repo.versions(&vol()).unwrap()[0].labels.clone()
}

#[test]
fn labels_change_beside_the_manifest_with_every_change_kept() {
    let (repo, mem, d, _tmp) = sealed();
    let manifest = mem.get(&format!("manifests/t/v/{}", d.hex())).unwrap();

    let done = repo
        .change_labels(&request(d, &[("eval", "passed"), ("step", "1000")], &[]))
        .unwrap();
    assert!(done.changed);
    assert_eq!(done.before, labels(&[("step", "1000")]));
    assert_eq!(done.labels, labels(&[("eval", "passed"), ("step", "1000")]));
    // Only what changed is recorded as set.
    assert_eq!(done.history.len(), 1);
    assert_eq!(done.history[0].set, labels(&[("eval", "passed")]));
    assert_eq!(listed(&repo), done.labels);

    let done = repo.change_labels(&request(d, &[], &["step"])).unwrap();
    assert_eq!(done.labels, labels(&[("eval", "passed")]));
    assert_eq!(done.history.len(), 2);
    assert_eq!(done.history[1].removed, vec!["step".to_string()]);
    assert_eq!(listed(&repo), labels(&[("eval", "passed")]));
    assert_eq!(repo.label_history(&vol(), &d).unwrap().len(), 2);

    // The same change again writes nothing.
    let again = repo
        .change_labels(&request(d, &[("eval", "passed")], &[]))
        .unwrap();
    assert!(!again.changed);
    assert_eq!(again.history.len(), 2);

    // The manifest, and so the digest, never changed.
    assert_eq!(
        mem.get(&format!("manifests/t/v/{}", d.hex())).unwrap(),
        manifest
    );
    assert_eq!(
        repo.resolve(&Ref::parse("t/v").unwrap()).unwrap(),
        d,
        "the same version"
    );
}

#[test]
fn a_change_that_cannot_be_made_is_refused_and_changes_nothing() {
    let (repo, mem, d, _tmp) = sealed();
    let key = format!("labels/t/v/{}", d.hex());
    for (req, kind, words) in [
        (
            request(d, &[], &["eval"]),
            ErrorKind::NotFound,
            "has no label eval: it has step",
        ),
        (
            request(d, &[("Bad", "x")], &[]),
            ErrorKind::Invalid,
            "label key",
        ),
        (
            request(d, &[("k", "a\nb")], &[]),
            ErrorKind::Invalid,
            "control characters",
        ),
        (
            request(d, &[("k", "1")], &["k"]),
            ErrorKind::Invalid,
            "both set and removed",
        ),
        (request(d, &[], &["../x"]), ErrorKind::Invalid, "label key"),
        (
            request(Digest([7; 32]), &[("k", "1")], &[]),
            ErrorKind::NotFound,
            "no version",
        ),
    ] {
        let e = repo.change_labels(&req).unwrap_err();
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.to_string().contains(words), "{words}: {e}");
    }
    // More than a version may carry.
    let many: Vec<(String, String)> = (0..65).map(|i| (format!("k{i}"), "v".into())).collect();
    let req = LabelRequest {
        volume: vol(),
        digest: d,
        set: many.into_iter().collect(),
        remove: vec![],
    };
    assert!(repo.change_labels(&req).is_err());
    assert_eq!(mem.get(&key).unwrap(), None, "nothing written");
    assert_eq!(listed(&repo), labels(&[("step", "1000")]));

    // A version in the trash is not relabelled.
    repo.delete_version(&Ref::pinned(vol(), d), false).unwrap();
    let e = repo
        .change_labels(&request(d, &[("eval", "passed")], &[]))
        .unwrap_err();
    assert!(e.to_string().contains("trash"), "{e}");
}

#[test]
fn a_damaged_label_object_is_ignored_when_read_and_replaced_when_changed() {
    let (repo, mem, d, _tmp) = sealed();
    let key = format!("labels/t/v/{}", d.hex());
    mem.put(&key, b"{not json").unwrap();
    assert_eq!(
        listed(&repo),
        labels(&[("step", "1000")]),
        "the sealed ones"
    );
    // One about another version is as good as damaged.
    let other = format!(
        r#"{{"format":1,"digest":"{}","labels":{{"x":"y"}},"history":[]}}"#,
        Digest([9; 32])
    );
    mem.put(&key, other.as_bytes()).unwrap();
    assert_eq!(listed(&repo), labels(&[("step", "1000")]));
    let done = repo
        .change_labels(&request(d, &[("eval", "passed")], &[]))
        .unwrap();
    assert_eq!(done.labels, labels(&[("eval", "passed"), ("step", "1000")]));
    assert!(
        mem.list("quarantine/")
            .unwrap()
            .iter()
            .any(|o| o.key.ends_with(&key)),
        "the damaged bytes are kept"
    );
}

#[test]
fn concurrent_changes_each_land_once() {
    let (repo, _mem, d, _tmp) = sealed();
    let repo = Arc::new(repo);
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let repo = Arc::clone(&repo);
            std::thread::spawn(move || {
                let k = format!("k{i}");
                repo.change_labels(&request(d, &[(k.as_str(), "1")], &[]))
                    .unwrap()
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap().changed);
    }
    let now = listed(&repo);
    assert_eq!(now.len(), 9, "{now:?}");
    assert_eq!(repo.label_history(&vol(), &d).unwrap().len(), 8);
}

#[test]
fn the_history_keeps_the_newest_changes_and_counts_the_rest() {
    let (repo, mem, d, _tmp) = sealed();
    let n = sealvol_core::labels::MAX_HISTORY + 20;
    for i in 0..n {
        let v = i.to_string();
        repo.change_labels(&request(d, &[("n", v.as_str())], &[]))
            .unwrap();
    }
    let h = repo.label_history(&vol(), &d).unwrap();
    assert_eq!(h.len(), sealvol_core::labels::MAX_HISTORY);
    assert_eq!(h.last().unwrap().set["n"], (n - 1).to_string());
    let raw = mem
        .get(&format!("labels/t/v/{}", d.hex()))
        .unwrap()
        .unwrap();
    let f: serde_json::Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(f["earlier"], 20);
}

#[test]
fn a_purged_version_takes_its_labels_with_it() {
    let (mut repo, mem, d, _tmp) = sealed();
    repo.change_labels(&request(d, &[("eval", "passed")], &[]))
        .unwrap();
    let key = format!("labels/t/v/{}", d.hex());
    assert!(mem.get(&key).unwrap().is_some());
    repo.change_settings(|c| c.retention = std::time::Duration::ZERO)
        .unwrap();
    repo.delete_version(&Ref::pinned(vol(), d), false).unwrap();
    repo.collect(
        &GcOptions {
            dry_run: false,
            wait: false,
            progress: &Quiet,
        },
        &sealvol_gc::Here,
    )
    .unwrap();
    assert_eq!(mem.get(&key).unwrap(), None);
}

#[test]
fn a_label_object_left_by_a_version_gone_is_collected_after_the_grace_period() {
    let (repo, mem, d, _tmp) = sealed();
    // A label object with no manifest (a purge interrupted between the two deletes).
    let orphan = Digest([5; 32]);
    let key = format!("labels/t/v/{}", orphan.hex());
    mem.put(
        &key,
        format!(r#"{{"format":1,"digest":"{orphan}","labels":{{}},"history":[]}}"#).as_bytes(),
    )
    .unwrap();
    let opts = GcOptions {
        dry_run: false,
        wait: false,
        progress: &Quiet,
    };
    repo.collect(&opts, &sealvol_gc::Here).unwrap();
    assert!(
        mem.get(&key).unwrap().is_some(),
        "young: maybe a seal under way"
    );
    mem.advance(repo.config().gc_grace + std::time::Duration::from_secs(60));
    repo.collect(&opts, &sealvol_gc::Here).unwrap();
    assert_eq!(mem.get(&key).unwrap(), None);
    // The live version's own labels are untouched.
    repo.change_labels(&request(d, &[("a", "b")], &[])).unwrap();
    repo.collect(&opts, &sealvol_gc::Here).unwrap();
    assert_eq!(listed(&repo).get("a").map(String::as_str), Some("b"));
}
