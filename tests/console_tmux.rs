//! The console as a person meets it: the real binary in a real terminal (tmux), on a
//! demo repository. Browse, roll a tag back by keyboard, quit, and find the terminal
//! restored.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::Env;

struct Tmux {
    session: String,
}

impl Tmux {
    fn start(env: &Env, width: u16, height: u16) -> Tmux {
        Tmux::run(env, width, height, "--demo")
    }

    /// The binary with `args` (shell words) in a new terminal.
    fn run(env: &Env, width: u16, height: u16, args: &str) -> Tmux {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let session = format!("sealvol-e2e-{}-{n}", std::process::id());
        // `Env::vars` last: they win (a bucket repository's address and keys).
        let vars: String = env
            .vars
            .iter()
            .map(|(k, v)| format!(" {k}='{v}'"))
            .collect();
        let cmd = format!(
            "env SEALVOL_REPO={} SEALVOL_STATE={} XDG_CONFIG_HOME={} COLORTERM=truecolor{vars} {} {args}; echo EXITED-$?; sleep 60",
            env.repo.display(),
            env.state.display(),
            env.path("config").display(),
            env!("CARGO_BIN_EXE_sealvol"),
        );
        let ok = Command::new("tmux")
            .args([
                "new-session",
                "-d",
                "-s",
                &session,
                "-x",
                &width.to_string(),
                "-y",
                &height.to_string(),
                &cmd,
            ])
            .status()
            .expect("tmux is installed (scripts/test.sh installs it)");
        assert!(ok.success());
        Tmux { session }
    }

    fn screen(&self) -> String {
        let out = Command::new("tmux")
            .args(["capture-pane", "-p", "-t", &self.session])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = self.screen();
            if s.contains(text) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "waited for {text:?}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// One key at a time, with a pause, as a person types (and so that ESC followed
    /// by a letter is not read as Alt+letter).
    fn keys(&self, keys: &[&str]) {
        for k in keys {
            Command::new("tmux")
                .args(["send-keys", "-t", &self.session, k])
                .status()
                .unwrap();
            std::thread::sleep(Duration::from_millis(150));
        }
    }

    fn alternate_screen_on(&self) -> bool {
        let out = Command::new("tmux")
            .args([
                "display-message",
                "-p",
                "-t",
                &self.session,
                "#{alternate_on}",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.session])
            .status();
    }
}

#[test]
fn roll_back_a_tag_by_keyboard_in_a_real_terminal() {
    let env = Env::new();
    let t = Tmux::start(&env, 110, 32);
    let s = t.wait_for("tiny-llama");
    assert!(
        s.contains("sealvol › volumes") && s.contains("support-lora"),
        "{s}"
    );
    assert!(t.alternate_screen_on());

    t.keys(&["j", "j", "Enter"]);
    let s = t.wait_for("versions");
    assert!(s.contains("pinned only") && s.contains("prod"), "{s}");

    t.keys(&["t"]);
    t.wait_for("history of");
    t.keys(&["j", "Tab", "u"]);
    let s = t.wait_for("move tag prod");
    assert!(s.contains("from b3:") && s.contains("to   b3:"), "{s}");
    t.keys(&["y"]);
    t.wait_for("now points at");

    t.keys(&["?"]);
    t.wait_for("esc closes");
    t.keys(&["Escape"]);
    t.keys(&["q"]);
    let s = t.wait_for("EXITED-0");
    assert!(
        !s.contains("sealvol › volumes"),
        "console left on screen:\n{s}"
    );
    assert!(!t.alternate_screen_on(), "terminal not restored");

    // The move happened in the repository, and is in the tag's history.
    let tags: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "tags", "weights/tiny-llama", "--json"])).unwrap();
    let prod = tags["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tag"] == "prod")
        .unwrap()
        .clone();
    let history = prod["history"].as_array().unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(
        history[2]["to"], history[0]["to"],
        "rolled back to the first version"
    );
}

