//! Watch mode where only processes show it: a foreground `volume watch` against a
//! scripted trainer (`gen_training_run.py`) seals each checkpoint once, prints one
//! digest per checkpoint and stops on ctrl-c; an agent killed with -9 mid-push catches
//! up without duplicates; one frozen by SIGSTOP mid-push abandons a checkpoint that
//! changed meanwhile; a user namespace out of inotify watches polls; bad inputs and a
//! full state disk are one line and exit 1. The rest of watch mode (retention, flat
//! folders, writers, empty and replaced folders, 10,000 files, a checkpoint that
//! cannot be sealed) runs on an agent in process: `engine/node/tests/watch.rs`.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Env, noise, write};
use sealvol_testkit::trainer::train;
use serde_json::Value;

/// A child process killed when the test ends, however it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_agent(env: &Env) -> Proc {
    let child = env
        .cmd()
        .arg("agent")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sealvol agent");
    let sock = env.state.join("agent.sock");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < deadline, "the agent did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Proc(child)
}

/// `volume watch DIR VOL --detach` with `extra`; returns the watch's id.
fn detach(env: &Env, dir: &Path, volume: &str, extra: &[&str]) -> String {
    let mut args = vec!["volume", "watch", dir.to_str().unwrap(), volume, "--detach"];
    args.extend_from_slice(extra);
    env.ok(&args).trim().to_string()
}

/// Waits until the foreground `volume watch` running as `watch` has made watch 1; if
/// it ends first, or never does, fails with what it said on stderr.
fn wait_for_watch_1(env: &Env, watch: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.run(&["watch", "show", "1", "--json"]).status.code() != Some(0) {
        let ended = watch.try_wait().ok().flatten();
        if ended.is_some() || Instant::now() > deadline {
            let _ = watch.kill();
            let mut err = String::new();
            if let Some(mut e) = watch.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            panic!("the watch did not start ({ended:?}); it said:\n{err}");
        }
        // Not faster: each `watch show` hosts the agent for a moment when none runs,
        // and the watch starting up must find the state free now and then.
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn view(env: &Env, id: &str) -> Value {
    serde_json::from_str(&env.ok(&["watch", "show", id, "--json"])).expect("watch show --json")
}

/// Waits until watch `id` satisfies `pred`; returns its view.
fn wait_for(env: &Env, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let v = view(env, id);
        if pred(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "watch {id} never {what}: {v:#}");
        std::thread::sleep(Duration::from_millis(50));
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

fn digest(env: &Env, dir: &Path) -> String {
    env.ok(&["digest", dir.to_str().unwrap()])
        .trim()
        .to_string()
}

/// Every live version of `vol`, by digest.
fn versions(env: &Env, vol: &str) -> BTreeSet<String> {
    let v: Value = serde_json::from_str(&env.ok(&["volume", "versions", vol, "--json"])).unwrap();
    v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["digest"].as_str().unwrap().to_string())
        .collect()
}

fn resolve(env: &Env, r: &str) -> String {
    let v: Value = serde_json::from_str(&env.ok(&["volume", "resolve", r, "--json"])).unwrap();
    v["digest"].as_str().unwrap().to_string()
}

#[test]
fn a_slow_trainer_s_checkpoints_each_become_one_version_and_none_half_written() {
    let env = Env::new();
    let run = env.path("run");
    let mut watch = env
        .cmd()
        .args([
            "volume",
            "watch",
            run.to_str().unwrap(),
            "w/run",
            "--tag",
            "step-{step}",
            "--tag",
            "latest",
            "--settle",
            "1s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sealvol volume watch");
    // The folder does not exist yet: the watch waits for it.
    wait_for_watch_1(&env, &mut watch);
    let v = wait_for(&env, "1", "waited for its folder", |v| {
        v["now"]["phase"] == "waiting"
    });
    assert!(
        v["now"]["why"]
            .as_str()
            .unwrap()
            .contains("does not exist yet"),
        "{v}"
    );

    // Written slowly, a MiB at a time with pauses: half-written files stay open, and
    // the pause between two files is a moment with nothing open.
    let done = train(
        &run,
        &[
            "--gib",
            "0.03",
            "--steps",
            "5",
            "--pause",
            "0.03",
            "--chunk-mib",
            "1",
        ],
    );
    let v = wait_for(&env, "1", "sealed 5 checkpoints", |v| sealed(v).len() == 5);

    let names: Vec<String> = sealed(&v).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "checkpoint-500",
            "checkpoint-1000",
            "checkpoint-1500",
            "checkpoint-2000",
            "checkpoint-2500"
        ],
        "each once, in step order"
    );
    let mut finished = BTreeSet::new();
    for (name, d) in sealed(&v) {
        assert_eq!(
            d,
            digest(&env, &run.join(&name)),
            "{name} sealed as it ended"
        );
        finished.insert(d);
    }
    // Nothing else was ever sealed: no version of a half-written checkpoint.
    assert_eq!(versions(&env, "w/run"), finished);
    assert_eq!(
        resolve(&env, "w/run:latest"),
        digest(&env, &run.join("checkpoint-2500"))
    );
    assert_eq!(
        resolve(&env, "w/run:step-1000"),
        digest(&env, &run.join("checkpoint-1000"))
    );
    // Each version says which checkpoint and step it is.
    let listed: Value =
        serde_json::from_str(&env.ok(&["volume", "versions", "w/run", "--json"])).unwrap();
    let newest = &listed["versions"][0]["labels"];
    assert_eq!(
        (newest["checkpoint"].as_str(), newest["step"].as_str()),
        (Some("checkpoint-2500"), Some("2500")),
        "{listed}"
    );
    // Only the changed layers were written.
    let pushes = v["watch"]["pushes"].as_array().unwrap();
    let sealed_pushes: Vec<&Value> = pushes.iter().filter(|p| p["outcome"] == "sealed").collect();
    assert_eq!(sealed_pushes.len(), 5, "{pushes:#?}");
    for (p, d) in sealed_pushes.iter().zip(&done).skip(1) {
        let changed = d["changed"].as_u64().unwrap();
        let new = p["bytes_new"].as_u64().unwrap();
        assert!(
            new <= changed + (1 << 20),
            "{}: {new} bytes written for {changed} changed",
            p["name"]
        );
        assert!(p["latency_secs"].as_f64().is_some(), "{p}");
    }

    // The trainer deletes an old checkpoint: its version stays.
    std::fs::remove_dir_all(run.join("checkpoint-500")).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(versions(&env, "w/run").len(), 5);

    // ctrl-c stops the watch; what it sealed stays.
    // SAFETY: kill with a pid of our own child.
    unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
    let out = watch.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().collect::<BTreeSet<_>>(),
        finished.iter().map(String::as_str).collect(),
        "one digest per sealed checkpoint on stdout"
    );
    let v = view(&env, "1");
    assert_eq!(v["watch"]["state"], "STOPPED");
    assert_eq!(versions(&env, "w/run").len(), 5);
}

