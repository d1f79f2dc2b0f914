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

/// What a tap saw of one file: its bytes, and how it ended.
#[derive(Default)]
struct Seen {
    bytes: Vec<u8>,
    end: Option<Result<Vec<&'static str>, String>>,
}

/// A file a tap was opened for: its key, its size, what it saw.
type Opened = (String, u64, std::sync::Arc<std::sync::Mutex<Seen>>);

#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<Opened>>);

struct OneFile(std::sync::Arc<std::sync::Mutex<Seen>>);

impl sealvol_source::Tap for Recorder {
    fn open(&self, key: &str, size: u64) -> Option<Box<dyn sealvol_source::FileTap>> {
        let seen = std::sync::Arc::default();
        self.0
            .lock()
            .unwrap()
            .push((key.to_string(), size, std::sync::Arc::clone(&seen)));
        Some(Box::new(OneFile(seen)))
    }
}

impl sealvol_source::FileTap for OneFile {
    fn bytes(&mut self, bytes: &[u8]) {
        self.0.lock().unwrap().bytes.extend_from_slice(bytes);
    }
    fn verified(self: Box<Self>, passed: &[&'static str]) {
        self.0.lock().unwrap().end = Some(Ok(passed.to_vec()));
    }
    fn failed(self: Box<Self>, why: &str) {
        self.0.lock().unwrap().end = Some(Err(why.to_string()));
    }
}

/// A sync with a tap: every file's bytes in listing order, each then verified against
/// the source's own hashes, or failed naming why (a byte flipped by the source).
fn tapped_sync(flip: Option<&str>) -> (sealvol_core::Result<String>, Vec<(String, u64, Seen)>) {
    let model = minilm_dir();
    let repo_arg = format!("org/minilm={}", model.display());
    let mut args = vec!["--repo", repo_arg.as_str()];
    if let Some(f) = flip {
        args.extend(["--flip", f]);
    }
    let hub = common::servers::HfServer::start(&args);
    let dir = tempfile::tempdir().unwrap();
    let repo = sealvol_core::Repository::open_local(&dir.path().join("repo"), true, false).unwrap();
    let db = sealvol_node::state::StateDb::open(
        &dir.path().join("state"),
        std::time::Duration::from_secs(5),
    )
    .unwrap()
    .unwrap();
    let spec = sealvol_node::jobs::JobSpec {
        source: "hf://org/minilm".into(),
        volume: "mirror/minilm".into(),
        endpoint: sealvol_source::endpoints::Resolved {
            url: Some(hub.url.clone()),
            path_style: false,
        },
        ..Default::default()
    };
    let tap = std::sync::Arc::new(Recorder::default());
    let opts = sealvol_node::sync::SyncOptions {
        state_dir: dir.path(),
        trust: sealvol_node::sync::Trust::Machine,
        batch_bytes: sealvol_node::sync::DEFAULT_BATCH,
        streams: 4,
        progress: &sealvol_core::progress::Quiet,
        cancel: std::sync::Arc::default(),
        connector: Some(&sealvol_sources::Sources),
        slot: None,
        tap: Some(tap.clone()),
    };
    let sealed = sealvol_node::sync::run(&repo, &db, &spec, &opts).map(|r| r.pinned_ref());
    let seen = std::mem::take(&mut *tap.0.lock().unwrap())
        .into_iter()
        .map(|(k, size, s)| (k, size, std::mem::take(&mut *s.lock().unwrap())))
        .collect();
    (sealed, seen)
}

#[test]
fn a_syncs_tap_sees_each_file_smallest_first_then_whether_the_sources_hashes_held() {
    let (sealed, seen) = tapped_sync(None);
    sealed.unwrap();
    let model = minilm_dir();
    // Smallest first (what loaders ask for first), then by name.
    let keys: Vec<(u64, &str)> = seen.iter().map(|(k, n, _)| (*n, k.as_str())).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "smallest first");
    assert_eq!(keys.len(), 13);
    for (key, size, s) in &seen {
        let want = std::fs::read(model.join(key)).unwrap();
        assert_eq!(*size, want.len() as u64);
        assert!(s.bytes == want, "{key}: the bytes as the source sent them");
        let passed = s.end.clone().unwrap().unwrap();
        let kind = if want.len() as u64 >= 10 << 20 {
            "sha256"
        } else {
            "git-blob-sha1"
        };
        assert_eq!(passed, [kind], "{key}");
    }

    // A source that flips a byte of the large file: the tap is told it failed, and why.
    let (sealed, seen) = tapped_sync(Some("model.safetensors"));
    assert!(sealed.is_err());
    let (_, _, s) = seen
        .iter()
        .find(|(k, _, _)| k == "model.safetensors")
        .unwrap();
    let why = s.end.clone().unwrap().unwrap_err();
    assert!(
        why.contains("model.safetensors") && why.contains("sha256"),
        "{why}"
    );
}
