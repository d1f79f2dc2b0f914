//! `volume diff`: what changed between two versions, files, chunks and tensors.

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::diff::{Status, VersionDiff};
use sealvol_core::{Ref, Result};

use crate::args::JSON_HELP;
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::{json, name, size};

/// What changed between two versions: files, chunks, and safetensors tensors.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume diff weights/qwen3-8b:prod weights/qwen3-8b:canary\n  sealvol volume diff weights/qwen3-8b@9f3c1a2b weights/qwen3-8b@77ab01cd --json"
)]
pub struct Diff {
    /// The older version (a ref).
    #[arg(value_name = "FROM", add = ArgValueCompleter::new(complete::refs))]
    from: String,
    /// The newer version: a ref, or TAG or @DIGEST relative to FROM's volume.
    #[arg(value_name = "TO", add = ArgValueCompleter::new(complete::refs))]
    to: String,
    /// Exit 1 when the versions differ, 0 when they are the same (as `git diff --exit-code`).
    #[arg(long)]
    exit_code: bool,
    /// Also list unchanged files and tensors.
    #[arg(long)]
    all: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Diff {
    fn run(self, ctx: &Ctx) -> Result<()> {
        diff(
            ctx,
            &self.from,
            &self.to,
            self.all,
            self.exit_code,
            self.json,
        )
    }
}

/// `to` may be relative to `from`'s volume (`canary`, `@9f3c1a2b`). With `exit_code`,
/// the process exits 1 when the versions differ, as `git diff --exit-code` does.
pub fn diff(
    ctx: &Ctx,
    from: &str,
    to: &str,
    all: bool,
    exit_code: bool,
    as_json: bool,
) -> Result<()> {
    let ra = Ref::parse(from)?;
    let rb = Ref::parse_in(to, &ra.volume)?;
    let repo = ctx.open_repo(false)?;
    let (da, db) = (repo.resolve(&ra)?, repo.resolve(&rb)?);
    let d = sealvol_core::diff::diff(&repo, (&ra.volume, &da), (&rb.volume, &db))?;
    if as_json {
        json(&d)?;
    } else {
        print_diff(&d, all)?;
    }
    let t = &d.totals;
    if exit_code && t.added + t.removed + t.modified > 0 {
        crate::output::exit_with(1);
    }
    Ok(())
}

fn print_diff(d: &VersionDiff, all: bool) -> Result<()> {
    let t = &d.totals;
    outln!("{} -> {}", d.from, d.to)?;
    outln!(
        "{} added, {} removed, {} modified, {} unchanged; {} in {} chunks not in the older version",
        t.added,
        t.removed,
        t.modified,
        t.unchanged,
        size(t.changed_bytes),
        t.changed_chunks
    )?;
    let mark = |s: Status| match s {
        Status::Added => "+",
        Status::Removed => "-",
        Status::Modified => "~",
        Status::Unchanged => "=",
    };
    for f in &d.files {
        if f.status == Status::Unchanged && !all {
            continue;
        }
        let sizes = match (f.size_from, f.size_to) {
            (Some(a), Some(b)) if a != b => format!("{} -> {}", size(a), size(b)),
            (_, Some(b)) => size(b),
            (Some(a), None) => size(a),
            (None, None) => String::new(),
        };
        let changed = if f.status == Status::Modified {
            format!(
                ", {} of {} chunks changed ({})",
                f.changed_chunks,
                f.chunks,
                size(f.changed_bytes)
            )
        } else {
            String::new()
        };
        outln!("{} {}  {sizes}{changed}", mark(f.status), name(&f.path))?;
        if let Some(tensors) = &f.tensors {
            for x in tensors
                .iter()
                .filter(|x| all || x.status != Status::Unchanged)
            {
                outln!(
                    "    {} {}  {} {:?} {}",
                    mark(x.status),
                    name(&x.name),
                    name(&x.dtype),
                    x.shape,
                    size(x.bytes)
                )?;
            }
        }
        if let Some(note) = &f.tensor_note {
            outln!("    (tensors not compared: {note})")?;
        }
    }
    Ok(())
}
