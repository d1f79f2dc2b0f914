//! `sealvol volume sync` and `sealvol jobs` against real servers on loopback (moto for S3,
//! Azurite, gcp-storage-emulator, a local Hugging Face hub):
//! digests equal to the same files pushed from disk, no new chunk for an
//! unchanged source, resume after kill -9, hostile keys, 403 and 404, and secrets that
//! never leak.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::servers::{
    AZURITE_KEY, Azurite, GcsEmulator, HfServer, Moto, SlowProxy, cloud_seed, minilm_dir,
};
use common::{Env, assert_same_tree, noise, walk_files, write};

/// Runs sealvol with the AWS environment pointing at `endpoint` (and nothing from the
/// host's own AWS configuration).
fn s3_cmd(env: &Env, endpoint: &str) -> Command {
    let mut c = env.cmd();
    c.env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env_remove("AWS_ENDPOINT_URL_S3")
        .env_remove("AWS_PROFILE");
    c
}

fn run(mut c: Command, args: &[&str]) -> Output {
    c.args(args).output().expect("run sealvol")
}

fn ok(c: Command, args: &[&str]) -> String {
    let out = run(c, args);
    assert!(
        out.status.success(),
        "sealvol {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// The job record a `--json` run printed, after checking that it succeeded.
fn job_json(c: Command, args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&ok(c, args)).expect("a JSON job")
}

/// Exit code and stderr of a run expected to fail.
fn fails(c: Command, args: &[&str]) -> (i32, String) {
    let out = run(c, args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "sealvol {args:?} succeeded: {err}");
    assert!(
        err.lines().any(|l| l.starts_with("error:")),
        "no error line: {err}"
    );
    (out.status.code().unwrap_or(-1), err)
}

fn digest_of(env: &Env, dir: &Path) -> String {
    env.ok(&["digest", dir.to_str().unwrap()])
        .trim()
        .to_string()
}

fn sample(root: &Path) {
    write(&root.join("config.json"), b"{\"layers\": 2}");
    write(&root.join("model.safetensors"), &noise(20 << 20, 1)); // three 8 MiB parts
    write(&root.join("tokenizer/vocab.txt"), &noise(300_000, 2));
    write(&root.join("tokenizer/empty.txt"), b"");
    write(&root.join("a/b/c/deep.bin"), &noise(5000, 3));
}

#[test]
fn an_s3_prefix_seals_the_digest_of_the_same_files_on_disk_and_resyncs_for_free() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let src = env.path("src");
    sample(&src);
    moto.seed(&["ckpts", "run-7/step-40", src.to_str().unwrap()]);
    // Another prefix that must not leak in.
    moto.seed(&["ckpts", "--keys", "run-7/step-400/other.bin=10"]);

    let ep = moto.endpoint();
    let out = ok(
        s3_cmd(&env, &ep),
        &[
            "volume",
            "sync",
            "s3://ckpts/run-7/step-40",
            "weights/run-7",
            "--tag",
            "latest",
        ],
    );
    let pinned = out.lines().last().unwrap().to_string();
    let want = digest_of(&env, &src);
    assert!(pinned.ends_with(&want), "{pinned} vs digest {want}");

    // The version holds the same bytes, and says where they came from.
    let pulled = env.path("pulled");
    env.ok(&[
        "volume",
        "pull",
        "weights/run-7:latest",
        pulled.to_str().unwrap(),
    ]);
    assert_same_tree(&src, &pulled);
    let manifest = manifest_json(&env, "weights/run-7", &want);
    let prov = &manifest["provenance"];
    assert_eq!(prov["source"], "s3://ckpts/run-7/step-40/");
    assert!(prov["listed"].as_str().is_some());
    let etag = prov["objects"]["model.safetensors"].as_str().unwrap();
    assert!(etag.len() > 8, "an ETag per object: {prov}");

    // Again: same digest, nothing fetched, no new chunk stored.
    let stored = env.stored_chunk_bytes();
    let job = job_json(
        s3_cmd(&env, &ep),
        &[
            "volume",
            "sync",
            "s3://ckpts/run-7/step-40",
            "weights/run-7",
            "--json",
        ],
    );
    assert_eq!(job["state"], "READY");
    assert!(job["sealed"].as_str().unwrap().ends_with(&want));
    assert_eq!(job["progress"]["chunks_new"], 0, "{job}");
    assert_eq!(env.stored_chunk_bytes(), stored);

    // Both jobs are on record.
    let jobs: serde_json::Value = serde_json::from_str(&env.ok(&["jobs", "ls", "--json"])).unwrap();
    let jobs = jobs["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j["state"] == "READY"));
    let shown = env.ok(&["jobs", "show", "1"]);
    assert!(
        shown.contains("READY") && shown.contains("s3://ckpts/run-7/step-40/"),
        "{shown}"
    );
}

fn manifest_json(env: &Env, volume: &str, digest: &str) -> serde_json::Value {
    let path = env
        .repo
        .join("manifests")
        .join(volume)
        .join(digest.trim_start_matches("b3:"));
    serde_json::from_slice(&std::fs::read(&path).expect("manifest")).unwrap()
}

#[test]
fn r2_and_coreweave_addresses_reach_their_configured_endpoints() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("adapter.safetensors"), &noise(100_000, 9));
    moto.seed(&["lora", "v1", src.to_str().unwrap()]);
    let want = digest_of(&env, &src);
    for (url, var) in [
        ("r2://0123abcd/lora/v1", "SEALVOL_R2_ENDPOINT"),
        ("cw://lora/v1", "SEALVOL_CW_ENDPOINT"),
    ] {
        let mut c = s3_cmd(&env, "http://127.0.0.1:9");
        c.env(var, moto.endpoint());
        let out = ok(c, &["volume", "sync", url, "adapters/x"]);
        assert!(out.trim().ends_with(&want), "{url}: {out}");
    }
}

