//! `volume ls | versions | files | resolve`: what the repository holds.

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::digest::Entry;
use sealvol_core::{Error, Name, Ref, Result, VolumeName};
use sealvol_views::format::{short_digest, tags};
use serde::Serialize;

use crate::args::{JSON_HELP, REF_HELP};
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::{json, name, size, table, when};

/// List namespaces and volumes.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol volume ls weights")]
pub struct Ls {
    /// Only this namespace (an error if it holds no volume).
    pub namespace: Option<String>,
    #[arg(long, help = JSON_HELP)]
    pub json: bool,
}

impl Run for Ls {
    fn run(self, ctx: &Ctx) -> Result<()> {
        ls(ctx, self.namespace.as_deref(), self.json)
    }
}

/// List the versions of a volume, newest first.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol volume versions weights/qwen3-8b --json")]
pub struct Versions {
    /// Volume: NAMESPACE/NAME.
    #[arg(add = ArgValueCompleter::new(complete::volumes))]
    volume: String,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Versions {
    fn run(self, ctx: &Ctx) -> Result<()> {
        versions(ctx, &self.volume, self.json)
    }
}

/// List the files of a version.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol volume files weights/qwen3-8b:prod")]
pub struct Files {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Files {
    fn run(self, ctx: &Ctx) -> Result<()> {
        files(ctx, &self.reference, self.json)
    }
}

/// Print the pinned ref (NS/NAME@b3:DIGEST) a ref resolves to now, for scripts.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  sealvol volume resolve weights/qwen3-8b:prod\n  vol:weights/qwen3-8b@b3:9f3c…"
)]
pub struct Resolve {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Resolve {
    fn run(self, ctx: &Ctx) -> Result<()> {
        resolve(ctx, &self.reference, self.json)
    }
}

pub fn ls(ctx: &Ctx, namespace: Option<&str>, as_json: bool) -> Result<()> {
    let ns = namespace.map(|n| Name::parse("namespace", n)).transpose()?;
    let repo = ctx.open_repo(false)?;
    let vols = repo.volume_infos(ns.as_ref())?;
    if let Some(ns) = &ns
        && vols.is_empty()
    {
        let mut known: Vec<String> = repo
            .volume_infos(None)?
            .into_iter()
            .map(|v| v.namespace)
            .collect();
        known.dedup();
        return Err(Error::not_found(format!("no namespace {ns}")).hint(
            match known.is_empty() {
                true => "the repository holds no volumes yet; push one with `sealvol volume push DIR NS/NAME`".to_string(),
                false => format!("namespaces here: {}", known.join(", ")),
            },
        ));
    }
    if as_json {
        return json(&serde_json::json!({ "volumes": vols }));
    }
    if vols.is_empty() {
        errln!("no volumes yet; push one with `sealvol volume push DIR NS/NAME`");
        return Ok(());
    }
    warn_damaged(vols.iter().map(|v| v.damaged).sum());
    let rows: Vec<Vec<String>> = vols
        .iter()
        .map(|v| {
            vec![
                v.namespace.clone(),
                v.name.clone(),
                match v.trashed {
                    0 => v.versions.to_string(),
                    n => format!("{} (+{n} in trash)", v.versions),
                },
                size(v.latest_bytes),
                when(&v.updated),
                {
                    let mut t = tags(&v.tags);
                    if v.expired_tags > 0 {
                        t.push_str(&format!(" (+{} expired)", v.expired_tags));
                    }
                    match v.damaged {
                        0 => t,
                        n => format!("{t} [{n} damaged: see `sealvol volume verify`]"),
                    }
                },
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
    )
}

pub fn versions(ctx: &Ctx, volume: &str, as_json: bool) -> Result<()> {
    let volume = VolumeName::parse(volume)?;
    let repo = ctx.open_repo(false)?;
    let versions = repo.versions(&volume)?;
    if versions.is_empty() {
        let trashed = repo.trash(Some(&volume)).map(|t| t.len()).unwrap_or(0);
        if trashed > 0 {
            // Known, but everything is in the trash: an empty list, said so.
            if as_json {
                return json(
                    &serde_json::json!({ "volume": volume.to_string(), "versions": versions }),
                );
            }
            errln!(
                "{volume} has no versions outside the trash ({trashed} there: `sealvol volume trash {volume}`)"
            );
            return Ok(());
        }
        return Err(repo.unknown_volume(&volume));
    }
    if as_json {
        return json(&serde_json::json!({ "volume": volume.to_string(), "versions": versions }));
    }
    warn_damaged(versions.iter().filter(|v| v.damaged.is_some()).count());
    // The labels column only where some version has labels.
    let labelled = versions.iter().any(|v| !v.labels.is_empty());
    let rows: Vec<Vec<String>> = versions
        .iter()
        .map(|v| {
            if v.damaged.is_some() {
                let mut row = vec![short_digest(&v.digest), "damaged".into()];
                row.extend(["-", "-", "-"].map(String::from));
                row.push(tags(&v.tags));
                if labelled {
                    row.push(String::new());
                }
                row.push(String::new());
                return row;
            }
            let mut row = vec![
                short_digest(&v.digest),
                when(&v.created),
                size(v.bytes),
                v.files.to_string(),
                size(v.new_bytes),
                tags_and_expired(&v.tags, &v.expired_tags),
            ];
            if labelled {
                row.push(sealvol_core::labels::shown(&v.labels));
            }
            // Where it came from: a folder pushed, or the address a sync listed.
            row.push(name(&v.source).into_owned());
            row
        })
        .collect();
    let mut head = vec!["DIGEST", "CREATED", "SIZE", "FILES", "NEW TO REPO", "TAGS"];
    if labelled {
        head.push("LABELS");
    }
    head.push("SOURCE");
    table(&head, &rows)
}

/// Damaged manifests and tags are listed, marked, and counted once on stderr.
fn warn_damaged(n: usize) {
    if n > 0 {
        errln!(
            "warning: {n} damaged manifest(s) or tag(s); `sealvol volume verify` says what is wrong, `sealvol repair` what can be fixed"
        );
    }
}

/// One entry of `volume files --json`: hashes carry their `b3:` prefix, as in the text.
#[derive(Serialize)]
struct FileJson<'a> {
    path: &'a str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hash: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    exec: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
}

impl<'a> From<&'a Entry> for FileJson<'a> {
    fn from(e: &'a Entry) -> Self {
        let blank = FileJson {
            path: e.path(),
            kind: "file",
            size: None,
            hash: None,
            exec: false,
            target: None,
        };
        match e {
            Entry::File {
                size, hash, exec, ..
            } => FileJson {
                size: Some(*size),
                hash: Some(format!("b3:{}", hash.hex())),
                exec: *exec,
                ..blank
            },
            Entry::Symlink { target, .. } => FileJson {
                kind: "link",
                target: Some(target),
                ..blank
            },
            Entry::Dir { .. } => FileJson {
                kind: "dir",
                ..blank
            },
        }
    }
}

pub fn files(ctx: &Ctx, reference: &str, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let repo = ctx.open_repo(false)?;
    let digest = repo.resolve(&r)?;
    let m = repo.manifest(&r.volume, &digest)?;
    if as_json {
        let files: Vec<FileJson> = m.entries.iter().map(FileJson::from).collect();
        return json(&serde_json::json!({
            "ref": format!("vol:{}@{digest}", r.volume),
            "files": files,
        }));
    }
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
            Entry::Dir { path } => vec!["-".into(), "dir".into(), format!("{}/", name(path))],
        })
        .collect();
    table(&["SIZE", "HASH", "PATH"], &rows)
}

/// The pinned ref a ref resolves to now, alone on stdout: for scripts and configs.
pub fn resolve(ctx: &Ctx, reference: &str, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let repo = ctx.open_repo(false)?;
    let digest = repo.resolve(&r)?;
    let pinned = Ref::pinned(r.volume.clone(), digest);
    if as_json {
        return json(&serde_json::json!({
            "requested": reference,
            "ref": pinned.to_string(),
            "volume": r.volume.to_string(),
            "digest": digest.to_string(),
        }));
    }
    outln!("{pinned}")
}

/// A version's tags, then those that point at it but have expired, marked so.
fn tags_and_expired(live: &[String], expired: &[String]) -> String {
    let mut all: Vec<String> = live.to_vec();
    all.extend(expired.iter().map(|t| format!("{t} (expired)")));
    tags(&all)
}
