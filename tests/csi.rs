//! `sealvol csi`, driven the way kubelet drives it: a gRPC client generated from the
//! CSI spec's own protobuf (tests/csi/kubelet.py, Python's grpcio) calls the real
//! plugin over its unix socket, and each publish is a real FUSE mount read byte for
//! byte. Needs FUSE (SKIPPED without it, unless SEALVOL_REQUIRE_FUSE) and the test
//! venv's grpcio-tools (scripts/test.sh installs them).

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::mounts::{is_mounted, mounts_json};
use common::{Env, fuse_available, noise, write};

/// A running `sealvol csi` with kubelet's client on its socket.
struct Plugin<'a> {
    env: &'a Env,
    child: Child,
    socket: PathBuf,
    log: PathBuf,
    extra: Vec<String>,
    /// `SEALVOL_CRASH_AT` for the plugin: where it dies as `kill -9` would.
    crash_at: Option<String>,
    kubelet: Kubelet,
}

struct Kubelet {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Kubelet {
    fn start(socket: &Path) -> Kubelet {
        Kubelet::start_with(socket, &[])
    }

    fn start_with(socket: &Path, args: &[&str]) -> Kubelet {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/csi/kubelet.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(socket)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 with grpcio-tools: run scripts/test.sh, which installs them");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Kubelet {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, v: &Value) -> Value {
        writeln!(self.stdin, "{v}").unwrap();
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        serde_json::from_str(&line)
            .unwrap_or_else(|_| panic!("kubelet.py answered {line:?} (is grpcio-tools installed?)"))
    }

