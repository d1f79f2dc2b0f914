//! `deploy check` and `deploy drift`: what deployment files serve, and where they disagree.

use std::path::PathBuf;

use clap::Args;
use sealvol_core::{Error, Repository, Result};
use sealvol_deploy::drift;
use sealvol_deploy::{Checked, DeployFile, Finding, Severity, check as check_file, file};
use sealvol_views::format::short_digest;

use super::words::follows_label;
use crate::args::JSON_HELP;
use crate::commands::{Ctx, Run};
use crate::output::{exit_with, json, name, table};

/// Check every ref of deployment files against the repository (fit for CI).
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol deploy check deploy/prod/config.yaml\n  sealvol deploy check deploy/ --strict --json\n\nErrors: a ref that does not resolve (unknown, in the trash, an ambiguous prefix), a\nmalformed file. Warnings: unpinned refs (a tag or a bare volume), abbreviated digests,\ntwo mounts on one path. Exits 1 on errors, and on warnings with --strict."
)]
pub struct Check {
    /// Deployment files (YAML with a `sealvol:` block), or folders of them.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Warnings fail the check too.
    #[arg(long)]
    strict: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Check {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Check {
            files,
            strict,
            json,
        } = self;
        check_files(ctx, &files, strict, json)
    }
}

/// Show which version each deployment serves, volume by volume, marking disagreements.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol deploy drift deploy/staging.yaml deploy/prod.yaml\n  sealvol deploy drift deploy/ --exit-code\n\nTags are resolved as they are now; * marks a ref that is not pinned."
)]
pub struct Drift {
    /// Deployment files, or folders of them.
    #[arg(required = true, value_name = "FILE")]
    paths: Vec<PathBuf>,
    /// Exit 1 when deployments disagree.
    #[arg(long)]
    exit_code: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Drift {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Drift {
            paths,
            exit_code,
            json,
        } = self;
        drift(ctx, &paths, exit_code, json)
    }
}

fn check_files(ctx: &Ctx, paths: &[PathBuf], strict: bool, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo(false)?;
    let mut loaded = load_all(&repo, paths)?;
    // What the trust policy would refuse to mount is an error here too, before a deploy.
    let policy = ctx.settings.policy()?;
    for l in &mut loaded {
        if let Loaded::Checked(c) = l {
            c.check_trust(&repo, &policy);
        }
    }
    let (mut errors, mut warnings) = (0, 0);
    let mut docs = Vec::new();
    for l in &loaded {
        match l {
            Loaded::Failed(p, e) => {
                errors += 1;
                docs.push(serde_json::json!({
                    "file": p.display().to_string(),
                    "error": e.message(),
                    "hint": e.hint_text(),
                    "mounts": [],
                    "findings": [],
                }));
                if !as_json {
                    outln!("{}: error: {}", p.display(), e.message())?;
                    if let Some(h) = e.hint_text() {
                        outln!("  hint: {h}")?;
                    }
                }
            }
            Loaded::Checked(c) => {
                errors += c.errors();
                warnings += c.warnings();
                docs.push(checked_json(c));
                if !as_json {
                    print_checked(c)?;
                }
            }
        }
    }
    let failed = errors > 0 || (strict && warnings > 0);
    if as_json {
        json(&serde_json::json!({
            "ok": !failed,
            "errors": errors,
            "warnings": warnings,
            "files": docs,
        }))?;
    } else if !ctx.quiet {
        errln!(
            "checked {} file(s): {errors} error(s), {warnings} warning(s)",
            loaded.len()
        );
    }
    match (errors, failed) {
        (0, false) => Ok(()),
        (0, true) => Err(Error::invalid(format!(
            "{warnings} warning(s), and --strict makes them errors"
        ))
        .hint("pin tag refs with `sealvol deploy pin FILE --all`")),
        (n, _) => Err(
            Error::invalid(format!("{n} error(s) in the deployment files"))
                .hint("the lines above say where and what to do"),
        ),
    }
}

fn checked_json(c: &Checked) -> serde_json::Value {
    let mounts: Vec<serde_json::Value> = c
        .file
        .mounts
        .iter()
        .zip(&c.served)
        .map(|(m, s)| {
            serde_json::json!({
                "ref": m.reference,
                "path": m.path,
                "line": m.at.line,
                "volume": s.as_ref().ok().map(|s| s.volume.to_string()),
                "digest": s.as_ref().ok().map(|s| s.digest.to_string()),
                "follows": s.as_ref().ok().map(|s| &s.follows),
                "error": s.as_ref().err().map(|e| e.message()),
            })
        })
        .collect();
    serde_json::json!({
        "file": c.file.path.display().to_string(),
        "mounts": mounts,
        "findings": c.findings,
    })
}

