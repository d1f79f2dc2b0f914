//! `sealvol volume …`: each subcommand is a thin wrapper that parses input, calls the
//! engine and prints for people (tables) or for programs (`--json`).

use serde::Serialize;

use std::sync::Arc;

use sealvol_core::cache::ChunkCache;
use sealvol_core::digest::Entry;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::{Fill, Tiers};
use sealvol_core::registry::TagChange;
use sealvol_core::verify::{VerifyReport, verify_all, verify_version};
use sealvol_core::{Error, ErrorKind, Name, Ref, Repository, Result, VolumeName};
use sealvol_node::state::StatCacheDir;

use super::Ctx;
use crate::cli::VolumeCommand;
use crate::output::{json, name, size, table, when};

pub fn run(ctx: &Ctx, cmd: VolumeCommand) -> Result<()> {
    match cmd {
        VolumeCommand::Push { dir, volume, tags } => {
            let volume = VolumeName::parse(&volume)?;
            let tags = tags
                .iter()
                .map(|t| Name::parse("tag", t))
                .collect::<Result<Vec<_>>>()?;
            let repo = ctx.open_repo(true)?;
            let progress = ctx.progress();
            let report = push(
                &repo,
                &dir,
                &volume,
                &tags,
                &PushOptions {
                    source: None,
                    stat_cache: Some(&StatCacheDir(&ctx.settings.state)),
                    progress: progress.as_ref(),
                },
            )?;
            if !ctx.quiet {
                let secs = report.elapsed.as_secs_f64();
                eprintln!(
                    "read {} in {secs:.2} s ({}/s); new {} in {} chunks, {} chunks reused; {} unchanged file(s) skipped{}",
                    size(report.bytes_read),
                    size((report.bytes_read as f64 / secs.max(1e-9)) as u64),
                    size(report.stats.new_bytes),
                    report.stats.new_chunks,
                    report.chunks_reused,
                    report.files_unchanged,
                    if report.sealed_new {
                        ""
                    } else {
                        "; this version was already sealed"
                    },
                );
                for t in &report.tags {
                    eprintln!("{}", tag_line(t));
                }
            }
            outln!("{}", report.pinned_ref())?;
            Ok(())
        }
        VolumeCommand::Sync {
            source,
            volume,
            tags,
            secret,
            include,
            exclude,
            detach,
            json,
        } => super::jobs::sync(
            ctx,
            super::jobs::SyncRequest {
                source,
                volume,
                tags,
                secret,
                include,
                exclude,
                detach,
                json,
            },
        ),
        VolumeCommand::Ls {
            namespace,
            json: as_json,
        } => {
            let ns = namespace
                .as_deref()
                .map(|n| Name::parse("namespace", n))
                .transpose()?;
            let repo = ctx.open_repo(false)?;
            let vols = repo.volume_infos(ns.as_ref())?;
            if as_json {
                json(&serde_json::json!({ "volumes": vols }))?;
            } else if vols.is_empty() {
                eprintln!("no volumes yet; push one with `sealvol volume push DIR NS/NAME`");
            } else {
                let rows: Vec<Vec<String>> = vols
                    .iter()
                    .map(|v| {
                        vec![
                            v.namespace.clone(),
                            v.name.clone(),
                            v.versions.to_string(),
                            size(v.latest_bytes),
                            when(&v.updated),
                            v.tags.join(","),
                        ]
                    })
                    .collect();
                table(
                    &[
                        "NAMESPACE",
                        "VOLUME",
                        "VERSIONS",
                        "LATEST",
                        "UPDATED",
                        "TAGS",
                    ],
                    &rows,
                )?;
            }
            Ok(())
        }
        VolumeCommand::Versions {
            volume,
            json: as_json,
        } => {
            let volume = VolumeName::parse(&volume)?;
            let repo = ctx.open_repo(false)?;
            let versions = repo.versions(&volume)?;
            if versions.is_empty() {
                return Err(Error::not_found(format!("no volume {volume}"))
                    .hint("list volumes with `sealvol volume ls`"));
            }
            if as_json {
                json(&serde_json::json!({ "volume": volume.to_string(), "versions": versions }))?;
            } else {
                let rows: Vec<Vec<String>> = versions
                    .iter()
                    .map(|v| {
                        vec![
                            v.digest.chars().take(15).collect(),
                            when(&v.created),
                            size(v.bytes),
                            v.files.to_string(),
                            size(v.new_bytes),
                            v.tags.join(","),
                        ]
                    })
                    .collect();
                table(
                    &["DIGEST", "CREATED", "SIZE", "FILES", "NEW", "TAGS"],
                    &rows,
                )?;
            }
            Ok(())
        }
        VolumeCommand::Files {
            reference,
            json: as_json,
        } => {
            let r = Ref::parse(&reference)?;
            let repo = ctx.open_repo(false)?;
            let digest = repo.resolve(&r)?;
            let m = repo.manifest(&r.volume, &digest)?;
            if as_json {
                json(&serde_json::json!({
                    "ref": format!("vol:{}@{digest}", r.volume),
                    "files": m.entries,
                }))?;
            } else {
                let rows: Vec<Vec<String>> = m
                    .entries
                    .iter()
                    .map(|e| match e {
                        Entry::File {
                            path,
                            size: n,
                            hash,
                            exec,
                        } => vec![
                            size(*n),
                            format!("b3:{}", &hash.hex()[..16]),
                            format!("{}{}", name(path), if *exec { "*" } else { "" }),
                        ],
                        Entry::Symlink { path, target } => vec![
                            "-".into(),
                            "link".into(),
                            format!("{} -> {}", name(path), name(target)),
                        ],
                        Entry::Dir { path } => {
                            vec!["-".into(), "dir".into(), format!("{}/", name(path))]
                        }
                    })
                    .collect();
                table(&["SIZE", "HASH", "PATH"], &rows)?;
            }
            Ok(())
        }
        VolumeCommand::Tag { reference, tag } => {
            let r = Ref::parse(&reference)?;
            let tag = Name::parse("tag", &tag)?;
            let repo = ctx.open_repo(false)?;
            let to = repo.resolve(&r)?;
            let moved = repo.move_tag(&r.volume, &tag, &to, None)?;
            if !ctx.quiet {
                eprintln!(
                    "{}",
                    tag_line(&TagChange {
                        tag: tag.to_string(),
                        from: moved.from,
                        to: to.to_string(),
                        moved: moved.moved,
                    })
                );
            }
            outln!("vol:{}@{to}", r.volume)?;
            Ok(())
        }
        VolumeCommand::Tags {
            volume,
            history,
            json: as_json,
        } => {
            let volume = VolumeName::parse(&volume)?;
            let repo = ctx.open_repo(false)?;
            if repo.version_digests(&volume)?.is_empty() {
                return Err(Error::not_found(format!("no volume {volume}"))
                    .hint("list volumes with `sealvol volume ls`"));
            }
            let tags = repo.tags(&volume)?;
            if as_json {
                json(&serde_json::json!({ "volume": volume.to_string(), "tags": tags }))?;
                return Ok(());
            }
            if tags.is_empty() {
                eprintln!("{volume} has no tags; add one with `sealvol volume tag REF TAG`");
                return Ok(());
            }
            if history {
                for t in &tags {
                    outln!("{} -> {}", t.tag, short(&t.digest))?;
                    for m in t.history.iter().rev() {
                        outln!(
                            "  {}  {} -> {}  by {}",
                            when(&m.at),
                            m.from
                                .as_deref()
                                .map(short)
                                .unwrap_or_else(|| "(new)".into()),
                            short(&m.to),
                            m.by
                        )?;
                    }
                }
            } else {
                let rows: Vec<Vec<String>> = tags
                    .iter()
                    .map(|t| {
                        vec![
                            t.tag.clone(),
                            short(&t.digest),
                            t.history.last().map(|m| when(&m.at)).unwrap_or_default(),
                            t.history.len().to_string(),
                        ]
                    })
                    .collect();
                table(&["TAG", "DIGEST", "MOVED", "MOVES"], &rows)?;
            }
            Ok(())
        }
        VolumeCommand::Diff {
            from,
            to,
            all,
            json: as_json,
        } => {
            let (ra, rb) = (Ref::parse(&from)?, Ref::parse(&to)?);
            let repo = ctx.open_repo(false)?;
            let (da, db) = (repo.resolve(&ra)?, repo.resolve(&rb)?);
            let d = sealvol_core::diff::diff(&repo, (&ra.volume, &da), (&rb.volume, &db))?;
            if as_json {
                json(&d)?;
            } else {
                print_diff(&d, all)?;
            }
            Ok(())
        }
        VolumeCommand::Pull {
            reference,
            dir,
            force,
        } => {
            let r = Ref::parse(&reference)?;
            let repo = ctx.open_repo(false)?;
            let digest = repo.resolve(&r)?;
            let progress = ctx.progress();
            let cache = ChunkCache::open(&ctx.settings.cache, ctx.settings.cache_size)?;
            // A pull fills the node cache for the mounts that follow.
            let tiers = Tiers::with_fill(Arc::new(repo), Some(Arc::new(cache)), Fill::Inline);
            let report = sealvol_core::pull::pull(
                &tiers,
                &r.volume,
                &digest,
                &dir,
                force,
                progress.as_ref(),
            )?;
            if !ctx.quiet {
                if report.temporaries_removed > 0 {
                    eprintln!(
                        "removed {} temporary file(s) an interrupted pull left",
                        report.temporaries_removed
                    );
                }
                if !report.removed.is_empty() {
                    eprintln!(
                        "removed {} path(s) the version does not hold:",
                        report.removed.len()
                    );
                    const SHOWN: usize = 20;
                    for p in report.removed.iter().take(SHOWN) {
                        eprintln!("  - {}", name(p));
                    }
                    if report.removed.len() > SHOWN {
                        eprintln!("  … and {} more", report.removed.len() - SHOWN);
                    }
                }
                eprintln!(
                    "pulled vol:{}@{digest}: {} file(s), {} into {}",
                    r.volume,
                    report.files,
                    size(report.bytes),
                    dir.display()
                );
            }
            Ok(())
        }
        VolumeCommand::Mount {
            reference,
            dir,
            cache,
            cache_size,
            foreground,
            requested,
        } => super::mount::mount(
            ctx,
            super::mount::Request {
                reference,
                dir,
                cache,
                cache_size,
                foreground,
                requested,
            },
        ),
        VolumeCommand::Unmount { dir, lazy } => super::mount::unmount(ctx, &dir, lazy),
        VolumeCommand::Mounts { json } => super::mount::list(ctx, json),
        VolumeCommand::Verify {
            reference,
            json: as_json,
        } => {
            let repo = ctx.open_repo(false)?;
            let progress = ctx.progress();
            let report = match &reference {
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
                .hint(
                    "restore the damaged objects from a mirror, or re-push the affected versions",
                ))
            }
        }
    }
}

/// What a tag move did, as the compare-and-swap saw it.
fn tag_line(t: &TagChange) -> String {
    let to = short(&t.to);
    match (&t.from, t.moved) {
        (_, false) => format!("tag {} already points at {to}", t.tag),
        (Some(from), true) => format!("tag {}: {} -> {to}", t.tag, short(from)),
        (None, true) => format!("tag {} -> {to} (new)", t.tag),
    }
}

fn short(digest: &str) -> String {
    digest.chars().take(15).collect()
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
        outln!("damaged: {}: {}", p.object, p.problem)?;
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

fn print_diff(d: &sealvol_core::diff::VersionDiff, all: bool) -> Result<()> {
    use sealvol_core::diff::Status;
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