#[test]
fn hostile_keys_are_refused_by_name_and_seal_nothing_unless_excluded() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    moto.seed(&[
        "evil",
        "--keys",
        "m/ok.bin=100",
        "m/empty.bin=0",
        "m/folder/=0",
        "m/a//b=5",
        "m/x/../../escape=5",
    ]);
    let ep = moto.endpoint();
    let (code, err) = fails(
        s3_cmd(&env, &ep),
        &["volume", "sync", "s3://evil/m", "x/evil"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("a//b") || err.contains("escape"), "{err}");
    assert!(
        err.contains("--exclude"),
        "the hint says how to go on: {err}"
    );
    assert!(!env.ok(&["volume", "ls"]).contains("x/evil"));
    let failed = env.ok(&["jobs", "show", "1"]);
    assert!(failed.contains("FAILED"), "{failed}");

    let out = ok(
        s3_cmd(&env, &ep),
        &[
            "volume",
            "sync",
            "s3://evil/m",
            "x/evil",
            "--exclude",
            "a//b",
            "--exclude",
            "x/**",
        ],
    );
    assert!(out.contains("vol:x/evil@b3:"), "{out}");
    let files = env.ok(&["volume", "files", "x/evil"]);
    assert!(
        files.contains("ok.bin") && files.contains("empty.bin"),
        "{files}"
    );
    assert!(
        !files.contains("folder"),
        "a folder marker is no file: {files}"
    );

    // A key that is both a file and a folder of other keys.
    moto.seed(&["clash", "--keys", "m/a=3", "m/a/b=3"]);
    let (_, err) = fails(
        s3_cmd(&env, &ep),
        &["volume", "sync", "s3://clash/m", "x/clash"],
    );
    assert!(err.contains("\"a\""), "{err}");
    // Nothing was ever written outside the repository and state directories.
    let mut top: Vec<String> = std::fs::read_dir(env.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    top.sort();
    assert_eq!(top, ["repo", "state"]);
}

#[test]
fn a_missing_bucket_fails_at_once_and_the_job_can_be_retried_once_it_exists() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let ep = moto.endpoint();
    let t = Instant::now();
    let (code, err) = fails(
        s3_cmd(&env, &ep),
        &["volume", "sync", "s3://nobucket/p", "x/y"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("no bucket nobucket"), "{err}");
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "a 404 is not retried"
    );
    assert!(env.ok(&["jobs", "show", "1"]).contains("FAILED"));

    let src = env.path("src");
    write(&src.join("w.bin"), &noise(10_000, 4));
    moto.seed(&["nobucket", "p", src.to_str().unwrap()]);
    let out = ok(s3_cmd(&env, &ep), &["jobs", "retry", "1"]);
    assert!(out.trim().ends_with(&digest_of(&env, &src)), "{out}");
    let job = env.ok(&["jobs", "show", "1"]);
    assert!(
        job.contains("READY") && job.contains("attempts  2"),
        "{job}"
    );

    // Retrying a READY job is refused, and says which jobs can be.
    let (_, err) = fails(s3_cmd(&env, &ep), &["jobs", "retry", "1"]);
    assert!(err.contains("FAILED or CANCELLED"), "{err}");
}