/// A finding as `deploy check` prints it: `FILE:LINE:COL: error: MESSAGE`.
pub(super) fn finding_line(f: &Finding) -> String {
    let sev = match f.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    format!(
        "{}:{}:{}: {sev}: {}",
        f.file.display(),
        f.line,
        f.col,
        name(&f.message)
    )
}

fn print_checked(c: &Checked) -> Result<()> {
    for f in &c.findings {
        outln!("{}", finding_line(f))?;
        if let Some(h) = &f.hint {
            outln!("  hint: {h}")?;
        }
    }
    for (m, s) in c.file.mounts.iter().zip(&c.served) {
        if let Ok(s) = s {
            outln!(
                "{}: {} {} ({}) at {}",
                c.file.path.display(),
                s.volume,
                short_digest(&s.digest.to_string()),
                follows_label(&s.follows),
                name(&m.path)
            )?;
        }
    }
    Ok(())
}

pub(super) fn drift(ctx: &Ctx, paths: &[PathBuf], exit_code: bool, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo(false)?;
    let mut checked = Vec::new();
    for l in load_all(&repo, paths)? {
        match l {
            Loaded::Checked(c) => checked.push(c),
            // Drift is between deployments that can be read: one that cannot is an
            // error, not a column of blanks.
            Loaded::Failed(_, e) => return Err(e),
        }
    }
    let files: Vec<PathBuf> = checked.iter().map(|c| c.file.path.clone()).collect();
    let names = file::display_names(&files);
    let rows = drift::drift(&checked);
    let disagree = rows.iter().filter(|r| !r.agree).count();
    if exit_code && disagree > 0 {
        exit_with(1);
    }
    if as_json {
        return json(&serde_json::json!({
            "deployments": names.iter().zip(&files).map(|(n, f)| serde_json::json!({"name": n, "file": f.display().to_string()})).collect::<Vec<_>>(),
            "volumes": rows,
            "disagree": disagree,
        }));
    }
    let mut header = vec!["", "VOLUME"];
    header.extend(names.iter().map(String::as_str));
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut row = vec![
                if r.agree { " " } else { "≠" }.to_string(),
                r.volume.clone(),
            ];
            row.extend(r.cells.iter().map(|cells| cell_text(cells)));
            row
        })
        .collect();
    table(&header, &table_rows)?;
    let unpinned = rows
        .iter()
        .flat_map(|r| r.cells.iter().flatten())
        .any(|c| c.follows.as_ref().is_some_and(|f| !f.pinned()));
    if unpinned {
        outln!("* unpinned (a tag or the newest version): what it resolves to now")?;
    }
    for r in &rows {
        for (cells, n) in r.cells.iter().zip(&names) {
            for c in cells.iter().filter(|c| c.error.is_some()) {
                outln!(
                    "{n}:{}: {}: {}",
                    c.line,
                    c.reference,
                    c.error.as_deref().unwrap_or_default()
                )?;
            }
        }
    }
    if !ctx.quiet {
        errln!(
            "{} volume(s) across {} deployment(s): {disagree} disagree",
            rows.len(),
            names.len()
        );
    }
    Ok(())
}

fn cell_text(cells: &[drift::Cell]) -> String {
    if cells.is_empty() {
        return "-".into();
    }
    cells
        .iter()
        .map(|c| match (&c.digest, &c.follows) {
            (Some(d), Some(f)) => {
                format!("{}{}", &d.hex()[..12], if f.pinned() { "" } else { "*" })
            }
            _ => "error".into(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A file that could not be loaded, or its check.
pub(super) enum Loaded {
    Failed(PathBuf, Error),
    Checked(Checked),
}

pub(super) fn load_all(repo: &Repository, paths: &[PathBuf]) -> Result<Vec<Loaded>> {
    Ok(file::collect(paths)?
        .into_iter()
        .map(|p| match DeployFile::read(&p) {
            Ok(f) => Loaded::Checked(check_file(repo, f)),
            Err(e) => Loaded::Failed(p, e),
        })
        .collect())
}
