//! `sealvol info` (the settings in effect) and `sealvol digest DIR` (a directory's
//! digest, without a repository).

use std::path::Path;

use sealvol_core::Result;

use super::Ctx;
use crate::config;
use crate::output::{json, size};

/// `sealvol init`: a new repository at the address in effect.
pub fn init(ctx: &Ctx, as_json: bool) -> Result<()> {
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

pub fn info(ctx: &Ctx, as_json: bool) -> Result<()> {
    let s = &ctx.settings;
    let config = config::config_path().map(|p| p.display().to_string());
    // The repository's own settings, if there is one yet.
    let repo = ctx.open_repo(false).ok();
    let repo_settings = repo.as_ref().map(|r| r.config());
    if as_json {
        return json(&serde_json::json!({
            "config_file": config,
            "repository": s.repo.to_string(),
            "state": s.state.display().to_string(),
            "cache": s.cache.display().to_string(),
            "cache_size": s.cache_size,
            "theme": s.theme,
            "fsync": s.fsync,
            "retention_secs": repo_settings.map(|c| c.retention.as_secs()),
            "gc_grace_secs": repo_settings.map(|c| c.gc_grace.as_secs()),
        }));
    }
    let config = config.unwrap_or_else(|| "(no home directory)".into());
    outln!("config file  {config}")?;
    outln!("repository   {}", s.repo)?;
    outln!("state        {}", s.state.display())?;
    outln!(
        "cache        {} (bound {})",
        s.cache.display(),
        size(s.cache_size)
    )?;
    outln!("theme        {}", s.theme)?;
    outln!("fsync        {}", if s.fsync { "on" } else { "off" })?;
    match repo_settings {
        Some(c) => {
            outln!(
                "retention    {} (the trash; `sealvol settings`)",
                humantime::format_duration(c.retention)
            )?;
            outln!("gc grace     {}", humantime::format_duration(c.gc_grace))
        }
        None => outln!("retention    (no repository yet)"),
    }
}

/// Shortest grace period allowed: a push's check-to-manifest window is milliseconds,
/// and the argument in docs/GC.md needs it well under half the period.
const MIN_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

pub fn settings(
    ctx: &Ctx,
    retention: Option<std::time::Duration>,
    gc_grace: Option<std::time::Duration>,
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
    if retention.is_some() || gc_grace.is_some() {
        repo.change_settings(|c| {
            if let Some(r) = retention {
                c.retention = r;
            }
            if let Some(g) = gc_grace {
                c.gc_grace = g;
            }
        })?;
    }
    let c = repo.config();
    if as_json {
        return json(&serde_json::json!({
            "repository": repo.location(),
            "retention_secs": c.retention.as_secs(),
            "gc_grace_secs": c.gc_grace.as_secs(),
        }));
    }
    outln!("retention  {}", humantime::format_duration(c.retention))?;
    outln!("gc grace   {}", humantime::format_duration(c.gc_grace))
}

pub fn digest(dir: &Path, as_json: bool) -> Result<()> {
    let digest = sealvol_core::walk::digest_dir(dir)?;
    if as_json {
        return json(&serde_json::json!({
            "dir": dir.display().to_string(),
            "digest": digest.to_string(),
        }));
    }
    outln!("{digest}")
}