#[test]
fn bad_inputs_are_refused_before_any_job_exists() {
    let env = Env::new();
    let ep = "http://127.0.0.1:9";
    for (args, code) in [
        (vec!["volume", "sync", "ftp://x/y", "a/b"], 2),
        (vec!["volume", "sync", "s3://bucket/p", "not-a-volume"], 2),
        (
            vec!["volume", "sync", "s3://bucket/p", "a/b", "--tag", "Bad Tag"],
            2,
        ),
        (
            vec![
                "volume",
                "sync",
                "s3://bucket/p",
                "a/b",
                "--include",
                "[oops",
            ],
            2,
        ),
        (
            vec![
                "volume",
                "sync",
                "s3://bucket/p",
                "a/b",
                "--secret",
                "nosuch",
            ],
            1,
        ),
        (vec!["jobs", "show", "42"], 1),
        (vec!["jobs", "retry", "42"], 1),
    ] {
        let (got, err) = fails(s3_cmd(&env, ep), &args);
        assert_eq!(got, code, "{args:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{err}"
        );
    }
    assert!(env.ok(&["jobs", "ls", "--json"]).contains("\"jobs\": []"));
}

#[test]
fn a_403_fails_at_once_and_says_which_credentials_to_give() {
    // moto checks credentials after its first N requests (the set-up below): the
    // default ones the tests use are unknown to it.
    let moto = Moto::start(&[("INITIAL_NO_AUTH_ACTION_COUNT", "2")]);
    let env = Env::new();
    moto.seed(&["private", "--keys", "p/w.bin=1000"]); // 2 requests, then auth
    let t = Instant::now();
    let (code, err) = fails(
        s3_cmd(&env, &moto.endpoint()),
        &["volume", "sync", "s3://private/p", "x/p"],
    );
    assert_eq!(code, 1);
    assert!(err.contains("access denied"), "{err}");
    assert!(
        err.contains("--secret") && err.contains("AWS_ACCESS_KEY_ID"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "a 403 is not retried"
    );
    let job = env.ok(&["jobs", "show", "1"]);
    assert!(
        job.contains("FAILED") && job.contains("access denied"),
        "{job}"
    );
}

#[test]
fn credentials_from_a_secret_are_used_and_never_leak() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(1000, 5));
    moto.seed(&["private", "p", src.to_str().unwrap()]);
    // A relay notes which access key id signed each request.
    let log = env.tmp.path().join("key-ids");
    let proxy = SlowProxy::start_logging(moto.port, 0, Some(&log));
    let ep = format!("http://127.0.0.1:{}", proxy.port);

    let secret = "s3cr3t-Value-that-must-never-show";
    let pair = format!("AKIDFROMSECRET:{secret}");
    assert!(env.set_secret("moto-key", &pair).status.success());
    let out = run(
        s3_cmd(&env, &ep),
        &[
            "volume",
            "sync",
            "s3://private/p",
            "x/p",
            "--secret",
            "moto-key",
            "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ids = std::fs::read_to_string(&log).unwrap();
    assert!(
        !ids.is_empty() && ids.lines().all(|l| l == "AKIDFROMSECRET"),
        "{ids}"
    );
    std::fs::remove_file(&log).unwrap();

    // The secret's value is nowhere: not in outputs, job records or the repository.
    let mut seen = String::from_utf8_lossy(&out.stdout).to_string();
    seen += &String::from_utf8_lossy(&out.stderr);
    for args in [
        vec!["jobs", "ls", "--json"],
        vec!["jobs", "show", "1"],
        vec!["jobs", "show", "1", "--json"],
        vec!["secret", "ls", "--json"],
        vec!["volume", "versions", "x/p", "--json"],
    ] {
        let o = env.run(&args);
        seen += &String::from_utf8_lossy(&o.stdout);
        seen += &String::from_utf8_lossy(&o.stderr);
    }
    assert!(seen.contains("moto-key"), "the name is shown: {seen}");
    assert!(!seen.contains(secret), "the secret leaked into an output");
    for f in walk_files(env.tmp.path()) {
        if f.starts_with(env.state.join("secrets")) {
            continue;
        }
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "the secret is in {}",
            f.display()
        );
    }

    // A malformed secret is refused before anything is fetched, without its value.
    assert!(env.set_secret("bad-key", secret).status.success());
    let (_, err) = fails(
        s3_cmd(&env, &ep),
        &[
            "volume",
            "sync",
            "s3://private/p",
            "x/q",
            "--secret",
            "bad-key",
        ],
    );
    assert!(
        err.contains("KEY_ID:SECRET") && !err.contains(secret),
        "{err}"
    );
}

