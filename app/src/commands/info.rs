//! `sealvol info` (the settings in effect) and `sealvol digest DIR` (a directory's
//! digest, without a repository).

use std::path::Path;

use sealvol_core::Result;

use super::Ctx;
use crate::config;
use crate::output::{json, size};

pub fn info(ctx: &Ctx, as_json: bool) -> Result<()> {
    let s = &ctx.settings;
    let config = config::config_path().map(|p| p.display().to_string());
    if as_json {
        return json(&serde_json::json!({
            "config_file": config,
            "repository": s.repo.display().to_string(),
            "state": s.state.display().to_string(),
            "cache": s.cache.display().to_string(),
            "cache_size": s.cache_size,
            "theme": s.theme,
            "fsync": s.fsync,
        }));
    }
    let config = config.unwrap_or_else(|| "(no home directory)".into());
    outln!("config file  {config}")?;
    outln!("repository   {}", s.repo.display())?;
    outln!("state        {}", s.state.display())?;
    outln!(
        "cache        {} (bound {})",
        s.cache.display(),
        size(s.cache_size)
    )?;
    outln!("theme        {}", s.theme)?;
    outln!("fsync        {}", if s.fsync { "on" } else { "off" })
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