#[test]
fn sigterm_restores_the_terminal() {
    let env = Env::new();
    let t = Tmux::start(&env, 100, 30);
    t.wait_for("tiny-llama");
    assert!(t.alternate_screen_on());
    let out = Command::new("tmux")
        .args(["display-message", "-p", "-t", &t.session, "#{pane_pid}"])
        .output()
        .unwrap();
    let shell = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let status = Command::new("pkill")
        .args(["-TERM", "-P", &shell, "sealvol"])
        .status()
        .unwrap();
    assert!(
        status.success(),
        "no sealvol process under the pane's shell"
    );
    t.wait_for("EXITED-");
    assert!(
        !t.alternate_screen_on(),
        "terminal not restored after SIGTERM"
    );
}

/// The console hosts the agent: a sync handed over from another terminal runs inside
/// it, and its Jobs screen shows the job end READY.
#[test]
fn the_console_is_the_agent_and_shows_a_sync_from_another_terminal() {
    let env = Env::new();
    let t = Tmux::start(&env, 110, 32);
    t.wait_for("tiny-llama");
    let src = env.path("ckpt");
    common::write(&src.join("model.safetensors"), &common::noise(3 << 20, 7));
    let out = env.ok(&[
        "volume",
        "sync",
        src.to_str().unwrap(),
        "weights/from-elsewhere",
        "--detach",
    ]);
    assert_eq!(out.trim(), "1", "the job went to the console's agent");
    t.keys(&["J"]);
    let s = t.wait_for("READY");
    assert!(
        s.contains("weights/from-elsewhere") && s.contains("sealed"),
        "{s}"
    );
    t.keys(&["Enter"]);
    t.wait_for("model.safetensors");
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
    // The console's agent is gone with it; no socket is left behind.
    assert!(!env.state.join("agent.sock").exists());
}

#[test]
fn delete_and_restore_by_keyboard_in_a_real_terminal() {
    let env = Env::new();
    let t = Tmux::start(&env, 120, 32);
    t.wait_for("tiny-llama");
    t.keys(&["j", "j", "Enter"]);
    t.wait_for("pinned only");
    // The oldest version has no tag: delete it, then undo from the trash.
    t.keys(&["G", "d"]);
    let s = t.wait_for("delete a version");
    assert!(s.contains("vol:weights/tiny-llama@b3:"), "{s}");
    t.keys(&["y"]);
    let s = t.wait_for("to the trash until");
    assert!(s.contains("undo: T, then U"), "{s}");
    assert!(
        !s.contains("pinned only"),
        "the deleted version is still listed:\n{s}"
    );
    t.keys(&["T"]);
    let s = t.wait_for("HAD TAGS");
    assert!(s.contains("6d 23h") && s.contains("LEFT"), "{s}");
    t.keys(&["U"]);
    t.wait_for("restore a version");
    t.keys(&["y"]);
    t.wait_for("restored weights/tiny-llama@b3:");
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
    let versions: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "versions", "weights/tiny-llama", "--json"]))
            .unwrap();
    assert_eq!(versions["versions"].as_array().unwrap().len(), 3);
    let trash: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "trash", "--json"])).unwrap();
    assert!(trash["trash"].as_array().unwrap().is_empty());
}

#[test]
fn a_watch_from_another_terminal_runs_in_the_console_and_stops_by_keyboard() {
    let env = Env::new();
    let t = Tmux::start(&env, 120, 36);
    t.wait_for("tiny-llama");
    let run = env.path("run");
    common::write(
        &run.join("checkpoint-40/model.safetensors"),
        &common::noise(1 << 20, 9),
    );
    let out = env.ok(&[
        "volume",
        "watch",
        run.to_str().unwrap(),
        "weights/run",
        "--detach",
        "--settle",
        "500ms",
        "--tag",
        "latest",
    ]);
    assert_eq!(out.trim(), "1", "the watch went to the console's agent");
    t.keys(&["W"]);
    let s = t.wait_for("checkpoint-40  b3:");
    assert!(s.contains("weights/run") && s.contains("idle"), "{s}");
    t.keys(&["x"]);
    t.wait_for("stop watch 1");
    t.keys(&["y"]);
    t.wait_for("watch 1 stopped");
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
    let ls: serde_json::Value = serde_json::from_str(&env.ok(&["watch", "ls", "--json"])).unwrap();
    assert_eq!(ls["watches"][0]["watch"]["state"], "STOPPED");
    assert_eq!(
        ls["watches"][0]["watch"]["sealed"][0]["name"],
        "checkpoint-40"
    );
}

