//! The repository in a bucket, opened in process against moto on loopback: `init`,
//! the same layout and digests as a local repository, push, pull, tags, diff, verify,
//! trash and gc round trips; addresses that are errors and never local directories;
//! bucket problems that say what to fix; refused credentials; a store that ignores
//! conditional writes; cut uploads; a version mirrored to a bucket and back. Many
//! processes at once, kill -9 and mounts on a bucket are tested on the binary
//! (`tests/s3repo.rs`, `tests/mirrors.rs`).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sealvol_core::Repository;
use sealvol_core::error::{Error, Result};
use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::pull::pull;
use sealvol_core::push::{PushOptions, PushReport, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::{Name, Ref, VolumeName};
use sealvol_core::testutil::noise;
use sealvol_core::verify::{ReadData, survey_all};
use sealvol_core::walk::digest_dir;
use sealvol_s3repo::{Address, Mode, Options};
use sealvol_source::Endpoints;
use sealvol_source::secrets::Secret;
use sealvol_testkit::servers::{FailingServer, FaultProxy, Moto};

/// Where the test keeps its files, and the credentials moto takes by default, stored
/// as `sealvol secret set` stores them.
struct Here {
    tmp: tempfile::TempDir,
}

impl Here {
    fn new() -> Here {
        let here = Here {
            tmp: tempfile::tempdir().unwrap(),
        };
        here.set_secret("test", "test:test");
        here
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.tmp.path().join(name)
    }

    fn set_secret(&self, name: &str, value: &str) {
        sealvol_source::secrets::set(&self.path("state"), name, value.as_bytes()).unwrap();
    }

    fn secret(&self, name: &str) -> Secret {
        sealvol_source::secrets::get(&self.path("state"), name).unwrap()
    }

    /// Opens `address` on the S3 server at `endpoint` as a command with
    /// `--repo-secret SECRET` does.
    fn open_with(
        &self,
        endpoint: &str,
        address: &str,
        mode: Mode,
        secret: &str,
    ) -> Result<Repository> {
        let endpoints = Endpoints {
            s3: Some(endpoint.to_string()),
            ..Endpoints::default()
        };
        let secret = self.secret(secret);
        let staging = self.path("staging");
        std::fs::create_dir_all(&staging).unwrap();
        let opts = Options {
            endpoints: &endpoints,
            secret: Some(&secret),
            staging: &staging,
            durable: false,
        };
        sealvol_s3repo::open(&Address::parse(address)?, mode, &opts)
    }

    fn open(&self, endpoint: &str, address: &str, mode: Mode) -> Result<Repository> {
        self.open_with(endpoint, address, mode, "test")
    }
}

/// Message and hint, as a person reads them.
fn said(e: &Error) -> String {
    format!("{e}\nhint: {}", e.hint_text().unwrap_or(""))
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn checkpoint(dir: &Path, seed: u64) {
    // Over one multipart part (16 MiB), so that packs go up in parts.
    write(&dir.join("model.safetensors"), &noise(20 << 20, seed));
    write(&dir.join("config.json"), b"{\"layers\": 4}\n");
    write(&dir.join("tokenizer/vocab.txt"), &noise(3000, seed + 100));
}

fn vol(v: &str) -> VolumeName {
    VolumeName::parse(v).unwrap()
}

fn push_to(repo: &Repository, dir: &Path, v: &str, tags: &[&str]) -> PushReport {
    let tags: Vec<Name> = tags
        .iter()
        .map(|t| Name::parse("tag", t).unwrap())
        .collect();
    push(repo, dir, &vol(v), &tags, &PushOptions::new(&Quiet)).unwrap()
}

/// The keys under `prefix` in `bucket`, as boto3 lists them.
fn bucket_keys(moto: &Moto, bucket: &str, prefix: &str) -> Vec<String> {
    let out = moto.seed(&["--list", bucket, prefix]);
    out.lines().map(str::to_string).collect()
}

fn verify_all(repo: &Repository) {
    let report = survey_all(repo, ReadData::All, None, false, &Quiet)
        .unwrap()
        .report();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

fn pull_into(repo: Repository, r: &str, out: &Path) {
    let r = Ref::parse(r).unwrap();
    let d = repo.resolve(&r).unwrap();
    pull(
        &Tiers::new(Arc::new(repo), None),
        &r.volume,
        &d,
        out,
        false,
        &Quiet,
    )
    .unwrap();
}

#[test]
fn a_bucket_repository_is_made_by_init_and_holds_what_a_local_one_does() {
    let here = Here::new();
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let ep = moto.endpoint();
    let address = "s3://models/team-a";
    let created = here.open(&ep, address, Mode::Init).unwrap();
    assert_eq!(created.location(), "s3://models/team-a/");
    let Err(again) = here.open(&ep, address, Mode::Init) else {
        panic!("a second init succeeded");
    };
    assert!(said(&again).contains("already holds a sealvol repository"));
    let mut repo = here.open(&ep, address, Mode::Existing).unwrap();

    let v1 = here.path("v1");
    checkpoint(&v1, 1);
    let first = push_to(&repo, &v1, "weights/tiny", &["prod"]);
    // The same digest as the same files on disk, and as in a local repository.
    assert_eq!(first.digest, digest_dir(&v1).unwrap());
    let local = Repository::open_local(&here.path("local"), true, false).unwrap();
    assert_eq!(
        push_to(&local, &v1, "weights/tiny", &[]).digest,
        first.digest
    );

    // A fine-tune of the same files: only what changed goes up.
    let v2 = here.path("v2");
    checkpoint(&v2, 1);
    let mut model = std::fs::read(v2.join("model.safetensors")).unwrap();
    model[(6 << 20)..(6 << 20) + 4096].copy_from_slice(&noise(4096, 9));
    write(&v2.join("model.safetensors"), &model);
    let second = push_to(&repo, &v2, "weights/tiny", &[]);
    let new_bytes = second.stats.new_bytes;
    assert!(new_bytes > 0 && new_bytes < 4 << 20, "{new_bytes}");
    let prod = Name::parse("tag", "prod").unwrap();
    repo.move_tag(&vol("weights/tiny"), &prod, &second.digest, None)
        .unwrap();

    // The layout of a local repository, under the prefix.
    let keys = bucket_keys(&moto, "models", "team-a/");
    for kind in [
        "team-a/sealvol.repo",
        "team-a/packs/",
        "team-a/index/",
        "team-a/files/",
        "team-a/manifests/weights/tiny/",
    ] {
        assert!(
            keys.iter().any(|k| k.starts_with(kind)),
            "no {kind} in {keys:?}"
        );
    }
    assert!(keys.contains(&"team-a/tags/weights/tiny/prod".to_string()));
    assert!(
        !keys.iter().any(|k| k.contains("probe/")),
        "probes are removed: {keys:?}"
    );

    // Versions, tags and their history, diff, pull, verify.
    assert_eq!(repo.versions(&vol("weights/tiny")).unwrap().len(), 2);
    let tags = repo.tags(&vol("weights/tiny")).unwrap();
    assert_eq!(tags[0].history.len(), 2, "{tags:?}");
    let diff = sealvol_core::diff::diff(
        &repo,
        (&vol("weights/tiny"), &first.digest),
        (&vol("weights/tiny"), &second.digest),
    )
    .unwrap();
    assert_eq!(diff.totals.modified, 1);
    let out = here.path("out");
    pull_into(
        here.open(&ep, address, Mode::Existing).unwrap(),
        "weights/tiny:prod",
        &out,
    );
    assert_eq!(digest_dir(&out).unwrap(), second.digest);
    verify_all(&repo);

    // Trash, restore, purge and gc work on the bucket.
    let pinned = Ref::pinned(vol("weights/tiny"), first.digest);
    repo.delete_version(&pinned, false).unwrap();
    assert_eq!(repo.versions(&vol("weights/tiny")).unwrap().len(), 1);
    repo.restore_version(&pinned).unwrap();
    assert_eq!(repo.versions(&vol("weights/tiny")).unwrap().len(), 2);
    repo.change_settings(|c| {
        c.gc_grace = Duration::from_secs(1);
        c.retention = Duration::from_secs(1);
    })
    .unwrap();
    repo.delete_version(&pinned, false).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let opts = GcOptions {
        dry_run: false,
        wait: false,
        progress: &Quiet,
    };
    let gc = sealvol_gc::collect(&repo, &opts).unwrap();
    assert_eq!(gc.purged.len(), 1, "{gc:?}");
    verify_all(&repo);
    let out2 = here.path("out2");
    pull_into(
        here.open(&ep, address, Mode::Existing).unwrap(),
        "weights/tiny:prod",
        &out2,
    );
    assert_eq!(digest_dir(&out2).unwrap(), second.digest);
}

#[test]
fn an_address_with_a_scheme_is_a_bucket_or_an_error_never_a_local_directory() {
    for (address, says) in [
        ("ftp://host/repo", "unknown scheme ftp://"),
        ("s3:bucket/prefix", "not followed by //"),
        ("gs://bucket/repo", "sync source"),
        ("s3://Bad_Bucket/p", "is not a bucket name"),
        ("", "is empty"),
    ] {
        let e = Address::parse(address).unwrap_err();
        assert!(said(&e).contains(says), "{address}: {}", said(&e));
        assert!(e.hint_text().is_some(), "{address}");
    }
    // A directory whose name holds a colon is written as a path.
    let here = Here::new();
    let colon = here.path("s3:data");
    let a = Address::parse(colon.to_str().unwrap()).unwrap();
    assert_eq!(a, Address::Local(colon.clone()));
    let rel = Address::parse("./s3:data").unwrap();
    assert_eq!(rel, Address::Local("./s3:data".into()));
    here.open("http://unused", colon.to_str().unwrap(), Mode::Init)
        .unwrap();
    assert!(colon.join("sealvol.repo").exists());
}

#[test]
fn bucket_problems_are_one_line_that_says_what_to_fix() {
    let here = Here::new();
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    moto.seed(&["models", "--keys", "other/data.csv=100"]);
    moto.seed(&["--put", "models", "newer/sealvol.repo", "{\"format\": 99}"]);
    let ep = moto.endpoint();
    let fails = |address: &str, mode: Mode| -> String {
        let Err(e) = here.open(&ep, address, mode) else {
            panic!("{address} opened");
        };
        assert!(e.hint_text().is_some(), "{address}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
        said(&e)
    };
    let err = fails("s3://no-such-bucket/p", Mode::Existing);
    assert!(err.contains("no bucket no-such-bucket"), "{err}");
    let err = fails("s3://no-such-bucket/p", Mode::Init);
    assert!(err.contains("no bucket no-such-bucket"), "{err}");
    let err = fails("s3://models/empty", Mode::Existing);
    assert!(err.contains("no repository at s3://models/empty/"), "{err}");
    assert!(
        err.contains("sealvol init --repo s3://models/empty/"),
        "{err}"
    );
    // A push never makes a bucket a repository: only init does.
    let err = fails("s3://models/empty", Mode::CreateLocal);
    assert!(err.contains("sealvol init"), "{err}");
    assert!(bucket_keys(&moto, "models", "empty/").is_empty());
    let err = fails("s3://models/other", Mode::Existing);
    assert!(
        err.contains("holds objects, but no sealvol repository"),
        "{err}"
    );
    let err = fails("s3://models/other", Mode::Init);
    assert!(
        err.contains("holds objects, but no sealvol repository"),
        "{err}"
    );
    assert_eq!(bucket_keys(&moto, "models", "other/"), ["other/data.csv"]);
    let err = fails("s3://models/newer", Mode::Existing);
    assert!(err.contains("format 99"), "{err}");

    // An endpoint that is down: retried for a few seconds, then said.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let t = Instant::now();
    let Err(e) = here.open(
        &format!("http://127.0.0.1:{port}"),
        "s3://models/team",
        Mode::Existing,
    ) else {
        panic!("a dead endpoint opened");
    };
    assert!(e.to_string().contains("cannot reach"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());

    // A service that answers every request with 500 (a fault moto cannot be made to
    // produce on demand, hence this small server): retried, then said.
    let failing = FailingServer::start();
    let endpoint = format!("http://127.0.0.1:{}", failing.port);
    let Err(e) = here.open(&endpoint, "s3://models/team", Mode::Existing) else {
        panic!("a failing endpoint opened");
    };
    assert!(e.to_string().contains("HTTP 500"), "{e}");
}

#[test]
fn wrong_credentials_and_a_bucket_without_permission_are_refused_at_once() {
    let here = Here::new();
    // moto checks credentials after its first N requests (the set-up below). (It also
    // rejects the signature of any listing with a `/` in its prefix, so with auth on,
    // only what needs no such listing is tried: opening and `init` at a bucket's root.)
    let moto = Moto::start(&[("INITIAL_NO_AUTH_ACTION_COUNT", "5")]);
    moto.seed(&["--bucket", "allowed"]); // 1 request
    moto.seed(&["--bucket", "forbidden"]); // 1 request
    let keys = moto.seed(&["--iam-user", "team-a", "--only", "allowed"]); // 3 requests
    here.set_secret("team-a", &keys);
    let ep = moto.endpoint();
    here.open_with(&ep, "s3://allowed", Mode::Init, "team-a")
        .unwrap();
    let Err(again) = here.open_with(&ep, "s3://allowed", Mode::Init, "team-a") else {
        panic!("a second init succeeded");
    };
    assert!(
        said(&again).contains("already holds"),
        "the secret reached the bucket: {}",
        said(&again)
    );
    for (address, mode, secret) in [
        // The default `test` keys: unknown to moto once it checks.
        ("s3://allowed", Mode::Existing, "test"),
        ("s3://forbidden", Mode::Existing, "team-a"),
        ("s3://forbidden", Mode::Init, "team-a"),
    ] {
        let t = Instant::now();
        let Err(e) = here.open_with(&ep, address, mode, secret) else {
            panic!("{address} opened with {secret}");
        };
        let err = said(&e);
        assert!(err.contains("access denied"), "{err}");
        assert!(err.contains("--repo-secret"), "{err}");
        assert!(!err.contains(keys.split_once(':').unwrap().1), "{err}");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "a 403 is not retried"
        );
    }
    let e = sealvol_source::secrets::get(&here.path("state"), "nope").unwrap_err();
    assert!(e.to_string().contains("nope"), "{e}");
}

#[test]
fn an_object_store_that_ignores_conditional_writes_is_refused_before_any_write() {
    let here = Here::new();
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    here.open(&moto.endpoint(), "s3://models/repo", Mode::Init)
        .unwrap();
    let before = bucket_keys(&moto, "models", "");
    let log = here.path("faults.log");
    let proxy = FaultProxy::start(moto.port, &["drop-conditions"], &log);
    // Every command opens its repository first: refused there, whatever it meant to do.
    for (address, mode) in [
        ("s3://models/repo", Mode::Existing),
        ("s3://models/repo", Mode::CreateLocal),
        ("s3://models/fresh", Mode::Init),
    ] {
        let Err(e) = here.open(&proxy.endpoint(), address, mode) else {
            panic!("{address} opened through a store without conditional writes");
        };
        let err = said(&e);
        assert!(err.contains("ignores conditional writes"), "{err}");
        assert!(err.contains("If-None-Match"), "{err}");
    }
    assert_eq!(
        bucket_keys(&moto, "models", ""),
        before,
        "nothing was written"
    );
    let faults = std::fs::read_to_string(&log).unwrap();
    assert!(
        faults.to_lowercase().contains("dropped if-none-match"),
        "{faults}"
    );
}

#[test]
fn a_connection_cut_mid_pack_upload_is_retried_and_nothing_half_written_is_referenced() {
    let here = Here::new();
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    here.open(&moto.endpoint(), "s3://models/repo", Mode::Init)
        .unwrap();
    let log = here.path("faults.log");
    let proxy = FaultProxy::start(moto.port, &["cut-uploads", "2"], &log);
    let repo = here
        .open(&proxy.endpoint(), "s3://models/repo", Mode::Existing)
        .unwrap();
    let src = here.path("src");
    checkpoint(&src, 5);
    let pushed = push_to(&repo, &src, "w/cut", &[]);
    let faults = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        faults.lines().filter(|l| l.starts_with("cut ")).count(),
        2,
        "{faults}"
    );
    let direct = here
        .open(&moto.endpoint(), "s3://models/repo", Mode::Existing)
        .unwrap();
    verify_all(&direct);
    let pulled = here.path("pulled");
    pull_into(direct, "w/cut", &pulled);
    assert_eq!(digest_dir(&pulled).unwrap(), pushed.digest);
}

#[test]
fn a_version_mirrored_to_a_bucket_and_back_keeps_its_digest_and_copies_only_what_is_missing() {
    let here = Here::new();
    let moto = Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let ep = moto.endpoint();
    here.open(&ep, "s3://models/eu", Mode::Init).unwrap();
    let local = Repository::open_local(&here.path("repo"), true, false).unwrap();
    let bucket = here.open(&ep, "s3://models/eu", Mode::Existing).unwrap();
    let v1 = here.path("v1");
    write(&v1.join("model.bin"), &noise(24 << 20, 1));
    write(&v1.join("config.json"), b"{\"layers\": 2}\n");
    let d1 = push_to(&local, &v1, "weights/m", &["prod"]).digest;
    let prod = Ref::parse("weights/m:prod").unwrap();

    let first = sealvol_core::mirror::mirror(&local, &bucket, &prod, &Quiet).unwrap();
    assert_eq!(first.digest, d1.to_string(), "{first:?}");
    assert!(first.new, "{first:?}");
    assert!(first.bytes_copied >= 24 << 20, "{first:?}");
    let again = sealvol_core::mirror::mirror(&local, &bucket, &prod, &Quiet).unwrap();
    assert_eq!(again.chunks_copied, 0, "{again:?}");
    assert!(!again.new, "{again:?}");

    // The bucket serves the same version under the same tag.
    let fresh = here.open(&ep, "s3://models/eu", Mode::Existing).unwrap();
    assert_eq!(fresh.resolve(&prod).unwrap(), d1);

    // A fine-tune pushed to the bucket comes back with only its changed chunks.
    let v2 = here.path("v2");
    let mut model = std::fs::read(v1.join("model.bin")).unwrap();
    model[20 << 20..].copy_from_slice(&noise(4 << 20, 7));
    write(&v2.join("model.bin"), &model);
    write(&v2.join("config.json"), b"{\"layers\": 2}\n");
    let d2 = push_to(&fresh, &v2, "weights/m", &["prod"]).digest;
    let back = sealvol_core::mirror::mirror(&fresh, &local, &prod, &Quiet).unwrap();
    assert_eq!(back.digest, d2.to_string(), "{back:?}");
    assert!(
        back.bytes_copied > 0 && back.bytes_copied < 8 << 20,
        "only the fine-tuned end crosses: {back:?}"
    );
    assert!(back.chunks_present > 0, "{back:?}");
    assert_eq!(local.resolve(&prod).unwrap(), d2);
    verify_all(&local);
    let out = here.path("out");
    pull_into(
        Repository::open_local(&here.path("repo"), false, false).unwrap(),
        &format!("weights/m@{d2}"),
        &out,
    );
    assert_eq!(digest_dir(&out).unwrap(), d2);
}
