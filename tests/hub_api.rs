//! `sealvol serve`'s Hugging Face Hub API (`/hf/`) read by another sealvol: a sync
//! from `hf://` with `HF_ENDPOINT` at a server seals the same version there, checking
//! every file against the ids the server gives (SHA-256 of the large ones, git blob
//! ids of the rest), as it checks the Hub's own. (The Hub's Python clients against the
//! same routes: python/tests/test_hub_clients.py.)

mod common;

use common::Env;
use common::servers::{key, minilm_dir, serve};
use serde_json::Value;

#[test]
fn one_server_seals_a_version_from_anothers_hub_api_with_every_file_checked() {
    let origin = Env::new();
    origin.ok(&["init"]);
    let pushed = origin.push(&minilm_dir(), "team/minilm", &["--tag", "prod"]);
    let served = serve(&origin, &[]);
    let reader = key(&origin, &["reader", "--namespace", "team", "--read-only"]);

    let mut copy = Env::new();
    copy.vars = vec![
        ("HF_ENDPOINT".into(), format!("{}/hf", served.url())),
        ("HF_HOME".into(), copy.path("hf-home").display().to_string()),
        ("HF_TOKEN".into(), reader.clone()),
    ];
    copy.ok(&["init"]);
    let job: Value = serde_json::from_str(&copy.ok(&[
        "volume",
        "sync",
        "hf://team/minilm@prod",
        "mirror/minilm",
        "--json",
    ]))
    .unwrap();
    assert_eq!(job["state"], "READY", "{job}");
    // The same files, so the same digest.
    let sealed = job["sealed"].as_str().unwrap_or_default().to_string();
    assert!(
        pushed.ends_with(sealed.rsplit('@').next().unwrap()),
        "{pushed} vs {sealed}"
    );
    let described: Value =
        serde_json::from_str(&copy.ok(&["volume", "describe", "mirror/minilm", "--json"])).unwrap();
    let checked = &described["checked"];
    assert_eq!(checked["sha256"], 1, "{checked}");
    assert_eq!(checked["git-blob-sha1"], 12, "{checked}");
    assert!(checked.get("unchecked").is_none(), "{checked}");

    // A key of another namespace: the repo is not there for it, and the sync says so.
    copy.vars[2].1 = key(&origin, &["other", "--namespace", "other"]);
    let said = copy.fails(
        1,
        &["volume", "sync", "hf://team/minilm@prod", "mirror/other"],
    );
    assert!(said.contains("no such repository"), "{said}");
}