#[test]
fn quitting_the_console_hands_its_watches_to_a_background_agent() {
    let env = Env::new();
    let t = Tmux::start(&env, 120, 36);
    t.wait_for("tiny-llama");
    let run = env.path("run");
    common::write(&run.join("step_1/w.bin"), &common::noise(1 << 16, 1));
    let id = env.ok(&[
        "volume",
        "watch",
        run.to_str().unwrap(),
        "weights/handed",
        "--detach",
        "--settle",
        "500ms",
    ]);
    assert_eq!(id.trim(), "1", "the watch went to the console's agent");
    let sealed = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let v: serde_json::Value =
                serde_json::from_str(&env.ok(&["watch", "show", "1", "--json"])).unwrap();
            if v["watch"]["sealed"].as_array().unwrap().len() == n {
                return v;
            }
            assert!(Instant::now() < deadline, "{v:#}");
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    sealed(1);
    t.keys(&["q"]);
    let s = t.wait_for("EXITED-0");
    assert!(s.contains("go on in a background agent"), "{s}");
    let pid: i32 = s
        .split("(pid ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {s}"));
    // Written after the console quit: the background agent seals it.
    common::write(&run.join("step_2/w.bin"), &common::noise(1 << 16, 2));
    let v = sealed(2);
    assert_eq!(v["watch"]["sealed"][1]["name"], "step_2");
    env.ok(&["watch", "stop", "1"]);
    // SAFETY: the background agent this test caused; it would exit idle in a minute.
    unsafe { libc::kill(pid, libc::SIGTERM) };
}

/// `deploy rollback` asks in a terminal. Answered yes, it writes; when someone changed
/// the file between the diff shown and the answer, it refuses and writes nothing.
#[test]
fn deploy_rollback_asks_and_refuses_a_file_changed_meanwhile() {
    let env = Env::new();
    let mut refs = Vec::new();
    for i in 1..=2 {
        let src = env.path(&format!("v{i}"));
        common::write(&src.join("w.bin"), format!("v{i}").as_bytes());
        refs.push(env.push(&src, "w/q", &[]));
        std::thread::sleep(Duration::from_millis(20));
    }
    let file = env.path("prod.yaml");
    let text = format!(
        "# prod\nsealvol:\n  mounts:\n    - ref: {}\n      path: /w\n",
        refs[1]
    );
    std::fs::write(&file, &text).unwrap();
    let args = format!("deploy rollback {} w/q --previous", file.display());
    let t = Tmux::run(&env, 200, 20, &args);
    let s = t.wait_for("[y/N]");
    assert!(
        s.contains("roll back w/q at /w") && s.contains("-   4:") && s.contains("+   4:"),
        "{s}"
    );
    // Someone else edits the file while the question is on screen.
    let theirs = text.replace("# prod", "# prod (edited by someone else)");
    std::fs::write(&file, &theirs).unwrap();
    t.keys(&["y", "Enter"]);
    let s = t.wait_for("EXITED-");
    assert!(
        s.contains("changed since it was read") && s.contains("EXITED-1"),
        "{s}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        theirs,
        "their edit stands"
    );
    drop(t);
    // Asked again and answered yes: written.
    let t = Tmux::run(&env, 200, 20, &args);
    t.wait_for("[y/N]");
    t.keys(&["y", "Enter"]);
    let s = t.wait_for("EXITED-");
    assert!(s.contains("EXITED-0"), "{s}");
    let digest = &refs[0][refs[0].find('@').unwrap() + 1..];
    assert!(std::fs::read_to_string(&file).unwrap().contains(digest));
}

