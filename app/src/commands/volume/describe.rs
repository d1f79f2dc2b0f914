//! `volume describe REF`: everything known about one version in one place: what it is
//! (digest, size, files, chunks, what it added to the repository), where it came from
//! (source, revision, when a sync listed it, who sealed it, its labels), which tags
//! point at it now (and when those expire), and which mounts on this node serve it.

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::{Ref, Result};
use sealvol_views::format::expires_in;
use serde::Serialize;

use crate::args::{JSON_HELP, REF_HELP};
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::{json, name, size, when};

/// Everything known about one version: size, what it added, source, labels, tags (and when they expire), mounts here.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol volume describe weights/qwen3-8b:prod --json")]
pub struct Describe {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Describe {
    fn run(self, ctx: &Ctx) -> Result<()> {
        describe(ctx, &self.reference, self.json)
    }
}

#[derive(Serialize)]
struct Described {
    requested: String,
    #[serde(rename = "ref")]
    pinned: String,
    volume: String,
    digest: String,
    created: String,
    pushed_by: String,
    source: String,
    revision: Option<String>,
    listed: Option<String>,
    labels: sealvol_core::labels::Labels,
    bytes: u64,
    files: u64,
    links: u64,
    dirs: u64,
    chunks: u64,
    new_bytes: u64,
    new_chunks: u64,
    /// How many of its files a sync recorded a source version (ETag, generation) for.
    source_objects: usize,
    /// How many synced files passed each set of checks of the source's own hashes
    /// (`unchecked`: the source gave none); empty for a push.
    checked: std::collections::BTreeMap<String, u64>,
    tags: Vec<TagNow>,
    mounts: Vec<MountNow>,
}

#[derive(Serialize)]
struct TagNow {
    tag: String,
    expires: Option<String>,
}

#[derive(Serialize)]
struct MountNow {
    dir: String,
    pid: u32,
}

pub fn describe(ctx: &Ctx, reference: &str, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let repo = ctx.open_repo(false)?;
    let digest = repo.resolve(&r)?;
    let m = repo.manifest(&r.volume, &digest)?;
    let d = digest.to_string();
    let tags = repo
        .tags(&r.volume)?
        .into_iter()
        .filter(|t| t.digest == d && t.damaged.is_none())
        .map(|t| TagNow {
            tag: t.tag,
            expires: t.expires,
        })
        .collect();
    let volume = r.volume.to_string();
    let mounts = sealvol_mount::records::list(&sealvol_mount::records::dir(&ctx.settings.state))
        .into_iter()
        .filter(|rec| rec.volume == volume && rec.digest == d)
        .map(|rec| MountNow {
            dir: rec.dir,
            pid: rec.pid,
        })
        .collect();
    let count = |f: fn(&sealvol_core::digest::Entry) -> bool| {
        m.entries.iter().filter(|e| f(e)).count() as u64
    };
    let out = Described {
        requested: reference.to_string(),
        pinned: Ref::pinned(r.volume.clone(), digest).to_string(),
        volume,
        digest: d,
        created: m.created.clone(),
        pushed_by: m.provenance.pushed_by.clone(),
        source: m.provenance.source.clone(),
        revision: m.provenance.revision.clone(),
        listed: m.provenance.listed.clone(),
        labels: repo.labels_now(&r.volume, &digest, &m.provenance.labels)?,
        bytes: m.stats.bytes,
        files: m.stats.files,
        links: count(|e| matches!(e, sealvol_core::digest::Entry::Symlink { .. })),
        dirs: count(|e| matches!(e, sealvol_core::digest::Entry::Dir { .. })),
        chunks: m.stats.chunks,
        new_bytes: m.stats.new_bytes,
        new_chunks: m.stats.new_chunks,
        source_objects: m.provenance.objects.len(),
        checked: m.provenance.checks_summary(),
        tags,
        mounts,
    };
    if as_json {
        return json(&out);
    }
    print(&out)
}

fn print(d: &Described) -> Result<()> {
    let now = sealvol_core::stamp::now();
    outln!("ref        {}", d.pinned)?;
    // Whoever sealed the version wrote these: shown escaped, never as they are.
    outln!("created    {} by {}", when(&d.created), name(&d.pushed_by))?;
    outln!("source     {}", name(&d.source))?;
    if let Some(r) = &d.revision {
        outln!("revision   {}", name(r))?;
    }
    if let Some(l) = &d.listed {
        outln!("listed     {}", when(l))?;
    }
    if d.source_objects > 0 {
        outln!(
            "objects    {} with their source version recorded",
            d.source_objects
        )?;
    }
    if !d.checked.is_empty() {
        let said: Vec<String> = d
            .checked
            .iter()
            .map(|(k, n)| format!("{n} file(s) {k}"))
            .collect();
        outln!(
            "checked    against the source's own hashes: {}",
            said.join(", ")
        )?;
    }
    for (k, v) in &d.labels {
        outln!("label      {k}={v}")?;
    }
    outln!(
        "size       {} in {} file(s), {} link(s), {} folder(s); {} chunk(s)",
        size(d.bytes),
        d.files,
        d.links,
        d.dirs,
        d.chunks
    )?;
    outln!(
        "added      {} in {} chunk(s) new to the repository when sealed",
        size(d.new_bytes),
        d.new_chunks
    )?;
    if d.tags.is_empty() {
        outln!("tags       none (pinned only)")?;
    }
    for t in &d.tags {
        match &t.expires {
            Some(at) => outln!(
                "tag        {} (expires {}, {})",
                t.tag,
                when(at),
                expires_in(at, now)
            )?,
            None => outln!("tag        {}", t.tag)?,
        }
    }
    for m in &d.mounts {
        outln!("mounted    {} (pid {})", m.dir, m.pid)?;
    }
    Ok(())
}
