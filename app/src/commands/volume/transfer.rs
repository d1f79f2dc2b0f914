//! `volume push | pull | mirror`: a directory becomes a sealed version, a version
//! becomes a directory that is exactly it, or a copy in another repository.

use std::path::{Path, PathBuf};

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::push::{PushOptions, PushReport, push as push_dir};
use sealvol_core::read::Fill;
use sealvol_core::{Name, Ref, Result, VolumeName};
use sealvol_node::state::StatCacheDir;

use super::tags::tag_line;
use crate::args::{JSON_HELP, ORIGIN_HELP, PEER_HELP, PEERS_FILE_HELP, REF_HELP};
use crate::commands::{Ctx, Run, jobs};
use crate::complete;
use crate::output::{json, name, size};

/// Seal a directory as a new version; prints its pinned ref last on stdout.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  sealvol volume push ./ckpt weights/qwen3-8b --tag prod\n  vol:weights/qwen3-8b@b3:9f3c…"
)]
pub struct Push {
    /// The directory to seal.
    dir: PathBuf,
    /// Volume: NAMESPACE/NAME.
    #[arg(add = ArgValueCompleter::new(complete::volumes))]
    volume: String,
    /// Point these tags at the new version (repeatable).
    #[arg(long = "tag", short = 't', value_name = "TAG")]
    tags: Vec<String>,
    /// Seal a folder that holds no file (refused otherwise: it is most often a wrong path).
    #[arg(long)]
    allow_empty: bool,
    /// Say something about the version (repeatable): KEY=VALUE, e.g. step=4000. Shown by `volume versions`, not part of the digest.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    labels: Vec<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Push {
    fn run(self, ctx: &Ctx) -> Result<()> {
        push(
            ctx,
            &self.dir,
            &self.volume,
            &self.tags,
            &self.labels,
            self.allow_empty,
            self.json,
        )
    }
}

/// Write a version's files into a directory, verifying every chunk.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol volume pull weights/qwen3-8b:prod ./model")]
pub struct Pull {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    /// The directory to write: new, empty, or (with --force) made exactly the version.
    dir: PathBuf,
    /// Pull into a non-empty directory: replace the version's files there and remove
    /// (and list) everything the version does not hold.
    #[arg(long)]
    force: bool,
    /// Only the paths matching this glob (repeatable; .gitignore-like: `*.safetensors`, `onnx/*`); each file verified as ever.
    #[arg(long, value_name = "GLOB")]
    include: Vec<String>,
    /// Leave out the paths matching this glob (repeatable; wins over --include).
    #[arg(long, value_name = "GLOB")]
    exclude: Vec<String>,
    #[arg(long = "peer", value_name = "URL", help = PEER_HELP)]
    peers: Vec<String>,
    #[arg(long, value_name = "FILE", help = PEERS_FILE_HELP, conflicts_with = "peers")]
    peers_file: Option<PathBuf>,
    #[arg(long = "origin", value_name = "REPO", help = ORIGIN_HELP)]
    origins: Vec<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Pull {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let how = Through {
            force: self.force,
            include: &self.include,
            exclude: &self.exclude,
            peers: &self.peers,
            peers_file: self.peers_file.as_deref(),
            origins: &self.origins,
        };
        pull(ctx, &self.reference, &self.dir, how, self.json)
    }
}

