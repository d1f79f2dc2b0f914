//! `deploy k8s FILE`: the pod `volumes:` and `volumeMounts:` that mount a deployment's
//! volumes through the CSI driver, each ref pinned now, as YAML to paste (or `--json`).

use std::path::{Path, PathBuf};

use clap::Args;
use sealvol_core::{Error, Ref, Result};
use sealvol_csi::pod::{self, PodVolume};
use sealvol_deploy::{DeployFile, Follows, check as check_file};

use super::check::finding_line;
use super::words::{follows_label, ref_error};
use crate::args::JSON_HELP;
use crate::commands::{Ctx, Run};
use crate::output::json;

/// Print the pod volumes and volumeMounts that mount a deployment's volumes in Kubernetes (CSI), pinned.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol deploy k8s config.yaml\n  sealvol deploy k8s config.yaml --json\n\nEach volume is an inline CSI volume of the driver csi.sealvol.dev (`sealvol csi`), read-only, with the ref\nthe file names resolved now: the config file stays the one source of truth, the pod gets fixed bytes.\nWhat `deploy check` reports as an error (or nested mounts) stops it, unless --no-check."
)]
pub struct K8s {
    file: PathBuf,
    /// Render even when `deploy check` finds a problem (a version the trust policy refuses, nested mounts); the output says so.
    #[arg(long)]
    no_check: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for K8s {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let K8s {
            file,
            no_check,
            json,
        } = self;
        k8s(ctx, &file, no_check, json)
    }
}

pub(super) fn k8s(ctx: &Ctx, path: &Path, no_check: bool, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo(false)?;
    let f = DeployFile::read(path)?;
    // The checks `deploy check` makes, trust included: a manifest for a version the
    // node would refuse, or for mounts that cannot be nested, fails at pod start.
    let mut c = check_file(&repo, f);
    c.check_trust(&repo, &ctx.settings.policy()?);
    let blocking: Vec<_> = c.findings.iter().filter(|f| f.blocks_render()).collect();
    if !blocking.is_empty() && !no_check {
        for f in &blocking {
            errln!("{}", finding_line(f));
            if let Some(h) = &f.hint {
                errln!("  hint: {h}");
            }
        }
        return Err(Error::invalid(format!(
            "{} problem(s) in {}; nothing was rendered",
            blocking.len(),
            path.display()
        ))
        .hint("fix what the lines above say, or `--no-check` renders it anyway"));
    }
    let ignored = blocking.len();
    let mut volumes = Vec::new();
    let mut followed = Vec::new();
    for (m, s) in c.file.mounts.iter().zip(&c.served) {
        let s = s.as_ref().map_err(|e| {
            ref_error(
                path,
                m,
                e,
                "nothing was rendered; `sealvol deploy check` shows every problem",
            )
        })?;
        if s.follows != Follows::Digest {
            followed.push(format!(
                "{} ({} → {})",
                m.reference,
                follows_label(&s.follows),
                s.digest.short(12)
            ));
        }
        volumes.push(PodVolume {
            volume: s.volume.to_string(),
            pinned: Ref::pinned(s.volume.clone(), s.digest).to_string(),
            path: m.path.clone(),
        });
    }
    let rendered = pod::render(&volumes);
    let unchecked = format!(
        "not checked (--no-check): {ignored} problem(s) `sealvol deploy check` reports were ignored"
    );
    if as_json {
        if ignored > 0 {
            errln!("{unchecked}");
        }
        return json(&rendered);
    }
    let mut header = vec![
        format!(
            "sealvol deploy k8s {}: {} volume(s), pinned",
            path.display(),
            volumes.len()
        ),
        "volumes: under the pod template's spec; volumeMounts: under the container that reads them"
            .into(),
    ];
    if ignored > 0 {
        header.push(unchecked);
    }
    if !followed.is_empty() {
        header.push(format!("resolved now: {}", followed.join(", ")));
    }
    print!("{}", pod::yaml(&rendered, &header));
    Ok(())
}
