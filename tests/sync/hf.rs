//! Hugging Face against the local hub serving all-MiniLM-L6-v2: the digest of the real
//! files pinned to the commit, as `volume files` and `volume describe` show it, and a hub
//! that does not answer within `--timeout`. Hub errors, a token secret, a paged
//! 100,000-file listing and flipped bytes run on an agent in process:
//! `engine/sources/tests/sync/hub.rs`.

use super::*;

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
