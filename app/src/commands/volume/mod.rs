//! `sealvol volume …`: one module per kind of work, each holding its commands'
//! arguments (clap) beside the code that runs them: `transfer` (push, pull, mirror),
//! `sync` (and what a sync and an import seal into), `import`, `export`, `browse` (ls,
//! versions, files, resolve), `describe`, `tags` (tag, tags), `labels`, `diff`, `sign`
//! (sign, verify-signature, signatures), `trash` (delete, untag, trash, restore), `gc`
//! and `verify`; mounts are `commands::mount`, watches `commands::watch`. Each prints
//! for people (tables) or for programs (`--json`, one document whose shape
//! docs/JSON.md gives).

mod browse;
mod describe;
mod diff;
mod export;
mod gc;
mod import;
mod labels;
mod sign;
mod sync;
mod tags;
mod transfer;
mod trash;
mod verify;

pub(crate) use browse::Ls;
pub(crate) use transfer::{Through, pull};
pub use verify::affected_line;

use super::group;

group! {
    // `sealvol volume …`: one variant per command, whose arguments sit beside it.
    #[derive(clap::Subcommand, Debug)]
    pub enum VolumeCommand {
        Push(transfer::Push),
        Sync(sync::Sync),
        Watch(crate::commands::watch::Start),
        Ls(browse::Ls),
        Versions(browse::Versions),
        Files(browse::Files),
        Tag(tags::Tag),
        Label(labels::Label),
        Describe(describe::Describe),
        Resolve(browse::Resolve),
        Tags(tags::Tags),
        Diff(diff::Diff),
        Pull(transfer::Pull),
        Export(export::Export),
        Import(import::Import),
        Mirror(transfer::Mirror),
        Mount(crate::commands::mount::Mount),
        Unmount(crate::commands::mount::Unmount),
        Mounts(crate::commands::mount::Mounts),
        /// Read profiles: the order a model's start-up reads a version in, replayed by later mounts.
        #[command(subcommand)]
        Profile(crate::commands::mount::ProfileCommand),
        Sign(sign::Sign),
        VerifySignature(sign::VerifySignature),
        Signatures(sign::Signatures),
        Delete(trash::Delete),
        Untag(trash::Untag),
        Trash(trash::Trash),
        Restore(trash::Restore),
        Gc(gc::Gc),
        Verify(verify::Verify),
    }
}
