//! Rollbacks of a deployment file against a real repository, as `deploy rollback`
//! makes them (`target`, `plan`, `apply`): each leaves every other byte of the file as
//! it was (comments, anchors, flow style, quoting, CRLF) and a rollback back by
//! `--to` gives the original bytes; an anchor's other uses change with it; a symbolic
//! link's target is written; a pin of a version in the trash still has a "previous".
//! What the command prints around them is tested in the binary's `tests/deploy.rs`.

use std::path::Path;

use sealvol_core::Repository;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::{Digest, Name, Ref, VolumeName};
use sealvol_deploy::check::{Severity, check};
use sealvol_deploy::file::DeployFile;
use sealvol_deploy::rollback::{self, Choice, RollbackPlan};

/// `w/q` with three versions (v1 oldest, tag prod on v3) and `x/lora` with one (tag
/// prod), as the binary's tests have them.
fn repo_with_history(dir: &Path) -> (Repository, Vec<Digest>) {
    let repo = Repository::open_local(&dir.join("repo"), true, false).unwrap();
    let w = VolumeName::parse("w/q").unwrap();
    let mut digests = Vec::new();
    for i in 1..=3 {
        let src = dir.join(format!("w{i}"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("weights.bin"), format!("weights {i}")).unwrap();
        let opts = PushOptions::new(&Quiet);
        digests.push(push(&repo, &src, &w, &[], &opts).unwrap().digest);
        // Sealed times are to the second or finer; keep the order unmistakable.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let prod = Name::parse("tag", "prod").unwrap();
    repo.move_tag(&w, &prod, &digests[2], None).unwrap();
    let lora = dir.join("lora");
    std::fs::create_dir_all(&lora).unwrap();
    std::fs::write(lora.join("adapter.bin"), "lora").unwrap();
    let l = VolumeName::parse("x/lora").unwrap();
    let opts = PushOptions::new(&Quiet);
    let d = push(&repo, &lora, &l, &[], &opts).unwrap().digest;
    repo.move_tag(&l, &prod, &d, None).unwrap();
    (repo, digests)
}

/// `deploy rollback FILE w/q (--previous | --to TO) --yes`: the plan it wrote, `None`
/// when the file was pinned there already.
fn rollback(repo: &Repository, path: &Path, choice: Choice) -> Option<RollbackPlan> {
    let volume = VolumeName::parse("w/q").unwrap();
    let f = DeployFile::read(path).unwrap();
    let i = rollback::mount_of(&f, &volume, None).unwrap();
    let to = rollback::target(repo, path, &f, i, &volume, &choice).unwrap();
    let plan = rollback::plan(repo, &f, i, to, &sealvol_sign::Policy::default()).unwrap()?;
    rollback::apply(&plan).unwrap();
    Some(plan)
}

/// The digest as a ref writes it (`b3:…`).
fn text(d: &Digest) -> String {
    d.to_string()
}

#[test]
fn rollback_round_trips_change_only_the_ref() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, refs) = repo_with_history(tmp.path());
    let (v2, v3) = (refs[1], refs[2]);
    let pinned3 = format!("vol:w/q@{}", text(&v3));
    // Comments, anchors and aliases, flow style, odd quoting, other keys, CRLF.
    let files = [
        (
            "block.yaml",
            format!(
                "# production\napp:\n  replicas: 3   # keep\n  env: {{A: '1', B: \"two\"}}\nsealvol:\n  mounts:\n    - ref: {pinned3}  # pinned\n      path: /app/weights\n    - ref: 'vol:x/lora:prod'\n      path: /app/lora\ntrailer: |\n  text\n"
            ),
        ),
        (
            "crlf.yaml",
            format!(
                "sealvol:\r\n  mounts:\r\n  - path: /app/weights\r\n    ref: \"{pinned3}\"\r\nother: [1, 2]\r\n"
            ),
        ),
        (
            "flow.yaml",
            format!("{{sealvol: {{mounts: [{{ref: '{pinned3}', path: /w}}]}}, x: y}}\n"),
        ),
        (
            "anchor.yaml",
            format!(
                "defaults: &weights '{pinned3}'\nbase: &mount\n  path: /w\nsealvol:\n  mounts:\n    - <<: *mount\n      ref: *weights\n"
            ),
        ),
    ];
    for (name, original) in &files {
        let path = tmp.path().join(name);
        std::fs::write(&path, original).unwrap();
        let plan = rollback(&repo, &path, Choice::Previous).unwrap();
        assert_eq!((plan.from, plan.to), (Some(v3), v2), "{name}");
        let after = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            after,
            original.replacen(&text(&v3), &text(&v2), 1),
            "{name}: only the digest changed"
        );
        assert_eq!(plan.edit.lines.len(), 1, "{name}: one line");
        // The anchor's other use changes with it, and the plan says which anchor.
        let anchors: &[&str] = match *name {
            "anchor.yaml" => &["weights"],
            _ => &[],
        };
        assert_eq!(plan.edit.anchors, anchors, "{name}");
        // And back, by --to a digest prefix: byte-identical to the original.
        let prefix = format!("@{}", &text(&v3)[3..15]);
        rollback(&repo, &path, Choice::To(prefix)).unwrap();
        assert_eq!(&std::fs::read_to_string(&path).unwrap(), original, "{name}");
        // Where it is pinned already, there is nothing to write.
        assert!(rollback(&repo, &path, Choice::To(format!("@{}", text(&v3)))).is_none());
    }

    // A symbolic link (a ConfigMap's file) is followed: its target is rewritten.
    let target = tmp.path().join("real.yaml");
    std::fs::write(
        &target,
        format!("sealvol:\n  mounts:\n    - {{ref: {pinned3}, path: /w}}\n"),
    )
    .unwrap();
    let link = tmp.path().join("link.yaml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    rollback(&repo, &link, Choice::Previous).unwrap();
    let meta = std::fs::symlink_metadata(&link).unwrap();
    assert!(meta.file_type().is_symlink());
    assert!(
        std::fs::read_to_string(&target)
            .unwrap()
            .contains(&text(&v2))
    );

    // The pinned version was deleted (in the trash): check calls the pin an error, and
    // --previous still knows the one before it.
    let pinned = tmp.path().join("deleted.yaml");
    std::fs::write(
        &pinned,
        format!("sealvol:\n  mounts:\n    - {{ref: {pinned3}, path: /w}}\n"),
    )
    .unwrap();
    let w = VolumeName::parse("w/q").unwrap();
    repo.delete_version(&Ref::pinned(w, v3), true).unwrap();
    let checked = check(&repo, DeployFile::read(&pinned).unwrap());
    assert_eq!(checked.errors(), 1);
    let error = checked
        .findings
        .iter()
        .find(|f| f.severity == Severity::Error)
        .unwrap();
    assert!(
        error.message.contains("is in the trash"),
        "{}",
        error.message
    );
    let plan = rollback(&repo, &pinned, Choice::Previous).unwrap();
    assert_eq!((plan.from, plan.to), (None, v2));
    assert!(
        std::fs::read_to_string(&pinned)
            .unwrap()
            .contains(&text(&v2))
    );
}
