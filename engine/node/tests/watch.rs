//! Watch mode, on an agent started in the test: every complete checkpoint becomes
//! exactly one version whose digest is the finished folder's, none is sealed while a
//! file of it is open for writing or while it is empty, retention trashes what its rules
//! let go and nothing a tag holds, a flat folder is sealed each time it settles, a
//! checkpoint that cannot be sealed waits for a fix while the next goes on, and a
//! replaced folder is followed. What only processes show (a foreground watch and its
//! signals, an agent killed or frozen mid-push, inotify limits of a user namespace, a
//! full state disk, exit codes) is tested on the binary: `tests/watch.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sealvol_testkit::trainer::train;
use serde_json::Value;

use sealvol_core::Repository;
use sealvol_core::refs::{Name, Ref, VolumeName};
use sealvol_core::testutil::noise;
use sealvol_core::walk::digest_dir;
use sealvol_node::agent::{Agent, AgentSettings, schedule::Limits};
use sealvol_node::jobs::JobsApi;
use sealvol_node::watch::{Layout, WatchSpec};

/// An agent over a repository of its own, and a second handle on the repository for
/// the test's reads, as another `sealvol` process would have.
struct Env {
    agent: Agent,
    repo: Repository,
    tmp: tempfile::TempDir,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let at = tmp.path().join("repo");
    let settings = AgentSettings {
        batch_bytes: 64 << 20,
        streams: 2,
        run_queue: true,
        trust: Default::default(),
        mirrors: None,
        limits: Limits::MACHINE,
        taps: None,
    };
    let repo = Repository::open_local(&at, true, false).unwrap();
    let agent = Agent::start(repo, &tmp.path().join("state"), settings, None)
        .unwrap()
        .expect("no other agent");
    Env {
        agent,
        repo: Repository::open_local(&at, false, false).unwrap(),
        tmp,
    }
}

impl Env {
    fn path(&self, name: &str) -> PathBuf {
        self.tmp.path().join(name)
    }

    /// `volume tag REF TAG`.
    fn tag(&self, r: &str, tag: &str) {
        let r = Ref::parse(r).unwrap();
        let d = self.repo.resolve(&r).unwrap();
        let tag = Name::parse("tag", tag).unwrap();
        self.repo.move_tag(&r.volume, &tag, &d, None).unwrap();
    }
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// `volume watch DIR VOL --detach` with `flags` (those of the CLI, as its parser
/// reads them); returns the watch's id.
fn detach(env: &Env, dir: &Path, volume: &str, flags: &[&str]) -> String {
    let mut spec = WatchSpec {
        dir: dir.to_str().unwrap().to_string(),
        volume: volume.to_string(),
        tags: Vec::new(),
        layout: Layout::Steps,
        settle_secs: 5.0,
        keep_last: None,
        keep_every: None,
        poll: false,
    };
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        let mut value = || *it.next().unwrap();
        match *flag {
            "--settle" => {
                spec.settle_secs = humantime::parse_duration(value()).unwrap().as_secs_f64()
            }
            "--tag" => spec.tags.push(value().to_string()),
            "--keep-last" => spec.keep_last = Some(value().parse().unwrap()),
            "--keep-every" => spec.keep_every = Some(value().parse().unwrap()),
            "--layout" => {
                spec.layout = match value() {
                    "flat" => Layout::Flat,
                    _ => Layout::Steps,
                }
            }
            "--poll" => spec.poll = true,
            other => panic!("no flag {other} here"),
        }
    }
    spec.check(&[]).unwrap();
    env.agent.add_watch(spec, None).unwrap().id.to_string()
}

/// What `watch show ID --json` prints.
fn view(env: &Env, id: &str) -> Value {
    serde_json::to_value(env.agent.watch_view(id.parse().unwrap()).unwrap()).unwrap()
}

