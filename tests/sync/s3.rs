//! S3 syncs where only processes show it, against moto: a sync without credentials in
//! its environment, a secret's value never printed or written, and resume after kill -9.
//! Digests, resyncs, endpoints, hostile keys, a missing bucket, 403, cut connections
//! and MD5 mismatches run on an agent in process: `engine/sources/tests/sync/s3.rs`.

use super::*;

/// No credentials anywhere, and an instance metadata service that refuses (as off
/// EC2): one error line and its hint, nothing logged besides, and no request made, so
/// nothing retried (the bucket's endpoint answers 500 to anything, which would be).
#[test]
fn a_sync_without_credentials_says_so_in_one_line_and_is_not_retried() {
    let imds = FailingServer::answering(403);
    let s3 = FailingServer::start();
    let env = Env::new();
    // A repository already: the first sync's "created a repository" is not the point.
    env.ok(&["init"]);
    let mut c = env.cmd();
    c.env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{}", s3.port))
        .env("AWS_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env(
            "AWS_EC2_METADATA_SERVICE_ENDPOINT",
            format!("http://127.0.0.1:{}", imds.port),
        );
    for var in [
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_EC2_METADATA_DISABLED",
        "AWS_ENDPOINT_URL_S3",
    ] {
        c.env_remove(var);
    }
    let t = Instant::now();
    let (code, err) = fails(
        c,
        &[
            "volume",
            "sync",
            "s3://ckpts/run-7/step-1",
            "weights/synced",
        ],
    );
    let took = t.elapsed();
    assert_eq!(code, 1);
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [
            "job 1: syncing s3://ckpts/run-7/step-1/",
            "error: s3://ckpts/run-7/step-1/: no AWS credentials found",
            "hint: give credentials in the environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or AWS_WEB_IDENTITY_TOKEN_FILE), or store KEY_ID:SECRET with `sealvol secret set NAME` and pass --secret NAME (--repo-secret NAME for the repository)",
        ],
        "{err}"
    );
    let log = env.ok(&["jobs", "logs", "1"]);
    assert_eq!(
        log.lines().filter(|l| l.contains("attempt")).count(),
        1,
        "tried once: {log}"
    );
    assert!(
        !log.contains("retry") && !log.contains("the connection was cut"),
        "{log}"
    );
    assert_eq!(
        log.matches("s3://ckpts/run-7/step-1/").count(),
        2,
        "queued and failed once each: {log}"
    );
    // Not a deadline (a busy machine may be slow): what a retry would cost is seconds.
    assert!(took < Duration::from_secs(20), "{took:?}");

    // A slash short is an address with a typo, not a local folder named `s3:`.
    let (code, err) = fails(
        env.cmd(),
        &["volume", "sync", "s3:/ckpts/run-7", "weights/synced"],
    );
    assert_eq!(code, 1);
    assert!(
        err.starts_with(
            "error: source \"s3:/ckpts/run-7\" looks like an address missing a slash: s3://ckpts/run-7\n"
        ),
        "{err}"
    );
    assert_eq!(env.ok(&["jobs", "ls"]).lines().count(), 2, "no second job");
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
