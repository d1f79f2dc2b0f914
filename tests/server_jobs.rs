//! Jobs that run on the server (`sealvol serve`) for the holders of its keys, with the
//! real binary: a sync submitted through `--remote` is fetched and sealed by the
//! server while the client only follows (its bytes are counted, and the source's), it
//! outlives the client and a kill -9 of the server, and every key is kept to its own
//! namespaces' jobs and secrets.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::Env;
use common::servers::{
    HfServer, Moto, SlowProxy, free_port, key, minilm_dir, relayed, serve, serve_named,
};
use serde_json::Value;

const MODEL: &str = "sentence-transformers/all-MiniLM-L6-v2";

/// A server whose jobs reach the Hugging Face stand-in `hub`.
fn server_env(hub: &HfServer, extra: &[(&str, &str)]) -> Env {
    let mut server = Env::new();
    server.vars = vec![
        ("HF_ENDPOINT".into(), hub.url.clone()),
        (
            "HF_HOME".into(),
            server.path("hf-home").display().to_string(),
        ),
    ];
    for (k, v) in extra {
        server.vars.push((k.to_string(), v.to_string()));
    }
    server.ok(&["init"]);
    server
}

/// The stand-in serving the real model, logging what it sends to `log`, and holding
/// bodies after `hold` bytes until `gate` exists.
fn hub(log: &Path, hold: Option<(u64, &Path)>) -> HfServer {
    let model = minilm_dir();
    let repo = format!("{MODEL}={}", model.display());
    let log = log.display().to_string();
    let mut args = vec!["--repo", &repo, "--log", &log];
    let (after, gate);
    if let Some((n, g)) = hold {
        after = n.to_string();
        gate = g.display().to_string();
        args.extend(["--hold-after", &after, "--gate", &gate]);
    }
    HfServer::start(&args)
}

/// Bytes of file bodies the stand-in has sent.
fn served_bytes(log: &Path) -> u64 {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum()
}

