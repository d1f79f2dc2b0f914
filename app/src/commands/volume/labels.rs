//! `volume label REF [K=V…] [--remove K…]`: change a sealed version's labels (outside
//! its digest, kept beside it with every change), or print them and their history.

use sealvol_core::labels::{self, LabelRequest, Labels};
use sealvol_core::{Ref, Result};

use crate::commands::Ctx;
use crate::output::{json, when};

pub fn label(
    ctx: &Ctx,
    reference: &str,
    set: &[String],
    remove: &[String],
    as_json: bool,
) -> Result<()> {
    let r = Ref::parse(reference)?;
    let set = labels::parse(set)?;
    let repo = ctx.open_repo(false)?;
    let digest = repo.resolve(&r)?;
    let pinned = Ref::pinned(r.volume.clone(), digest);
    if set.is_empty() && remove.is_empty() {
        let m = repo.manifest(&r.volume, &digest)?;
        let now = repo.labels_now(&r.volume, &digest, &m.provenance.labels)?;
        let history = repo.label_history(&r.volume, &digest)?;
        if as_json {
            return json(&serde_json::json!({
                "ref": pinned.to_string(),
                "sealed": m.provenance.labels,
                "labels": now,
                "history": history,
            }));
        }
        outln!("{pinned}")?;
        outln!("labels: {}", shown(&now))?;
        if history.is_empty() {
            outln!("unchanged since it was sealed")?;
        } else {
            outln!("sealed with: {}", shown(&m.provenance.labels))?;
            for c in history.iter().rev() {
                outln!(
                    "  {}  {}  {}",
                    when(&c.at),
                    c.by,
                    change_text(&c.set, &c.removed)
                )?;
            }
        }
        return Ok(());
    }
    let done = repo.change_labels(&LabelRequest {
        volume: r.volume.clone(),
        digest,
        set,
        remove: remove.to_vec(),
    })?;
    if as_json {
        return json(&done);
    }
    if !ctx.quiet {
        if done.changed {
            errln!(
                "labels of {}: {} (were: {})",
                done.reference,
                shown(&done.labels),
                shown(&done.before)
            );
        } else {
            errln!(
                "labels of {} unchanged: it already has {}",
                done.reference,
                shown(&done.labels)
            );
        }
    }
    outln!("{pinned}")
}

fn shown(l: &Labels) -> String {
    if l.is_empty() {
        "none".into()
    } else {
        labels::shown(l)
    }
}

/// One change as a line: `set k=v, removed k`.
fn change_text(set: &Labels, removed: &[String]) -> String {
    let mut parts = Vec::new();
    if !set.is_empty() {
        parts.push(format!("set {}", labels::shown(set)));
    }
    if !removed.is_empty() {
        parts.push(format!("removed {}", removed.join(", ")));
    }
    parts.join("; ")
}