#[test]
fn a_killed_sync_resumes_without_fetching_finished_batches_again() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let src = env.path("src");
    for i in 0..12 {
        write(
            &src.join(format!("shard-{i:02}.bin")),
            &noise(3 << 20, 100 + i),
        );
    }
    moto.seed(&["big", "ckpt", src.to_str().unwrap()]);
    let want = digest_of(&env, &src);
    // 4 MiB/s per connection, 2 connections: the 36 MiB take ~4.5 s.
    let proxy = SlowProxy::start(moto.port, 4 << 20);
    let ep = format!("http://127.0.0.1:{}", proxy.port);

    let mut c = s3_cmd(&env, &ep);
    c.env("SEALVOL_SYNC_BATCH", "6M")
        .env("SEALVOL_SYNC_STREAMS", "2")
        .args(["volume", "sync", "s3://big/ckpt", "w/big", "--tag", "prod"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    // Kill it once a batch or two are durable (each ends a pack), well before the end.
    let deadline = Instant::now() + Duration::from_secs(60);
    while pack_count(&env) < 2 {
        assert!(Instant::now() < deadline, "no batch finished");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the sync ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !env.ok(&["volume", "ls"]).contains("w/big"),
        "nothing sealed yet"
    );

    // The same command again (its endpoint is part of the job).
    let mut c = s3_cmd(&env, &ep);
    c.env("SEALVOL_SYNC_BATCH", "6M");
    let out = run(
        c,
        &[
            "volume",
            "sync",
            "s3://big/ckpt",
            "w/big",
            "--tag",
            "prod",
            "--json",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("job 1: resuming"), "{err}");
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["id"], 1);
    assert_eq!(job["attempts"], 2);
    assert!(job["sealed"].as_str().unwrap().ends_with(&want), "{job}");
    // Objects of finished batches were not fetched again.
    let read = job["progress"]["chunks_new"].as_u64().unwrap()
        + job["progress"]["chunks_reused"].as_u64().unwrap();
    let all_chunks = env.stored_chunk_count();
    assert!(
        read < all_chunks,
        "read {read} chunks of {all_chunks}: nothing was skipped"
    );
    let pulled = env.path("pulled");
    env.ok(&["volume", "pull", "w/big:prod", pulled.to_str().unwrap()]);
    assert_same_tree(&src, &pulled);
}

fn pack_count(env: &Env) -> usize {
    let dir = env.repo.join("index");
    if !dir.exists() {
        return 0;
    }
    walk_files(&dir).len()
}

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

#[test]
fn a_local_folder_syncs_like_a_push() {
    let env = Env::new();
    let src = env.path("src");
    sample(&src);
    let out = env.ok(&[
        "volume",
        "sync",
        src.to_str().unwrap(),
        "x/local",
        "--tag",
        "v1",
    ]);
    assert!(out.trim().ends_with(&digest_of(&env, &src)), "{out}");
    let (code, err) = fails(
        env.cmd(),
        &[
            "volume",
            "sync",
            src.to_str().unwrap(),
            "x/local",
            "--exclude",
            "*.bin",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("apply to remote sources"), "{err}");
}

/// Runs sealvol against a local Hugging Face stand-in.
fn hf_cmd(env: &Env, endpoint: &str) -> Command {
    let mut c = env.cmd();
    c.env("HF_ENDPOINT", endpoint)
        .env("HF_HOME", env.path("hf-home"))
        .env_remove("HF_TOKEN");
    c
}

#[test]
fn a_real_model_from_the_hub_seals_the_digest_of_its_files_pinned_to_the_commit() {
    let model = minilm_dir();
    let env = Env::new();
    let hub = HfServer::start(&[
        "--repo",
        &format!("sentence-transformers/all-MiniLM-L6-v2={}", model.display()),
        "--dataset",
        &format!("sealvol/evals={}", model.join("1_Pooling").display()),
    ]);
    let job = job_json(
        hf_cmd(&env, &hub.url),
        &[
            "volume",
            "sync",
            "hf://sentence-transformers/all-MiniLM-L6-v2",
            "embed/minilm",
            "--tag",
            "prod",
            "--json",
        ],
    );
    let want = digest_of(&env, &model);
    let sealed = job["sealed"].as_str().unwrap();
    assert!(sealed.ends_with(&want), "{sealed} vs {want}");
    let files = env.ok(&["volume", "files", "embed/minilm:prod"]);
    for f in [
        "model.safetensors",
        "tokenizer.json",
        "vocab.txt",
        "1_Pooling/config.json",
    ] {
        assert!(files.contains(f), "{f} missing: {files}");
    }
    // The version names the commit it came from, and each file's content id.
    let m = manifest_json(&env, "embed/minilm", &want);
    let sha = m["provenance"]["revision"].as_str().unwrap();
    assert_eq!(sha.len(), 40, "{m}");
    assert_eq!(
        m["provenance"]["source"],
        "hf://sentence-transformers/all-MiniLM-L6-v2@main"
    );
    // A content id per file: the git blob id (of the LFS pointer, for the weights),
    // which changes whenever the bytes do.
    let id = m["provenance"]["objects"]["model.safetensors"]
        .as_str()
        .unwrap();
    assert!(
        id.len() >= 40 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{m}"
    );
    // Pinned to a commit, the same bytes again: same digest, nothing new.
    let again = ok(
        hf_cmd(&env, &hub.url),
        &[
            "volume",
            "sync",
            &format!("hf://sentence-transformers/all-MiniLM-L6-v2@{sha}"),
            "embed/minilm",
        ],
    );
    assert!(again.trim().ends_with(&want));
    // Datasets too.
    let ds = ok(
        hf_cmd(&env, &hub.url),
        &["volume", "sync", "hf://datasets/sealvol/evals", "evals/x"],
    );
    assert!(
        ds.trim()
            .ends_with(&digest_of(&env, &model.join("1_Pooling"))),
        "{ds}"
    );
}

#[test]
fn hub_errors_say_what_to_fix_and_a_token_secret_opens_a_private_repo() {
    let model = minilm_dir().join("1_Pooling");
    let env = Env::new();
    let token = "hf_privateTokenValueThatMustNotLeak";
    let hub = HfServer::start(&[
        "--repo",
        &format!("org/private={}", model.display()),
        "--token",
        token,
    ]);
    // No token: 401.
    let t = Instant::now();
    let (code, err) = fails(
        hf_cmd(&env, &hub.url),
        &["volume", "sync", "hf://org/private", "x/p"],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("access denied") && err.contains("HF_TOKEN"),
        "{err}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "a 401 is not retried"
    );

    assert!(env.set_secret("hf", token).status.success());
    // A wrong revision and a missing repository are permanent, and named.
    let (_, err) = fails(
        hf_cmd(&env, &hub.url),
        &[
            "volume",
            "sync",
            "hf://org/private@v9",
            "x/p",
            "--secret",
            "hf",
        ],
    );
    assert!(err.contains("no revision \"v9\""), "{err}");
    let (_, err) = fails(
        hf_cmd(&env, &hub.url),
        &[
            "volume",
            "sync",
            "hf://org/nothing",
            "x/p",
            "--secret",
            "hf",
        ],
    );
    assert!(err.contains("no such repository"), "{err}");

    let out = run(
        hf_cmd(&env, &hub.url),
        &[
            "volume",
            "sync",
            "hf://org/private",
            "x/p",
            "--secret",
            "hf",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .ends_with(&digest_of(&env, &model))
    );
    let mut seen = String::from_utf8_lossy(&out.stderr).to_string();
    for id in 1..=4 {
        seen += &env.ok(&["jobs", "show", &id.to_string(), "--json"]);
        seen += &env.ok(&["jobs", "logs", &id.to_string()]);
    }
    assert!(!seen.contains(token), "the token leaked");
}

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
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("service account"), "{err}");
    assert!(!err.contains(bogus), "the secret leaked: {err}");
}

#[test]
fn a_listing_of_a_hundred_thousand_files_is_paged_through_and_filtered() {
    // The local hub pages its tree 1,000 entries at a time, as the Hub does. The files
    // live in memory (/dev/shm): on this disk, making 100,000 files takes a minute.
    let env = Env::new();
    let shm = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let repo = shm.path().join("many");
    for d in 0..100 {
        let dir = repo.join(format!("shard-{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..1000 {
            std::fs::write(dir.join(format!("f-{f:03}.txt")), format!("{d}/{f}")).unwrap();
        }
    }
    let hub = HfServer::start(&["--dataset", &format!("org/many={}", repo.display())]);
    let t = Instant::now();
    let job = job_json(
        hf_cmd(&env, &hub.url),
        &[
            "volume",
            "sync",
            "hf://datasets/org/many",
            "x/many",
            "--include",
            "shard-07/f-00*",
            "--json",
        ],
    );
    assert_eq!(job["progress"]["files_total"], 10, "{job}");
    let logs = env.ok(&["jobs", "logs", "1"]);
    assert!(
        logs.contains("listed 10 object(s)") && logs.contains("(99990 left out by filters)"),
        "{logs}"
    );
    eprintln!("100,000-entry listing synced in {:?}", t.elapsed());
}

#[test]
fn a_connection_cut_mid_file_is_read_on_from_where_it_stopped() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &noise(3 << 20, 31));
    write(&src.join("b.bin"), &noise(2 << 20, 32));
    moto.seed(&["cut", "p", src.to_str().unwrap()]);
    // Every connection dies after 1 MiB from the server.
    let proxy = SlowProxy::start_cutting(moto.port, 1 << 20);
    let ep = format!("http://127.0.0.1:{}", proxy.port);
    let out = run(
        s3_cmd(&env, &ep),
        &["volume", "sync", "s3://cut/p", "x/cut"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .ends_with(&digest_of(&env, &src))
    );
    assert!(
        err.contains("reading on"),
        "the cuts happened and were survived: {err}"
    );
    // The job's own log says so too, with where each cut happened.
    let log = env.ok(&["jobs", "logs", "1"]);
    assert!(
        log.lines()
            .any(|l| l.contains("a.bin: the connection was cut at byte")
                && l.contains("reading on from there")),
        "{log}"
    );
}
