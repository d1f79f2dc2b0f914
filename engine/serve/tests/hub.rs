//! The Hugging Face Hub's API over the repository (`hub/`): revisions as versions, and
//! a repo's info as the Hub's clients read it.

mod common;

use sealvol_core::error::ErrorKind;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::{Digest, Name, VolumeName};
use sealvol_core::repo::Repository;
use sealvol_core::testutil::{folder, noise};
use sealvol_serve::hub::{ids, revision};

fn sealed(
    repo: &Repository,
    root: &std::path::Path,
    vol: &VolumeName,
    seed: u64,
    tags: &[&str],
) -> Digest {
    let dir = folder(root, &format!("v{seed}"), &[("w.bin", noise(5000, seed))]);
    let tags: Vec<Name> = tags
        .iter()
        .map(|t| Name::parse("tag", t).unwrap())
        .collect();
    push(repo, &dir, vol, &tags, &PushOptions::new(&Quiet))
        .unwrap()
        .digest
}

#[test]
fn a_revision_names_a_version_by_tag_digest_commit_id_or_main() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&dir.path().join("repo"), true, false).unwrap();
    let vol = VolumeName::parse("team/model").unwrap();
    let first = sealed(&repo, dir.path(), &vol, 1, &["prod"]);
    let second = sealed(&repo, dir.path(), &vol, 2, &[]);
    let at = |rev: &str| revision::resolve(&repo, &vol, rev);

    assert_eq!(at("prod").unwrap(), first);
    assert_eq!(at(&first.to_string()).unwrap(), first);
    assert_eq!(at(&first.hex()).unwrap(), first);
    assert_eq!(at(&ids::commit_id(&first)).unwrap(), first);
    // No tag `main`: the newest sealed version; then the tag, once there is one.
    assert_eq!(at("main").unwrap(), second);
    sealed(&repo, dir.path(), &vol, 1, &["main"]);
    assert_eq!(at("main").unwrap(), first);

    // Names of no version: not found, never read as anything else.
    for rev in [
        "refs/pr/1",
        "refs%2Fpr%2F1",
        "..",
        "../../etc",
        "a\0b",
        "",
        "nope",
        &"0".repeat(40),
        &"0".repeat(64),
        "b3:zz",
        &ids::commit_id(&first).to_uppercase(),
    ] {
        let e = at(rev).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{rev:?}: {e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }
}

#[test]
fn a_repos_info_names_its_commit_and_files_and_hides_what_the_key_may_not_see() {
    let s = common::server();
    let vol = VolumeName::parse("t/serve").unwrap();
    let digest = s
        .repo
        .resolve(&sealvol_core::Ref::parse("t/serve").unwrap())
        .unwrap();
    let commit = ids::commit_id(&digest);
    for path in [
        "/hf/api/models/t/serve".to_string(),
        format!("/hf/api/models/t/serve/revision/{commit}"),
        format!("/hf/api/datasets/t/serve/revision/{}", digest.hex()),
    ] {
        let (status, _, body) = s.get(&path, &[]);
        assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], vol.to_string());
        assert_eq!(v["sha"], commit);
        assert_eq!(v["siblings"][0]["rfilename"], "w.bin");
        assert_eq!(v["siblings"][0]["size"], s.file.size);
    }
    let code = |path: &str, key: &str| {
        let auth = format!("Bearer {key}");
        let (status, h, _) = s.get(path, &[("authorization", &auth)]);
        let code = h
            .get("x-error-code")
            .map(|v| v.to_str().unwrap().to_string());
        (status, code)
    };
    let not = |what: &str| (404, Some(what.to_string()));
    assert_eq!(code("/hf/api/models/t/nope", &s.key), not("RepoNotFound"));
    assert_eq!(
        code("/hf/api/models/t/serve/revision/refs%2Fpr%2F1", &s.key),
        not("RevisionNotFound")
    );
    assert_eq!(
        code(
            &format!("/hf/api/models/t/serve/revision/{}", "0".repeat(40)),
            &s.key
        ),
        not("RevisionNotFound")
    );
    // A key of another namespace is told nothing more than of a repo that is not there.
    let other = sealvol_serve::keys::create(&s.place(), "b", false, vec!["b".into()]).unwrap();
    assert_eq!(code("/hf/api/models/t/serve", &other), not("RepoNotFound"));
}
