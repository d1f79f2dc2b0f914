//! GCS against gcp-storage-emulator.

use super::*;

#[test]
fn gcs_through_its_emulator_pins_each_object_to_its_generation() {
    let gcs = GcsEmulator::start();
    let env = Env::new();
    let src = env.path("src");
    sample(&src);
    cloud_seed("gcs", &gcs.endpoint, "models", "qwen/step-9", &src);
    // Another prefix that must not leak in.
    let other = env.path("other");
    write(&other.join("x.bin"), b"not this");
    cloud_seed("gcs", &gcs.endpoint, "models", "qwen/step-90", &other);
    let gcs_cmd = || {
        let mut c = env.cmd();
        c.env("STORAGE_EMULATOR_HOST", &gcs.endpoint)
            .env_remove("GOOGLE_APPLICATION_CREDENTIALS")
            .env_remove("GOOGLE_SERVICE_ACCOUNT");
        c
    };

    let out = ok(
        gcs_cmd(),
        &["volume", "sync", "gs://models/qwen/step-9", "w/gcs"],
    );
    let want = digest_of(&env, &src);
    assert!(out.trim().ends_with(&want), "{out} vs {want}");
    let prov = &manifest_json(&env, "w/gcs", &want)["provenance"];
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
    let (code, err) = fails(gcs_cmd(), &["volume", "sync", "gs://nobucket/p", "w/x"]);
    assert_eq!(code, 1);
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
    assert!(env.set_secret("gkey", bogus).status.success());
    let (code, err) = fails(
        gcs_cmd(),
        &[
            "volume",
            "sync",
            "gs://models/qwen/step-9",
            "w/y",
            "--secret",
            "gkey",
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("service account"), "{err}");
    assert!(!err.contains(bogus), "the secret leaked: {err}");
}
