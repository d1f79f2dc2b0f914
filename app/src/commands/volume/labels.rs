//! `volume label REF [K=V…] [--remove K…]`: change a sealed version's labels (outside
//! its digest, kept beside it with every change), or print them and their history.

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::labels::{self, LabelRequest, Labels};
use sealvol_core::{Ref, Result};

use crate::args::{JSON_HELP, REF_HELP};
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::{json, when};

/// Set or remove labels of a sealed version (outside its digest); with neither, print them and every change.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume label weights/run-7@b3:9f3c1a2b eval=passed step=4000\n  sealvol volume label weights/run-7:prod --remove eval\n  sealvol volume label weights/run-7:prod\n\nA version's labels are those of the push that sealed it until they are changed here;\nevery change is kept (who, when, what), and a deleted version's labels go with it."
)]
pub struct Label {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    /// Labels to set: KEY=VALUE (a key it has gets the new value).
    #[arg(value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// A label to remove (repeatable).
    #[arg(long = "remove", value_name = "KEY")]
    remove: Vec<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Label {
    fn run(self, ctx: &Ctx) -> Result<()> {
        label(ctx, &self.reference, &self.set, &self.remove, self.json)
    }
}

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
