//! `sealvol info` (the settings in effect) and `sealvol digest DIR` (a directory's
//! digest, without a repository).

use std::path::{Path, PathBuf};

use clap::Args;
use sealvol_core::Result;
use sealvol_core::usage::QuotaUsage;
use sealvol_setup::settings as config;
use sealvol_views::format::span;

use super::{Ctx, Run};
use crate::args::{JSON_HELP, quota_arg};
use crate::output::{json, size, table};

/// Create a repository: in a directory, or in a bucket prefix (the only way one is made there).
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol init --repo s3://models/sealvol\n  AWS_ENDPOINT_URL=http://minio:9000 sealvol init --repo s3://models/team-a\n  sealvol init --repo r2://ACCOUNT/models/sealvol --repo-secret r2-keys\n  sealvol init --repo /srv/sealvol\n\nA bucket must exist already, and honour conditional writes (If-None-Match, If-Match):\nthey are all that keeps many writers safe, and init proves them before it writes."
)]
pub struct Init {
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Init {
    fn run(self, ctx: &Ctx) -> Result<()> {
        init(ctx, self.json)
    }
}

/// Show the settings in effect and where they come from.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol info --json")]
pub struct Info {
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Info {
    fn run(self, ctx: &Ctx) -> Result<()> {
        info(ctx, self.json)
    }
}

/// Show or change the repository's settings: the trash's retention, gc's grace period, and namespaces' quotas.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol settings\n  sealvol settings --retention 14d\n  sealvol settings --gc-grace 30m\n  sealvol settings --quota team-a=500G --quota team-b=none\n\nA quota counts the stored bytes of the distinct chunks a namespace's versions reference, live and in the trash (a chunk two namespaces hold counts for both), and their signatures; a push, sync or signature past it is refused. Deleting frees quota once gc has purged the versions from the trash.\n\nThe grace period must be longer than any push takes between its last check and its\nmanifest (milliseconds); longer also spares long pushes from rewriting their data."
)]
pub struct Settings {
    /// How long a deleted version stays restorable, e.g. 7d, 36h.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    retention: Option<std::time::Duration>,
    /// Garbage collection's grace period, e.g. 15m (at least 1s).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    gc_grace: Option<std::time::Duration>,
    /// A namespace's quota, NS=SIZE (500G, 2T), or NS=none to remove it (repeatable).
    #[arg(long = "quota", value_name = "NS=SIZE", value_parser = quota_arg)]
    quotas: Vec<(String, Option<u64>)>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Settings {
    fn run(self, ctx: &Ctx) -> Result<()> {
        settings(ctx, self.retention, self.gc_grace, &self.quotas, self.json)
    }
}

/// Print the digest DIR would seal as, without a repository.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol digest ./ckpt\n  b3:9f3c…")]
pub struct Digest {
    /// The directory to hash.
    dir: PathBuf,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Digest {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let _ = ctx;
        self.print()
    }
}

impl Digest {
    /// Needs no repository nor settings: run before they are read.
    pub fn print(&self) -> Result<()> {
        digest(&self.dir, self.json)
    }
}

/// `sealvol init`: a new repository at the address in effect.
fn init(ctx: &Ctx, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo_as(sealvol_s3repo::Mode::Init)?;
    let c = repo.config();
    if as_json {
        return json(&serde_json::json!({
            "repository": repo.location(),
            "format": c.format,
            "retention_secs": c.retention.as_secs(),
            "gc_grace_secs": c.gc_grace.as_secs(),
        }));
    }
    outln!("created a repository at {}", repo.location())
}

/// The settings in effect, each with where it came from (a flag, a `SEALVOL_*`
/// variable, config.toml, the default, or the repository itself).
fn info(ctx: &Ctx, as_json: bool) -> Result<()> {
    let s = &ctx.settings;
    let config = config::config_path();
    let config_there = config.as_deref().is_some_and(std::path::Path::is_file);
    // The repository's own settings, if there is one yet.
    let repo = ctx.open_repo(false).ok();
    let repo_settings = repo.as_ref().map(|r| r.config());
    let quotas = match &repo {
        Some(r) => r.quotas()?,
        None => Vec::new(),
    };
    let from = |key: &str| s.origins.get(key).cloned().unwrap_or_default();
    // The trust policy in force: which namespaces need whose signature (and whether
    // its key files load, as every mount and pull will load them).
    let trust_error = s.policy().err();
    if as_json {
        return json(&serde_json::json!({
            "config_file": config.as_ref().map(|p| p.display().to_string()),
            "config_file_exists": config_there,
            "repository": s.repo.to_string(),
            "remote": s.remote,
            "state": s.state.display().to_string(),
            "cache": s.cache.display().to_string(),
            "cache_size": s.cache_size,
            "theme": s.theme,
            "fsync": s.fsync,
            "timeout_secs": s.timeout.as_secs(),
            "sync_batch": s.sync_batch,
            "sync_streams": s.sync_streams,
            "retention_secs": repo_settings.map(|c| c.retention.as_secs()),
            "gc_grace_secs": repo_settings.map(|c| c.gc_grace.as_secs()),
            "quotas": quotas_json(&quotas),
            "trust": s.trust,
            "trust_error": trust_error.as_ref().map(|e| e.to_string()),
            "sources": s.origins,
        }));
    }
    let config_line = match (&config, config_there) {
        (Some(p), true) => p.display().to_string(),
        (Some(p), false) => format!("{} (not there: nothing is read from it)", p.display()),
        (None, _) => "(no home directory)".into(),
    };
    outln!("config file  {config_line}")?;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut row = |name: &str, value: String, source: String| {
        rows.push(vec![name.to_string(), value, source]);
    };
    match &s.remote {
        Some(r) => row("remote", r.clone(), from("remote")),
        None => row("repository", s.repo.to_string(), from("repository")),
    }
    row("state", s.state.display().to_string(), from("state"));
    row("cache", s.cache.display().to_string(), from("cache"));
    row("cache bound", size(s.cache_size), from("cache_size"));
    row("theme", s.theme.clone(), from("theme"));
    row(
        "fsync",
        (if s.fsync { "on" } else { "off" }).into(),
        from("fsync"),
    );
    row("timeout", span(s.timeout), from("timeout"));
    row("sync batch", size(s.sync_batch), from("sync_batch"));
    row(
        "sync streams",
        s.sync_streams.to_string(),
        from("sync_streams"),
    );
    match repo_settings {
        Some(c) => {
            let shown = "the repository (`sealvol settings`)".to_string();
            row("retention", span(c.retention), shown.clone());
            row("gc grace", span(c.gc_grace), shown.clone());
            for q in &quotas {
                row(
                    &format!("quota {}", q.namespace),
                    sealvol_views::format::quota(q.usage.bytes, q.quota),
                    shown.clone(),
                );
            }
        }
        None => row("retention", "-".into(), "(no repository yet)".into()),
    }
    if s.trust.is_empty() {
        row(
            "trust",
            "none: mounts and pulls need no signature".into(),
            "(default; [trust] in config.toml)".into(),
        );
    }
    for (ns, keys) in &s.trust {
        let keys: Vec<String> = keys.iter().map(|k| k.display().to_string()).collect();
        row(
            &format!("trust {ns}"),
            format!("mount and pull need a signature by {}", keys.join(" or ")),
            "config.toml [trust]".into(),
        );
    }
    table(&["SETTING", "VALUE", "FROM"], &rows)?;
    if let Some(e) = trust_error {
        errln!("warning: the trust policy does not load, so every mount and pull fails: {e}");
    }
    Ok(())
}

/// Shortest grace period allowed: a push's check-to-manifest window is milliseconds,
/// and the argument in docs/GC.md needs it well under half the period.
const MIN_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

fn settings(
    ctx: &Ctx,
    retention: Option<std::time::Duration>,
    gc_grace: Option<std::time::Duration>,
    quotas: &[(String, Option<u64>)],
    as_json: bool,
) -> Result<()> {
    if gc_grace.is_some_and(|g| g < MIN_GRACE) {
        return Err(
            sealvol_core::Error::invalid("--gc-grace must be at least 1s")
                .hint("the default, 15m, suits nearly everyone"),
        );
    }
    if retention.is_some_and(|r| r.is_zero()) {
        return Err(
            sealvol_core::Error::invalid("--retention must be longer than 0s")
                .hint("deleted versions need some time in the trash; the default is 7d"),
        );
    }
    let mut repo = ctx.open_repo(false)?;
    if retention.is_some() || gc_grace.is_some() || !quotas.is_empty() {
        repo.change_settings(|c| {
            if let Some(r) = retention {
                c.retention = r;
            }
            if let Some(g) = gc_grace {
                c.gc_grace = g;
            }
            set_quotas(c, quotas);
        })?;
    }
    let c = repo.config().clone();
    let usage = repo.quotas()?;
    if as_json {
        return json(&serde_json::json!({
            "repository": repo.location(),
            "retention_secs": c.retention.as_secs(),
            "gc_grace_secs": c.gc_grace.as_secs(),
            "quotas": quotas_json(&usage),
        }));
    }
    outln!("retention  {}", span(c.retention))?;
    outln!("gc grace   {}", span(c.gc_grace))?;
    for q in &usage {
        outln!(
            "quota      {}: {}",
            q.namespace,
            sealvol_views::format::quota(q.usage.bytes, q.quota)
        )?;
    }
    Ok(())
}

fn quotas_json(quotas: &[QuotaUsage]) -> Vec<serde_json::Value> {
    quotas
        .iter()
        .map(|q| {
            serde_json::json!({
                "namespace": q.namespace, "quota_bytes": q.quota, "used_bytes": q.usage.bytes,
                "chunks": q.usage.chunks, "versions": q.usage.versions,
            })
        })
        .collect()
}

/// Applies `--quota NS=SIZE` (or `NS=none`) to the settings.
pub fn set_quotas(c: &mut sealvol_core::repo::RepoConfig, quotas: &[(String, Option<u64>)]) {
    for (ns, q) in quotas {
        match q {
            Some(bytes) => {
                c.quotas.insert(ns.clone(), *bytes);
            }
            None => {
                c.quotas.remove(ns);
            }
        }
    }
}

fn digest(dir: &Path, as_json: bool) -> Result<()> {
    let digest = sealvol_core::walk::digest_dir(dir)?;
    if as_json {
        return json(&serde_json::json!({
            "dir": dir.display().to_string(),
            "digest": digest.to_string(),
        }));
    }
    outln!("{digest}")
}