/// The on-call rollback in the console, in a real terminal: `D`, the deployment, `b`,
/// the version before, the confirmation, `y`; the file changes in that ref only.
#[test]
fn roll_a_deployment_back_in_the_console_in_a_real_terminal() {
    let env = Env::new();
    let mut refs = Vec::new();
    for i in 1..=2 {
        let src = env.path(&format!("v{i}"));
        common::write(&src.join("w.bin"), format!("v{i}").as_bytes());
        refs.push(env.push(&src, "weights/qwen", &[]));
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = env.path("deploy");
    std::fs::create_dir_all(&dir).unwrap();
    let prod = dir.join("prod.yaml");
    let text = format!(
        "# prod: be careful\r\nsealvol:\r\n  mounts:\r\n    - ref: \"{}\"   # pinned\r\n      path: /w\r\n",
        refs[1]
    );
    std::fs::write(&prod, &text).unwrap();
    std::fs::write(
        dir.join("staging.yaml"),
        format!(
            "sealvol:\n  mounts:\n    - ref: {}\n      path: /w\n",
            refs[0]
        ),
    )
    .unwrap();
    // A --deploy that names nothing is an error before the console opens.
    let t = Tmux::run(
        &env,
        120,
        32,
        &format!("--deploy {}", env.path("nope").display()),
    );
    let s = t.wait_for("EXITED-");
    assert!(
        s.contains("no such file or folder") && s.contains("EXITED-1"),
        "{s}"
    );
    drop(t);
    // The folder from config.toml's deploy_dirs.
    let config = env.path("config/sealvol");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("deploy_dirs = [{:?}]\n", dir.display().to_string()),
    )
    .unwrap();
    let t = Tmux::run(&env, 120, 32, "");
    t.wait_for("qwen");
    t.keys(&["D"]);
    let s = t.wait_for("prod.yaml");
    assert!(s.contains("≠") && s.contains("staging.yaml"), "{s}");
    // prod.yaml is the first column: straight to b.
    t.keys(&["b"]);
    t.wait_for("serving now");
    t.keys(&["Enter"]);
    let s = t.wait_for("roll back weights/qwen");
    assert!(
        s.contains("prod.yaml") && s.contains("from b3:") && s.contains("to   b3:"),
        "{s}"
    );
    t.keys(&["y"]);
    t.wait_for("wrote");
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
    let d = |r: &str| r[r.find('@').unwrap() + 1..].to_string();
    assert_eq!(
        std::fs::read_to_string(&prod).unwrap(),
        text.replace(&d(&refs[1]), &d(&refs[0]))
    );
}

#[test]
fn the_console_on_a_bucket_names_it_and_browses_it() {
    let moto = common::servers::Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let mut env = Env::new();
    env.vars = moto.repo_vars("s3://models/team");
    env.ok(&["init"]);
    let src = env.path("src");
    common::write(&src.join("model.bin"), &common::noise(200_000, 3));
    let v1 = env.push(&src, "w/model", &["--tag", "prod"]);
    common::write(&src.join("model.bin"), &common::noise(200_000, 4));
    env.push(&src, "w/model", &[]);

    let t = Tmux::run(&env, 110, 30, "");
    // The title names the bucket at once; the list follows once it is read.
    let s = t.wait_for("prod");
    assert!(
        s.contains("s3://models/team/"),
        "the title names the bucket:\n{s}"
    );
    t.keys(&["Enter"]);
    // Loaded, not just titled: the untagged version's row is on the versions screen only
    // (the breadcrumb says "versions" while the list is still being read).
    let s = t.wait_for("pinned only");
    assert!(s.contains("versions") && s.contains("prod"), "{s}");
    t.keys(&["t"]);
    t.wait_for("history of");
    t.keys(&["Escape", "q"]);
    t.wait_for("EXITED-0");
    assert!(!t.alternate_screen_on(), "terminal not restored");
    let tags: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "tags", "w/model", "--json"])).unwrap();
    assert!(
        v1.ends_with(tags["tags"][0]["digest"].as_str().unwrap()),
        "browsing moved nothing: {tags}"
    );
}