#[test]
fn a_watcher_killed_mid_push_catches_up_without_sealing_anything_twice() {
    let env = Env::new();
    let staging = env.path("staging");
    train(&staging, &["--gib", "0.1", "--steps", "4"]);
    let run = env.path("run");
    std::fs::create_dir_all(&run).unwrap();
    let mut agent = start_agent(&env);
    let id = &detach(
        &env,
        &run,
        "w/kill",
        &["--settle", "500ms", "--tag", "latest"],
    );
    for step in [500, 1000] {
        let name = format!("checkpoint-{step}");
        std::fs::rename(staging.join(&name), run.join(&name)).unwrap();
    }
    // Killed while it reads a checkpoint.
    let v = wait_for(&env, id, "pushed", |v| {
        v["now"]["phase"] == "pushing"
            && v["now"]["bytes_done"].as_u64() < v["now"]["bytes_total"].as_u64().map(|t| t * 3 / 4)
    });
    // SAFETY: kill with a pid of our own child.
    unsafe { libc::kill(agent.0.id() as i32, libc::SIGKILL) };
    let _ = agent.0.wait();
    let pushing = v["now"]["name"].as_str().unwrap().to_string();

    // Written while nothing watched.
    for step in [1500, 2000] {
        let name = format!("checkpoint-{step}");
        std::fs::rename(staging.join(&name), run.join(&name)).unwrap();
    }
    agent = start_agent(&env);
    let v = wait_for(&env, id, "caught up", |v| sealed(v).len() == 4);
    let names: Vec<String> = sealed(&v).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "checkpoint-500",
            "checkpoint-1000",
            "checkpoint-1500",
            "checkpoint-2000"
        ],
        "{pushing} was being pushed when the agent died"
    );
    for (name, d) in sealed(&v) {
        assert_eq!(d, digest(&env, &run.join(&name)), "{name}");
    }
    assert_eq!(versions(&env, "w/kill").len(), 4);
    // `latest` only ever moved forward, once per checkpoint.
    let tags: Value =
        serde_json::from_str(&env.ok(&["volume", "tags", "w/kill", "--history", "--json"]))
            .unwrap();
    let latest = tags["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "latest")
        .unwrap();
    let moves = latest["history"].as_array().unwrap();
    assert!(moves.len() <= 4, "{moves:#?}");
    assert_eq!(
        resolve(&env, "w/kill:latest"),
        digest(&env, &run.join("checkpoint-2000"))
    );
    drop(agent);
}

