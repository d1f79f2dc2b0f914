//! Syncs from Hugging Face against the local hub stand-in, run by an agent started in
//! the test: hub errors that say what to fix and a token from a secret that opens a
//! private repository, a 100,000-file listing paged through and filtered, and a flipped
//! byte that fails its file naming both hashes. The real model synced and described,
//! and a hub that does not answer within `--timeout`, are tested on the binary
//! (`tests/sync/hf.rs`).

use std::time::{Duration, Instant};

use super::common::{digest_of, error_of, here};
use sealvol_node::jobs::{JobState, JobsApi};
use sealvol_source::Endpoints;
use sealvol_testkit::servers::{HfServer, minilm_dir};
use sha2::Digest as _;

fn hub_at(url: &str) -> Endpoints {
    Endpoints {
        hf: Some(url.to_string()),
        ..Endpoints::default()
    }
}

#[test]
fn hub_errors_say_what_to_fix_and_a_token_secret_opens_a_private_repo() {
    let model = minilm_dir().join("1_Pooling");
    let h = here();
    let token = "hf_privateTokenValueThatMustNotLeak";
    let hub = HfServer::start(&[
        "--repo",
        &format!("org/private={}", model.display()),
        "--token",
        token,
    ]);
    let eps = hub_at(&hub.url);
    // No token: 401.
    let t = Instant::now();
    let job = h.submit(&eps, "hf://org/private", "x/p", |_| {});
    assert_eq!(job.state, JobState::Failed);
    let err = error_of(&job);
    assert!(
        err.contains("access denied") && err.contains("HF_TOKEN"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "a 401 is not retried"
    );

    h.set_secret("hf", token);
    let with_token = |s: &mut sealvol_node::jobs::JobSpec| s.secret = Some("hf".into());
    // A wrong revision and a missing repository are permanent, and named.
    let job = h.submit(&eps, "hf://org/private@v9", "x/p", with_token);
    assert!(
        error_of(&job).contains("no revision \"v9\""),
        "{}",
        error_of(&job)
    );
    let job = h.submit(&eps, "hf://org/nothing", "x/p", with_token);
    assert!(
        error_of(&job).contains("no such repository"),
        "{}",
        error_of(&job)
    );

    let job = h.submit(&eps, "hf://org/private", "x/p", with_token);
    assert_eq!(job.state, JobState::Ready, "{job:?}");
    assert!(job.sealed.as_deref().unwrap().ends_with(&digest_of(&model)));
    let mut seen = String::new();
    for j in h.agent.list().unwrap() {
        seen += &serde_json::to_string(&j).unwrap();
        seen += &h.agent.logs(j.id).unwrap();
    }
    assert!(seen.contains("x/p"), "the jobs were read: {seen}");
    assert!(!seen.contains(token), "the token leaked");
}

#[test]
fn a_listing_of_a_hundred_thousand_files_is_paged_through_and_filtered() {
    // The local hub pages its tree 1,000 entries at a time, as the Hub does. The files
    // live in memory (/dev/shm): on this disk, making 100,000 files takes a minute.
    let h = here();
    let shm = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let repo = shm.path().join("many");
    for d in 0..100 {
        let dir = repo.join(format!("shard-{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..1000 {
            std::fs::write(dir.join(format!("f-{f:03}.txt")), format!("{d}/{f}")).unwrap();
        }
    }
    let hub = HfServer::start(&["--dataset", &format!("org/many={}", repo.display())]);
    let job = h.submit(&hub_at(&hub.url), "hf://datasets/org/many", "x/many", |s| {
        s.include = vec!["shard-07/f-00*".into()]
    });
    assert_eq!(job.state, JobState::Ready, "{job:?}");
    assert_eq!(job.progress.files_total, 10, "{job:?}");
    let logs = h.agent.logs(job.id).unwrap();
    assert!(
        logs.contains("listed 10 object(s)") && logs.contains("(99990 left out by filters)"),
        "{logs}"
    );
}

#[test]
fn a_hub_that_sends_one_flipped_byte_fails_the_file_naming_both_hashes_and_seals_nothing() {
    let model = minilm_dir();
    for (file, kind) in [
        ("model.safetensors", "sha256"),
        ("config.json", "git-blob-sha1"),
    ] {
        let h = here();
        let hub = HfServer::start(&[
            "--repo",
            &format!("sentence-transformers/all-MiniLM-L6-v2={}", model.display()),
            "--flip",
            file,
        ]);
        let job = h.submit(
            &hub_at(&hub.url),
            "hf://sentence-transformers/all-MiniLM-L6-v2",
            "embed/minilm",
            |_| {},
        );
        assert_eq!(job.state, JobState::Failed, "{job:?}");
        let err = error_of(&job);
        // The file, the check, and both hashes: what the Hub says and what came.
        let bytes = std::fs::read(model.join(file)).unwrap();
        let said = match kind {
            "sha256" => hex::encode(sha2::Sha256::digest(&bytes)),
            _ => {
                let mut h = sha1::Sha1::new();
                h.update(format!("blob {}\0", bytes.len()).as_bytes());
                h.update(&bytes);
                hex::encode(h.finalize())
            }
        };
        assert!(
            err.contains(file) && err.contains(kind) && err.contains(&said),
            "{err}"
        );
        assert!(err.contains("they hash to"), "{err}");
        // Nothing sealed.
        assert!(h.volumes().is_empty(), "{:?}", h.volumes());
    }
}
