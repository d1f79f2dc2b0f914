//! `cache save | restore`: the startup cache. A folder of compiled kernels and captured
//! graphs is a version like any other, tagged by the key it was built for; a later
//! replica restores it by the same key, and a first one finds none and starts anyway.

use std::path::{Path, PathBuf};

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::push::{PushOptions, push as push_dir};
use sealvol_core::refs::Target;
use sealvol_core::{Error, ErrorKind, Ref, Result, VolumeName};
use sealvol_deploy::startup::tag_for_key;
use sealvol_node::state::StatCacheDir;

use crate::args::JSON_HELP;
use crate::commands::{Ctx, Run, group};
use crate::complete;
use crate::output::{json, size};

group! {
    // `sealvol cache …`: startup caches saved under a key.
    #[derive(clap::Subcommand, Debug)]
    pub enum CacheCommand {
        Save(Save),
        Restore(Restore),
    }
}

/// Publish a folder (compiled kernels, captured graphs) as the cache for a key.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  sealvol cache save ~/.cache/torch/inductor caches/qwen3-8b --key \"H100-80GB/torch-2.5.1\"\n\nThe key becomes a tag (cache-<slug>-<hash>); saving unchanged contents writes nothing."
)]
pub struct Save {
    dir: PathBuf,
    /// Volume: NAMESPACE/NAME.
    #[arg(add = ArgValueCompleter::new(complete::volumes))]
    volume: String,
    /// What the cache depends on, in any text (GPU model, framework version, …).
    #[arg(long)]
    key: String,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Save {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Save {
            dir,
            volume,
            key,
            json,
        } = self;
        save(ctx, &dir, &volume, &key, json)
    }
}

/// Put the cache for a key into a folder (or mount it there); no cache yet is not an error.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol cache restore caches/qwen3-8b ~/.cache/torch/inductor --key \"H100-80GB/torch-2.5.1\"\n  sealvol cache restore caches/qwen3-8b /cache --key \"$KEY\" --mount\n\nWhen no cache was saved for the key, it says so in one line and exits 0: a first replica\nstill starts, and saves one."
)]
pub struct Restore {
    #[arg(add = ArgValueCompleter::new(complete::volumes))]
    volume: String,
    dir: PathBuf,
    #[arg(long)]
    key: String,
    /// Mount it read-only at DIR instead of copying it there.
    #[arg(long)]
    mount: bool,
    /// Make DIR exactly the cache: what it holds that the cache does not is removed.
    #[arg(long, conflicts_with = "mount")]
    force: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Restore {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Restore {
            volume,
            dir,
            key,
            mount,
            force,
            json,
        } = self;
        restore(ctx, &volume, &dir, &key, mount, force, json)
    }
}

fn save(ctx: &Ctx, dir: &Path, volume: &str, key: &str, as_json: bool) -> Result<()> {
    let volume = VolumeName::parse(volume)?;
    let tag = tag_for_key(key)?;
    let repo = ctx.open_repo(true)?;
    let progress = ctx.progress();
    let report = push_dir(
        &repo,
        dir,
        &volume,
        std::slice::from_ref(&tag),
        &PushOptions {
            cancel: None,
            guard: None,
            source: None,
            stat_cache: Some(&StatCacheDir(&ctx.settings.state)),
            progress: progress.as_ref(),
            labels: Default::default(),
        },
    )?;
    let moved = report.tags.iter().any(|t| t.moved);
    if as_json {
        return json(&serde_json::json!({
            "volume": volume.to_string(),
            "key": key,
            "tag": tag.to_string(),
            "ref": report.pinned_ref(),
            "sealed_new": report.sealed_new,
            "tag_moved": moved,
            "bytes": report.stats.bytes,
            "new_bytes": report.stats.new_bytes,
        }));
    }
    if !ctx.quiet {
        match (report.sealed_new, moved) {
            (false, false) => errln!(
                "the cache for this key is unchanged ({}): nothing written",
                tag
            ),
            _ => errln!(
                "saved the cache for this key as {volume}:{tag}: {} new of {}",
                size(report.stats.new_bytes),
                size(report.stats.bytes)
            ),
        }
    }
    outln!("{}", report.pinned_ref())
}

fn restore(
    ctx: &Ctx,
    volume: &str,
    dir: &Path,
    key: &str,
    mount: bool,
    force: bool,
    as_json: bool,
) -> Result<()> {
    let volume = VolumeName::parse(volume)?;
    let tag = tag_for_key(key)?;
    // A repository that cannot be opened is an error; only a missing cache is not.
    let repo = ctx.open_repo(false)?;
    let r = Ref {
        volume: volume.clone(),
        target: Target::Tag(tag.clone()),
    };
    let digest = match repo.resolve(&r) {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if as_json {
                return json(&serde_json::json!({
                    "restored": false,
                    "volume": volume.to_string(),
                    "tag": tag.to_string(),
                    "ref": null,
                    "dir": dir.display().to_string(),
                    "mounted": false,
                    "why": e.message(),
                }));
            }
            if !ctx.quiet {
                errln!(
                    "no startup cache for this key in {volume} yet ({}): nothing restored; `sealvol cache save` after the first start publishes one",
                    e.message()
                );
            }
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    drop(repo);
    let pinned = Ref::pinned(volume.clone(), digest).to_string();
    let quiet = Ctx::new(ctx.settings.clone(), ctx.quiet || as_json);
    match mount {
        true => {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
            crate::commands::mount::mount(
                &quiet,
                crate::commands::mount::Mount {
                    reference: pinned.clone(),
                    dir: dir.to_path_buf(),
                    cache: None,
                    cache_size: None,
                    prefetch_memory: None,
                    read_timeout: sealvol_mount::DEFAULT_READ_TIMEOUT,
                    peers: Vec::new(),
                    peers_file: None,
                    origins: Vec::new(),
                    metrics: None,
                    foreground: false,
                    requested: Some(format!("{volume}:{tag}")),
                    quiet: false,
                },
            )?
        }
        false => crate::commands::volume::pull(
            &quiet,
            &pinned,
            dir,
            crate::commands::volume::Through {
                include: &[],
                exclude: &[],
                force,
                peers: &[],
                peers_file: None,
                origins: &[],
            },
            false,
        )?,
    }
    if as_json {
        return json(&serde_json::json!({
            "restored": true,
            "volume": volume.to_string(),
            "tag": tag.to_string(),
            "ref": pinned,
            "dir": dir.display().to_string(),
            "mounted": mount,
            "why": null,
        }));
    }
    if !ctx.quiet {
        errln!(
            "restored the startup cache {pinned} {} {}",
            if mount { "mounted at" } else { "into" },
            dir.display()
        );
    }
    Ok(())
}