/// The Mounts screen shows a live mount's read-ahead memory against its bound and its
/// failed reads, from the mount's own counters, and the ring of cache servers it reads
/// through, each with its share.
#[test]
fn the_mounts_screen_shows_a_live_mounts_memory_errors_and_ring() {
    if !common::fuse_available() {
        return;
    }
    let mut env = Env::new();
    let src = env.path("src");
    common::write(&src.join("model.bin"), &common::noise(8 << 20, 5));
    env.push(&src, "w/model", &[]);
    let a = common::servers::serve_named(&env, "cache-a", &[]);
    let b = common::servers::serve_named(&env, "cache-b", &["--no-jobs"]);
    env.vars.push(("SEALVOL_API_KEY".into(), a.key.clone()));
    let mnt = env.path("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    env.ok(&[
        "volume",
        "mount",
        "w/model",
        mnt.to_str().unwrap(),
        "--prefetch-memory",
        "48M",
        "--peer",
        &a.url(),
        "--peer",
        &b.url(),
    ]);
    // Unmounted however the test ends, so a failure leaves no mount behind.
    struct Unmount<'a>(&'a Env, std::path::PathBuf);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let dir = self.1.to_string_lossy().to_string();
            let _ = self.0.run(&["volume", "unmount", "--lazy", &dir]);
        }
    }
    let _unmount = Unmount(&env, mnt.clone());
    let read = std::fs::read(mnt.join("model.bin")).unwrap();
    assert_eq!(read.len(), 8 << 20);

    let t = Tmux::run(&env, 160, 30, "");
    t.wait_for("1 volume(s)");
    t.keys(&["M"]);
    let s = t.wait_for("MEMORY PEAK");
    let row = s
        .lines()
        .find(|l| l.contains("w/model@b3:"))
        .unwrap_or_else(|| panic!("no row for the mount:\n{s}"));
    assert!(row.contains("/48M"), "memory against its bound: {row}");
    assert!(row.trim_end().ends_with('0'), "no failed reads: {row}");
    // The selected mount's ring: both servers, half the key space each.
    assert!(s.contains("ring 2 of 2 up"), "{s}");
    for served in [&a, &b] {
        let line = s
            .lines()
            .find(|l| l.contains(&served.addr))
            .unwrap_or_else(|| panic!("no row for {}:\n{s}", served.addr));
        assert!(line.contains(" up ") && line.contains("50%"), "{line}");
    }
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
}

/// The console on a remote engine with a read-only key: the title says where it is and
/// what the key may do, and the console is read-only (it offers no write the server
/// would refuse).
#[test]
fn the_console_on_a_remote_engine_says_so_and_a_read_only_key_makes_it_read_only() {
    let server = Env::new();
    let src = server.path("src");
    common::write(&src.join("model.bin"), &common::noise(200_000, 5));
    server.push(&src, "w/model", &["--tag", "prod"]);
    let served = common::servers::serve(&server, &[]);
    let key = server.ok(&["key", "create", "viewer", "--read-only"]);
    let mut env = Env::new();
    env.vars = vec![
        ("SEALVOL_REMOTE".into(), served.url()),
        ("SEALVOL_API_KEY".into(), key.trim().into()),
    ];
    let t = Tmux::run(&env, 140, 30, "");
    let s = t.wait_for("prod");
    assert!(
        s.contains(&served.url())
            && s.contains("key viewer (read-only)")
            && s.contains("· read-only"),
        "the title names the remote and the key:\n{s}"
    );
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
}

