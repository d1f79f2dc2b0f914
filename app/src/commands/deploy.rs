//! `deploy check | pin | drift | rollback | mount | unmount`: the volumes a deployment's
//! config file names, checked, compared, pinned, rolled back and mounted.

use std::path::{Path, PathBuf};

use sealvol_core::{Digest, Error, ErrorKind, Ref, Repository, Result, VolumeName};
use sealvol_deploy::drift;
use sealvol_deploy::{
    Checked, DeployFile, Follows, Severity, check, file, history, rewrite, rollback,
};
use sealvol_views::format::short_digest;

use crate::cli::DeployCommand;
use crate::commands::Ctx;
use crate::output::{exit_with, json, name, size, table, when};

pub fn run(ctx: &Ctx, cmd: DeployCommand) -> Result<()> {
    match cmd {
        DeployCommand::Check {
            files,
            strict,
            json,
        } => check_files(ctx, &files, strict, json),
        DeployCommand::Pin {
            file,
            volume,
            all,
            dry_run,
            json,
        } => pin(ctx, &file, volume.as_deref(), all, dry_run, json),
        DeployCommand::Drift {
            paths,
            exit_code,
            json,
        } => drift_cmd(ctx, &paths, exit_code, json),
        DeployCommand::Rollback {
            file,
            volume,
            to,
            previous,
            path,
            yes,
            json,
        } => rollback(
            ctx,
            &file,
            &volume,
            Choice::from(to, previous)?,
            path.as_deref(),
            yes,
            json,
        ),
        DeployCommand::Mount { file, root, json } => mount(ctx, &file, root.as_deref(), json),
        DeployCommand::Unmount { file, root, lazy } => unmount(ctx, &file, root.as_deref(), lazy),
    }
}

/// A file that could not be loaded, or its check.
enum Loaded {
    Failed(PathBuf, Error),
    Checked(Checked),
}

fn load_all(repo: &Repository, paths: &[PathBuf]) -> Result<Vec<Loaded>> {
    Ok(file::collect(paths)?
        .into_iter()
        .map(|p| match DeployFile::read(&p) {
            Ok(f) => Loaded::Checked(check(repo, f)),
            Err(e) => Loaded::Failed(p, e),
        })
        .collect())
}

fn follows_label(f: &Follows) -> String {
    match f {
        Follows::Digest => "pinned".into(),
        Follows::Prefix => "digest prefix".into(),
        Follows::Tag(t) => format!("tag {t}"),
        Follows::Latest => "newest version".into(),
    }
}

