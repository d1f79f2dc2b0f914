//! `volume verify`: check every object, name what is damaged and what it breaks, and
//! say how to fix it.

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::verify::{Affected, ReadData, VerifyReport, survey_all, survey_version};
use sealvol_core::{Error, ErrorKind, Ref, Repository, Result};
use serde::Serialize;

use crate::args::JSON_HELP;
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::{json, name, size};

/// Check the repository (or one version): name each damaged object, what it breaks, and the fix.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume verify\n  sealvol volume verify --read-data\n  sealvol volume verify --read-data-subset 1/10\n  sealvol volume verify weights/qwen3-8b:prod\n\nWithout --read-data, every object's structure is checked and a random sample of packs is read\n(at least 1/16 of the chunk data, and at least 256 MiB: a small repository is read whole).\nA version (REF) is always read whole. Damaged copies found are recorded, so no push reuses them."
)]
pub struct Verify {
    /// Only this version (a ref: NS/NAME@b3:DIGEST, NS/NAME:TAG or NS/NAME) [default: the whole repository]
    #[arg(value_name = "REF", add = ArgValueCompleter::new(complete::refs))]
    reference: Option<String>,
    /// Read every pack and check every chunk's hash.
    #[arg(long)]
    read_data: bool,
    /// Read some packs: N/T (run 1/T … T/T to cover everything) or P% (a random share).
    #[arg(long, value_name = "N/T|P%")]
    read_data_subset: Option<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Verify {
    fn run(self, ctx: &Ctx) -> Result<()> {
        verify(
            ctx,
            &VerifyArgs {
                reference: self.reference.as_deref(),
                read_data: self.read_data,
                subset: self.read_data_subset.as_deref(),
                json: self.json,
            },
        )
    }
}

struct VerifyArgs<'a> {
    pub reference: Option<&'a str>,
    pub read_data: bool,
    pub subset: Option<&'a str>,
    pub json: bool,
}

fn verify(ctx: &Ctx, args: &VerifyArgs) -> Result<()> {
    let read = match (args.read_data, args.subset) {
        (true, Some(_)) => {
            return Err(
                Error::invalid("--read-data and --read-data-subset do not go together")
                    .hint("--read-data reads every pack; --read-data-subset reads some"),
            );
        }
        (true, None) => ReadData::All,
        (false, Some(s)) => ReadData::parse_subset(s)?,
        (false, None) => ReadData::Sample,
    };
    let repo = ctx.open_repo(false)?;
    let config_damage = repo.config_damage().map(str::to_string);
    let progress = ctx.progress();
    let survey = match args.reference {
        Some(r) => {
            if args.read_data || args.subset.is_some() {
                return Err(Error::invalid("verify REF always reads every chunk of the version")
                    .hint("drop --read-data / --read-data-subset, or drop REF to check the whole repository"));
            }
            let r = Ref::parse(r)?;
            let digest = repo.resolve(&r)?;
            survey_version(&repo, &r.volume, &digest, progress.as_ref())?
        }
        None => survey_all(&repo, read, config_damage, true, progress.as_ref())?,
    };
    let report = survey.report();
    print_verify(&repo, &report, args.json, ctx.quiet)?;
    if report.problems.is_empty() {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Corrupt,
            format!("{} damaged object(s) found", report.problems.len()),
        )
        .hint(match report.fix.first() {
            Some(f) => format!("run `{}`; the lines above say what it does", f.command),
            None => "see the lines above".into(),
        }))
    }
}

#[derive(Serialize)]
struct VerifyJson<'a> {
    repository: &'a str,
    ok: bool,
    #[serde(flatten)]
    report: &'a VerifyReport,
}

