//! Syncs from S3 and its kin (R2, CoreWeave) against moto on loopback, run by an agent
//! started in the test with these sources: the digest of the same files on disk and a
//! resync for free, configured endpoints, hostile keys, a missing bucket retried once it
//! exists, a 403, a connection cut mid-file, and bytes that disagree with an object's
//! MD5. What only processes show (a sync without credentials in its environment,
//! secrets never printed, kill -9 mid-sync) is tested on the binary
//! (`tests/sync/s3.rs`).

use std::time::{Duration, Instant};

use super::common::{digest_of, endpoints, error_of, here, manifest_json, sample, write};
use sealvol_core::testutil::noise;
use sealvol_node::jobs::{JobState, JobsApi};
use sealvol_source::Endpoints;
use sealvol_testkit::servers::{FaultProxy, Moto, SlowProxy};

#[test]
fn an_s3_prefix_seals_the_digest_of_the_same_files_on_disk_and_resyncs_for_free() {
    let moto = Moto::start(&[]);
    let h = here();
    let src = h.path("src");
    sample(&src);
    moto.seed(&["ckpts", "run-7/step-40", src.to_str().unwrap()]);
    // Another prefix that must not leak in.
    moto.seed(&["ckpts", "--keys", "run-7/step-400/other.bin=10"]);
    let eps = endpoints(&moto.endpoint());

    let job = h.sync(
        &eps,
        "s3://ckpts/run-7/step-40",
        "weights/run-7",
        &["latest"],
        &[],
    );
    assert_eq!(job.state, JobState::Ready, "{job:?}");
    let want = digest_of(&src);
    assert!(job.sealed.as_deref().unwrap().ends_with(&want), "{job:?}");

    // The version holds the same bytes, and says where they came from.
    let repo = h.repository();
    let r = sealvol_core::refs::Ref::parse("weights/run-7:latest").unwrap();
    assert_eq!(repo.resolve(&r).unwrap().to_string(), want);
    let manifest = manifest_json(&h, "weights/run-7", &want);
    let prov = &manifest["provenance"];
    assert_eq!(prov["source"], "s3://ckpts/run-7/step-40/");
    assert!(prov["listed"].as_str().is_some());
    let etag = prov["objects"]["model.safetensors"].as_str().unwrap();
    assert!(etag.len() > 8, "an ETag per object: {prov}");
    // Written in one part, an object's ETag is its MD5: its bytes were checked. One
    // written in parts (`-N`) has no hash of its whole content to check against.
    let checked = prov["checked"].as_object().unwrap();
    for (path, etag) in prov["objects"].as_object().unwrap() {
        let want = if etag.as_str().unwrap().contains('-') {
            ""
        } else {
            "md5"
        };
        assert_eq!(checked[path], want, "{path}: {prov}");
    }
    assert!(checked.values().any(|c| c == "md5"), "{prov}");

    // Again: same digest, nothing fetched, no new chunk stored.
    let stored = h.stored_chunk_bytes();
    let again = h.sync(&eps, "s3://ckpts/run-7/step-40", "weights/run-7", &[], &[]);
    assert_eq!(again.state, JobState::Ready);
    assert!(again.sealed.as_deref().unwrap().ends_with(&want));
    assert_eq!(again.progress.chunks_new, 0, "{again:?}");
    assert_eq!(h.stored_chunk_bytes(), stored);

    // Both jobs are on record.
    let jobs = h.agent.list().unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j.state == JobState::Ready));
    assert_eq!(jobs[1].spec.source, "s3://ckpts/run-7/step-40/");
}

#[test]
fn r2_and_coreweave_addresses_reach_their_configured_endpoints() {
    let moto = Moto::start(&[]);
    let h = here();
    let src = h.path("src");
    write(&src.join("adapter.safetensors"), &noise(100_000, 9));
    moto.seed(&["lora", "v1", src.to_str().unwrap()]);
    let want = digest_of(&src);
    for (url, eps) in [
        (
            "r2://0123abcd/lora/v1",
            Endpoints {
                s3: Some("http://127.0.0.1:9".into()),
                r2: Some(moto.endpoint()),
                ..Endpoints::default()
            },
        ),
        (
            "cw://lora/v1",
            Endpoints {
                s3: Some("http://127.0.0.1:9".into()),
                cw: Some(moto.endpoint()),
                ..Endpoints::default()
            },
        ),
    ] {
        let job = h.sync(&eps, url, "adapters/x", &[], &[]);
        assert!(
            job.sealed.as_deref().is_some_and(|s| s.ends_with(&want)),
            "{url}: {job:?}"
        );
    }
}

