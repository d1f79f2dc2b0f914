//! The remote engine (`sealvol_client::remote`) against a server started in the test:
//! every key that must be refused (none, wrong, malformed, revoked, read-only pushing,
//! another namespace, garbage collection by a key not the admin's) is refused with its
//! reason and nothing is written; small files pushed beside the server and through it
//! pull back whole through it for a key scoped to their namespace, and no other.
//! A training job's whole session through `--remote` (the CLI's wiring of the remote as
//! its read peer included) and a namespace's quota as `settings` shows it are tested on
//! the binary (`tests/remote.rs`).

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{Listening, listen};
use sealvol_core::error::{Error, Result};
use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::pull::pull;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::{Digest, Name, VolumeName};
use sealvol_core::repo::Repository;
use sealvol_core::testutil::noise;
use sealvol_core::verify::{ReadData, survey_all};
use sealvol_core::walk::digest_dir;

struct Here {
    path: std::path::PathBuf,
    served: Listening,
    tmp: tempfile::TempDir,
}

fn here() -> Here {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("repo");
    let repo = Arc::new(Repository::open_local(&path, true, false).unwrap());
    let served = listen(&repo, tmp.path(), true, sealvol_serve::Policy::default());
    Here { path, served, tmp }
}

impl Here {
    fn dir(&self, name: &str) -> std::path::PathBuf {
        self.tmp.path().join(name)
    }

    /// The repository as the server's own machine opens it.
    fn repo(&self) -> Repository {
        Repository::open_local(&self.path, false, false).unwrap()
    }

    fn place(&self) -> sealvol_serve::keys::Place {
        sealvol_serve::keys::Place::of(&self.served.keys_dir, Arc::new(self.repo())).unwrap()
    }

    /// `sealvol key create NAME [--read-only] [--namespace NS]`.
    fn key(&self, name: &str, read_only: bool, ns: &[&str]) -> String {
        let ns = ns.iter().map(|n| n.to_string()).collect();
        sealvol_serve::keys::create(&self.place(), name, read_only, ns).unwrap()
    }

    /// The repository through the server with `key`, as `--remote URL` opens it.
    fn remote(&self, key: &str) -> Result<Repository> {
        let staging = self.dir("staging");
        std::fs::create_dir_all(&staging).unwrap();
        sealvol_client::remote::open(&self.served.url, Some(key), &staging)
    }

    fn get_as(&self, key: &str, path: &str) -> (u16, Vec<u8>) {
        self.served.rt.block_on(async {
            let r = reqwest::Client::new()
                .get(format!("{}{path}", self.served.url))
                .bearer_auth(key)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.bytes().await.unwrap().to_vec())
        })
    }
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn checkpoint(dir: &Path, seed: u64) {
    write(&dir.join("model.safetensors"), &noise(6 << 20, seed));
    write(&dir.join("config.json"), b"{\"layers\": 2}\n");
}

fn vol(v: &str) -> VolumeName {
    VolumeName::parse(v).unwrap()
}

fn push_to(repo: &Repository, dir: &Path, v: &str, tags: &[&str]) -> Result<Digest> {
    let tags: Vec<Name> = tags
        .iter()
        .map(|t| Name::parse("tag", t).unwrap())
        .collect();
    push(repo, dir, &vol(v), &tags, &PushOptions::new(&Quiet)).map(|r| r.digest)
}

/// Message and hint, as a person reads them.
fn said(e: &Error) -> String {
    format!("{e}\nhint: {}", e.hint_text().unwrap_or(""))
}

fn refused<T>(r: Result<T>) -> String {
    match r {
        Ok(_) => panic!("not refused"),
        Err(e) => said(&e),
    }
}

