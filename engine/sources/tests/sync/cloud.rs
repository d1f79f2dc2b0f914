//! Syncs from Azure Blob (Azurite) and GCS (its emulator), run by an agent started in
//! the test: an account key from a secret, a wrong one refused at once; each GCS object
//! pinned to its generation and checked against both its hashes, a missing bucket, and
//! a secret that is no service account key refused without being shown.

use std::time::{Duration, Instant};

use super::common::{digest_of, error_of, here, manifest_json, sample, write};
use sealvol_node::jobs::{JobSpec, JobState, JobsApi};
use sealvol_source::Endpoints;
use sealvol_testkit::servers::{AZURITE_KEY, Azurite, GcsEmulator, cloud_seed};

#[test]
fn azure_through_azurite_with_an_account_key_secret() {
    let az = Azurite::start();
    let h = here();
    let src = h.path("src");
    sample(&src);
    cloud_seed("azure", &az.endpoint, "models", "qwen", &src);
    let eps = Endpoints {
        azure: Some(az.endpoint.clone()),
        ..Endpoints::default()
    };
    // A wrong key is refused with what to do; the right one, from a secret, works.
    h.set_secret(
        "wrong",
        "d3Jvbmcta2V5LW9mLXRoZS1yaWdodC1sZW5ndGgtZm9yLWF6dXJl",
    );
    let t = Instant::now();
    let job = h.submit(&eps, "az://devstoreaccount1/models/qwen", "w/az", |s| {
        s.secret = Some("wrong".into())
    });
    assert_eq!(job.state, JobState::Failed);
    let err = error_of(&job);
    assert!(
        err.contains("access denied") || err.contains("403"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "a 403 is not retried for long"
    );
    h.set_secret("azurite", AZURITE_KEY);
    let job = h.submit(&eps, "az://devstoreaccount1/models/qwen", "w/az", |s| {
        s.secret = Some("azurite".into())
    });
    assert_eq!(job.state, JobState::Ready, "{job:?}");
    assert!(job.sealed.as_deref().unwrap().ends_with(&digest_of(&src)));
    let seen = serde_json::to_string(&h.agent.list().unwrap()).unwrap();
    assert!(
        seen.contains("azurite"),
        "the secret's name is on record: {seen}"
    );
    assert!(!seen.contains(AZURITE_KEY), "the key leaked");
}

#[test]
fn gcs_through_its_emulator_pins_each_object_to_its_generation() {
    let gcs = GcsEmulator::start();
    let h = here();
    let src = h.path("src");
    sample(&src);
    cloud_seed("gcs", &gcs.endpoint, "models", "qwen/step-9", &src);
    // Another prefix that must not leak in.
    let other = h.path("other");
    write(&other.join("x.bin"), b"not this");
    cloud_seed("gcs", &gcs.endpoint, "models", "qwen/step-90", &other);
    let eps = Endpoints {
        gcs: Some(gcs.endpoint.clone()),
        ..Endpoints::default()
    };

    let job = h.submit(&eps, "gs://models/qwen/step-9", "w/gcs", |_| {});
    let want = digest_of(&src);
    assert!(
        job.sealed.as_deref().is_some_and(|s| s.ends_with(&want)),
        "{job:?} vs {want}"
    );
    let prov = &manifest_json(&h, "w/gcs", &want)["provenance"];
    assert_eq!(prov["source"], "gs://models/qwen/step-9/");
    let generation = prov["objects"]["model.safetensors"].as_str().unwrap();
    assert!(
        !generation.is_empty() && generation.bytes().all(|b| b.is_ascii_digit()),
        "a generation per object: {prov}"
    );
    // The listing's own MD5 and CRC32C of each object: every byte checked against both.
    let checked = prov["checked"].as_object().unwrap();
    assert!(
        !checked.is_empty() && checked.values().all(|c| c == "md5,crc32c"),
        "{prov}"
    );

    // A missing bucket fails at once, naming it and what to check.
    let t = Instant::now();
    let job = h.submit(&eps, "gs://nobucket/p", "w/x", |_| {});
    assert_eq!(job.state, JobState::Failed);
    let err = error_of(&job);
    assert!(
        err.contains("gs://nobucket/p/") && err.contains("not found"),
        "{err}"
    );
    assert!(err.contains("hint: check the bucket"), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "a 404 is not retried"
    );

    // A secret that is not a service account's JSON key is refused without being shown.
    let bogus = "not-a-service-account-key-3f9c";
    h.set_secret("gkey", bogus);
    let job = h.submit(&eps, "gs://models/qwen/step-9", "w/y", |s: &mut JobSpec| {
        s.secret = Some("gkey".into())
    });
    assert_eq!(job.state, JobState::Failed);
    let err = error_of(&job);
    assert!(err.contains("service account"), "{err}");
    assert!(!err.contains(bogus), "the secret leaked: {err}");
}