#[test]
fn hostile_keys_are_refused_by_name_and_seal_nothing_unless_excluded() {
    let moto = Moto::start(&[]);
    let h = here();
    moto.seed(&[
        "evil",
        "--keys",
        "m/ok.bin=100",
        "m/empty.bin=0",
        "m/folder/=0",
        "m/a//b=5",
        "m/x/../../escape=5",
    ]);
    let eps = endpoints(&moto.endpoint());
    let job = h.sync(&eps, "s3://evil/m", "x/evil", &[], &[]);
    assert_eq!(job.state, JobState::Failed);
    let err = error_of(&job);
    assert!(err.contains("a//b") || err.contains("escape"), "{err}");
    assert!(
        err.contains("--exclude"),
        "the hint says how to go on: {err}"
    );
    assert!(!h.volumes().contains(&"x/evil".to_string()));

    let job = h.sync(&eps, "s3://evil/m", "x/evil", &[], &["a//b", "x/**"]);
    assert_eq!(job.state, JobState::Ready, "{job:?}");
    let repo = h.repository();
    let d = sealvol_core::Digest::parse(job.sealed.as_deref().unwrap().rsplit('@').next().unwrap())
        .unwrap();
    let paths: Vec<String> = repo
        .manifest(
            &sealvol_core::refs::VolumeName::parse("x/evil").unwrap(),
            &d,
        )
        .unwrap()
        .entries
        .iter()
        .map(|e| e.path().to_string())
        .collect();
    assert!(
        paths.contains(&"ok.bin".to_string()) && paths.contains(&"empty.bin".to_string()),
        "{paths:?}"
    );
    assert!(
        !paths.iter().any(|p| p.contains("folder")),
        "a folder marker is no file: {paths:?}"
    );

    // A key that is both a file and a folder of other keys.
    moto.seed(&["clash", "--keys", "m/a=3", "m/a/b=3"]);
    let job = h.sync(&eps, "s3://clash/m", "x/clash", &[], &[]);
    assert!(error_of(&job).contains("\"a\""), "{}", error_of(&job));
    // Nothing was ever written outside the repository and state directories.
    let mut top: Vec<String> = std::fs::read_dir(h.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    top.sort();
    assert_eq!(top, ["repo", "state"]);
}

#[test]
fn a_missing_bucket_fails_at_once_and_the_job_can_be_retried_once_it_exists() {
    let moto = Moto::start(&[]);
    let h = here();
    let eps = endpoints(&moto.endpoint());
    let t = Instant::now();
    let job = h.sync(&eps, "s3://nobucket/p", "x/y", &[], &[]);
    assert_eq!(job.state, JobState::Failed);
    assert!(error_of(&job).contains("no bucket nobucket"), "{job:?}");
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "a 404 is not retried"
    );

    let src = h.path("src");
    write(&src.join("w.bin"), &noise(10_000, 4));
    moto.seed(&["nobucket", "p", src.to_str().unwrap()]);
    h.agent.retry(job.id).unwrap();
    let job = h.ended(job.id);
    assert_eq!(job.state, JobState::Ready, "{job:?}");
    assert!(job.sealed.as_deref().unwrap().ends_with(&digest_of(&src)));
    assert_eq!(job.attempts, 2);

    // Retrying a READY job is refused, and says which jobs can be.
    let e = h.agent.retry(job.id).unwrap_err();
    let said = format!("{e} {}", e.hint_text().unwrap_or(""));
    assert!(said.contains("FAILED or CANCELLED"), "{said}");
}

#[test]
fn a_403_fails_at_once_and_says_which_credentials_to_give() {
    // moto checks credentials after its first N requests (the set-up below): the
    // `test` ones are unknown to it.
    let moto = Moto::start(&[("INITIAL_NO_AUTH_ACTION_COUNT", "2")]);
    let h = here();
    moto.seed(&["private", "--keys", "p/w.bin=1000"]); // 2 requests, then auth
    let t = Instant::now();
    let job = h.sync(
        &endpoints(&moto.endpoint()),
        "s3://private/p",
        "x/p",
        &[],
        &[],
    );
    assert_eq!(job.state, JobState::Failed);
    let err = error_of(&job);
    assert!(err.contains("access denied"), "{err}");
    assert!(
        err.contains("--secret") && err.contains("AWS_ACCESS_KEY_ID"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "a 403 is not retried"
    );
}

#[test]
fn a_connection_cut_mid_file_is_read_on_from_where_it_stopped() {
    let moto = Moto::start(&[]);
    let h = here();
    let src = h.path("src");
    write(&src.join("a.bin"), &noise(3 << 20, 31));
    write(&src.join("b.bin"), &noise(2 << 20, 32));
    moto.seed(&["cut", "p", src.to_str().unwrap()]);
    // Every connection dies after 1 MiB from the server.
    let proxy = SlowProxy::start_cutting(moto.port, 1 << 20);
    let eps = endpoints(&format!("http://127.0.0.1:{}", proxy.port));
    let job = h.sync(&eps, "s3://cut/p", "x/cut", &[], &[]);
    assert_eq!(job.state, JobState::Ready, "{job:?}");
    assert!(job.sealed.as_deref().unwrap().ends_with(&digest_of(&src)));
    // The job's log says where each cut happened, and that it read on.
    let log = h.agent.logs(job.id).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("a.bin: the connection was cut at byte")
                && l.contains("reading on from there")),
        "{log}"
    );
}

#[test]
fn bytes_that_disagree_with_the_objects_own_md5_fail_the_job_and_seal_nothing() {
    let moto = Moto::start(&[]);
    let h = here();
    let src = h.path("src");
    write(&src.join("a.bin"), &noise(3 << 20, 41));
    moto.seed(&["flip", "p", src.to_str().unwrap()]);
    let log = h.path("faults.log");
    let proxy = FaultProxy::start(moto.port, &["flip-reads"], &log);
    let job = h.sync(
        &endpoints(&proxy.endpoint()),
        "s3://flip/p",
        "x/flip",
        &[],
        &[],
    );
    assert_eq!(job.state, JobState::Failed);
    let err = error_of(&job);
    let md5 = {
        use md5::Digest as _;
        hex::encode(md5::Md5::digest(std::fs::read(src.join("a.bin")).unwrap()))
    };
    assert!(
        err.contains("a.bin") && err.contains("md5") && err.contains(&md5),
        "{err}"
    );
    // Read again before the job failed, and nothing sealed.
    let flips = std::fs::read_to_string(&log).unwrap().lines().count();
    assert!(flips >= 3, "read {flips} time(s): {err}");
    assert!(!h.volumes().iter().any(|v| v.contains("flip")));
}