#[test]
fn keys_that_must_be_refused_are_refused_and_nothing_is_written() {
    let h = here();
    let seed = h.dir("seed");
    checkpoint(&seed, 3);
    let d = push_to(&h.repo(), &seed, "weights/base", &["prod"]).unwrap();
    let v1 = h.dir("v1");
    checkpoint(&v1, 4);
    let versions =
        || serde_json::to_string(&h.repo().versions(&vol("weights/base")).unwrap()).unwrap();
    let before = versions();

    let staging = h.dir("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let e = refused(sealvol_client::remote::open(&h.served.url, None, &staging));
    assert!(
        e.contains("needs an API key") && e.contains("SEALVOL_API_KEY"),
        "{e}"
    );
    let e = refused(h.remote(&format!("sv1:ci:{}", "0".repeat(64))));
    assert!(e.contains("not known to this server"), "{e}");
    let e = refused(h.remote("hunter2"));
    assert!(e.contains("malformed"), "{e}");

    let ro = h.remote(&h.key("reader", true, &[])).unwrap();
    assert!(ro.volumes(None).unwrap().contains(&vol("weights/base")));
    let e = refused(push_to(&ro, &v1, "weights/base", &[]));
    assert!(
        e.contains("read-only") && e.contains("may not write"),
        "{e}"
    );
    let stable = Name::parse("tag", "stable").unwrap();
    let e = refused(ro.move_tag(&vol("weights/base"), &stable, &d, None));
    assert!(e.contains("may not write"), "{e}");

    let elsewhere = h.remote(&h.key("elsewhere", false, &["evals"])).unwrap();
    let e = refused(push_to(&elsewhere, &v1, "weights/base", &[]));
    assert!(e.contains("may not"), "{e}");
    assert!(
        !elsewhere
            .volumes(None)
            .unwrap()
            .contains(&vol("weights/base"))
    );

    let ci_key = h.key("ci", false, &["weights"]);
    let ci = h.remote(&ci_key).unwrap();
    ci.volumes(None).unwrap();
    sealvol_serve::keys::revoke(&h.place(), "ci").unwrap();
    let e = refused(push_to(&ci, &v1, "weights/base", &[]));
    assert!(e.contains("revoked"), "{e}");
    let listed = sealvol_serve::keys::list(&h.place()).unwrap();
    let ci_listed = listed.iter().find(|k| k.name == "ci").unwrap();
    assert!(ci_listed.revoked.is_some());
    let shown = serde_json::to_string(&listed).unwrap();
    assert!(
        !shown.contains(&ci_key[ci_key.len() - 64..]),
        "a key is never shown again: {shown}"
    );

    // None of it sealed anything, and no key collects garbage but the admin's.
    assert_eq!(versions(), before);
    let opts = GcOptions {
        dry_run: false,
        wait: false,
        progress: &Quiet,
    };
    let gc_try = h.remote(&h.key("gc-try", false, &["weights"])).unwrap();
    let e = refused(sealvol_gc::collect(&gc_try, &opts));
    assert!(e.contains("may not"), "{e}");
    let admin = h.remote(&h.served.key).unwrap();
    sealvol_gc::collect(&admin, &opts).unwrap();

    let e = refused(sealvol_client::remote::open(
        "ftp://host",
        Some(&ci_key),
        &staging,
    ));
    assert!(e.contains("--remote") && e.contains("http://"), "{e}");
    let place = h.place();
    let e = refused(sealvol_serve::keys::create(
        &place,
        "Bad Name",
        false,
        vec![],
    ));
    assert!(e.contains("Bad Name"), "{e}");
    let e = refused(sealvol_serve::keys::create(&place, "reader", false, vec![]));
    assert!(e.contains("already a key named reader"), "{e}");
    let e = refused(sealvol_serve::keys::revoke(&place, "nobody"));
    assert!(e.contains("no key named nobody"), "{e}");
}

/// Small files have no chunk lists (docs/FORMAT.md, "Small files"): a version of many
/// of them pushed on the server pulls back whole through it for a key scoped to its
/// namespace, which may not read the pack indexes that hold them; the server answers
/// for their lists. A key of another namespace gets none of them.
#[test]
fn small_files_pushed_beside_the_server_pull_through_it_for_a_scoped_key() {
    let h = here();
    let src = h.dir("evalset");
    for i in 0..300 {
        write(
            &src.join(format!("part-{}/row-{i:03}.txt", i / 100)),
            format!("{i}\n").as_bytes(),
        );
    }
    write(&src.join("embeddings.bin"), &noise(2 << 20, 5));
    let d = push_to(&h.repo(), &src, "evals/tiny", &[]).unwrap();
    let lists = || {
        std::fs::read_dir(h.path.join("files"))
            .unwrap()
            .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
            .count()
    };
    assert_eq!(lists(), 1, "only the large file has a chunk list");

    let pull_as = |repo: Repository, d: &Digest, v: &str, out: &Path| -> Result<()> {
        pull(
            &Tiers::new(Arc::new(repo), None),
            &vol(v),
            d,
            out,
            false,
            &Quiet,
        )
        .map(|_| ())
    };
    let reader_key = h.key("reader", true, &["evals"]);
    let out = h.dir("out");
    pull_as(h.remote(&reader_key).unwrap(), &d, "evals/tiny", &out).unwrap();
    assert_eq!(digest_dir(&out).unwrap(), d);

    // Pushed through the server by a key of the namespace: still no list per file.
    let writer = h.remote(&h.key("writer", false, &["evals"])).unwrap();
    let more = h.dir("more");
    for i in 0..200 {
        write(
            &more.join(format!("rows/{i:03}.txt")),
            format!("more {i}\n").as_bytes(),
        );
    }
    let d2 = push_to(&writer, &more, "evals/more", &[]).unwrap();
    assert_eq!(
        lists(),
        1,
        "a push through the server stored lists for small files"
    );
    let out2 = h.dir("out2");
    pull_as(h.remote(&reader_key).unwrap(), &d2, "evals/more", &out2).unwrap();
    assert_eq!(digest_dir(&out2).unwrap(), d2);
    let report = survey_all(&h.repo(), ReadData::All, None, false, &Quiet)
        .unwrap()
        .report();
    assert!(report.problems.is_empty(), "{:?}", report.problems);

    let elsewhere = h.remote(&h.key("elsewhere", false, &["weights"])).unwrap();
    let e = refused(pull_as(elsewhere, &d, "evals/tiny", &h.dir("o")));
    assert!(e.contains("out of scope") || e.contains("may not"), "{e}");
    // Asked by name, a small file's list is refused to it too.
    let small = blake3::hash(b"7\n").to_hex().to_string();
    let path = format!("/v1/objects/files/{}/{small}", &small[..2]);
    let (status, _) = h.get_as(&h.key("elsewhere2", false, &["weights"]), &path);
    assert_eq!(status, 403);
    // Its own namespace's key gets the list the server makes for it.
    let (status, body) = h.get_as(&h.key("reader2", true, &["evals"]), &path);
    assert_eq!(status, 200);
    assert!(body.starts_with(b"SVFILE02"), "{body:?}");
}