#[test]
fn a_checkpoint_changed_during_its_push_is_abandoned_then_sealed_whole() {
    let env = Env::new();
    let run = env.path("run");
    let ck = run.join("checkpoint-100");
    write(&ck.join("model.safetensors"), &noise(160 << 20, 11));
    let agent = start_agent(&env);
    let id = &detach(&env, &run, "w/ab", &["--settle", "500ms"]);
    // Frozen while it reads (a real agent, stopped by a signal), then the trainer adds
    // a file: the push must notice before it seals.
    wait_for(&env, id, "started reading", |v| {
        v["now"]["phase"] == "pushing"
            && v["now"]["bytes_done"].as_u64() < v["now"]["bytes_total"].as_u64().map(|t| t / 2)
    });
    // SAFETY: signals to a pid of our own child.
    unsafe { libc::kill(agent.0.id() as i32, libc::SIGSTOP) };
    write(&ck.join("extra.json"), b"{\"late\": true}");
    unsafe { libc::kill(agent.0.id() as i32, libc::SIGCONT) };
    let v = wait_for(&env, id, "sealed it", |v| sealed(v).len() == 1);
    let outcomes: Vec<&str> = v["watch"]["pushes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["abandoned", "sealed"]);
    let whole = digest(&env, &ck);
    assert_eq!(sealed(&v)[0].1, whole);
    assert_eq!(versions(&env, "w/ab"), BTreeSet::from([whole]));
}

#[test]
fn out_of_inotify_watches_the_watch_polls_and_says_so() {
    let env = Env::new();
    let run = env.path("run");
    for i in 1..=3u64 {
        write(&run.join(format!("checkpoint-{i}/w.bin")), &noise(4096, i));
    }
    // A user namespace of its own, whose inotify watch limit the test lowers to 2: the
    // watch of the run and its three checkpoint folders needs 4. The limit is the
    // namespace's own `/proc/sys/user/max_inotify_watches`; `fs.inotify.max_user_watches`
    // is the machine's, which a root that maps to itself (`-r`) could change for all.
    let global = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches").unwrap();
    let mut c = Command::new("unshare");
    for (k, v) in env.cmd().get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let script = "echo 2 > /proc/sys/user/max_inotify_watches && exec \"$0\" \"$@\"";
    let watch = c
        .args(["-Ur", "sh", "-c", script, env!("CARGO_BIN_EXE_sealvol")])
        .args([
            "volume",
            "watch",
            run.to_str().unwrap(),
            "w/poll",
            "--settle",
            "500ms",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("unshare (util-linux)");
    let mut watch = Proc(watch);
    wait_for_watch_1(&env, &mut watch.0);
    let v = wait_for(&env, "1", "sealed all three by polling", |v| {
        sealed(v).len() == 3
    });
    let how = v["notifier"].as_str().unwrap();
    assert!(
        how.starts_with("polling") && how.contains("inotify refused"),
        "{how}"
    );
    let log = env.ok(&["watch", "logs", "1"]);
    assert_eq!(
        log.matches("change events: polling").count(),
        1,
        "said once: {log}"
    );
    drop(watch);
    assert_eq!(
        std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches").unwrap(),
        global,
        "the machine's own limit is untouched"
    );
}

#[test]
fn bad_watch_inputs_are_refused_with_nothing_recorded() {
    let env = Env::new();
    let run = env.path("run");
    std::fs::create_dir_all(&run).unwrap();
    let file = env.path("file.bin");
    write(&file, b"x");
    env.push(&run, "w/seed", &["--allow-empty"]);
    let r = run.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![file.to_str().unwrap(), "w/x"], "is a file"),
        (vec!["s3://bucket/run", "w/x"], "not a local folder"),
        (vec![env.repo.to_str().unwrap(), "w/x"], "overlaps"),
        (vec![r, "not-a-volume"], "NAMESPACE/NAME"),
        (vec![r, "w/x", "--settle", "100ms"], "too short"),
        (vec![r, "w/x", "--keep-last", "0"], "--keep-last 0"),
        (vec![r, "w/x", "--keep-every", "0"], "--keep-every 0"),
        (vec![r, "w/x", "--tag", "step-{epoch}"], "placeholder"),
        (vec![r, "w/x", "--tag", "bad tag"], "tag"),
        (
            vec![r, "w/x", "--layout", "flat", "--tag", "s-{step}"],
            "needs a step",
        ),
        (
            vec![r, "w/x", "--layout", "flat", "--keep-every", "10"],
            "--layout steps",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["volume", "watch"];
        all.extend(&args);
        let err = env.fails(1, &all);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            err.lines().filter(|l| l.starts_with("error:")).count() == 1,
            "{err}"
        );
    }
    let out = env.fails(2, &["volume", "watch", r, "w/x", "--settle", "10 parsecs"]);
    assert!(out.contains("--settle"), "{out}");
    // Nothing was recorded.
    let ls: Value = serde_json::from_str(&env.ok(&["watch", "ls", "--json"])).unwrap();
    assert_eq!(ls["watches"], serde_json::json!([]));
    // Unknown watches are errors, not empty answers.
    for cmd in ["show", "stop", "logs"] {
        let err = env.fails(1, &["watch", cmd, "9"]);
        assert!(
            err.contains("no watch 9") || err.contains("watch 9 has no log"),
            "{err}"
        );
    }
    // One folder, one volume, one set of options at a time; a stopped watch says so.
    let _agent = start_agent(&env);
    let id = env.ok(&["volume", "watch", r, "w/x", "--detach", "--settle", "1s"]);
    let id = id.trim();
    let err = env.fails(
        1,
        &["volume", "watch", r, "w/x", "--detach", "--settle", "2s"],
    );
    assert!(err.contains(&format!("watch {id}")), "{err}");
    let same = env.ok(&["volume", "watch", r, "w/x", "--detach", "--settle", "1s"]);
    assert_eq!(same.trim(), id, "the same watch again is that watch");
    env.ok(&["watch", "stop", id]);
    let err = env.fails(1, &["watch", "stop", id]);
    assert!(err.contains("already stopped"), "{err}");
}

/// A state directory on a full 1 MiB tmpfs: `watch --detach` says its agent could not
/// start because the disk is full (its log could hold nothing), `jobs ls` says to free
/// space; once space is freed, everything works again without deleting anything by hand
/// (the state database half-made on the full disk is made anew).
#[test]
fn a_full_state_directory_says_so_and_recovers_once_space_is_freed() {
    let Some(fs) = common::Tmpfs::mount("1M") else {
        eprintln!("SKIPPED: no tmpfs (not root)");
        return;
    };
    let mut env = Env::new();
    env.state = fs.path().join("state");
    std::fs::create_dir_all(&env.state).unwrap();
    let src = env.path("run");
    write(&src.join("a.bin"), &noise(1000, 1));
    fs.fill();
    let err = env.fails(
        1,
        &["volume", "watch", src.to_str().unwrap(), "t/w", "--detach"],
    );
    assert!(
        err.contains("the disk of") && err.contains("is full"),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("exit status: 101"),
        "{err}"
    );
    let err = env.fails(1, &["jobs", "ls"]);
    assert!(err.contains("free some space"), "{err}");
    std::fs::remove_file(fs.path().join("fill")).unwrap();
    env.ok(&["jobs", "ls"]);
    env.ok(&["volume", "watch", src.to_str().unwrap(), "t/w", "--detach"]);
    let ls: Value = serde_json::from_str(&env.ok(&["watch", "ls", "--json"])).unwrap();
    let id = ls["watches"][0]["watch"]["id"]
        .as_u64()
        .expect("the watch is listed");
    env.ok(&["watch", "stop", &id.to_string()]);
}