/// Copy a version into another repository (only the chunks it lacks), under the same digest.
#[derive(Args, Debug)]
#[command(
    after_help = "The version keeps its digest there, so either repository can serve it (`--origin`).\nA tag in REF moves there too. A folder that does not exist becomes a repository; a bucket must be `sealvol init`ed.\n\nExamples:\n  sealvol volume mirror weights/qwen3-8b:prod --to s3://models-eu/sealvol\n  sealvol --repo s3://models-eu/sealvol volume mirror weights/qwen3-8b@9f3c1a2b --to /srv/sealvol"
)]
pub struct Mirror {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    /// The repository to copy into: a directory or s3://BUCKET/PREFIX (r2://, cw://). With --remote, the name of one of the server's destinations (`serve --mirror-to NAME=REPO`): the server copies it as a job.
    #[arg(long, value_name = "REPO")]
    to: String,
    /// With --remote: hand the job to the server, print its id, return.
    #[arg(long)]
    detach: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Mirror {
    fn run(self, ctx: &Ctx) -> Result<()> {
        match &ctx.settings.remote {
            // On a remote engine the server copies, to a destination of its own.
            Some(_) => {
                jobs::mirror_on_server(ctx, &self.reference, &self.to, self.detach, self.json)
            }
            None if self.detach => Err(sealvol_core::Error::usage(
                "--detach is for a mirror job on a server (--remote)",
            )
            .hint("a local mirror runs in the foreground")),
            None => mirror(ctx, &self.reference, &self.to, self.json),
        }
    }
}

pub fn push(
    ctx: &Ctx,
    dir: &Path,
    volume: &str,
    tags: &[String],
    labels: &[String],
    allow_empty: bool,
    as_json: bool,
) -> Result<()> {
    let volume = VolumeName::parse(volume)?;
    let labels = sealvol_core::labels::parse(labels)?;
    let tags = tags
        .iter()
        .map(|t| Name::parse("tag", t))
        .collect::<Result<Vec<_>>>()?;
    if !allow_empty && dir.is_dir() && !holds_a_file(dir) {
        return Err(sealvol_core::Error::invalid(format!(
            "{} holds no file: nothing to seal",
            name(&dir.display().to_string())
        ))
        .hint("check the path; to seal an empty version on purpose, pass --allow-empty"));
    }
    let repo = ctx.open_repo(true)?;
    let progress = ctx.progress();
    let report = push_dir(
        &repo,
        dir,
        &volume,
        &tags,
        &PushOptions {
            cancel: None,
            guard: None,
            source: None,
            stat_cache: Some(&StatCacheDir(&ctx.settings.state)),
            progress: progress.as_ref(),
            labels: labels.clone(),
        },
    )?;
    let ignored = labels_not_applied(&repo, &report, &labels)?;
    let requests = repo.requests();
    if as_json {
        let mut v = push_json(&report);
        v["requests"] = serde_json::json!(requests);
        if !ignored.is_empty() {
            v["labels_not_applied"] = serde_json::json!(ignored);
        }
        if let Some(at) = sealvol_setup::created_repository() {
            v["created_repository"] = serde_json::json!(at);
        }
        return json(&v);
    }
    if !ignored.is_empty() {
        // Said even with --quiet: what was asked for did not happen.
        errln!(
            "labels not applied: {} was already sealed, and a version's labels are those it was sealed with",
            report.pinned_ref()
        );
        errln!(
            "  add them with `sealvol volume label {} {}`",
            report.pinned_ref(),
            ignored
                .iter()
                .map(|(k, v)| crate::output::quoted(&format!("{k}={v}")))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    if !ctx.quiet {
        errln!("{}", push_summary(&report));
        if let Some(r) = requests {
            errln!("{}", requests_line(&r, report.stats.bytes));
        }
        for t in &report.tags {
            errln!("{}", tag_line(t));
        }
    }
    outln!("{}", report.pinned_ref())
}

/// The labels a push asked for that the version it sealed does not carry: it was
/// sealed before (by anyone), so its labels stayed as they were.
fn labels_not_applied(
    repo: &sealvol_core::Repository,
    report: &PushReport,
    asked: &sealvol_core::labels::Labels,
) -> Result<sealvol_core::labels::Labels> {
    if report.sealed_new || asked.is_empty() {
        return Ok(Default::default());
    }
    let m = repo.manifest(&report.volume, &report.digest)?;
    let now = repo.labels_now(&report.volume, &report.digest, &m.provenance.labels)?;
    Ok(asked
        .iter()
        .filter(|(k, v)| now.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect())
}

/// `push --json`: the report.
fn push_json(r: &PushReport) -> serde_json::Value {
    serde_json::json!({
        "ref": r.pinned_ref(),
        "volume": r.volume.to_string(),
        "digest": r.digest.to_string(),
        "sealed_new": r.sealed_new,
        "files": r.stats.files,
        "bytes": r.stats.bytes,
        "bytes_read": r.bytes_read,
        "new_bytes": r.stats.new_bytes,
        "new_chunks": r.stats.new_chunks,
        "chunks_reused": r.chunks_reused,
        "files_healed": r.files_healed,
        "files_unchanged": r.files_unchanged,
        "seconds": r.elapsed.as_secs_f64(),
        "tags": r.tags,
    })
}

/// What a push read and wrote. A rate is shown only for a read long enough to have
/// one; a re-push that read nothing says what it skipped instead.
fn push_summary(r: &PushReport) -> String {
    let secs = r.elapsed.as_secs_f64();
    let read = match (r.bytes_read, secs) {
        (0, _) => "read nothing".to_string(),
        (n, s) if s >= 0.5 => format!(
            "read {} in {s:.1} s ({}/s)",
            size(n),
            size((n as f64 / s) as u64)
        ),
        (n, _) => format!("read {}", size(n)),
    };
    let wrote = match r.stats.new_chunks {
        0 => "no new chunks".to_string(),
        n => format!("new {} in {n} chunk(s)", size(r.stats.new_bytes)),
    };
    let mut parts = vec![read, wrote];
    if r.chunks_reused > 0 {
        parts.push(format!("{} chunk(s) reused", r.chunks_reused));
    }
    if r.files_unchanged > 0 {
        parts.push(format!(
            "{} unchanged file(s) skipped without reading (stat cache)",
            r.files_unchanged
        ));
    }
    if r.files_healed > 0 {
        parts.push(format!(
            "healed {} stored file(s) whose chunks were damaged",
            r.files_healed
        ));
    }
    if !r.sealed_new {
        parts.push("this version was already sealed".into());
    }
    parts.join("; ")
}

/// What a push or pull cost in requests, for a repository on an object store.
pub(crate) fn requests_line(r: &sealvol_core::store::Requests, bytes: u64) -> String {
    format!(
        "{} request(s) to the repository ({} GET, {} PUT, {} LIST, {} HEAD, {} DELETE; {:.0} per GiB); {} sent, {} received",
        r.total(),
        r.gets,
        r.puts,
        r.lists,
        r.heads,
        r.deletes,
        r.per_gib(bytes),
        size(r.bytes_sent),
        size(r.bytes_received)
    )
}

/// How a pull reads: over what is in its folder (`--force`), and through which peers
/// and mirrored origins.
pub struct Through<'a> {
    pub force: bool,
    /// Which paths (`--include`, `--exclude`); all when both are empty.
    pub include: &'a [String],
    pub exclude: &'a [String],
    pub peers: &'a [String],
    /// `--peers-file`: a ring that may change while the pull runs.
    pub peers_file: Option<&'a Path>,
    pub origins: &'a [String],
}

pub fn pull(ctx: &Ctx, reference: &str, dir: &Path, how: Through, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    // Checked before anything is read: a bad pattern is an error with nothing written.
    let filter = match how.include.is_empty() && how.exclude.is_empty() {
        true => None,
        false => Some(sealvol_source::Filter::new(how.include, how.exclude)?),
    };
    let takes = |p: &str| filter.as_ref().is_none_or(|f| f.takes(p));
    // A pull fills the node cache for the mounts that follow (with what they could not
    // read again from the repository itself: `read_tiers`).
    let tiers = ctx.read_tiers(how.peers, how.peers_file, how.origins, Fill::Inline)?;
    let repo = tiers.repo();
    let digest = repo.resolve(&r)?;
    // Before a byte is written: a version the policy refuses is never pulled.
    ctx.settings.policy()?.admit(repo, &r.volume, &digest)?;
    let progress = ctx.progress();
    let report = sealvol_core::pull::pull_selected(
        &tiers,
        &r.volume,
        &digest,
        dir,
        how.force,
        filter
            .is_some()
            .then_some(&takes as sealvol_core::pull::Select),
        progress.as_ref(),
    )?;
    let pinned = Ref::pinned(r.volume.clone(), digest);
    let requests = tiers.repo().requests();
    if as_json {
        return json(&serde_json::json!({
            "ref": pinned.to_string(),
            "dir": dir.display().to_string(),
            "report": report,
            "requests": requests,
            "tiers": tiers.counters.snapshot(),
        }));
    }
    if ctx.quiet {
        return Ok(());
    }
    if report.temporaries_removed > 0 {
        errln!(
            "removed {} temporary file(s) an interrupted pull left",
            report.temporaries_removed
        );
    }
    if !report.removed.is_empty() {
        errln!(
            "removed {} path(s) the version does not hold:",
            report.removed.len()
        );
        const SHOWN: usize = 20;
        for p in report.removed.iter().take(SHOWN) {
            errln!("  - {}", name(p));
        }
        if report.removed.len() > SHOWN {
            errln!(
                "  … and {} more (--json lists them all)",
                report.removed.len() - SHOWN
            );
        }
    }
    if report.kept > 0 {
        errln!(
            "kept {} file(s) already there with the version's bytes",
            report.kept
        );
    }
    let part = match filter {
        Some(_) => " (the paths --include/--exclude take)",
        None => "",
    };
    errln!(
        "pulled {pinned}: {} file(s), {} into {}{part}",
        report.files,
        size(report.bytes),
        name(&dir.display().to_string())
    );
    if let Some(r) = requests {
        errln!("{}", requests_line(&r, report.bytes));
    }
    Ok(())
}

/// Whether anything but folders lies below `dir` (a file or a link), found at the
/// first one; an unreadable folder counts as holding something (the push says why).
fn holds_a_file(dir: &Path) -> bool {
    let mut folders = vec![dir.to_path_buf()];
    while let Some(d) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            return true;
        };
        for e in entries {
            let Ok(e) = e else { return true };
            match e.file_type() {
                Ok(t) if t.is_dir() => folders.push(e.path()),
                _ => return true,
            }
        }
    }
    false
}

/// `volume mirror REF --to REPO`.
pub fn mirror(ctx: &Ctx, reference: &str, to: &str, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let address = sealvol_s3repo::Address::parse(to)?;
    if address.is_same_repository(&ctx.settings.repo) {
        return Err(sealvol_core::Error::invalid(format!(
            "--to {address} is the repository the version is read from"
        ))
        .hint("give --to another repository: a folder, or s3://BUCKET/PREFIX"));
    }
    let src = ctx.open_repo(false)?;
    // Resolved before the destination is opened: an unknown ref creates nothing.
    src.resolve(&r)?;
    let dest = ctx.open_at(&address, sealvol_s3repo::Mode::CreateLocal)?;
    let progress = ctx.progress();
    let report = sealvol_core::mirror::mirror(&src, &dest, &r, progress.as_ref())?;
    let pinned = format!("vol:{}@{}", report.volume, report.digest);
    if as_json {
        return json(&serde_json::json!({
            "ref": pinned,
            "to": dest.location(),
            "report": report,
            "requests": dest.requests(),
        }));
    }
    if !ctx.quiet {
        let to = name(dest.location());
        match report.new {
            true => errln!(
                "mirrored {pinned} to {to}: {} file(s), {} chunk(s) copied ({}), {} already there",
                report.files_copied,
                report.chunks_copied,
                size(report.bytes_copied),
                report.chunks_present,
            ),
            false => errln!("{to} already holds {pinned}: nothing copied"),
        }
        // The tag REF named is pointed there too (README: "Mirrored origins").
        for t in &report.tags {
            errln!("{} (in {to})", tag_line(t));
        }
    }
    println!("{pinned}");
    Ok(())
}
