//! `volume gc`: purge the expired trash, reclaim what nothing references, and say what
//! was found and freed.

use clap::Args;
use sealvol_core::Result;
use sealvol_core::gc::GcReport;
use sealvol_core::ops::GcOptions;
use sealvol_views::format::short_digest;

use crate::args::JSON_HELP;
use crate::commands::{Ctx, Run};
use crate::output::{json, size};

/// Purge expired versions from the trash and reclaim what no version references.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume gc --dry-run\n  sealvol volume gc\n  sealvol volume gc --no-wait     (condemn now; the next gc sweeps)\n\nSafe while other processes and machines push: what is unreferenced is condemned first,\nand deleted only after the grace period (`sealvol settings`) if it is still unreferenced.\nPacks that are mostly dead are rewritten. Only one gc runs at a time."
)]
pub struct Gc {
    /// Say what would be purged, condemned, rewritten and freed; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Do not wait out the grace period: condemn now and leave the sweep to the next gc.
    #[arg(long)]
    no_wait: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Gc {
    fn run(self, ctx: &Ctx) -> Result<()> {
        gc(ctx, self.dry_run, self.no_wait, self.json)
    }
}

pub fn gc(ctx: &Ctx, dry_run: bool, no_wait: bool, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo(false)?;
    let progress = ctx.progress();
    let report = repo.collect(
        &GcOptions {
            dry_run,
            wait: !no_wait,
            progress: progress.as_ref(),
        },
        &sealvol_gc::Here,
    )?;
    if as_json {
        return json(&serde_json::json!({ "repository": repo.location(), "report": report }));
    }
    print(&report)
}

fn print(r: &GcReport) -> Result<()> {
    let would = |did: &'static str, would: &'static str| if r.dry_run { would } else { did };
    for p in &r.purged {
        outln!(
            "{} vol:{}@{} (its time in the trash is over)",
            would("purged", "would purge"),
            p.volume,
            short_digest(&p.digest)
        )?;
    }
    for p in &r.kept_tagged {
        outln!(
            "kept vol:{}@{}: past its window, but a tag points at it again",
            p.volume,
            short_digest(&p.digest)
        )?;
    }
    outln!(
        "marked {} version(s) ({} in the trash, still restorable); {} pack(s), {}; {} chunk list(s)",
        r.versions,
        r.in_trash,
        r.packs_before,
        size(r.pack_bytes_before),
        r.files_before
    )?;
    if r.repacked > 0 {
        outln!(
            "{} {} mostly-dead pack(s) ({}) into {}",
            would("rewrote", "would rewrite"),
            r.repacked,
            size(r.repacked_bytes),
            match r.dry_run {
                true => format!("about {} of live chunks", size(r.repack_new_bytes)),
                false => format!(
                    "{} new pack(s) ({}); {} chunk list(s) relinked",
                    r.repack_new_packs,
                    size(r.repack_new_bytes),
                    r.relinked_files
                ),
            }
        )?;
    }
    outln!(
        "{} {} pack(s) and {} chunk list(s) that nothing references ({})",
        would("condemned", "would condemn"),
        r.condemned_packs,
        r.condemned_files,
        size(r.condemned_bytes)
    )?;
    if r.young_packs + r.young_files > 0 {
        outln!(
            "left {} pack(s) and {} chunk list(s) younger than the grace period ({}s): a push may be about to use them",
            r.young_packs,
            r.young_files,
            r.grace_secs
        )?;
    }
    if !r.dry_run {
        if r.rounds_swept > 0 {
            outln!(
                "swept {} round(s): deleted {} pack(s) and {} chunk list(s), freed {}{}",
                r.rounds_swept,
                r.deleted_packs,
                r.deleted_files,
                size(r.bytes_freed),
                match r.rescued {
                    0 => String::new(),
                    n => format!("; {n} object(s) rescued by pushes"),
                }
            )?;
        }
        if r.sweep_pending {
            outln!(
                "the sweep is left to the next `sealvol volume gc`, at least {}s from now",
                r.grace_secs
            )?;
        }
    }
    for n in &r.notes {
        outln!("note: {n}")?;
    }
    Ok(())
}