/// `vol:…@… (tags a, b): file, file` or `tag ns/vol:t`.
pub fn affected_line(a: &Affected) -> String {
    let mut line = match &a.version {
        Some(v) => name(v).into_owned(),
        None => format!(
            "tag {}",
            a.tags
                .iter()
                .map(|t| name(t).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    if a.version.is_some() && !a.tags.is_empty() {
        line.push_str(&format!(" (tags {})", a.tags.join(", ")));
    }
    if a.whole {
        line.push_str(": the whole version (its manifest cannot be read)");
    } else if !a.files.is_empty() {
        let shown: Vec<String> = a
            .files
            .iter()
            .take(8)
            .map(|f| name(f).into_owned())
            .collect();
        line.push_str(&format!(": {}", shown.join(", ")));
        if a.files.len() > 8 {
            line.push_str(&format!(" and {} more", a.files.len() - 8));
        }
    }
    line
}

/// What a verify read of the chunk data, for its summary line.
fn what_was_read(report: &VerifyReport) -> String {
    match report.read_data.as_str() {
        "all" => format!("read {} of chunk data (every pack)", size(report.bytes)),
        "this version" => format!("read {} of chunk data (the version's)", size(report.bytes)),
        "sample" if report.packs_read == report.packs => format!(
            "read {} of chunk data (every pack: a repository under 256 MiB is read whole, a larger one sampled)",
            size(report.bytes)
        ),
        _ if report.packs_read == report.packs => {
            format!("read {} of chunk data (every pack)", size(report.bytes))
        }
        "none" => "read no chunk data".into(),
        "sample" => format!(
            "sampled {} of {} pack(s) ({} of chunk data); `--read-data` reads all",
            report.packs_read,
            report.packs,
            size(report.bytes)
        ),
        other => format!(
            "read {} of chunk data in {} of {} pack(s) ({other}; `--read-data` reads all)",
            size(report.bytes),
            report.packs_read,
            report.packs
        ),
    }
}

fn print_verify(
    repo: &Repository,
    report: &VerifyReport,
    as_json: bool,
    quiet: bool,
) -> Result<()> {
    if as_json {
        return json(&VerifyJson {
            repository: repo.location(),
            ok: report.problems.is_empty(),
            report,
        });
    }
    for p in &report.problems {
        outln!("damaged {}", name(&p.object))?;
        for d in &p.details {
            outln!("  {}", name(d))?;
        }
        for a in &p.affects {
            outln!("  breaks {}", affected_line(a))?;
        }
        if p.affects.is_empty() {
            outln!("  breaks nothing sealed: no version reads it")?;
        }
    }
    for n in &report.notes {
        errln!("note: {}", name(n));
    }
    if !quiet {
        let read = what_was_read(report);
        errln!(
            "checked {} pack(s), {} chunk(s), {} chunk list(s), {} version(s), {} tag(s); {read}",
            report.packs,
            report.chunks,
            report.files,
            report.versions,
            report.tags
        );
    }
    if report.problems.is_empty() {
        for f in &report.fix {
            errln!("to heal: {}  ({})", f.command, f.why);
        }
        return outln!("ok");
    }
    if !report.damaged_versions.is_empty() {
        outln!(
            "{} version(s) cannot be read back in full:",
            report.damaged_versions.len()
        )?;
        for a in &report.damaged_versions {
            outln!("  {}", affected_line(a))?;
        }
    }
    outln!("to fix:")?;
    for f in &report.fix {
        outln!("  {}", f.command)?;
        outln!("      {}", f.why)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampled_verify_says_how_much_it_read_and_how_to_read_all() {
        let mut r = VerifyReport {
            packs: 40,
            packs_read: 3,
            bytes: 3 << 20,
            read_data: "sample".into(),
            ..Default::default()
        };
        assert_eq!(
            what_was_read(&r),
            "sampled 3 of 40 pack(s) (3.0 MiB of chunk data); `--read-data` reads all"
        );
        r.read_data = "subset 1/4".into();
        assert!(
            what_was_read(&r).contains("in 3 of 40 pack(s) (subset 1/4; `--read-data` reads all)")
        );
        r.packs_read = 40;
        r.read_data = "sample".into();
        assert!(what_was_read(&r).contains("a larger one sampled"));
    }
}
