//! `deploy check | pin | drift | rollback | mount | unmount | k8s`: the volumes a deployment's
//! config file names, checked, compared, pinned, rolled back and mounted. One module
//! per kind of work: reading (`check`: check and drift), rewriting (`edit`: pin and
//! rollback), mounting (`mount`), and the pod spec that mounts them in Kubernetes (`k8s`).

mod check;
mod edit;
mod k8s;
mod mount;
mod words;

use sealvol_core::Result;

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
