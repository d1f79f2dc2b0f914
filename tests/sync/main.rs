//! `sealvol volume sync` and `sealvol jobs` against real servers on loopback, for what
//! only processes show: a module per source (moto for S3; a local Hugging Face hub) and
//! the agent's lifecycle in its own: resume after kill -9, credentials from the
//! environment, secrets never printed, `--timeout`, detached jobs and cancels. What a
//! source does (digests, endpoints, hostile keys, 403 and 404, cut connections, bad
//! bytes, Azure and GCS) runs on an agent in process in `engine/sources/tests/`.

#[path = "../common/mod.rs"]
mod common;

mod agent;
mod hf;
mod local;
mod s3;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::servers::{FailingServer, HfServer, Moto, SlowProxy, minilm_dir};
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

fn manifest_json(env: &Env, volume: &str, digest: &str) -> serde_json::Value {
    let path = env
        .repo
        .join("manifests")
        .join(volume)
        .join(digest.trim_start_matches("b3:"));
    serde_json::from_slice(&std::fs::read(&path).expect("manifest")).unwrap()
}

fn pack_count(env: &Env) -> usize {
    let dir = env.repo.join("index");
    if !dir.exists() {
        return 0;
    }
    walk_files(&dir).len()
}
