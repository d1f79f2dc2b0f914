//! `repair`: fix what verify finds, moving damaged objects to quarantine/, and say what
//! is still missing and how to heal it.

use std::path::{Path, PathBuf};

use clap::Args;
use sealvol_core::repair::{RepairOptions, RepairReport, repair as run_repair};
use sealvol_core::{Error, ErrorKind, Result};

use crate::args::JSON_HELP;
use crate::commands::volume::affected_line;
use crate::commands::{Ctx, Run};
use crate::output::{json, name};

/// Fix what `volume verify` finds: rebuild indexes, relink chunks to healthy copies, restore tags.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol repair --dry-run\n  sealvol repair\n  sealvol repair --from ./ckpt\n\nNothing is deleted: damaged objects move to quarantine/ in the repository.\nVersions still missing data are listed; --from DIR heals them from a folder holding their files."
)]
pub struct Repair {
    /// Show what would be done; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Read every pack first, to find damage no read has recorded yet.
    #[arg(long)]
    read_data: bool,
    /// A folder holding the files of damaged versions (their source), to heal them from.
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Repair {
    fn run(self, ctx: &Ctx) -> Result<()> {
        repair(
            ctx,
            self.dry_run,
            self.read_data,
            self.from.as_deref(),
            self.json,
        )
    }
}

fn repair(
    ctx: &Ctx,
    dry_run: bool,
    read_data: bool,
    from: Option<&Path>,
    as_json: bool,
) -> Result<()> {
    if let Some(dir) = from
        && !dir.is_dir()
    {
        return Err(
            Error::invalid(format!("--from {}: no such folder", dir.display()))
                .hint("give the folder that holds the files of the damaged versions"),
        );
    }
    let mut repo = ctx.open_repo(false)?;
    let progress = ctx.progress();
    let report = run_repair(
        &mut repo,
        &RepairOptions {
            dry_run,
            read_data,
            from,
            progress: progress.as_ref(),
        },
    )?;
    if as_json {
        json(&serde_json::json!({ "repository": repo.location(), "report": report }))?;
    } else {
        print_repair(&report)?;
    }
    if report.dry_run || (report.remaining.is_empty() && report.remaining_versions.is_empty()) {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Corrupt,
            format!(
                "{} version(s) still miss data after repair",
                report.remaining_versions.len()
            ),
        )
        .hint(match report.fix.first() {
            Some(f) => format!("run `{}`", f.command),
            None => "re-push or re-sync the affected versions from their source".into(),
        }))
    }
}

fn print_repair(r: &RepairReport) -> Result<()> {
    let verb = if r.dry_run { "would" } else { "did" };
    if r.actions.is_empty() {
        outln!("nothing to repair")?;
    }
    for a in &r.actions {
        outln!("{verb} {}: {}", a.action, name(&a.object))?;
        outln!("  {}", name(&a.detail))?;
    }
    if !r.remaining_versions.is_empty() {
        outln!(
            "{} version(s) {} miss data:",
            r.remaining_versions.len(),
            if r.dry_run { "would still" } else { "still" }
        )?;
        for a in &r.remaining_versions {
            outln!("  {}", affected_line(a))?;
        }
        if r.dry_run {
            outln!(
                "heal them with `sealvol repair --from DIR` (a folder holding their files), or re-push or re-sync them from their source"
            )?;
        }
    }
    for f in &r.fix {
        outln!("to heal: {}", f.command)?;
        outln!("      {}", f.why)?;
    }
    if !r.dry_run && r.remaining.is_empty() && r.remaining_versions.is_empty() {
        outln!("ok: the repository verifies")?;
    }
    Ok(())
}
