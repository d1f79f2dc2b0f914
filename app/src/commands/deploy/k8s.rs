//! `deploy k8s FILE`: the pod `volumes:` and `volumeMounts:` that mount a deployment's
//! volumes through the CSI driver, each ref pinned now, as YAML to paste (or `--json`).

use std::path::Path;

use sealvol_core::{Ref, Result};
use sealvol_csi::pod::{self, PodVolume};
use sealvol_deploy::{DeployFile, Follows, check};

use super::{follows_label, ref_error};
use crate::commands::Ctx;
use crate::output::json;

pub(super) fn k8s(ctx: &Ctx, path: &Path, as_json: bool) -> Result<()> {
    let repo = ctx.open_repo(false)?;
    let f = DeployFile::read(path)?;
    let mut volumes = Vec::new();
    let mut followed = Vec::new();
    for m in &f.mounts {
        let s = check::resolve(&repo, m).map_err(|e| {
            ref_error(
                path,
                m,
                &e,
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
    if as_json {
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
    if !followed.is_empty() {
        header.push(format!("resolved now: {}", followed.join(", ")));
    }
    print!("{}", pod::yaml(&rendered, &header));
    Ok(())
}
