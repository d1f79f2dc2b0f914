//! `deploy check | pin | drift | rollback | mount | unmount | k8s`: the volumes a deployment's
//! config file names, checked, compared, pinned, rolled back and mounted. One module
//! per kind of work: reading (`check`: check and drift), rewriting (`edit`: pin and
//! rollback), mounting (`mount`), and the pod spec that mounts them in Kubernetes (`k8s`).

mod check;
mod edit;
mod k8s;
mod mount;

use std::path::{Path, PathBuf};

use sealvol_core::{Error, Repository, Result};
use sealvol_deploy::{Checked, DeployFile, Follows, MountEntry, check as check_file, file};

use crate::cli::DeployCommand;
use crate::commands::Ctx;

pub fn run(ctx: &Ctx, cmd: DeployCommand) -> Result<()> {
    match cmd {
        DeployCommand::Check {
            files,
            strict,
            json,
        } => check::check_files(ctx, &files, strict, json),
        DeployCommand::Pin {
            file,
            volume,
            all,
            dry_run,
            json,
        } => edit::pin(ctx, &file, volume.as_deref(), all, dry_run, json),
        DeployCommand::Drift {
            paths,
            exit_code,
            json,
        } => check::drift(ctx, &paths, exit_code, json),
        DeployCommand::Rollback {
            file,
            volume,
            to,
            previous,
            path,
            yes,
            json,
        } => edit::rollback(
            ctx,
            &file,
            &volume,
            edit::choice(to, previous)?,
            path.as_deref(),
            yes,
            json,
        ),
        DeployCommand::Mount { file, root, json } => {
            mount::mount(ctx, &file, root.as_deref(), json)
        }
        DeployCommand::K8s {
            file,
            no_check,
            json,
        } => k8s::k8s(ctx, &file, no_check, json),
        DeployCommand::Unmount { file, root, lazy } => {
            mount::unmount(ctx, &file, root.as_deref(), lazy)
        }
    }
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

pub(super) fn follows_label(f: &Follows) -> String {
    match f {
        Follows::Digest => "pinned".into(),
        Follows::Prefix => "digest prefix".into(),
        Follows::Tag(t) => format!("tag {t}"),
        Follows::Latest => "newest version".into(),
    }
}

/// A mount's ref that does not resolve, named by its place in the file.
pub(super) fn ref_error(path: &Path, m: &MountEntry, e: &Error, hint: &str) -> Error {
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
    .hint(hint.to_string())
}
