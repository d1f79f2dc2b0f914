//! The agent's lifecycle: detached jobs in an agent that answers ls, show, cancel,
//! retry and logs; an agent killed mid-job, resumed by the next; a background agent
//! started by `--detach`.

use super::*;

/// Spawns `sealvol agent` for `env` with the AWS environment of `endpoint`.
fn start_agent(env: &Env, endpoint: &str) -> std::process::Child {
    let mut c = s3_cmd(env, endpoint);
    c.env("SEALVOL_SYNC_BATCH", "6M")
        .env("SEALVOL_SYNC_STREAMS", "2")
        .arg("agent")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = c.spawn().unwrap();
    let sock = env.state.join("agent.sock");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&sock).is_err() {
        assert!(Instant::now() < deadline, "the agent did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

fn job_event(env: &Env, id: u32) -> serde_json::Value {
    serde_json::from_str(&env.ok(&["jobs", "show", &id.to_string(), "--json"])).unwrap()
}

fn wait_for_state(env: &Env, id: u32, state: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ev = job_event(env, id);
        if ev["job"]["state"] == state {
            return ev;
        }
        assert!(
            Instant::now() < deadline,
            "job {id} never became {state}: {ev}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn big_source(env: &Env, moto: &Moto) -> (std::path::PathBuf, String) {
    let src = env.path("src");
    for i in 0..12 {
        write(
            &src.join(format!("shard-{i:02}.bin")),
            &noise(3 << 20, 200 + i),
        );
    }
    moto.seed(&["big", "ckpt", src.to_str().unwrap()]);
    let want = digest_of(env, &src);
    (src, want)
}

#[test]
fn detached_jobs_run_in_an_agent_that_answers_ls_show_cancel_retry_and_logs() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let (_src, want) = big_source(&env, &moto);
    let proxy = SlowProxy::start(moto.port, 2 << 20);
    let ep = format!("http://127.0.0.1:{}", proxy.port);
    let mut agent = start_agent(&env, &ep);

    let t = Instant::now();
    let mut c = s3_cmd(&env, &ep);
    c.args([
        "volume",
        "sync",
        "s3://big/ckpt",
        "w/big",
        "--tag",
        "prod",
        "--detach",
    ]);
    let id = ok(c, &[]);
    assert_eq!(id.trim(), "1");
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "--detach returns at once"
    );

    // The agent holds the state database; these answers come through its socket.
    wait_for_state(&env, 1, "RUNNING");
    let deadline = Instant::now() + Duration::from_secs(30);
    let ev = loop {
        let ev = job_event(&env, 1);
        if ev["rate"].as_u64().unwrap_or(0) > 0 && !ev["files"].as_array().unwrap().is_empty() {
            break ev;
        }
        assert!(Instant::now() < deadline, "no live progress: {ev}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        ev["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["state"] == "reading"),
        "{ev}"
    );
    let ls = env.ok(&["jobs", "ls"]);
    assert!(
        ls.contains("RUNNING") && ls.contains("s3://big/ckpt/"),
        "{ls}"
    );

    let cancelled = env.ok(&["jobs", "cancel", "1", "--json"]);
    let job: serde_json::Value = serde_json::from_str(&cancelled).unwrap();
    assert_eq!(job["state"], "CANCELLED", "{job}");
    assert!(
        !env.ok(&["volume", "ls"]).contains("w/big"),
        "a cancelled job seals nothing"
    );
    let (_, err) = fails(env.cmd(), &["jobs", "cancel", "1"]);
    assert!(err.contains("CANCELLED"), "{err}");

    let out = run(s3_cmd(&env, &ep), &["jobs", "retry", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("in the agent (pid"), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).trim().ends_with(&want));

    let logs = env.ok(&["jobs", "logs", "1"]);
    for line in [
        "queued: s3://big/ckpt/ -> w/big",
        "attempt 1 started",
        "CANCELLED: cancelled",
        "queued again by the user",
        "attempt 2 started",
        "already stored by an earlier run",
        "READY: sealed vol:w/big@",
    ] {
        assert!(logs.contains(line), "no {line:?} in\n{logs}");
    }
    agent.kill().unwrap();
    agent.wait().unwrap();
}

#[test]
fn an_agent_killed_mid_job_is_resumed_by_the_next_agent() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let (src, want) = big_source(&env, &moto);
    let proxy = SlowProxy::start(moto.port, 4 << 20);
    let ep = format!("http://127.0.0.1:{}", proxy.port);
    let mut agent = start_agent(&env, &ep);
    let mut c = s3_cmd(&env, &ep);
    c.args([
        "volume",
        "sync",
        "s3://big/ckpt",
        "w/big",
        "--tag",
        "prod",
        "--detach",
    ]);
    ok(c, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while pack_count(&env) < 2 {
        assert!(Instant::now() < deadline, "no batch finished");
        std::thread::sleep(Duration::from_millis(20));
    }
    agent.kill().unwrap();
    agent.wait().unwrap();

    let mut agent = start_agent(&env, &ep);
    let ev = wait_for_state(&env, 1, "READY");
    assert!(
        ev["job"]["sealed"].as_str().unwrap().ends_with(&want),
        "{ev}"
    );
    assert_eq!(ev["job"]["attempts"], 2);
    let logs = env.ok(&["jobs", "logs", "1"]);
    assert!(
        logs.contains("the agent that ran this job stopped; queued again"),
        "{logs}"
    );
    assert!(logs.contains("already stored by an earlier run"), "{logs}");
    let pulled = env.path("pulled");
    env.ok(&["volume", "pull", "w/big:prod", pulled.to_str().unwrap()]);
    assert_same_tree(&src, &pulled);
    agent.kill().unwrap();
    agent.wait().unwrap();
}

#[test]
fn detach_starts_a_background_agent_when_none_runs() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(50_000, 11));
    moto.seed(&["small", "p", src.to_str().unwrap()]);
    let mut c = s3_cmd(&env, &moto.endpoint());
    c.args([
        "volume",
        "sync",
        "s3://small/p",
        "x/small",
        "--detach",
        "--json",
    ]);
    let job = job_json(c, &[]);
    assert_eq!(job["id"], 1);
    let ev = wait_for_state(&env, 1, "READY");
    assert!(
        ev["job"]["sealed"]
            .as_str()
            .unwrap()
            .ends_with(&digest_of(&env, &src))
    );
    // The background agent says who it is in its log; stop it.
    let log = std::fs::read_to_string(env.state.join("agent.log")).unwrap();
    let pid: i32 = log
        .split("agent (pid ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {log}"));
    Command::new("kill").arg(pid.to_string()).status().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while env.state.join("agent.sock").exists() {
        assert!(
            Instant::now() < deadline,
            "the agent did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
