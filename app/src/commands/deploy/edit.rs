//! `deploy pin` and `deploy rollback`: refs rewritten in place, one scalar each.

use std::path::{Path, PathBuf};

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::{Digest, Error, Ref, Repository, Result, VolumeName};
use sealvol_deploy::rollback::Choice;
use sealvol_deploy::{DeployFile, check, history, rewrite, rollback};
use sealvol_views::format::short_digest;

use super::words::ref_error;
use crate::args::JSON_HELP;
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::{json, name, size, when};

/// Rewrite tag refs (and abbreviated digests) to the digests they resolve to now.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol deploy pin config.yaml --all\n  sealvol deploy pin config.yaml adapters/support-lora --dry-run\n\nOnly the refs change: comments, quoting, key order and line endings stay as they were."
)]
pub struct Pin {
    file: PathBuf,
    /// Pin only the refs of this volume (NS/NAME).
    #[arg(conflicts_with = "all")]
    volume: Option<String>,
    /// Pin every ref that is not pinned.
    #[arg(long)]
    all: bool,
    /// Show the change; write nothing.
    #[arg(long)]
    dry_run: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Pin {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Pin {
            file,
            volume,
            all,
            dry_run,
            json,
        } = self;
        pin(ctx, &file, volume.as_deref(), all, dry_run, json)
    }
}

/// Point one volume's ref at another version, changing no other byte of the file.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol deploy rollback deploy/prod.yaml weights/qwen3-8b --previous\n  sealvol deploy rollback deploy/prod.yaml weights/qwen3-8b --to @1a2b3c4d --yes\n\nShows the line that changes and asks first. The file is replaced by a rename, and only\nif it still holds what the diff was made from."
)]
pub struct Rollback {
    file: PathBuf,
    /// The volume to roll back (NS/NAME).
    #[arg(add = ArgValueCompleter::new(complete::volumes))]
    volume: String,
    /// The version to go to: a ref, or @DIGEST or TAG of this volume.
    #[arg(long, value_name = "REF", conflicts_with = "previous")]
    to: Option<String>,
    /// The version of the volume sealed just before the one the file serves now (by seal time, not the file's own history of pins: for that, --to with the digest from `git log -p FILE`).
    #[arg(long)]
    previous: bool,
    /// The mount, when the file mounts the volume more than once.
    #[arg(long, value_name = "PATH")]
    path: Option<String>,
    /// Write without asking.
    #[arg(long, short = 'y')]
    yes: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Rollback {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Rollback {
            file,
            volume,
            to,
            previous,
            path,
            yes,
            json,
        } = self;
        rollback(
            ctx,
            &file,
            &volume,
            choice(to, previous)?,
            path.as_deref(),
            yes,
            json,
        )
    }
}

pub(super) fn pin(
    ctx: &Ctx,
    path: &Path,
    volume: Option<&str>,
    all: bool,
    dry_run: bool,
    as_json: bool,
) -> Result<()> {
    let only = match (volume, all) {
        (Some(v), false) => Some(VolumeName::parse(v)?),
        (None, true) => None,
        _ => {
            return Err(Error::usage("say which refs to pin: a VOLUME, or --all")
                .hint("e.g. `sealvol deploy pin config.yaml --all`"));
        }
    };
    let repo = ctx.open_repo(false)?;
    let f = DeployFile::read(path)?;
    let c = check(&repo, f);
    let mut changes = Vec::new();
    let mut matched = false;
    for (i, (m, s)) in c.file.mounts.iter().zip(&c.served).enumerate() {
        let volume_of = s
            .as_ref()
            .map(|s| s.volume.clone())
            .or_else(|_| Ref::parse(&m.reference).map(|r| r.volume));
        if let (Some(only), Ok(v)) = (&only, &volume_of)
            && v != only
        {
            continue;
        }
        matched = true;
        let s = s
            .as_ref()
            .map_err(|e| ref_error(path, m, e, "nothing was pinned: fix this ref first"))?;
        if !s.follows.pinned() {
            changes.push((i, history::pinned_text(&m.reference, &s.volume, &s.digest)));
        }
    }
    if let (Some(v), false) = (&only, matched) {
        return Err(rollback::not_mounted(&c.file, v));
    }
    if changes.is_empty() {
        if as_json {
            return json(
                &serde_json::json!({"file": path.display().to_string(), "lines": [], "written": false}),
            );
        }
        errln!(
            "{}: every ref is pinned already; nothing to do",
            path.display()
        );
        return Ok(());
    }
    let edit = rewrite::edit(&c.file, &changes)?;
    if !dry_run {
        rewrite::apply(&edit)?;
    }
    if as_json {
        return json(&serde_json::json!({
            "file": path.display().to_string(),
            "lines": edit.lines,
            "written": !dry_run,
        }));
    }
    print_diff(&edit)?;
    if !ctx.quiet {
        errln!(
            "{} {} ref(s) in {}",
            if dry_run { "would pin" } else { "pinned" },
            changes.len(),
            path.display()
        );
    }
    Ok(())
}

