//! S3 and its kin (R2, CoreWeave) against moto: digests, resync for free, endpoints,
//! hostile keys, a missing bucket, 403, secrets that never leak, resume after kill -9,
//! and connections cut mid-file.

use super::*;

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
    // Written in one part, an object's ETag is its MD5: its bytes were checked. One
    // written in parts (`-N`) has no hash of its whole content to check against.
    let checked = prov["checked"].as_object().unwrap();
    for (path, etag) in prov["objects"].as_object().unwrap() {
        let want = if etag.as_str().unwrap().contains('-') {
            ""
        } else {
            "md5"
        };
        assert_eq!(checked[path], want, "{path}: {prov}");
    }
    assert!(checked.values().any(|c| c == "md5"), "{prov}");

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
    assert_eq!(code, 1, "{err}");
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

#[test]
fn bytes_that_disagree_with_the_objects_own_md5_fail_the_job_and_seal_nothing() {
    let moto = Moto::start(&[]);
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &noise(3 << 20, 41));
    moto.seed(&["flip", "p", src.to_str().unwrap()]);
    let log = env.path("faults.log");
    let proxy = FaultProxy::start(moto.port, &["flip-reads"], &log);
    let (_, err) = fails(
        s3_cmd(&env, &proxy.endpoint()),
        &["volume", "sync", "s3://flip/p", "x/flip"],
    );
    let md5 = {
        use md5::Digest as _;
        hex::encode(md5::Md5::digest(std::fs::read(src.join("a.bin")).unwrap()))
    };
    assert!(
        err.contains("a.bin") && err.contains("md5") && err.contains(&md5),
        "{err}"
    );
    // Read again before the job failed, and nothing sealed.
    let flips = std::fs::read_to_string(&log).unwrap().lines().count();
    assert!(flips >= 3, "read {flips} time(s): {err}");
    assert!(!env.ok(&["volume", "ls"]).contains("flip"));
}