/// A bucket that accepts connections and never answers: the console is drawn at once
/// with a spinner while it opens the repository, then says why it could not, and `q`
/// quits at any moment, the terminal restored. (It drew nothing for six minutes and
/// ignored `q`.)
#[test]
fn the_console_on_a_bucket_that_stops_answering_opens_at_once_and_quits_on_q() {
    let moto = common::servers::Moto::start(&[]);
    moto.seed(&["--bucket", "models"]);
    let mut env = Env::new();
    env.vars = moto.repo_vars("s3://models/team");
    env.ok(&["init"]);
    let _frozen = moto.freeze();

    // q while the repository is still being opened.
    let t = Tmux::run(&env, 100, 24, "");
    let s = t.wait_for("opening s3://models/team/");
    assert!(
        t.alternate_screen_on(),
        "the console is drawn at once:\n{s}"
    );
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
    assert!(!t.alternate_screen_on(), "terminal not restored");

    // Waited out: the error in the status line, and the console still answers.
    let t = Tmux::run(&env, 160, 24, "--timeout 3s");
    t.wait_for("opening s3://models/team/");
    let deadline = Instant::now() + Duration::from_secs(120);
    let s = loop {
        let s = t.screen();
        if s.contains("did not answer") {
            break s;
        }
        assert!(Instant::now() < deadline, "no error shown:\n{s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(s.contains(&moto.endpoint()), "{s}");
    t.keys(&["?"]);
    t.wait_for("keys");
    t.keys(&["Escape", "q"]);
    t.wait_for("EXITED-0");
    assert!(!t.alternate_screen_on(), "terminal not restored");
}

/// Every screen survives a terminal resized to 20×5, 1×1 and 50×15 and back (Jobs and
/// Watch panicked at 20×5, the diff at 1×1), and the console still quits cleanly.
#[test]
fn every_screen_survives_a_terminal_resized_down_to_one_cell() {
    let env = Env::new();
    let t = Tmux::start(&env, 100, 30);
    t.wait_for("tiny-llama");
    let resize = |w: u16, h: u16| {
        let ok = Command::new("tmux")
            .args(["resize-window", "-t", &t.session, "-x"])
            .arg(w.to_string())
            .arg("-y")
            .arg(h.to_string())
            .status()
            .unwrap();
        assert!(ok.success());
        std::thread::sleep(Duration::from_millis(300));
    };
    let screens: [&[&str]; 6] = [
        &[":", "jobs", "Enter"],
        &[":", "watch", "Enter"],
        &[":", "mounts", "Enter"],
        &[":", "trash", "Enter"],
        &[":", "deployments", "Enter"],
        &["Enter"],
    ];
    for keys in screens {
        resize(100, 30);
        t.keys(&["Escape", "Escape", "Escape"]);
        t.keys(keys);
        for (w, h) in [(20, 5), (1, 1), (50, 15), (100, 30)] {
            resize(w, h);
        }
        let s = t.screen();
        assert!(!s.contains("EXITED-"), "{keys:?}: the console ended:\n{s}");
    }
    // The diff of the demo's two versions, at the sizes that broke it.
    resize(100, 30);
    t.keys(&["Escape", "Escape", "Escape", ":"]);
    t.keys(&["diff weights/tiny-llama weights/tiny-llama:prod", "Enter"]);
    for (w, h) in [(1, 1), (20, 5), (50, 15), (100, 30)] {
        resize(w, h);
    }
    let s = t.screen();
    assert!(!s.contains("EXITED-"), "diff: the console ended:\n{s}");
    t.keys(&["Escape", "Escape", "q"]);
    t.wait_for("EXITED-0");
}

/// The demo's first and last tiny-llama: the tensors that changed are in layers 10 and
/// 11, far down a 49-tensor file. The tensors pane shows them first, enter moves the
/// keys into it, `G` reaches its last row, `/` filters the tensors, esc goes back.
#[test]
fn the_tensor_diff_is_reached_and_scrolled_by_keyboard_in_a_real_terminal() {
    let env = Env::new();
    let t = Tmux::start(&env, 110, 30);
    t.wait_for("tiny-llama");
    // weights/tiny-llama, its oldest version marked, then its newest: the diff opens.
    t.keys(&["j", "j", "Enter"]);
    t.wait_for("pinned only");
    t.keys(&["G", "m", "g", "m"]);
    let s = t.wait_for("tensors of model.safetensors");
    assert!(
        s.contains("1 added · 8 modified · 40 unchanged"),
        "tensor counts:\n{s}"
    );
    // Changed first: all nine on the first screen, before any unchanged one.
    for name in [
        "model.lora_extra.weight",
        "model.layers.10.self_attn.q_proj.weight",
        "model.layers.11.self_attn.o_proj.weight",
    ] {
        assert!(s.contains(name), "{name} not shown:\n{s}");
    }
    let first_unchanged = s.find("= model.layers.").expect("unchanged rows after");
    assert!(s.find("model.layers.11.self_attn.o_proj").unwrap() < first_unchanged);

    t.keys(&["Enter"]);
    t.wait_for("9 of 49 tensor(s) changed");
    t.keys(&["G"]);
    let s = t.wait_for("49/49");
    assert!(s.contains("› tensors"), "{s}");
    t.keys(&["/", "l", "a", "y", "e", "r", "s", ".", "1", "1", "Enter"]);
    let s = t.wait_for("model.layers.11.self_attn.v_proj");
    assert!(
        !s.contains("model.layers.3.") && s.contains("model.safetensors"),
        "the filter is on the tensors, not the files:\n{s}"
    );
    t.keys(&["Escape", "Escape"]);
    let s = t.wait_for("enter its tensors");
    assert!(!s.contains("› tensors"), "{s}");
    t.keys(&["Escape", "q"]);
    t.wait_for("EXITED-0");
}

/// `volume delete` in a terminal asks, naming the retention as people write it, and its
/// undo hint is a ref with its `b3:`, as every other printed ref.
#[test]
fn delete_asks_in_plain_words_and_its_undo_is_a_whole_ref() {
    let env = Env::new();
    let src = env.path("src");
    common::write(&src.join("w.bin"), b"weights");
    let pinned = env.push(&src, "t/asked", &[]);
    let t = Tmux::run(&env, 200, 12, &format!("volume delete {pinned}"));
    let s = t.wait_for("[y/N]");
    assert!(
        s.contains(&format!(
            "move {pinned} to the trash (restorable for 7 days)? [y/N]"
        )),
        "{s}"
    );
    t.keys(&["y", "Enter"]);
    let s = t.wait_for("EXITED-0");
    assert!(
        s.contains("undo: `sealvol volume restore t/asked@b3:"),
        "{s}"
    );
}

/// The console on a remote engine starts a sync from the palette: the job is the
/// server's, and its progress shows live on the Jobs screen until it is sealed.
#[test]
fn the_console_on_a_remote_starts_a_sync_from_the_palette_and_shows_it_live() {
    use common::servers::{HfServer, minilm_dir, serve};
    let tmp = tempfile::tempdir().unwrap();
    let gate = tmp.path().join("gate");
    let repo = format!(
        "sentence-transformers/all-MiniLM-L6-v2={}",
        minilm_dir().display()
    );
    let gate_s = gate.display().to_string();
    // Held at 20 MB until the test has seen it running.
    let hub = HfServer::start(&[
        "--repo",
        &repo,
        "--hold-after",
        "20000000",
        "--gate",
        &gate_s,
    ]);
    let mut server = Env::new();
    server.vars = vec![
        ("HF_ENDPOINT".into(), hub.url.clone()),
        (
            "HF_HOME".into(),
            server.path("hf-home").display().to_string(),
        ),
    ];
    server.ok(&["init"]);
    let served = serve(&server, &[]);
    let key = server.ok(&["key", "create", "ci", "--namespace", "embed"]);
    let mut env = Env::new();
    env.vars = vec![
        ("SEALVOL_REMOTE".into(), served.url()),
        ("SEALVOL_API_KEY".into(), key.trim().into()),
    ];
    let t = Tmux::run(&env, 150, 36, "");
    t.wait_for("key ci");
    t.keys(&[
        ":",
        "sync hf://sentence-transformers/all-MiniLM-L6-v2 embed/minilm --tag prod",
        "Enter",
    ]);
    let s = t.wait_for("RUNNING");
    assert!(s.contains("embed/minilm"), "{s}");
    // Live figures, read from the server's events: held at 20 MB of 87.4 MiB.
    t.wait_for("/ 87.4 MiB");
    // The status line said where the job went (its messages, in full: `L`).
    t.keys(&["L"]);
    t.wait_for("job 1 queued on the server");
    t.keys(&["Escape"]);
    std::fs::write(&gate, b"").unwrap();
    t.wait_for("READY");
    let want = server.ok(&["digest", minilm_dir().to_str().unwrap()]);
    assert!(
        server
            .ok(&["volume", "resolve", "embed/minilm:prod"])
            .trim()
            .ends_with(want.trim())
    );
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
}

/// What the CLI starts, the palette starts: a mount in the background and a watch in
/// the console's agent, each then on its live screen.
#[test]
fn the_palette_mounts_a_version_and_starts_a_watch() {
    let env = Env::new();
    let t = Tmux::start(&env, 130, 36);
    t.wait_for("tiny-llama");
    let run = env.path("run");
    common::write(
        &run.join("checkpoint-7/model.safetensors"),
        &common::noise(1 << 20, 3),
    );
    t.keys(&[
        ":",
        &format!("watch {} weights/run", run.display()),
        "Enter",
    ]);
    // On the Watch screen at once (it seals after its 10 s settle; that is not this
    // test's business).
    let s = t.wait_for("weights/run");
    assert!(s.contains(&run.display().to_string()), "{s}");
    t.keys(&["L"]);
    t.wait_for("watch 1 started");
    t.keys(&["Escape", "x"]);
    t.wait_for("stop watch 1");
    t.keys(&["y"]);
    t.wait_for("watch 1 stopped");
    // Its bad input is said, and nothing starts.
    t.keys(&[":", "watch ./only-a-folder", "Enter"]);
    t.wait_for("watch takes a folder and a volume");

    if common::fuse_available() {
        let mnt = env.path("mnt");
        std::fs::create_dir_all(&mnt).unwrap();
        struct Unmount<'a>(&'a Env, std::path::PathBuf);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let dir = self.1.to_string_lossy().to_string();
                let _ = self.0.run(&["volume", "unmount", "--lazy", &dir]);
            }
        }
        let _unmount = Unmount(&env, mnt.clone());
        t.keys(&[
            ":",
            &format!("mount weights/tiny-llama:prod {}", mnt.display()),
            "Enter",
        ]);
        let s = t.wait_for("tiny-llama@b3:");
        assert!(s.contains(&mnt.display().to_string()), "{s}");
        assert!(common::mounts::is_mounted(&mnt));
        env.ok(&["volume", "unmount", mnt.to_str().unwrap()]);
    }
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
}

