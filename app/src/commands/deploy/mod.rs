//! `deploy check | pin | drift | rollback | mount | unmount | k8s`: the volumes a deployment's
//! config file names, checked, compared, pinned, rolled back and mounted. One module
//! per kind of work: reading (`check`: check and drift), rewriting (`edit`: pin and
//! rollback), mounting (`mount`), and the pod spec that mounts them in Kubernetes (`k8s`).

mod check;
mod edit;
mod k8s;
mod mount;
mod words;

use super::group;

group! {
    // `sealvol deploy …`: one variant per command, whose arguments sit beside it.
    #[derive(clap::Subcommand, Debug)]
    pub enum DeployCommand {
        Check(check::Check),
        Pin(edit::Pin),
        Drift(check::Drift),
        Rollback(edit::Rollback),
        Mount(mount::Mount),
        K8s(k8s::K8s),
        Unmount(mount::Unmount),
    }
}
