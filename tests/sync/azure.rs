//! Azure Blob against Azurite.

use super::*;

#[test]
fn azure_through_azurite_with_an_account_key_secret() {
    let az = Azurite::start();
    let env = Env::new();
    let src = env.path("src");
    sample(&src);
    cloud_seed("azure", &az.endpoint, "models", "qwen", &src);
    let az_cmd = || {
        let mut c = env.cmd();
        c.env("SEALVOL_AZURE_ENDPOINT", &az.endpoint)
            .env_remove("AZURE_STORAGE_ACCOUNT_KEY")
            .env_remove("AZURE_STORAGE_SAS_KEY");
        c
    };
    // A wrong key is refused with what to do; the right one, from a secret, works.
    assert!(
        env.set_secret(
            "wrong",
            "d3Jvbmcta2V5LW9mLXRoZS1yaWdodC1sZW5ndGgtZm9yLWF6dXJl"
        )
        .status
        .success()
    );
    let t = Instant::now();
    let (_, err) = fails(
        az_cmd(),
        &[
            "volume",
            "sync",
            "az://devstoreaccount1/models/qwen",
            "w/az",
            "--secret",
            "wrong",
        ],
    );
    assert!(
        err.contains("access denied") || err.contains("403"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "a 403 is not retried for long"
    );
    assert!(env.set_secret("azurite", AZURITE_KEY).status.success());
    let out = ok(
        az_cmd(),
        &[
            "volume",
            "sync",
            "az://devstoreaccount1/models/qwen",
            "w/az",
            "--secret",
            "azurite",
        ],
    );
    assert!(out.trim().ends_with(&digest_of(&env, &src)), "{out}");
    let seen = env.ok(&["jobs", "ls", "--json"]) + &env.ok(&["jobs", "show", "2", "--json"]);
    assert!(!seen.contains(AZURITE_KEY), "the key leaked");
}