/// The demo has deployments (staging, prod, canary: one drifts), and the on-call path
/// `D j tab b enter` shows a confirmation that fits 80×24 and says how to answer.
#[test]
fn the_demos_deployments_roll_back_at_80x24_with_the_answer_in_view() {
    let env = Env::new();
    let t = Tmux::start(&env, 80, 24);
    t.wait_for("tiny-llama");
    t.keys(&["D"]);
    let s = t.wait_for("prod/config.yaml");
    assert!(
        s.contains("canary/config.yaml") && s.contains("staging/config") && s.contains("≠"),
        "{s}"
    );
    // To the weights' row, then the deployment to roll back: canary, the one that drifts.
    let rows: Vec<&str> = s.lines().collect();
    let at = rows
        .iter()
        .position(|l| l.contains("weights/tiny-llama"))
        .unwrap();
    let first = rows
        .iter()
        .position(|l| {
            l.contains("adapters/support-lora")
                || l.contains("tokenizers/bpe-32k")
                || l.contains("weights/tiny-llama")
        })
        .unwrap();
    for _ in first..at {
        t.keys(&["j"]);
    }
    t.keys(&["b"]);
    t.wait_for("serving now");
    t.keys(&["Enter"]);
    let s = t.wait_for("roll back weights/tiny-llama");
    assert!(
        s.contains(" y ") && s.contains("cancel"),
        "no way to answer in view:\n{s}"
    );
    assert!(s.contains("from b3:") && s.contains("to   b3:"), "{s}");
    assert!(
        s.contains("y writes"),
        "the status line says how to answer:\n{s}"
    );
    t.keys(&["y"]);
    t.wait_for("wrote");
    t.keys(&["q"]);
    t.wait_for("EXITED-0");
    assert!(env.state.join("demo/deploy/canary/config.yaml").is_file());
}