    fn call(&mut self, name: &str, request: Value) -> Value {
        self.send(&json!({"call": name, "request": request}))
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl<'a> Plugin<'a> {
    fn start(env: &'a Env, extra: &[&str]) -> Plugin<'a> {
        Plugin::start_crashing_at(env, extra, None)
    }

    /// A plugin that dies with SIGKILL at the named point of its work.
    fn start_crashing_at(env: &'a Env, extra: &[&str], crash_at: Option<&str>) -> Plugin<'a> {
        let socket = env.state.join("csi.sock");
        let log = env.path("csi.log");
        let child = spawn(env, &socket, &log, extra, crash_at);
        wait_socket(&socket, &log);
        Plugin {
            env,
            child,
            kubelet: Kubelet::start(&socket),
            socket,
            log,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            crash_at: crash_at.map(str::to_string),
        }
    }

    /// kill -9, `meanwhile`, then a new plugin on the same state.
    fn kill_and_restart_with(&mut self, meanwhile: impl FnOnce()) {
        self.stop_and_restart_with("-9", meanwhile);
    }

    /// `kill SIGNAL`, `meanwhile`, then a new plugin on the same state; how the old
    /// one ended.
    fn stop_and_restart_with(
        &mut self,
        signal: &str,
        meanwhile: impl FnOnce(),
    ) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status();
        let ended = self.child.wait().unwrap();
        meanwhile();
        let extra: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        self.child = spawn(
            self.env,
            &self.socket,
            &self.log,
            &extra,
            self.crash_at.as_deref(),
        );
        wait_socket(&self.socket, &self.log);
        self.kubelet = Kubelet::start(&self.socket);
        ended
    }

    /// Waits for a plugin started with a crash point to die there (SIGKILL), then, after
    /// `meanwhile`, starts a new plugin on the same state with no crash point.
    fn restart_after_its_crash(&mut self, meanwhile: impl FnOnce()) {
        use std::os::unix::process::ExitStatusExt;
        let deadline = Instant::now() + Duration::from_secs(60);
        let ended = loop {
            if let Some(ended) = self.child.try_wait().unwrap() {
                break ended;
            }
            assert!(
                Instant::now() < deadline,
                "the plugin did not die at {:?}: {}",
                self.crash_at,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(ended.signal(), Some(9), "{ended:?}: {}", self.log());
        self.crash_at = None;
        self.stop_and_restart_with("-0", meanwhile);
    }

    /// The last line the plugin logged about adopting a former run's mounts.
    fn adopted(&self) -> String {
        self.log()
            .lines()
            .rev()
            .find(|l| l.contains("adopted the mounts"))
            .unwrap_or_default()
            .to_string()
    }

    fn call(&mut self, name: &str, request: Value) -> Value {
        self.kubelet.call(name, request)
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Plugin<'_> {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // What the plugin published goes with the test.
        for m in mounts_json(self.env) {
            let dir = m["dir"].as_str().unwrap_or_default();
            self.env.run(&["volume", "unmount", "--lazy", dir]);
        }
    }
}

fn spawn(env: &Env, socket: &Path, log: &Path, extra: &[&str], crash_at: Option<&str>) -> Child {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut cmd = env.cmd();
    if let Some(point) = crash_at {
        cmd.env("SEALVOL_CRASH_AT", point);
    }
    cmd.args(extra)
        .args(["csi", "--endpoint"])
        .arg(format!("unix://{}", socket.display()))
        .args(["--node-id", "node-a"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn wait_socket(socket: &Path, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(
            Instant::now() < deadline,
            "the plugin did not listen: {}",
            fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An inline volume of pod `pod`, as kubelet publishes it.
fn inline(env: &Env, pod: &str, reference: &str) -> Value {
    json!({
        "volume_id": format!("csi-{pod}"),
        "target_path": target(env, pod).display().to_string(),
        "volume_capability": {"mount": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}},
        "readonly": true,
        "volume_context": {
            "ref": reference,
            "csi.storage.k8s.io/ephemeral": "true",
            "csi.storage.k8s.io/pod.name": pod,
            "csi.storage.k8s.io/pod.namespace": "serving",
        },
    })
}

/// kubelet's target path for a pod's volume; kubelet makes its parent.
fn target(env: &Env, pod: &str) -> PathBuf {
    let parent = env.path(&format!(
        "kubelet/pods/{pod}/volumes/kubernetes.io~csi/weights"
    ));
    fs::create_dir_all(&parent).unwrap();
    parent.join("mount")
}

fn unpublish(env: &Env, pod: &str) -> Value {
    json!({"volume_id": format!("csi-{pod}"), "target_path": target(env, pod).display().to_string()})
}

fn ok(answer: &Value) -> &Value {
    assert!(answer.get("ok").is_some(), "expected success, got {answer}");
    &answer["ok"]
}

/// The gRPC code and message of a refusal.
fn refused(answer: &Value) -> (String, String) {
    assert!(
        answer.get("ok").is_none(),
        "expected a refusal, got {answer}"
    );
    (
        answer["code"].as_str().unwrap().to_string(),
        answer["message"].as_str().unwrap().to_string(),
    )
}

/// Mounts the plugin's processes serve at `dir`.
fn mounts_at(env: &Env, dir: &Path) -> Vec<Value> {
    let d = dir.canonicalize().unwrap_or(dir.to_path_buf());
    mounts_json(env)
        .into_iter()
        .filter(|m| m["dir"].as_str() == d.to_str())
        .collect()
}

/// Two versions of `t/weights` as pinned refs: v1 tagged prod (and its files), v2
/// untagged.
fn weights(env: &Env) -> (String, String, PathBuf) {
    let v1 = env.path("v1");
    write(&v1.join("config.json"), br#"{"layers": 2}"#);
    write(&v1.join("model.safetensors"), &noise(6 << 20, 1));
    for i in 0..20 {
        write(
            &v1.join(format!("tok/{i}.txt")),
            format!("token {i}\n").as_bytes(),
        );
    }
    let d1 = env.push(&v1, "t/weights", &["--tag", "prod"]);
    let v2 = env.path("v2");
    write(&v2.join("config.json"), br#"{"layers": 3}"#);
    let d2 = env.push(&v2, "t/weights", &[]);
    (d1, d2, v1)
}

fn digest(pinned: &str) -> &str {
    pinned.split_once('@').unwrap().1
}

#[test]
fn an_inline_volume_is_published_read_byte_for_byte_once_and_unpublished() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let (d1, d2, v1) = weights(&env);
    let mut p = Plugin::start(&env, &[]);

    let info = p.call("GetPluginInfo", json!({}));
    assert_eq!(ok(&info)["name"], "csi.sealvol.dev");
    assert_eq!(ok(&p.call("Probe", json!({})))["ready"], true);
    // Any :authority, as the spec allows on a unix socket: grpcio's own default (the
    // socket's path, which HTTP/2 does not take as an authority) works as kubelet's does.
    let mut grpcio = Kubelet::start_with(&p.socket, &["--grpcio-authority"]);
    assert_eq!(
        ok(&grpcio.call("GetPluginInfo", json!({})))["name"],
        "csi.sealvol.dev"
    );
    assert_eq!(
        ok(&grpcio.call("NodeGetInfo", json!({})))["node_id"],
        "node-a"
    );
    drop(grpcio);
    assert_eq!(ok(&p.call("NodeGetInfo", json!({})))["node_id"], "node-a");
    let caps = p.call("NodeGetCapabilities", json!({})).to_string();
    assert!(
        caps.contains("GET_VOLUME_STATS") && !caps.contains("STAGE_UNSTAGE"),
        "{caps}"
    );

    let t = target(&env, "llm-0");
    ok(&p.call(
        "NodePublishVolume",
        inline(&env, "llm-0", "vol:t/weights:prod"),
    ));
    common::assert_same_tree(&v1, &t);
    // A second identical publish succeeds without a second mount.
    ok(&p.call(
        "NodePublishVolume",
        inline(&env, "llm-0", "vol:t/weights:prod"),
    ));
    let served = mounts_at(&env, &t);
    assert_eq!(served.len(), 1, "{served:?}");
    // The tag resolved once, at publish: its pinned ref is recorded and logged.
    assert_eq!(served[0]["digest"], digest(&d1));
    assert_eq!(served[0]["requested"], "vol:t/weights:prod");
    assert!(
        p.log()
            .contains(&format!("published vol:t/weights:prod as {d1}")),
        "{}",
        p.log()
    );
    // The tag moves; the pod's bytes do not.
    env.ok(&["volume", "tag", &d2, "prod"]);
    assert_eq!(
        fs::read(t.join("config.json")).unwrap(),
        br#"{"layers": 2}"#
    );

    let stats = p.call(
        "NodeGetVolumeStats",
        json!({"volume_id": "csi-llm-0", "volume_path": t.display().to_string()}),
    );
    let usage = ok(&stats)["usage"].as_array().unwrap().clone();
    let total = |unit: &str| {
        usage
            .iter()
            .find(|u| u["unit"] == unit)
            .and_then(|u| u["total"].as_str())
            .map(|s| s.parse::<u64>().unwrap())
    };
    let files = common::walk_files(&v1);
    let bytes: u64 = files
        .iter()
        .map(|f| fs::metadata(v1.join(f)).unwrap().len())
        .sum();
    assert_eq!(total("BYTES"), Some(bytes));
    assert_eq!(total("INODES"), Some(files.len() as u64));
    assert_eq!(ok(&stats)["volume_condition"]["abnormal"], Value::Null);

    ok(&p.call("NodeUnpublishVolume", unpublish(&env, "llm-0")));
    assert!(
        !is_mounted(&t) && !t.exists(),
        "the target path goes with the mount"
    );
    // Unpublish of a path with nothing published succeeds (idempotent).
    ok(&p.call("NodeUnpublishVolume", unpublish(&env, "llm-0")));
    let gone = p.call(
        "NodeGetVolumeStats",
        json!({"volume_id": "csi-llm-0", "volume_path": t.display().to_string()}),
    );
    assert_eq!(refused(&gone).0, "NOT_FOUND");
}

/// A PersistentVolume's publish: its handle is the pinned ref, kubelet asks a reader
/// mode and may leave `readonly` unset.
fn persistent(env: &Env, pod: &str, handle: &str, mode: &str) -> Value {
    json!({
        "volume_id": handle,
        "target_path": target(env, pod).display().to_string(),
        "volume_capability": {"mount": {}, "access_mode": {"mode": mode}},
        "readonly": false,
        "volume_context": {},
    })
}

#[test]
fn a_persistent_volume_mounts_its_pinned_handle_and_a_tag_handle_is_refused() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let (d1, _, v1) = weights(&env);
    let mut p = Plugin::start(&env, &[]);

    let tagged = p.call(
        "NodePublishVolume",
        persistent(&env, "pv-0", "vol:t/weights:prod", "MULTI_NODE_READER_ONLY"),
    );
    let (code, msg) = refused(&tagged);
    assert_eq!(code, "INVALID_ARGUMENT", "{msg}");
    assert!(msg.contains("vol:t/weights:prod"), "{msg}");
    assert!(!target(&env, "pv-0").exists());

    let t = target(&env, "pv-0");
    ok(&p.call(
        "NodePublishVolume",
        persistent(&env, "pv-0", &d1, "MULTI_NODE_READER_ONLY"),
    ));
    common::assert_same_tree(&v1, &t);
    assert!(
        fs::write(t.join("config.json"), b"x").is_err(),
        "the mount is read-only"
    );
    ok(&p.call(
        "NodeUnpublishVolume",
        json!({"volume_id": d1, "target_path": t.display().to_string()}),
    ));
    assert!(!is_mounted(&t) && !t.exists());
}

/// One bad publish: refused with `code`, its message naming `names`, nothing new
/// mounted at the pod's target and nothing made there.
fn refuses(p: &mut Plugin, pod: &str, request: Value, code: &str, names: &str) {
    let t = target(p.env, pod);
    let existed = t.exists();
    let before = mounts_at(p.env, &t).len();
    let (c, msg) = refused(&p.call("NodePublishVolume", request));
    eprintln!("{pod}: {c} {msg}");
    assert_eq!(c, code, "{pod}: {msg}");
    assert!(
        msg.contains(names),
        "{pod}: {msg:?} does not name {names:?}"
    );
    assert!(!msg.contains('\n'), "one line: {msg:?}");
    assert_eq!(mounts_at(p.env, &t).len(), before, "{pod}: left mounted");
    assert_eq!(t.exists(), existed, "{pod}: the target path was changed");
}

#[test]
fn what_cannot_be_published_is_refused_with_its_name_and_nothing_is_left_mounted() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let (d1, d2, _) = weights(&env);
    env.ok(&["volume", "delete", &d2, "--yes"]);
    let mut p = Plugin::start(&env, &[]);

    refuses(
        &mut p,
        "no-volume",
        inline(&env, "no-volume", "vol:t/nothing:prod"),
        "NOT_FOUND",
        "t/nothing",
    );
    refuses(
        &mut p,
        "no-tag",
        inline(&env, "no-tag", "vol:t/weights:staging"),
        "NOT_FOUND",
        "staging",
    );
    refuses(
        &mut p,
        "no-version",
        inline(
            &env,
            "no-version",
            &format!("vol:t/weights@b3:{}", "0".repeat(64)),
        ),
        "NOT_FOUND",
        "b3:0000",
    );
    refuses(
        &mut p,
        "trashed",
        inline(&env, "trashed", &d2),
        "NOT_FOUND",
        &digest(&d2)[..12],
    );
    // Writable: a writer mode without readonly, or a multi-writer mode at all.
    let mut w = inline(&env, "writer", &d1);
    w["readonly"] = json!(false);
    refuses(
        &mut p,
        "writer",
        w,
        "INVALID_ARGUMENT",
        "SINGLE_NODE_WRITER",
    );
    let mut w = inline(&env, "multi", &d1);
    w["volume_capability"]["access_mode"]["mode"] = json!("MULTI_NODE_MULTI_WRITER");
    refuses(
        &mut p,
        "multi",
        w,
        "INVALID_ARGUMENT",
        "MULTI_NODE_MULTI_WRITER",
    );
    // A block volume, mount flags, secrets, an attribute nobody defined.
    let mut b = inline(&env, "block", &d1);
    b["volume_capability"] =
        json!({"block": {}, "access_mode": {"mode": "SINGLE_NODE_READER_ONLY"}});
    refuses(&mut p, "block", b, "INVALID_ARGUMENT", "block");
    let mut s = inline(&env, "secrets", &d1);
    s["secrets"] = json!({"key": "svk_from_a_pod"});
    refuses(
        &mut p,
        "secrets",
        s,
        "INVALID_ARGUMENT",
        "nodePublishSecretRef",
    );
    let mut u = inline(&env, "unknown", &d1);
    u["volume_context"]["cache"] = json!("/etc");
    refuses(&mut p, "unknown", u, "INVALID_ARGUMENT", "cache");
    // Cache servers the driver was not given: its key goes only to its own.
    let mut peers = inline(&env, "peers", &d1);
    peers["volume_context"]["peers"] = json!("http://10.0.0.9:8080");
    refuses(&mut p, "peers", peers, "PERMISSION_DENIED", "10.0.0.9");
    // Crafted target paths.
    for (i, path) in ["relative/mount", "/a/../etc", "/a/./b", ""]
        .iter()
        .enumerate()
    {
        let mut c = inline(&env, &format!("path-{i}"), &d1);
        c["target_path"] = json!(path);
        let (code, msg) = refused(&p.call("NodePublishVolume", c));
        assert_eq!(code, "INVALID_ARGUMENT", "{path:?}: {msg}");
    }
    // A target path that is a file, or a directory with files in it.
    let t = target(&env, "file");
    fs::write(&t, b"not a directory").unwrap();
    refuses(
        &mut p,
        "file",
        inline(&env, "file", &d1),
        "FAILED_PRECONDITION",
        "is a file",
    );
    assert_eq!(fs::read(&t).unwrap(), b"not a directory");
    let t = target(&env, "full");
    write(&t.join("kept.txt"), b"mine");
    refuses(
        &mut p,
        "full",
        inline(&env, "full", &d1),
        "FAILED_PRECONDITION",
        "not empty",
    );
    assert_eq!(fs::read(t.join("kept.txt")).unwrap(), b"mine");
    // A target that already holds another volume, published here or by hand.
    ok(&p.call("NodePublishVolume", inline(&env, "held", &d1)));
    let mut other = inline(&env, "held", "vol:t/weights:prod");
    other["volume_id"] = json!("csi-other");
    refuses(&mut p, "held", other, "ALREADY_EXISTS", "csi-held");
    assert_eq!(mounts_at(&env, &target(&env, "held")).len(), 1);
    // By hand: a mount of its own state directory, not the plugin's.
    let by_hand = target(&env, "by-hand");
    let elsewhere = env.path("operator-state");
    let _m = common::mounts::mount(
        &env,
        &d1,
        &by_hand,
        &["--state", elsewhere.to_str().unwrap()],
    );
    refuses(
        &mut p,
        "by-hand",
        inline(&env, "by-hand", &d1),
        "ALREADY_EXISTS",
        "did not make",
    );
    let (code, _) = refused(&p.call("NodeUnpublishVolume", unpublish(&env, "by-hand")));
    assert_eq!(code, "FAILED_PRECONDITION");
    assert!(
        is_mounted(&by_hand),
        "a mount it did not make is not its to end"
    );

    // Through all of it the plugin stayed up, and said each refusal once in its log.
    assert_eq!(ok(&p.call("Probe", json!({})))["ready"], true);
    assert!(p.log().contains("publish refused"), "{}", p.log());
    ok(&p.call("NodeUnpublishVolume", unpublish(&env, "held")));
}

#[test]
fn unpublish_during_reads_frees_the_path_and_the_reader_finishes_with_the_right_bytes() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let (d1, _, v1) = weights(&env);
    let mut p = Plugin::start(&env, &[]);
    let t = target(&env, "reader");
    ok(&p.call("NodePublishVolume", inline(&env, "reader", &d1)));
    let first = mounts_at(&env, &t)[0]["pid"].as_u64().unwrap();

    let want = fs::read(v1.join("model.safetensors")).unwrap();
    let mut f = fs::File::open(t.join("model.safetensors")).unwrap();
    let mut got = vec![0u8; 1 << 20];
    f.read_exact(&mut got).unwrap();

    ok(&p.call("NodeUnpublishVolume", unpublish(&env, "reader")));
    assert!(!is_mounted(&t), "the path is free at once");
    // The open file is still served to its end.
    f.read_to_end(&mut got).unwrap();
    assert!(got == want, "the reader's bytes differ after unpublish");
    drop(f);
    // And the same pod can publish again at once; the first mount's process, ending
    // now that its last file is closed, leaves the new mount alone (it once unmounted
    // whatever stood at its path as it ended). Checked once that process is gone.
    ok(&p.call("NodePublishVolume", inline(&env, "reader", &d1)));
    let deadline = Instant::now() + Duration::from_secs(60);
    while Path::new(&format!("/proc/{first}")).exists() {
        assert!(
            Instant::now() < deadline,
            "the first mount's process never ended, or the plugin never reaped it"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(is_mounted(&t), "the new mount went with the old process");
    assert_eq!(fs::read(t.join("model.safetensors")).unwrap(), want);
    ok(&p.call("NodeUnpublishVolume", unpublish(&env, "reader")));
}

#[test]
fn two_publishes_at_once_of_one_volume_make_one_mount_and_eight_pods_eight() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let (d1, _, v1) = weights(&env);
    let mut p = Plugin::start(&env, &[]);
    let same = inline(&env, "twin", "vol:t/weights:prod");
    let both = p.kubelet.send(&json!({"parallel": [
        {"call": "NodePublishVolume", "request": same},
        {"call": "NodePublishVolume", "request": same},
    ]}));
    for r in both["results"].as_array().unwrap() {
        ok(r);
    }
    assert_eq!(mounts_at(&env, &target(&env, "twin")).len(), 1);
    common::assert_same_tree(&v1, &target(&env, "twin"));

    // Eight pods of one node at once, each its own mount, all of them up. (The
    // plugin's threads fork mount processes at the same moment: a lock one of them
    // held on its target while another forked once failed a publish in 40.)
    let pods: Vec<String> = (0..8).map(|i| format!("pod-{i}")).collect();
    let calls: Vec<Value> = pods
        .iter()
        .map(|pod| json!({"call": "NodePublishVolume", "request": inline(&env, pod, &d1)}))
        .collect();
    let answers = p.kubelet.send(&json!({ "parallel": calls }));
    for r in answers["results"].as_array().unwrap() {
        ok(r);
    }
    for pod in pods.iter().map(String::as_str).chain(["twin"]) {
        assert_eq!(mounts_at(&env, &target(&env, pod)).len(), 1, "{pod}");
        ok(&p.call("NodeUnpublishVolume", unpublish(&env, pod)));
        assert!(!is_mounted(&target(&env, pod)));
    }
}

/// Mount processes started with this test's state directory that still run, each
/// without its guard (a child forked from it, with the same command line).
fn mount_processes(env: &Env) -> Vec<String> {
    let state = env.state.display().to_string();
    let mut found = Vec::new();
    for e in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let (Ok(cmdline), Ok(stat)) = (
            fs::read(e.path().join("cmdline")),
            fs::read_to_string(e.path().join("stat")),
        ) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        // The fields after the command name: state, then the parent's pid.
        let mut rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .unwrap_or("")
            .split_whitespace();
        let zombie = rest.next() == Some("Z");
        let ppid: u32 = rest.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if !zombie && args.contains(&state) && args.iter().any(|a| a == "mount") {
            found.push((pid, ppid, args.join(" ")));
        }
    }
    let pids: Vec<u32> = found.iter().map(|f| f.0).collect();
    found
        .into_iter()
        .filter(|(_, ppid, _)| !pids.contains(ppid))
        .map(|(pid, _, args)| format!("{pid}: {args}"))
        .collect()
}

/// Waits (at most 30 s) until no mount process of the test's state runs.
fn assert_no_mount_process_left(env: &Env, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !mount_processes(env).is_empty() {
        assert!(
            Instant::now() < deadline,
            "{what}: mount processes left running: {:?}",
            mount_processes(env)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_plugin_killed_at_any_point_of_a_publish_leaves_nothing_kubelet_cannot_finish() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let (d1, _, v1) = weights(&env);
    // Each point of a publish, in order, where the plugin dies as with kill -9; after
    // the restart kubelet either retries the publish or gives up and unpublishes.
    // "mount-spawned" twice: the new plugin starts while the orphaned mount process
    // is still starting, and once it has mounted.
    let rounds = [
        ("csi-intent-recorded", false),
        ("csi-target-made", false),
        ("mount-spawned", false),
        ("mount-spawned", true),
        ("csi-mount-ready", false),
        ("csi-publish-recorded", false),
    ];
    for (n, (point, wait_for_mount)) in rounds.into_iter().enumerate() {
        for retry in [true, false] {
            let what = format!(
                "killed at {point} (mounted first: {wait_for_mount}), then {}",
                if retry { "publish" } else { "unpublish" }
            );
            let pod = format!("p{n}-{retry}");
            let t = target(&env, &pod);
            let mut p = Plugin::start_crashing_at(&env, &[], Some(point));
            let answer = p.call("NodePublishVolume", inline(&env, &pod, &d1));
            assert!(answer.get("ok").is_none(), "{what}: {answer}");
            p.restart_after_its_crash(|| {
                if wait_for_mount {
                    let deadline = Instant::now() + Duration::from_secs(30);
                    while mounts_at(&env, &t).is_empty() {
                        assert!(
                            Instant::now() < deadline,
                            "{what}: the orphaned mount never came up"
                        );
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            });
            assert!(p.adopted().contains("0 failed"), "{what}: {}", p.log());
            if retry {
                ok(&p.call("NodePublishVolume", inline(&env, &pod, &d1)));
                common::assert_same_tree(&v1, &t);
                let served = mounts_at(&env, &t);
                assert_eq!(served.len(), 1, "{what}: {served:?}");
                assert_eq!(
                    mount_processes(&env).len(),
                    1,
                    "{what}: {:?}",
                    mount_processes(&env)
                );
                // Its stats say it serves.
                let stats = p.call(
                    "NodeGetVolumeStats",
                    json!({"volume_id": format!("csi-{pod}"), "volume_path": t.display().to_string()}),
                );
                assert_eq!(
                    ok(&stats)["volume_condition"]["abnormal"],
                    Value::Null,
                    "{what}"
                );
            }
            ok(&p.call("NodeUnpublishVolume", unpublish(&env, &pod)));
            assert!(!is_mounted(&t) && !t.exists(), "{what}: the target is left");
            assert_no_mount_process_left(&env, &what);
            let records: Vec<_> = fs::read_dir(env.state.join("csi/targets"))
                .unwrap()
                .flatten()
                .map(|e| e.file_name())
                .collect();
            assert!(records.is_empty(), "{what}: records left: {records:?}");
            // A second unpublish, as kubelet may send, is still OK.
            ok(&p.call("NodeUnpublishVolume", unpublish(&env, &pod)));
        }
    }
}

#[test]
fn a_mount_an_older_plugin_left_unrecorded_is_remounted_by_a_publish_and_ended_by_an_unpublish() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let (d1, _, v1) = weights(&env);
    let mut p = Plugin::start(&env, &[]);
    for pod in ["again", "gone"] {
        ok(&p.call("NodePublishVolume", inline(&env, pod, &d1)));
    }
    // An older plugin recorded a target only once its mount answered, and could die
    // in between: its mounts served with no record.
    p.kill_and_restart_with(|| {
        fs::remove_dir_all(env.state.join("csi/targets")).unwrap();
    });
    let t = target(&env, "again");
    ok(&p.call("NodePublishVolume", inline(&env, "again", &d1)));
    common::assert_same_tree(&v1, &t);
    assert_eq!(mounts_at(&env, &t).len(), 1);
    ok(&p.call("NodeUnpublishVolume", unpublish(&env, "again")));
    ok(&p.call("NodeUnpublishVolume", unpublish(&env, "gone")));
    for pod in ["again", "gone"] {
        let t = target(&env, pod);
        assert!(!is_mounted(&t) && !t.exists(), "{pod}");
    }
    assert_no_mount_process_left(&env, "unrecorded mounts");
}

#[test]
fn a_plugin_killed_during_an_unpublish_is_unpublished_by_the_retry() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let (d1, _, _) = weights(&env);
    let mut p = Plugin::start_crashing_at(&env, &[], Some("csi-unmounted"));
    ok(&p.call("NodePublishVolume", inline(&env, "u", &d1)));
    let answer = p.call("NodeUnpublishVolume", unpublish(&env, "u"));
    assert!(answer.get("ok").is_none(), "{answer}");
    p.restart_after_its_crash(|| {});
    ok(&p.call("NodeUnpublishVolume", unpublish(&env, "u")));
    let t = target(&env, "u");
    assert!(!is_mounted(&t) && !t.exists());
    assert_no_mount_process_left(&env, "killed after the unmount");
}

#[test]
fn a_plugin_killed_with_mounts_in_place_adopts_them_when_it_restarts() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let (d1, _, v1) = weights(&env);
    let mut p = Plugin::start(&env, &[]);
    for pod in ["kept", "killed"] {
        ok(&p.call("NodePublishVolume", inline(&env, pod, &d1)));
    }
    // kill -9 the plugin: its mounts are processes of their own and go on serving.
    p.kill_and_restart_with(|| {
        common::assert_same_tree(&v1, &target(&env, "kept"));
        // One mount's process dies too while the plugin is down.
        let m = mounts_at(&env, &target(&env, "killed"));
        let pid = m[0]["pid"].as_u64().unwrap().to_string();
        let _ = Command::new("kill").args(["-9", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while is_mounted(&target(&env, "killed")) {
            assert!(
                Instant::now() < deadline,
                "the killed mount's guard did not clear it"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    assert!(
        p.adopted()
            .contains("1 serving, 1 mounted again, 0 gone, 0 failed"),
        "{}",
        p.log()
    );
    for pod in ["kept", "killed"] {
        let t = target(&env, pod);
        common::assert_same_tree(&v1, &t);
        // kubelet publishes again after a plugin restart: nothing new is mounted.
        ok(&p.call("NodePublishVolume", inline(&env, pod, &d1)));
        assert_eq!(mounts_at(&env, &t).len(), 1, "{pod}");
        ok(&p.call("NodeUnpublishVolume", unpublish(&env, pod)));
        assert!(!is_mounted(&t) && !t.exists(), "{pod}");
    }
    // SIGTERM (kubelet stopping the plugin's pod) ends the plugin cleanly, not its
    // mounts.
    ok(&p.call("NodePublishVolume", inline(&env, "kept", &d1)));
    let ended = p.stop_and_restart_with("-TERM", || {
        common::assert_same_tree(&v1, &target(&env, "kept"));
    });
    assert!(ended.success(), "{ended:?}: {}", p.log());
    assert!(
        p.adopted().contains("1 serving, 0 mounted again"),
        "{}",
        p.log()
    );
    ok(&p.call("NodeUnpublishVolume", unpublish(&env, "kept")));
    // A restart with nothing published adopts nothing.
    p.kill_and_restart_with(|| {});
    assert!(
        p.adopted()
            .contains("0 serving, 0 mounted again, 0 gone, 0 failed"),
        "{}",
        p.log()
    );
}

#[test]
fn a_missing_or_wrong_key_and_an_unreachable_repository_are_refused_and_publish_once_back() {
    if !fuse_available() {
        return;
    }
    let server = Env::new();
    let (d1, _, v1) = weights(&server);
    let port = common::servers::free_port();
    let listen = format!("127.0.0.1:{port}");
    let served = common::servers::serve(&server, &["--listen", &listen]);
    let reader = common::servers::key(&server, &["csi-node", "--namespace", "t", "--read-only"]);

    // The driver's config holds the key; a wrong one, or none, is refused as such.
    let forged = format!("{}{}", &reader[..reader.len() - 4], "0000");
    let mut wrong = served.client(&forged);
    let mut p = Plugin::start(&wrong, &[]);
    refuses(
        &mut p,
        "wrong-key",
        inline(&wrong, "wrong-key", &d1),
        "UNAUTHENTICATED",
        "SEALVOL_API_KEY",
    );
    drop(p);
    wrong.vars.retain(|(k, _)| k != "SEALVOL_API_KEY");
    let mut p = Plugin::start(&wrong, &[]);
    refuses(
        &mut p,
        "no-key",
        inline(&wrong, "no-key", &d1),
        "UNAUTHENTICATED",
        "key",
    );
    drop(p);

    let node = served.client(&reader);
    let mut p = Plugin::start(&node, &[]);
    ok(&p.call("NodePublishVolume", inline(&node, "first", &d1)));
    common::assert_same_tree(&v1, &target(&node, "first"));

    // The repository's server goes away: a publish says so, and kubelet retries.
    drop(served);
    refuses(
        &mut p,
        "down",
        inline(&node, "down", &d1),
        "UNAVAILABLE",
        &listen,
    );
    let _back = common::servers::serve(&server, &["--listen", &listen]);
    ok(&p.call("NodePublishVolume", inline(&node, "down", &d1)));
    common::assert_same_tree(&v1, &target(&node, "down"));
    for pod in ["first", "down"] {
        ok(&p.call("NodeUnpublishVolume", unpublish(&node, pod)));
    }
}

#[test]
fn the_kubernetes_manifests_pass_the_schemas_and_agree_with_each_other_and_the_driver() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/csi/manifests.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(&root)
        .output()
        .expect("python3 with kubernetes-validate: run scripts/test.sh, which installs it");
    let m: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("manifests.py: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        m["failures"],
        json!([]),
        "against Kubernetes {}",
        m["version"]
    );
    let objects: Vec<&str> = m["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    for want in [
        "CSIDriver/csi.sealvol.dev",
        "DaemonSet/sealvol-csi-node",
        "StatefulSet/sealvol-serve",
        "Service/sealvol-serve",
        "ConfigMap/sealvol-peers",
        "ServiceAccount/sealvol-csi-node",
        "Deployment/llm-server",
        "PersistentVolume/weights-qwen3-8b-9f3c1a2b",
        // Kubernetes without the driver: an image volume from serve's registry.
        "Pod/llm-server-image-volume",
        "Secret/sealvol-pull",
    ] {
        assert!(objects.contains(&want), "{want} missing: {objects:?}");
    }
    // kubectl apply -k takes every manifest but the examples.
    let mut want: Vec<&str> = m["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|f| !f.starts_with("example"))
        .collect();
    let mut listed: Vec<&str> = m["kustomization_resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    want.sort();
    listed.sort();
    assert_eq!(listed, want);

    // The driver's name is the plugin's, and kubelet finds its socket where the
    // registrar says.
    assert_eq!(m["driver"], "csi.sealvol.dev");
    assert_eq!(
        m["registration_path"],
        format!(
            "--kubelet-registration-path={}/csi.sock",
            m["plugin_dir"].as_str().unwrap()
        )
    );
    assert!(
        m["plugin_dir"]
            .as_str()
            .unwrap()
            .ends_with("/csi.sealvol.dev")
    );
    assert_eq!(m["pods_propagation"], "Bidirectional");
    // Its key from a Secret, its node name from the pod's node; the args parse.
    assert_eq!(
        m["plugin_env"]["SEALVOL_API_KEY"]["secretKeyRef"]["name"],
        "sealvol-node"
    );
    assert_eq!(
        m["plugin_env"]["NODE_NAME"]["fieldRef"]["fieldPath"],
        "spec.nodeName"
    );
    let env = Env::new();
    let mut args: Vec<String> = m["plugin_args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().replace("$(NODE_NAME)", "node-a"))
        .collect();
    args.push("--help".into());
    let help = env.cmd().args(&args).output().unwrap();
    assert!(
        help.status.success(),
        "{:?}",
        String::from_utf8_lossy(&help.stderr)
    );
    // The ring: one peer per server of the StatefulSet, each by its stable name.
    let peers: Vec<&str> = m["peers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(peers.len() as u64, m["replicas"].as_u64().unwrap());
    let service = m["service_name"].as_str().unwrap();
    assert!(
        m["headless"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h == service)
    );
    for (i, p) in peers.iter().enumerate() {
        assert!(
            p.starts_with(&format!("http://sealvol-serve-{i}.{service}.sealvol.svc")),
            "{p}"
        );
    }
    // The example reads its version read-only, and sees a remount.
    let v = &m["example_volumes"][0]["csi"];
    assert_eq!(v["driver"], "csi.sealvol.dev");
    assert_eq!(v["readOnly"], true);
    assert!(
        v["volumeAttributes"]["ref"]
            .as_str()
            .unwrap()
            .contains("@b3:")
    );
    assert_eq!(m["example_mounts"][0]["readOnly"], true);
    assert_eq!(
        m["example_mounts"][0]["mountPropagation"],
        "HostToContainer"
    );
}
