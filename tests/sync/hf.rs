//! Hugging Face against the local hub serving all-MiniLM-L6-v2: the digest of the real
//! files pinned to the commit, hub errors, a token secret, a paged 100,000-file
//! listing.

use super::*;
use sha2::Digest as _;

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
    // A content id per file, which changes whenever the bytes do: the weights' (an
    // LFS file's) SHA-256, a small file's git blob id.
    let id = m["provenance"]["objects"]["model.safetensors"]
        .as_str()
        .unwrap();
    assert!(
        id.len() == 64 && id.chars().all(|c| c.is_ascii_hexdigit()),
        "{m}"
    );
    // Every byte was checked against the Hub's own hashes: the LFS file's SHA-256,
    // each small file's git blob id; so says the version, the job and `describe`.
    let checked = &m["provenance"]["checked"];
    assert_eq!(checked["model.safetensors"], "sha256", "{m}");
    assert_eq!(checked["config.json"], "git-blob-sha1", "{m}");
    let files_n = m["provenance"]["objects"].as_object().unwrap().len() as u64;
    let checks = job["checks"].as_object().unwrap();
    assert_eq!(
        checks["sha256"].as_u64().unwrap_or(0) + checks["git-blob-sha1"].as_u64().unwrap_or(0),
        files_n,
        "{job}"
    );
    assert!(checks.get("unchecked").is_none(), "{job}");
    let described = env.ok(&["volume", "describe", "embed/minilm:prod"]);
    assert!(
        described.contains("file(s) sha256") && described.contains("git-blob-sha1"),
        "{described}"
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
    // A typo in the name: the Hub answers 401 RepoNotFound (a private repository looks
    // the same), which is said as a missing repository, not as a token to set.
    let (_, err) = fails(
        hf_cmd(&env, &hub.url),
        &[
            "volume",
            "sync",
            "hf://sentence-transformers/all-MiniLM-L6-v3",
            "embed/x",
        ],
    );
    assert!(
        err.contains("no such repository") && !err.contains("access denied"),
        "{err}"
    );
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

/// A hub that accepts connections and never answers (a listener nobody reads), and one
/// that refuses them: the sync fails within `--timeout` with one line that says which
/// and since when, not after minutes of tries.
#[test]
fn a_hub_that_does_not_answer_fails_the_sync_within_the_timeout() {
    let env = Env::new();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    for url in [&silent_url, &closed] {
        let t = Instant::now();
        let (code, err) = fails(
            hf_cmd(&env, url),
            &["--timeout", "3s", "volume", "sync", "hf://org/model", "x/m"],
        );
        let took = t.elapsed();
        assert_eq!(code, 1, "{err}");
        assert!(took < Duration::from_secs(90), "{url}: {took:?}: {err}");
        let line = err.lines().find(|l| l.starts_with("error:")).unwrap_or("");
        assert!(line.contains("hf://org/model"), "{err}");
        assert!(
            !err.contains("panicked") && !err.contains("DispatchFailure"),
            "{err}"
        );
        if url == &silent_url {
            assert!(line.contains("failing since"), "{err}");
            assert!(err.contains("--timeout"), "{err}");
        }
    }
    drop(silent);
}

#[test]
fn a_hub_that_sends_one_flipped_byte_fails_the_file_naming_both_hashes_and_seals_nothing() {
    let model = minilm_dir();
    for (file, kind) in [
        ("model.safetensors", "sha256"),
        ("config.json", "git-blob-sha1"),
    ] {
        let env = Env::new();
        let hub = HfServer::start(&[
            "--repo",
            &format!("sentence-transformers/all-MiniLM-L6-v2={}", model.display()),
            "--flip",
            file,
        ]);
        let (_, err) = fails(
            hf_cmd(&env, &hub.url),
            &[
                "volume",
                "sync",
                "hf://sentence-transformers/all-MiniLM-L6-v2",
                "embed/minilm",
            ],
        );
        // The file, the check, and both hashes: what the Hub says and what came.
        let bytes = std::fs::read(model.join(file)).unwrap();
        let said = match kind {
            "sha256" => hex::encode(sha2::Sha256::digest(&bytes)),
            _ => {
                let mut h = sha1::Sha1::new();
                h.update(format!("blob {}\0", bytes.len()).as_bytes());
                h.update(&bytes);
                hex::encode(h.finalize())
            }
        };
        assert!(
            err.contains(file) && err.contains(kind) && err.contains(&said),
            "{err}"
        );
        assert!(err.contains("they hash to"), "{err}");
        // Read again before failing, and nothing sealed.
        assert!(
            env.ok(&["volume", "ls"]).trim().is_empty()
                || !env.ok(&["volume", "ls"]).contains("minilm")
        );
    }
}