/// Waits until watch `id` satisfies `pred`; returns its view. The deadline only fails
/// a watch that never gets there.
fn wait_for(env: &Env, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v = view(env, id);
        if pred(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "watch {id} never {what}: {v:#}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sealed(v: &Value) -> Vec<(String, String)> {
    v["watch"]["sealed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["digest"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `sealvol digest DIR`.
fn digest(_env: &Env, dir: &Path) -> String {
    digest_dir(dir).unwrap().to_string()
}

/// Every live version of `vol`, by digest.
fn versions(env: &Env, vol: &str) -> BTreeSet<String> {
    env.repo
        .versions(&VolumeName::parse(vol).unwrap())
        .unwrap()
        .into_iter()
        .map(|v| v.digest)
        .collect()
}

fn resolve(env: &Env, r: &str) -> String {
    env.repo
        .resolve(&Ref::parse(r).unwrap())
        .unwrap()
        .to_string()
}

#[test]
fn retention_trashes_what_the_rules_let_go_and_nothing_a_tag_holds() {
    let env = env();
    let staging = env.path("staging");
    train(&staging, &["--gib", "0.01", "--steps", "6"]);
    let run = env.path("run");
    std::fs::create_dir_all(&run).unwrap();
    let id = &detach(
        &env,
        &run,
        "w/ret",
        &[
            "--settle",
            "500ms",
            "--tag",
            "step-{step}",
            "--tag",
            "latest",
            "--keep-last",
            "2",
            "--keep-every",
            "1000",
        ],
    );
    let mut digests = Vec::new();
    for (i, step) in [500, 1000, 1500, 2000, 2500, 3000].iter().enumerate() {
        let name = format!("checkpoint-{step}");
        // Renamed into place, finished, as a trainer that writes elsewhere first does.
        std::fs::rename(staging.join(&name), run.join(&name)).unwrap();
        wait_for(&env, id, "sealed the next checkpoint", |v| {
            sealed(v).len() == i + 1
        });
        digests.push(digest(&env, &run.join(&name)));
        if *step == 500 {
            env.tag("w/ret:step-500", "prod");
        }
    }
    // A folder still being written under a temporary name is left alone...
    let tmp = run.join("tmp-checkpoint-3500");
    write(&tmp.join("model.safetensors"), &noise(1 << 20, 7));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        sealed(&view(&env, id)).len(),
        6,
        "a tmp folder is no checkpoint"
    );
    // ...until it is renamed.
    std::fs::rename(&tmp, run.join("checkpoint-3500")).unwrap();
    // Retention runs after the seal is recorded: idle with seven sealed means it ran.
    let v = wait_for(
        &env,
        id,
        "sealed the renamed folder and applied retention",
        |v| sealed(v).len() == 7 && v["now"]["phase"] == "idle",
    );
    digests.push(digest(&env, &run.join("checkpoint-3500")));

    // Kept: 500 (prod holds it), 1000, 2000 and 3000 (multiples of 1000), 3000 and 3500
    // (the last two). Trashed: 1500 and 2500, restorable.
    let live = versions(&env, "w/ret");
    let want: BTreeSet<String> = [0, 1, 3, 5, 6]
        .iter()
        .map(|i| digests[*i].clone())
        .collect();
    assert_eq!(live, want, "{v:#}");
    let trashed: BTreeSet<String> = env
        .repo
        .trash(Some(&VolumeName::parse("w/ret").unwrap()))
        .unwrap()
        .into_iter()
        .map(|t| t.digest)
        .collect();
    assert_eq!(
        trashed,
        [2, 4].iter().map(|i| digests[*i].clone()).collect()
    );
    // The trashed checkpoints lost their own step tag, nothing else.
    assert!(
        env.repo
            .resolve(&Ref::parse("w/ret:step-1500").unwrap())
            .is_err()
    );
    assert_eq!(resolve(&env, "w/ret:step-500"), digests[0]);
    assert_eq!(resolve(&env, "w/ret:latest"), digests[6]);
    env.repo
        .restore_version(&Ref::parse(&format!("w/ret@{}", digests[2])).unwrap())
        .unwrap();
    assert!(versions(&env, "w/ret").contains(&digests[2]));
}

#[test]
fn a_file_held_open_for_writing_keeps_its_checkpoint_from_being_sealed() {
    let env = env();
    let run = env.path("run");
    let ck = run.join("step_7");
    write(&ck.join("config.json"), b"{}");
    // Another process holds a file of it open for writing, quietly, past the settle.
    let mut writer = Command::new("sh")
        .arg("-c")
        .arg("exec 3>>\"$1/weights.bin\"; read _")
        .arg("sh")
        .arg(&ck)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let id = &detach(&env, &run, "w/open", &["--settle", "500ms", "--poll"]);
    let v = wait_for(&env, id, "saw the writer", |v| {
        v["now"]["why"]
            .as_str()
            .is_some_and(|w| w.contains("open for writing"))
    });
    assert!(
        v["notifier"].as_str().unwrap().starts_with("polling"),
        "{v}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert!(sealed(&view(&env, id)).is_empty());
    write(&ck.join("weights.bin"), &noise(1 << 20, 3));
    drop(writer.stdin.take());
    writer.wait().unwrap();
    let v = wait_for(&env, id, "sealed it", |v| sealed(v).len() == 1);
    assert_eq!(sealed(&v)[0].1, digest(&env, &ck));
}

#[test]
fn a_flat_folder_is_sealed_each_time_it_settles_after_a_change() {
    let env = env();
    let staging = env.path("staging");
    train(&staging, &["--gib", "0.01", "--steps", "3"]);
    let flat = env.path("adapter");
    std::fs::create_dir_all(&flat).unwrap();
    let id = &detach(
        &env,
        &flat,
        "w/flat",
        &[
            "--layout",
            "flat",
            // Longer than the stat cache's racy window (1 s), so that what a push read is
            // cached for the next.
            "--settle",
            "1500ms",
            "--tag",
            "latest",
            "--keep-last",
            "2",
        ],
    );
    let mut digests = Vec::new();
    for (i, step) in [500, 1000, 1500].iter().enumerate() {
        // torch.save's way: each file to a temporary name, then renamed over the old one.
        let src = staging.join(format!("checkpoint-{step}"));
        for f in std::fs::read_dir(&src).unwrap().flatten() {
            let tmp = flat.join(format!("{}.tmp", f.file_name().to_string_lossy()));
            std::fs::copy(f.path(), &tmp).unwrap();
            std::fs::rename(&tmp, flat.join(f.file_name())).unwrap();
        }
        let want = digest(&env, &src);
        wait_for(&env, id, "sealed the new state", |v| {
            sealed(v).len() == i + 1 && sealed(v)[i].1 == want
        });
        digests.push(want);
    }
    // The same bytes written again: nothing new.
    let cfg = flat.join("config.json");
    let bytes = std::fs::read(&cfg).unwrap();
    std::fs::write(&cfg, &bytes).unwrap();
    let v = wait_for(&env, id, "looked again", |v| {
        v["watch"]["pushes"].as_array().unwrap().len() == 4
    });
    assert_eq!(v["watch"]["pushes"][3]["outcome"], "unchanged", "{v:#}");
    // Only the rewritten file was read again: the stat cache knew the other three.
    assert_eq!(v["watch"]["pushes"][3]["files_unchanged"], 3, "{v:#}");
    assert_eq!(v["watch"]["pushes"][3]["files_read"], 1, "{v:#}");
    assert_eq!(sealed(&v).len(), 3);
    assert_eq!(
        versions(&env, "w/flat"),
        BTreeSet::from([digests[1].clone(), digests[2].clone()]),
        "--keep-last 2"
    );
    assert_eq!(resolve(&env, "w/flat:latest"), digests[2]);
}

#[test]
fn a_checkpoint_of_ten_thousand_files_is_sealed_once() {
    let env = env();
    let staging = env.path("staging/checkpoint-1");
    for i in 0..10_000 {
        write(
            &staging.join(format!("part-{:02}/f{i:05}.bin", i % 100)),
            &noise(256, i as u64),
        );
    }
    let run = env.path("run");
    std::fs::create_dir_all(&run).unwrap();
    let id = &detach(&env, &run, "w/many", &["--settle", "500ms"]);
    std::fs::rename(&staging, run.join("checkpoint-1")).unwrap();
    let v = wait_for(&env, id, "sealed it", |v| sealed(v).len() == 1);
    assert_eq!(sealed(&v)[0].1, digest(&env, &run.join("checkpoint-1")));
    assert_eq!(v["watch"]["pushes"].as_array().unwrap().len(), 1, "{v:#}");
    let vol = VolumeName::parse("w/many").unwrap();
    let d = env.repo.resolve(&Ref::parse("w/many").unwrap()).unwrap();
    let files = env.repo.manifest(&vol, &d).unwrap().entries;
    let files = files
        .iter()
        .filter(|e| matches!(e, sealvol_core::digest::Entry::File { .. }))
        .count();
    assert_eq!(files, 10_000);
}

#[test]
fn a_checkpoint_that_cannot_be_sealed_waits_for_a_fix_and_the_next_goes_on() {
    let env = env();
    let run = env.path("run");
    write(&run.join("checkpoint-1/model.bin"), &noise(4096, 1));
    std::os::unix::fs::symlink("/etc/hostname", run.join("checkpoint-1/leak")).unwrap();
    write(&run.join("checkpoint-2/model.bin"), &noise(4096, 2));
    let id = &detach(
        &env,
        &run,
        "w/fix",
        &["--settle", "500ms", "--tag", "latest"],
    );
    let v = wait_for(&env, id, "sealed the next one", |v| sealed(v).len() == 1);
    assert_eq!(sealed(&v)[0].0, "checkpoint-2");
    let failed = &v["watch"]["pushes"][0];
    assert_eq!(failed["outcome"], "failed", "{v:#}");
    assert_eq!(failed["name"], "checkpoint-1");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("points outside"),
        "{failed}"
    );
    assert_eq!(v["pending"], serde_json::json!(["checkpoint-1"]));
    // Fixed: it is sealed, and `latest` stays on the higher step.
    std::fs::remove_file(run.join("checkpoint-1/leak")).unwrap();
    let v = wait_for(&env, id, "sealed the fixed one", |v| sealed(v).len() == 2);
    assert_eq!(sealed(&v)[1].1, digest(&env, &run.join("checkpoint-1")));
    assert_eq!(
        resolve(&env, "w/fix:latest"),
        digest(&env, &run.join("checkpoint-2"))
    );
}

#[test]
fn an_empty_checkpoint_folder_waits_for_its_files_and_a_replaced_folder_is_followed() {
    let env = env();
    let run = env.path("run");
    std::fs::create_dir_all(run.join("checkpoint-1")).unwrap();
    let id = &detach(&env, &run, "w/late", &["--settle", "500ms"]);
    // Made before its files, as a trainer gathering its state first does: an empty
    // folder is no checkpoint, however long it stays empty.
    wait_for(&env, id, "saw the empty folder", |v| {
        v["now"]["why"]
            .as_str()
            .is_some_and(|w| w.contains("no file in it yet"))
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(sealed(&view(&env, id)).is_empty());
    write(&run.join("checkpoint-1/model.bin"), &noise(1 << 16, 1));
    let v = wait_for(&env, id, "sealed it", |v| sealed(v).len() == 1);
    assert_eq!(sealed(&v)[0].1, digest(&env, &run.join("checkpoint-1")));

    // The whole folder replaced by another of the same name: followed anew.
    std::fs::remove_dir_all(&run).unwrap();
    let staging = env.path("next");
    write(&staging.join("checkpoint-2/model.bin"), &noise(1 << 16, 2));
    std::fs::rename(&staging, &run).unwrap();
    let v = wait_for(&env, id, "sealed the new folder's checkpoint", |v| {
        sealed(v).len() == 2
    });
    assert_eq!(
        sealed(&v)[1],
        (
            "checkpoint-2".to_string(),
            digest(&env, &run.join("checkpoint-2"))
        )
    );
}
