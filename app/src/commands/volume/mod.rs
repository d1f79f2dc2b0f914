//! `sealvol volume …`: each subcommand is a thin wrapper that parses input, calls the
//! engine and prints for people (tables) or for programs (`--json`, one document whose
//! shape docs/JSON.md gives). One module per group: `transfer` (push, pull), `browse`
//! (ls, versions, files, resolve), `tags` (tag, tags), `labels` (label), `diff` and `verify`; mounts are
//! `commands::mount`, syncs `commands::jobs`.

mod browse;
mod describe;
mod diff;
mod export;
mod gc;
mod import;
mod labels;
mod sign;
mod tags;
mod transfer;
mod trash;
mod verify;

pub(crate) use transfer::{Through, pull};
pub use verify::affected_line;

use sealvol_core::Result;

use super::Ctx;
use crate::cli::VolumeCommand;

pub fn run(ctx: &Ctx, cmd: VolumeCommand) -> Result<()> {
    match cmd {
        VolumeCommand::Push {
            dir,
            volume,
            tags,
            allow_empty,
            labels,
            json,
        } => transfer::push(ctx, &dir, &volume, &tags, &labels, allow_empty, json),
        VolumeCommand::Pull {
            reference,
            dir,
            force,
            include,
            exclude,
            peers,
            peers_file,
            origins,
            json,
        } => transfer::pull(
            ctx,
            &reference,
            &dir,
            transfer::Through {
                force,
                include: &include,
                exclude: &exclude,
                peers: &peers,
                peers_file: peers_file.as_deref(),
                origins: &origins,
            },
            json,
        ),
        VolumeCommand::Export {
            reference,
            dest,
            registry_secret,
            tls_verify,
            piece_size,
            mount_from,
            json,
        } => export::export(
            ctx,
            &reference,
            &dest,
            export::Reach {
                secret: registry_secret,
                tls_verify,
                piece: piece_size,
                mount_from,
            },
            json,
        ),
        VolumeCommand::Mirror {
            reference,
            to,
            detach,
            json,
        } => match &ctx.settings.remote {
            // On a remote engine the server copies, to a destination of its own.
            Some(_) => super::jobs::mirror_on_server(ctx, &reference, &to, detach, json),
            None if detach => Err(sealvol_core::Error::usage(
                "--detach is for a mirror job on a server (--remote)",
            )
            .hint("a local mirror runs in the foreground")),
            None => transfer::mirror(ctx, &reference, &to, json),
        },
        VolumeCommand::Sync {
            source,
            volume,
            tags,
            secret,
            include,
            exclude,
            detach,
            wait: _,
            json,
        } => super::jobs::sync(
            ctx,
            super::jobs::SyncRequest {
                source,
                volume,
                tags,
                secret,
                include,
                exclude,
                detach,
                json,
                endpoint: None,
            },
        ),
        VolumeCommand::Import {
            source,
            volume,
            tags,
            registry_secret,
            tls_verify,
            detach,
            json,
        } => import::import(
            ctx,
            import::Request {
                source,
                volume,
                tags,
                secret: registry_secret,
                tls_verify,
                detach,
                json,
            },
        ),
        VolumeCommand::Watch(args) => super::watch::start(ctx, args),
        VolumeCommand::Ls { namespace, json } => browse::ls(ctx, namespace.as_deref(), json),
        VolumeCommand::Versions { volume, json } => browse::versions(ctx, &volume, json),
        VolumeCommand::Files { reference, json } => browse::files(ctx, &reference, json),
        VolumeCommand::Resolve { reference, json } => browse::resolve(ctx, &reference, json),
        VolumeCommand::Describe { reference, json } => describe::describe(ctx, &reference, json),
        VolumeCommand::Tag {
            reference,
            tag,
            expires,
            json,
        } => tags::tag(ctx, &reference, &tag, expires.as_deref(), json),
        VolumeCommand::Label {
            reference,
            set,
            remove,
            json,
        } => labels::label(ctx, &reference, &set, &remove, json),
        VolumeCommand::Tags {
            volume,
            history,
            json,
        } => tags::tags(ctx, &volume, history, json),
        VolumeCommand::Diff {
            from,
            to,
            all,
            exit_code,
            json,
        } => diff::diff(ctx, &from, &to, all, exit_code, json),
        VolumeCommand::Mount {
            reference,
            dir,
            cache,
            cache_size,
            prefetch_memory,
            read_timeout,
            peers,
            peers_file,
            origins,
            metrics,
            foreground,
            requested,
        } => super::mount::mount(
            ctx,
            super::mount::Request {
                reference,
                dir,
                cache,
                cache_size,
                prefetch_memory,
                read_timeout,
                peers,
                peers_file,
                origins,
                metrics,
                foreground,
                requested,
                quiet: false,
            },
        ),
        VolumeCommand::Unmount { dir, lazy } => super::mount::unmount(ctx, &dir, lazy),
        VolumeCommand::Mounts { json } => super::mount::list(ctx, json),
        VolumeCommand::Sign {
            reference,
            key,
            sha256,
            import,
            json,
        } => sign::sign(
            ctx,
            &reference,
            key.as_deref(),
            sha256,
            import.as_deref(),
            json,
        ),
        VolumeCommand::VerifySignature {
            reference,
            public_keys,
            json,
        } => sign::verify_signature(ctx, &reference, &public_keys, json),
        VolumeCommand::Signatures {
            reference,
            out,
            json,
        } => sign::signatures(ctx, &reference, out.as_deref(), json),
        VolumeCommand::Profile(crate::cli::ProfileCommand::Save { reference, json }) => {
            super::mount::save_profile(ctx, &reference, json)
        }
        VolumeCommand::Delete {
            reference,
            untag,
            yes,
            json,
        } => trash::delete(ctx, &reference, untag, yes, json),
        VolumeCommand::Untag { reference, json } => trash::untag(ctx, &reference, json),
        VolumeCommand::Trash { volume, json } => trash::trash(ctx, volume.as_deref(), json),
        VolumeCommand::Restore { reference, json } => trash::restore(ctx, &reference, json),
        VolumeCommand::Gc {
            dry_run,
            no_wait,
            json,
        } => gc::gc(ctx, dry_run, no_wait, json),
        VolumeCommand::Verify {
            reference,
            read_data,
            read_data_subset,
            json,
        } => verify::verify(
            ctx,
            &verify::VerifyArgs {
                reference: reference.as_deref(),
                read_data,
                subset: read_data_subset.as_deref(),
                json,
            },
        ),
    }
}