fn check_files(ctx: &Ctx, paths: &[PathBuf], strict: bool, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo(false)?;
    let loaded = load_all(&repo, paths)?;
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
        eprintln!(
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

fn print_checked(c: &Checked) -> Result<()> {
    for f in &c.findings {
        let sev = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        outln!(
            "{}:{}:{}: {sev}: {}",
            f.file.display(),
            f.line,
            f.col,
            name(&f.message)
        )?;
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

fn pin(
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
        let s = s.as_ref().map_err(|e| {
            Error::new(
                e.kind(),
                format!(
                    "{}:{}:{}: {}: {}",
                    path.display(),
                    m.at.line,
                    m.at.col,
                    m.reference,
                    e.message()
                ),
            )
            .hint("nothing was pinned: fix this ref first")
        })?;
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
        eprintln!(
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
        eprintln!(
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

fn drift_cmd(ctx: &Ctx, paths: &[PathBuf], exit_code: bool, as_json: bool) -> Result<()> {
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
        eprintln!(
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

/// Which version a rollback goes to.
pub enum Choice {
    To(String),
    Previous,
}

impl Choice {
    fn from(to: Option<String>, previous: bool) -> Result<Choice> {
        match (to, previous) {
            (Some(t), false) => Ok(Choice::To(t)),
            (None, true) => Ok(Choice::Previous),
            _ => Err(
                Error::usage("say where to roll back to: --previous, or --to REF")
                    .hint("`sealvol volume versions NS/NAME` lists the versions"),
            ),
        }
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

fn rollback(
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
    let target = match &choice {
        Choice::To(to) => {
            let r = Ref::parse_in(to, &volume)?;
            if r.volume != volume {
                return Err(Error::invalid(format!(
                    "--to {to} names a version of {}, not of {volume}",
                    r.volume
                )));
            }
            repo.resolve(&r)?
        }
        Choice::Previous => {
            let cur = current.as_ref().map_err(|e| {
                Error::new(
                    e.kind(),
                    format!(
                        "{}: the ref of {volume} ({}) does not resolve, so there is no \"previous\": {}",
                        path.display(),
                        m.reference,
                        e.message()
                    ),
                )
                .hint(format!(
                    "name the version with --to; `sealvol volume versions {volume}` lists them"
                ))
            })?;
            history::previous(&repo, &volume, &cur.digest)?
        }
    };
    let Some(plan) = rollback::plan(&repo, &f, i, target)? else {
        if as_json {
            return json(
                &serde_json::json!({"file": path.display().to_string(), "volume": volume.to_string(), "path": m.path, "from": target.to_string(), "to": target.to_string(), "lines": [], "written": false}),
            );
        }
        eprintln!(
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
        eprintln!(
            "{}: roll back {volume} at {}",
            path.display(),
            name(&m.path)
        );
        eprintln!("  from {from}");
        eprintln!("  to   {}", version_line(&repo, &volume, &target));
        for l in &plan.edit.lines {
            eprintln!("-{:>4}: {}", l.line, name(&l.old));
            eprintln!("+{:>4}: {}", l.line, name(&l.new));
        }
        for a in &plan.edit.anchors {
            eprintln!(
                "note: the ref comes from the anchor &{a}: every alias of it changes with it"
            );
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
        eprintln!(
            "wrote {}: {volume} is pinned to {}",
            path.display(),
            short_digest(&target.to_string())
        );
    }
    Ok(())
}

/// Where a mount of the file goes: its path, below `root` when one is given.
fn mount_point(root: Option<&Path>, path: &str) -> PathBuf {
    match root {
        // The path is absolute and climbs nowhere (checked when the file was read).
        Some(r) => r.join(path.trim_start_matches('/')),
        None => PathBuf::from(path),
    }
}

fn mount(ctx: &Ctx, path: &Path, root: Option<&Path>, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo(false)?;
    let f = DeployFile::read(path)?;
    // Every ref resolved first, once: a deployment mounts all of it or nothing.
    let mut plan = Vec::new();
    for m in &f.mounts {
        let s = check::resolve(&repo, m).map_err(|e| {
            Error::new(
                e.kind(),
                format!(
                    "{}:{}:{}: {}: {}",
                    path.display(),
                    m.at.line,
                    m.at.col,
                    m.reference,
                    e.message()
                ),
            )
            .hint("nothing was mounted")
        })?;
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
                    crate::commands::mount::Request {
                        reference: pinned.clone(),
                        dir: dir.clone(),
                        cache: None,
                        cache_size: None,
                        foreground: false,
                        requested: Some(m.reference.clone()),
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
            eprintln!(
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
    Ok(())
}

fn unmount(ctx: &Ctx, path: &Path, root: Option<&Path>, lazy: bool) -> Result<()> {
    let f = DeployFile::read(path)?;
    let mut failed = Vec::new();
    // The reverse order: a mount inside another goes first.
    for m in f.mounts.iter().rev() {
        let dir = mount_point(root, &m.path);
        if let Err(e) = crate::commands::mount::unmount(ctx, &dir, lazy) {
            if e.kind() == ErrorKind::NotFound {
                eprintln!("{}: not mounted", dir.display());
                continue;
            }
            eprintln!("{}: {}", dir.display(), e);
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
