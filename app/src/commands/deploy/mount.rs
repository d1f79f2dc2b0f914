//! `deploy mount` and `deploy unmount`: a deployment's volumes at their paths, all or none.

use std::path::{Path, PathBuf};

use clap::Args;
use sealvol_core::{Error, ErrorKind, Ref, Result};
use sealvol_deploy::{DeployFile, Follows, check};

use super::words::{follows_label, ref_error};
use crate::args::JSON_HELP;
use crate::commands::{Ctx, Run};
use crate::output::json;

/// Mount every volume of a deployment file at its path (tags resolved once, and printed).
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol deploy mount config.yaml\n  sealvol deploy mount config.yaml --root /tmp/sandbox\n\nAll or nothing: when one mount fails, the ones made before it are unmounted."
)]
pub struct Mount {
    file: PathBuf,
    /// Mount below this folder instead of at the absolute paths (path /app/w → ROOT/app/w).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Mount {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Mount { file, root, json } = self;
        mount(ctx, &file, root.as_deref(), json)
    }
}

/// Unmount what `deploy mount` mounted for a deployment file.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol deploy unmount config.yaml --root /tmp/sandbox")]
pub struct Unmount {
    file: PathBuf,
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Detach now even if busy; unmount once the last file is closed.
    #[arg(long)]
    lazy: bool,
}

impl Run for Unmount {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Unmount { file, root, lazy } = self;
        unmount(ctx, &file, root.as_deref(), lazy)
    }
}

/// Where a mount of the file goes: its path, below `root` when one is given.
fn mount_point(root: Option<&Path>, path: &str) -> PathBuf {
    match root {
        // The path is absolute and climbs nowhere (checked when the file was read).
        Some(r) => r.join(path.trim_start_matches('/')),
        None => PathBuf::from(path),
    }
}

pub(super) fn mount(ctx: &Ctx, path: &Path, root: Option<&Path>, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo(false)?;
    let f = DeployFile::read(path)?;
    // Every ref resolved first, once: a deployment mounts all of it or nothing.
    let mut plan = Vec::new();
    // config.toml's trust and the file's own: every version admitted before any mounts.
    let policy = f.policy(&ctx.settings.policy()?)?;
    for m in &f.mounts {
        let s =
            check::resolve(&repo, m).map_err(|e| ref_error(path, m, &e, "nothing was mounted"))?;
        policy
            .admit(&repo, &s.volume, &s.digest)
            .map_err(|e| ref_error(path, m, &e, "nothing was mounted"))?;
        plan.push((m, s));
    }
    drop(repo);
    let mut done: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    for (m, s) in &plan {
        let dir = mount_point(root, &m.path);
        let pinned = Ref::pinned(s.volume.clone(), s.digest).to_string();
        let result = std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io("cannot create", &dir, e))
            .and_then(|()| {
                crate::commands::mount::mount(
                    ctx,
                    crate::commands::mount::Mount {
                        reference: pinned.clone(),
                        dir: dir.clone(),
                        cache: None,
                        cache_size: None,
                        prefetch_memory: None,
                        read_timeout: sealvol_mount::DEFAULT_READ_TIMEOUT,
                        peers: Vec::new(),
                        peers_file: None,
                        origins: Vec::new(),
                        metrics: None,
                        foreground: false,
                        requested: Some(m.reference.clone()),
                        quiet: true,
                    },
                )
            });
        if let Err(e) = result {
            // All or nothing: what this command mounted goes again.
            for d in done.iter().rev() {
                let _ = crate::commands::mount::unmount(ctx, d, false);
            }
            return Err(e.hint(format!(
                "nothing stays mounted; {} was the mount that failed",
                dir.display()
            )));
        }
        if !as_json && !ctx.quiet {
            errln!(
                "mounted {} ({}) at {}",
                pinned,
                match &s.follows {
                    Follows::Digest => "pinned".to_string(),
                    other => format!("{} resolved now", follows_label(other)),
                },
                dir.display()
            );
        }
        out.push(serde_json::json!({
            "ref": m.reference,
            "resolved": pinned,
            "dir": dir.display().to_string(),
        }));
        done.push(dir);
    }
    if as_json {
        return json(&serde_json::json!({"file": path.display().to_string(), "mounts": out}));
    }
    if !ctx.quiet {
        let root = root
            .map(|r| format!(" --root {}", r.display()))
            .unwrap_or_default();
        errln!(
            "`sealvol deploy unmount {}{root}` ends them",
            path.display()
        );
    }
    Ok(())
}

pub(super) fn unmount(ctx: &Ctx, path: &Path, root: Option<&Path>, lazy: bool) -> Result<()> {
    let f = DeployFile::read(path)?;
    let mut failed = Vec::new();
    // The reverse order: a mount inside another goes first.
    for m in f.mounts.iter().rev() {
        let dir = mount_point(root, &m.path);
        if let Err(e) = crate::commands::mount::unmount(ctx, &dir, lazy) {
            if e.kind() == ErrorKind::NotFound {
                errln!("{}: not mounted", dir.display());
                continue;
            }
            errln!("{}: {}", dir.display(), e);
            failed.push(dir);
        }
    }
    match failed.is_empty() {
        true => Ok(()),
        false => Err(Error::new(
            ErrorKind::Io,
            format!(
                "{} mount(s) of {} could not be unmounted",
                failed.len(),
                path.display()
            ),
        )
        .hint("a process may still use it; --lazy detaches it now and unmounts once it is free")),
    }
}
