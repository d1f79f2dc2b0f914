//! `volume verify`: read everything back and report what is damaged.

use serde::Serialize;

use sealvol_core::verify::{VerifyReport, verify_all, verify_version};
use sealvol_core::{Error, ErrorKind, Ref, Repository, Result};

use crate::commands::Ctx;
use crate::output::{json, name, size};

pub fn verify(ctx: &Ctx, reference: Option<&str>, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo(false)?;
    let progress = ctx.progress();
    let report = match reference {
        Some(r) => {
            let r = Ref::parse(r)?;
            let digest = repo.resolve(&r)?;
            verify_version(&repo, &r.volume, &digest, progress.as_ref())?
        }
        None => verify_all(&repo, progress.as_ref())?,
    };
    print_verify(&repo, &report, as_json, ctx.quiet)?;
    if report.problems.is_empty() {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::Corrupt,
            format!("{} problem(s) found", report.problems.len()),
        )
        .hint("restore the damaged objects from a mirror, or re-push the affected versions"))
    }
}

#[derive(Serialize)]
struct VerifyJson<'a> {
    repository: &'a str,
    ok: bool,
    #[serde(flatten)]
    report: &'a VerifyReport,
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
        outln!("damaged: {}: {}", name(&p.object), p.problem)?;
    }
    if !quiet {
        eprintln!(
            "checked {} pack(s), {} chunk(s), {} file(s), {} version(s), {}",
            report.packs,
            report.chunks,
            report.files,
            report.versions,
            size(report.bytes)
        );
    }
    if report.problems.is_empty() {
        outln!("ok")?;
    }
    Ok(())
}