fn job(env: &Env, id: u64) -> Value {
    serde_json::from_str(&env.ok(&["jobs", "show", &id.to_string(), "--json"])).unwrap()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn model_digest(env: &Env) -> String {
    env.ok(&["digest", minilm_dir().to_str().unwrap()])
        .trim()
        .to_string()
}

#[test]
fn a_sync_runs_on_the_server_outlives_its_client_and_the_client_reads_none_of_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, gate) = (tmp.path().join("hub.log"), tmp.path().join("gate"));
    let hub = hub(&log, Some((12 << 20, &gate)));
    let server = server_env(&hub, &[("SEALVOL_SYNC_BATCH", "4MiB")]);
    let served = serve(&server, &[]);
    let ci = served.client(&key(&server, &["ci", "--namespace", "embed"]));
    let source = format!("hf://{MODEL}");

    // Started and followed, then killed mid-way: held at the gate, the job is RUNNING.
    let mut first = ci
        .cmd()
        .args(["volume", "sync", &source, "embed/minilm", "--tag", "prod"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the job to fetch", || served_bytes(&log) >= 8 << 20);
    assert_eq!(job(&ci, 1)["job"]["state"], "RUNNING");
    first.kill().unwrap();
    first.wait().unwrap();

    // The job goes on without it; another client follows it to the end, through a
    // relay that counts every byte it sends and receives.
    let count = tmp.path().join("relay.count");
    let port: u16 = served.addr.rsplit(':').next().unwrap().parse().unwrap();
    let relay = SlowProxy::start_counting(port, &count);
    let mut follower = served.client(&ci.vars[1].1);
    follower.vars[0].1 = format!("http://127.0.0.1:{}", relay.port);
    std::fs::write(&gate, b"").unwrap();
    let out = follower.run(&["jobs", "show", "1", "--follow", "--json"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    // The attempt running is the log's first: one count, not "resuming (attempt 2)".
    assert!(
        said.contains("job 1: syncing") && !said.contains("attempt 2"),
        "{said}"
    );
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    let done: Value = serde_json::from_str(&printed).unwrap();
    assert_eq!(done["state"], "READY", "{done}");
    let want = model_digest(&server);
    let sealed = done["sealed"].as_str().unwrap();
    assert!(sealed.ends_with(&want), "{sealed} vs {want}");
    assert_eq!(
        server
            .ok(&["volume", "resolve", "embed/minilm:prod"])
            .trim(),
        sealed
    );
    // Every byte of the model was downloaded, by the server (the clients do not even
    // know where the hub is); the follower moved some KiB of events.
    let model: u64 = common::walk_files(&minilm_dir())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(
        served_bytes(&log) >= model,
        "{} < {model}",
        served_bytes(&log)
    );
    let (up, down) = relayed(&count);
    eprintln!("the follower sent {up} and received {down} bytes");
    assert!(
        down > 0 && down < 1 << 20,
        "the follower received {down} bytes"
    );

    // --detach prints the id and returns.
    let before = relayed(&count);
    let id = follower.ok(&["volume", "sync", &source, "embed/minilm-again", "--detach"]);
    assert_eq!(id.trim(), "2");
    let (up, down) = relayed(&count);
    assert!(down - before.1 < 64 << 10 && up - before.0 < 64 << 10);
    let done: Value =
        serde_json::from_str(&ci.ok(&["jobs", "show", "2", "--follow", "--json"])).unwrap();
    assert_eq!(done["state"], "READY", "{done}");
    let logs = ci.ok(&["jobs", "logs", "1"]);
    assert!(logs.contains("READY: sealed vol:embed/minilm@"), "{logs}");
    assert!(
        !logs.contains(&server.state.display().to_string()),
        "a log names no path of the server's: {logs}"
    );
}

#[test]
fn a_server_killed_mid_sync_resumes_the_job_and_seals_the_same_digest() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, gate) = (tmp.path().join("hub.log"), tmp.path().join("gate"));
    // Held 300 KB before the end: the first batch (the small files and the weights)
    // is stored, the second is mid-way.
    let total: u64 = common::walk_files(&minilm_dir())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let hub = hub(&log, Some((total - 300_000, &gate)));
    let server = server_env(&hub, &[("SEALVOL_SYNC_BATCH", "4MiB")]);
    let listen = format!("127.0.0.1:{}", free_port());
    let served = serve(&server, &["--listen", &listen]);
    let ci = served.client(&key(&server, &["ci", "--namespace", "embed"]));
    let source = format!("hf://{MODEL}");
    ci.ok(&["volume", "sync", &source, "embed/minilm", "--detach"]);
    wait_for("a batch to be stored", || {
        ci.ok(&["jobs", "logs", "1"]).contains("batch 1/2 stored")
    });
    // A follower, which must ride out the restart.
    let follower = ci
        .cmd()
        .args(["jobs", "show", "1", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    drop(served); // kill -9
    std::fs::write(&gate, b"").unwrap();
    let _again = serve_named(&server, "serve-cache", &["--listen", &listen]);
    let out = follower.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["state"], "READY", "{done}");
    assert_eq!(done["attempts"], 2, "{done}");
    assert!(
        done["sealed"]
            .as_str()
            .unwrap()
            .ends_with(&model_digest(&server)),
        "{done}"
    );
    let logs = ci.ok(&["jobs", "logs", "1"]);
    assert!(logs.contains("queued again"), "{logs}");
    assert!(logs.contains("already stored by an earlier run"), "{logs}");
}

/// `sealvol --remote … secret set NAME [--namespace NS]` with `value` on stdin.
fn set_secret(env: &Env, name: &str, ns: Option<&str>, value: &str) -> std::process::Output {
    use std::io::Write;
    let mut cmd = env.cmd();
    cmd.args(["secret", "set", name]);
    if let Some(ns) = ns {
        cmd.args(["--namespace", ns]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(value.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn keys_see_and_change_the_jobs_and_secrets_of_their_own_namespaces_only() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, gate) = (tmp.path().join("hub.log"), tmp.path().join("gate"));
    let model = minilm_dir();
    let repo = format!("{MODEL}={}", model.display());
    let (log_s, gate_s) = (log.display().to_string(), gate.display().to_string());
    let hub = HfServer::start(&[
        "--repo",
        &repo,
        "--token",
        "hf_server_side",
        "--log",
        &log_s,
        "--hold-after",
        "1048576",
        "--gate",
        &gate_s,
    ]);
    // The server's own environment holds a token the hub takes: no job that names no
    // secret may use it.
    let server = server_env(&hub, &[("HF_TOKEN", "hf_server_side")]);
    let served = serve(&server, &[]);
    let ci = served.client(&key(&server, &["ci", "--namespace", "embed"]));
    let other = served.client(&key(&server, &["other", "--namespace", "weights"]));
    let reader = served.client(&key(&server, &["reader", "--read-only"]));
    let source = format!("hf://{MODEL}");

    // Without a secret, the job reaches the hub with no credentials, and fails.
    let e = ci.fails(1, &["volume", "sync", &source, "embed/anon"]);
    assert!(e.contains("access denied"), "{e}");
    assert!(e.contains("secret set NAME --namespace embed"), "{e}");
    let e = ci.fails(
        1,
        &["volume", "sync", &source, "embed/a", "--secret", "nope"],
    );
    assert!(e.contains("no secret named nope in namespace embed"), "{e}");

    // Secrets: stored for a namespace, listed by name to keys that see it, never shown.
    let out = set_secret(&ci, "hf", None, "hf_server_side\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stored = server.state.join("serve/agent/namespace-secrets/embed/hf");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&stored).unwrap().mode() & 0o777, 0o600);
    let listed = ci.ok(&["secret", "ls", "--json"]);
    assert!(
        listed.contains("\"hf\"") && listed.contains("\"embed\""),
        "{listed}"
    );
    assert!(!listed.contains("hf_server_side"), "{listed}");
    assert!(!other.ok(&["secret", "ls", "--json"]).contains("\"hf\""));
    let out = set_secret(&other, "hf", Some("embed"), "stolen");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("may not store secrets in namespace embed")
    );
    let e = other.fails(
        1,
        &["volume", "sync", &source, "weights/x", "--secret", "hf"],
    );
    assert!(e.contains("no secret named hf in namespace weights"), "{e}");
    let e = other.fails(1, &["secret", "rm", "hf", "--namespace", "embed"]);
    assert!(
        e.contains("may not remove secrets in namespace embed"),
        "{e}"
    );
    // A secret a key holds is removed by name (its one namespace implied).
    let out = set_secret(&ci, "spare", None, "x");
    assert!(out.status.success());
    ci.ok(&["secret", "rm", "spare"]);
    assert!(!ci.ok(&["secret", "ls"]).contains("spare"));

    // With the namespace's secret, the job runs (held at the gate: RUNNING).
    let id = ci.ok(&[
        "volume",
        "sync",
        &source,
        "embed/minilm",
        "--secret",
        "hf",
        "--detach",
    ]);
    let id: u64 = id.trim().parse().unwrap();
    wait_for("the job to run", || {
        job(&ci, id)["job"]["state"] == "RUNNING"
    });

    // Where the server reaches its sources is not part of the records callers see.
    let listed: Value = serde_json::from_str(&ci.ok(&["jobs", "ls", "--json"])).unwrap();
    for j in listed["jobs"].as_array().unwrap() {
        assert!(j["spec"]["endpoint"]["url"].is_null(), "{j}");
    }
    // Another namespace's key: no such job, nothing started in embed.
    assert!(!other.ok(&["jobs", "ls", "--json"]).contains("embed/"));
    let e = other.fails(1, &["jobs", "show", &id.to_string()]);
    assert!(e.contains(&format!("no job {id}")), "{e}");
    let e = other.fails(1, &["jobs", "cancel", &id.to_string()]);
    assert!(e.contains(&format!("no job {id}")), "{e}");
    let e = other.fails(1, &["volume", "sync", &source, "embed/sneak"]);
    assert!(e.contains("may not start jobs in namespace embed"), "{e}");
    // A read-only key sees, and neither starts nor cancels.
    assert!(reader.ok(&["jobs", "ls"]).contains("embed/minilm"));
    let e = reader.fails(1, &["jobs", "cancel", &id.to_string()]);
    assert!(e.contains("may not cancel jobs in namespace embed"), "{e}");
    let e = reader.fails(1, &["volume", "sync", &source, "embed/ro"]);
    assert!(e.contains("may not start jobs"), "{e}");
    let admin = served.client(&served.key);
    let all: Value = serde_json::from_str(&admin.ok(&["jobs", "ls", "--json"])).unwrap();
    // The anonymous one and this one: a refused submission leaves no job.
    assert_eq!(all["jobs"].as_array().unwrap().len(), 2, "{all}");
    // A local path, a job that does not exist.
    let e = ci.fails(1, &["volume", "sync", "/etc", "embed/etc"]);
    assert!(e.contains("never reads the server's own files"), "{e}");
    // A registry a key names (any host and port, the server's own network's too), when
    // the operator listed none.
    let e = ci.fails(
        1,
        &["volume", "sync", "oci://10.0.0.1:5000/m:v1", "embed/oci"],
    );
    assert!(
        e.contains("read only the registries it was started with"),
        "{e}"
    );
    assert!(e.contains("--jobs-oci-registry"), "{e}");
    let e = ci.fails(1, &["jobs", "show", "99", "--follow"]);
    assert!(e.contains("no job 99"), "{e}");

    // Two clients cancel at once: it ends CANCELLED once, and each is told so.
    let both: Vec<_> = (0..2)
        .map(|_| {
            ci.cmd()
                .args(["jobs", "cancel", &id.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = both
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    assert!(outs.iter().any(|o| o.status.success()));
    for o in &outs {
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            o.status.success() || err.contains("is CANCELLED; it cannot become CANCELLED"),
            "{err}"
        );
    }
    assert_eq!(job(&ci, id)["job"]["state"], "CANCELLED");
    // Following a cancelled job exits 3; a retry runs it to the end.
    let out = ci.run(&["jobs", "show", &id.to_string(), "--follow"]);
    assert_eq!(out.status.code(), Some(3));
    std::fs::write(&gate, b"").unwrap();
    let out = ci.ok(&["jobs", "retry", &id.to_string()]);
    assert!(out.trim().ends_with(&model_digest(&server)), "{out}");
}

#[test]
fn a_job_whose_source_the_server_cannot_reach_fails_with_why_and_a_retry_works_once_it_can() {
    let moto = Moto::start(&[]);
    let mut server = Env::new();
    // The bucket is private: this server lets jobs use its own credentials.
    server.vars = vec![
        ("AWS_ENDPOINT_URL_S3".into(), moto.endpoint()),
        ("AWS_ACCESS_KEY_ID".into(), "test".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "test".into()),
    ];
    server.ok(&["init"]);
    let served = serve(&server, &["--jobs-use-server-credentials"]);
    let ci = served.client(&key(&server, &["ci", "--namespace", "w"]));
    let e = ci.fails(1, &["volume", "sync", "s3://later/ckpt/", "w/ckpt"]);
    assert!(e.contains("later"), "{e}");
    let failed = job(&ci, 1);
    assert_eq!(failed["job"]["state"], "FAILED", "{failed}");
    assert!(failed["job"]["reason"].as_str().unwrap().contains("later"));
    // Where the server reaches the bucket is named nowhere a caller reads: not in the
    // error, the record, its reason, nor the job's log.
    let endpoint = moto.endpoint();
    let authority = endpoint.split("://").nth(1).unwrap().trim_end_matches('/');
    let logs = ci.ok(&["jobs", "logs", "1"]);
    for (what, text) in [
        ("error", e.clone()),
        ("record", failed.to_string()),
        ("log", logs),
    ] {
        assert!(
            !text.contains(authority),
            "the {what} names {authority}: {text}"
        );
    }

    let dir: PathBuf = ci.path("ckpt");
    common::write(&dir.join("model.safetensors"), &common::noise(3 << 20, 5));
    moto.seed(&["later", "ckpt", dir.to_str().unwrap()]);
    let sealed = ci.ok(&["jobs", "retry", "1"]);
    let want = server.ok(&["digest", dir.to_str().unwrap()]);
    assert!(sealed.trim().ends_with(want.trim()), "{sealed} vs {want}");
}

/// A mirror job on the server: a version copied to one of the destinations the server
/// was started with, named by the job, never an address of the caller's choosing.
#[test]
fn a_mirror_job_copies_a_version_to_a_destination_the_server_names() {
    let mut server = Env::new();
    server.ok(&["init"]);
    let eu = server.path("eu");
    let served = serve(&server, &["--mirror-to", &format!("eu={}", eu.display())]);
    let ci = served.client(&key(&server, &["ci", "--namespace", "w"]));
    let src = ci.path("v1");
    common::write(&src.join("model.bin"), &common::noise(2 << 20, 3));
    let pinned = ci.push(&src, "w/m", &["--tag", "prod"]);

    let out = ci.ok(&["volume", "mirror", "w/m:prod", "--to", "eu"]);
    assert_eq!(out.trim(), pinned, "the job's sealed ref is the version");
    server
        .vars
        .push(("SEALVOL_REPO".into(), eu.display().to_string()));
    assert_eq!(
        server.ok(&["volume", "resolve", "w/m:prod"]).trim(),
        pinned,
        "the destination holds it, tag and all"
    );
    let logs = ci.ok(&["jobs", "logs", "1"]);
    assert!(logs.contains("mirrored to eu"), "{logs}");

    // Only the server's destinations, only in the key's namespaces.
    let e = ci.fails(
        1,
        &["volume", "mirror", "w/m:prod", "--to", "/tmp/elsewhere"],
    );
    assert!(e.contains("invalid mirror destination"), "{e}");
    let e = ci.fails(1, &["volume", "mirror", "w/m:prod", "--to", "us"]);
    assert!(
        e.contains("no mirror destination named us") && e.contains("eu"),
        "{e}"
    );
    let other = served.client(&key(&server, &["other", "--namespace", "x"]));
    let e = other.fails(1, &["volume", "mirror", "w/m:prod", "--to", "eu"]);
    assert!(e.contains("may not start jobs in namespace w"), "{e}");
    let e = ci.fails(1, &["volume", "mirror", "w/m:nope", "--to", "eu"]);
    assert!(e.contains("nope"), "{e}");
    let e = server.fails(2, &["serve", "--mirror-to", "eu"]);
    assert!(e.contains("give NAME=REPO"), "{e}");
}

/// A revoked key's jobs end with it, queued or running, and nothing is sealed for it;
/// its open event stream ends within a second; no other key can start the job again
/// on its behalf.
#[test]
fn a_revoked_keys_jobs_and_event_streams_end_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, gate) = (tmp.path().join("hub.log"), tmp.path().join("gate"));
    let hub = hub(&log, Some((4 << 20, &gate)));
    let server = server_env(&hub, &[]);
    // One job of the namespace at a time: the second waits, QUEUED.
    let served = serve(&server, &["--jobs-per-namespace", "1"]);
    let ci = served.client(&key(&server, &["ci", "--namespace", "embed"]));
    let other = served.client(&key(&server, &["other", "--namespace", "embed"]));
    let source = format!("hf://{MODEL}");
    ci.ok(&["volume", "sync", &source, "embed/minilm", "--detach"]);
    ci.ok(&["volume", "sync", &source, "embed/queued", "--detach"]);
    wait_for("the first job to run", || {
        job(&ci, 1)["job"]["state"] == "RUNNING"
    });
    assert_eq!(job(&ci, 2)["job"]["state"], "QUEUED");

    // A follower of the held job, its stream open.
    let follower = ci
        .cmd()
        .args(["jobs", "show", "1", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    server.ok(&["key", "revoke", "ci"]);
    let revoked = Instant::now();
    let out = follower.wait_with_output().unwrap();
    let took = revoked.elapsed();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("revoked"), "{said}");
    // The stream looks at its key four times a second; before, it stayed open as long
    // as the job (held at the gate: for ever). A loose bound: a busy machine is slow.
    eprintln!("the stream ended {took:?} after the revocation");
    assert!(
        took < Duration::from_secs(10),
        "the stream ended after {took:?}"
    );

    for id in [1, 2] {
        wait_for("the revoked key's jobs to end", || {
            job(&other, id)["job"]["state"] == "CANCELLED"
        });
    }
    // Opened now, the job would have run to the end: it does not.
    std::fs::write(&gate, b"").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let versions = server.run(&["volume", "versions", "embed/minilm"]);
    assert!(
        !versions.status.success(),
        "a version was sealed for a revoked key"
    );
    let e = other.fails(1, &["jobs", "retry", "1"]);
    assert!(e.contains("acts for key ci, which is revoked"), "{e}");
}

/// One POST of a job over raw HTTP: the status and the body.
fn post_job(served: &common::servers::Served, key: &str, volume: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let body = format!(r#"{{"source": "hf://{MODEL}", "volume": "{volume}"}}"#);
    let mut s = std::net::TcpStream::connect(&served.addr).unwrap();
    write!(
        s,
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    let status = all.split(' ').nth(1).unwrap().parse().unwrap();
    let body = all.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

/// A key that queues jobs past its cap is answered 429 with the cap and the count,
/// and the jobs it has never delay another team's: team-a's are held at the source for
/// as long as the test runs, and team-b's still starts at once and finishes.
#[test]
fn a_key_past_its_queue_cap_gets_429_and_another_teams_job_starts_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let (log, gate) = (tmp.path().join("hub.log"), tmp.path().join("gate"));
    let hub = hub(&log, Some((1 << 20, &gate)));
    let server = server_env(&hub, &[]);
    let served = serve(
        &server,
        &["--jobs-per-key", "1", "--queue-per-key", "2", "--jobs", "2"],
    );
    let a_key = key(&server, &["a", "--namespace", "team-a"]);
    let a = served.client(&a_key);
    let b = served.client(&key(&server, &["b", "--namespace", "team-b"]));
    let (status, _) = post_job(&served, &a_key, "team-a/m1");
    assert_eq!(status, 200);
    wait_for("team-a's first job to run", || {
        job(&a, 1)["job"]["state"] == "RUNNING"
    });
    for v in ["team-a/m2", "team-a/m3"] {
        assert_eq!(post_job(&served, &a_key, v).0, 200);
    }
    let (status, body) = post_job(&served, &a_key, "team-a/m4");
    assert_eq!(status, 429, "{body}");
    assert!(
        body.contains("key a already has 2 job(s) queued, its cap (serve --queue-per-key 2)"),
        "{body}"
    );
    // The CLI says the same on one line, with what to do.
    let e = a.fails(
        1,
        &["volume", "sync", &format!("hf://{MODEL}"), "team-a/m5"],
    );
    assert!(e.contains("its cap (serve --queue-per-key 2)"), "{e}");
    assert!(e.contains("jobs cancel"), "{e}");

    // team-a's job holds its slot (its source answers nothing more); team-b's runs in
    // the other one at once, and shows as running while team-a's is still held.
    b.ok(&[
        "volume",
        "sync",
        &format!("hf://{MODEL}"),
        "team-b/m",
        "--detach",
    ]);
    let b_id = serde_json::from_str::<Value>(&b.ok(&["jobs", "ls", "--json"])).unwrap()["jobs"][0]
        ["id"]
        .as_u64()
        .unwrap();
    wait_for("team-b's job to run", || {
        job(&b, b_id)["job"]["state"] == "RUNNING"
    });
    assert_eq!(job(&a, 1)["job"]["state"], "RUNNING");
    assert_eq!(
        job(&a, 2)["job"]["state"],
        "QUEUED",
        "one of team-a's at a time"
    );
    std::fs::write(&gate, b"").unwrap();
    wait_for("team-b's job to be sealed", || {
        job(&b, b_id)["job"]["state"] == "READY"
    });
}

/// A tmpfs of `mib` MiB mounted at `dir` until dropped: a disk that fills. Needs root
/// (CI runs as root and sets SEALVOL_REQUIRE_NETNS, which makes its absence a failure).
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(dir: &Path, mib: u64) -> Option<SmallDisk> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir)
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            assert!(
                std::env::var_os("SEALVOL_REQUIRE_NETNS").is_none(),
                "cannot mount a tmpfs (root is needed)"
            );
            return None;
        }
        Some(SmallDisk(dir.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .args(["-l"])
            .arg(&self.0)
            .output();
    }
}

#[test]
fn a_job_that_fills_the_servers_disk_says_so_without_naming_the_servers_files() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = hub(&tmp.path().join("hub.log"), None);
    let mut server = Env::new();
    let Some(_disk) = SmallDisk::mount(&server.repo, 4) else {
        return;
    };
    server.vars = vec![("HF_ENDPOINT".into(), hub.url.clone())];
    server.ok(&["init"]);
    let served = serve(&server, &[]);
    let ci = served.client(&key(&server, &["ci", "--namespace", "embed"]));
    let out = ci.run(&["volume", "sync", &format!("hf://{MODEL}"), "embed/minilm"]);
    assert!(!out.status.success());
    let said = format!(
        "{}{}{}",
        String::from_utf8_lossy(&out.stderr),
        ci.ok(&["jobs", "show", "1", "--json"]),
        ci.ok(&["jobs", "logs", "1"])
    );
    assert!(said.contains("No space left on device"), "{said}");
    assert!(
        said.contains("could not read or write its own files"),
        "{said}"
    );
    // Nothing of where the server keeps its files, nor how its repository is laid out.
    let root = server.tmp.path().display().to_string();
    for leak in [root.as_str(), "/tmp/", "…", ".tmp"] {
        assert!(!said.contains(leak), "{leak:?} in {said}");
    }
}

/// Every command a session on a remote engine offers (`` `sealvol …` `` in a hint or an
/// undo line, and the server's own `sealvol --remote URL …`), as printed.
fn offered_commands(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|c| c.starts_with("sealvol "))
        .map(str::to_string)
        .collect();
    for (i, _) in text.match_indices("sealvol --remote ") {
        if i > 0 && text.as_bytes()[i - 1] == b'`' {
            continue;
        }
        let rest = &text[i..];
        let end = rest.find(['\n', '`', ';']).unwrap_or(rest.len());
        out.push(rest[..end].trim_end_matches(['.', ')']).trim().to_string());
    }
    out
}

#[test]
fn the_commands_a_remote_session_offers_carry_its_remote_and_run_as_printed() {
    let moto = Moto::start(&[]);
    let mut server = Env::new();
    server.vars = vec![("AWS_ENDPOINT_URL_S3".into(), moto.endpoint())];
    let private = server.path("private");
    common::write(&private.join("w.bin"), b"w");
    moto.seed(&["private", "x", private.to_str().unwrap()]);
    let src = server.path("src");
    common::write(&src.join("w.bin"), b"weights");
    let pinned = server.push(&src, "t/m", &["--tag", "prod"]);
    let served = serve(&server, &[]);
    let url = served.url();
    let secret = key(&server, &["ci", "--namespace", "t"]);
    let ci = served.client(&secret);

    let mut said = String::new();
    let out = ci.run(&["volume", "delete", "t/m:prod", "--untag", "--yes"]);
    assert!(out.status.success());
    said.push_str(&String::from_utf8_lossy(&out.stderr));
    said.push_str(&ci.fails(1, &["jobs", "show", "999"]));
    // A sync the server has no credentials for: the hint names its secret command.
    let e = ci.fails(1, &["volume", "sync", "s3://private/x", "t/m"]);
    assert!(e.contains("secret set"), "{e}");
    said.push_str(&e);

    let offered = offered_commands(&said);
    assert!(offered.len() >= 4, "{said}");
    for c in &offered {
        assert!(
            c.starts_with(&format!("sealvol --remote {url} ")),
            "{c}\n{said}"
        );
        assert!(!c.contains(" URL "), "{c}");
    }
    // Run as printed, in a shell that has the key but no SEALVOL_REMOTE: each works.
    // (Newest first: the restore before the tag move it makes moot; those with
    // placeholders, such as NAME, are for a person to fill in.)
    let mut bare = served.client(&secret);
    bare.vars.retain(|(k, _)| k != "SEALVOL_REMOTE");
    let placeholder = |w: &str| w.len() > 1 && w.chars().all(|c| c.is_ascii_uppercase());
    let mut ran = 0;
    for c in offered.iter().rev() {
        let words = shlex::split(c).unwrap();
        if words.iter().any(|w| placeholder(w)) || c.contains('<') {
            continue;
        }
        let args: Vec<&str> = words[1..].iter().map(String::as_str).collect();
        bare.ok(&args);
        ran += 1;
    }
    assert!(ran >= 3, "{offered:?}");
    assert_eq!(
        server.ok(&["volume", "resolve", "t/m:prod"]).trim(),
        pinned,
        "the undo undid"
    );

    // https:// to this plain-HTTP server: said in words, with the address that works.
    let mut tls = served.client(&secret);
    tls.vars.retain(|(k, _)| k != "SEALVOL_REMOTE");
    let https = url.replacen("http://", "https://", 1);
    let e = tls.fails(1, &["--remote", &https, "volume", "ls"]);
    assert!(
        e.contains("answered in plain HTTP, not TLS") && e.contains(&format!("use {url}")),
        "{e}"
    );
    assert!(!e.contains("InvalidContentType"), "{e}");
}