fn print_diff(edit: &rewrite::Edit) -> Result<()> {
    for l in &edit.lines {
        outln!("-{:>4}: {}", l.line, name(&l.old))?;
        outln!("+{:>4}: {}", l.line, name(&l.new))?;
    }
    for a in &edit.anchors {
        outln!("note: the ref comes from the anchor &{a}: every alias of it changes with it")?;
    }
    Ok(())
}

/// The rollback's target from its flags: exactly one of --to and --previous.
pub(super) fn choice(to: Option<String>, previous: bool) -> Result<Choice> {
    match (to, previous) {
        (Some(t), false) => Ok(Choice::To(t)),
        (None, true) => Ok(Choice::Previous),
        _ => Err(
            Error::usage("say where to roll back to: --previous, or --to REF")
                .hint("`sealvol volume versions NS/NAME` lists the versions"),
        ),
    }
}

/// A version's line in a confirmation: its digest, when it was sealed, its size and tags.
fn version_line(repo: &Repository, volume: &VolumeName, d: &Digest) -> String {
    let tags: Vec<String> = repo
        .tags(volume)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| t.digest == d.to_string())
        .map(|t| t.tag)
        .collect();
    match repo.manifest(volume, d) {
        Ok(m) => format!(
            "{d} (sealed {}, {}{})",
            when(&m.created),
            size(m.stats.bytes),
            match tags.is_empty() {
                true => String::new(),
                false => format!(", tags {}", tags.join(", ")),
            }
        ),
        Err(_) => d.to_string(),
    }
}

pub(super) fn rollback(
    ctx: &Ctx,
    path: &Path,
    volume: &str,
    choice: Choice,
    at: Option<&str>,
    yes: bool,
    as_json: bool,
) -> Result<()> {
    let volume = VolumeName::parse(volume)?;
    let repo = ctx.open_repo(false)?;
    let f = DeployFile::read(path)?;
    let i = rollback::mount_of(&f, &volume, at)?;
    let m = &f.mounts[i];
    let current = rollback::current(&repo, &f, i);
    let target = rollback::target(&repo, path, &f, i, &volume, &choice)?;
    let Some(plan) = rollback::plan(&repo, &f, i, target, &ctx.settings.policy()?)? else {
        if as_json {
            return json(
                &serde_json::json!({"file": path.display().to_string(), "volume": volume.to_string(), "path": m.path, "from": target.to_string(), "to": target.to_string(), "lines": [], "written": false}),
            );
        }
        errln!(
            "{}: {volume} is pinned to {target} already; nothing to do",
            path.display()
        );
        return Ok(());
    };
    let from = match &current {
        Ok(c) => version_line(&repo, &volume, &c.digest),
        Err(e) => format!("{} (does not resolve: {})", m.reference, e.message()),
    };
    if !as_json || !yes {
        errln!(
            "{}: roll back {volume} at {}",
            path.display(),
            name(&m.path)
        );
        errln!("  from {from}");
        errln!("  to   {}", version_line(&repo, &volume, &target));
        if matches!(choice, Choice::Previous) {
            errln!(
                "  (--previous: the version of {volume} sealed just before the one pinned now, by seal time, not the file's own history of pins)"
            );
        }
        for l in &plan.edit.lines {
            errln!("-{:>4}: {}", l.line, name(&l.old));
            errln!("+{:>4}: {}", l.line, name(&l.new));
        }
        for a in &plan.edit.anchors {
            errln!("note: the ref comes from the anchor &{a}: every alias of it changes with it");
        }
    }
    if !yes {
        crate::output::ask(
            "pass --yes to write the file without asking",
            "not rolled back",
            &format!("write {}?", path.display()),
        )?;
    }
    rollback::apply(&plan)?;
    if as_json {
        return json(&serde_json::json!({
            "file": path.display().to_string(),
            "volume": volume.to_string(),
            "path": m.path,
            "from": plan.from.map(|d| d.to_string()),
            "to": target.to_string(),
            "lines": plan.edit.lines,
            "written": true,
        }));
    }
    if !ctx.quiet {
        errln!(
            "wrote {}: {volume} is pinned to {}",
            path.display(),
            short_digest(&target.to_string())
        );
    }
    Ok(())
}
