//! `sealvol volume mount | unmount | mounts`.
//!
//! A background mount is this same binary re-run with `--foreground`: the flags that
//! make it are this module's, starting it, serving it and unmounting it are the mount
//! engine's (`sealvol_mount::process`), what is printed is this module's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::cache::ChunkCache;
use sealvol_core::registry::now_rfc3339;
use sealvol_core::{Digest, Error, Ref, Result, VolumeName};
use sealvol_mount::process;
use sealvol_mount::records::{self as records, MountRecord};
use sealvol_mount::{self as mount, MountOptions};
use sealvol_setup::settings::{Peers, parse_size};
use sealvol_views::format::short_digest;

use super::{Ctx, Run, group};
use crate::args::{JSON_HELP, ORIGIN_HELP, PEER_HELP, PEERS_FILE_HELP, REF_HELP};
use crate::complete;
use crate::output::{json, name, size, table};

/// Mount a version read-only at DIR; bytes stream lazily through the node cache.
#[derive(Args, Debug)]
#[command(
    after_help = "A tag resolves once, at mount time: the mount keeps serving that digest when the tag moves.\n\nExamples:\n  sealvol volume mount weights/qwen3-8b:prod /models/qwen\n  sealvol volume mount weights/qwen3-8b@9f3c1a2b /models/qwen --cache /nvme/sealvol --cache-size 200G --foreground"
)]
pub struct Mount {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    pub reference: String,
    /// An existing, empty directory.
    pub dir: PathBuf,
    /// Node-disk cache directory, shared by every mount and pull [default: from config]
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Bound of the node-disk cache, e.g. 500M, 20G [default: from config, else 20G]
    #[arg(long, value_name = "BYTES")]
    pub cache_size: Option<String>,
    /// Memory for read-ahead and recent chunks, e.g. 256M [default: from config, else 1/32 of RAM, 64M to 512M]
    #[arg(long, value_name = "BYTES")]
    pub prefetch_memory: Option<String>,
    /// How long a read waits for its bytes, retrying a failing origin, before it fails with EIO (1s to 1h)
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = humantime::parse_duration)]
    pub read_timeout: Duration,
    // Cache servers to read through; none: config.toml's `peers`.
    #[arg(long = "peer", value_name = "URL", help = PEER_HELP)]
    pub peers: Vec<String>,
    // A file listing them, followed while the mount runs.
    #[arg(long, value_name = "FILE", help = PEERS_FILE_HELP, conflicts_with = "peers")]
    pub peers_file: Option<PathBuf>,
    // Mirrored origins; none: config.toml's `mirrors`.
    #[arg(long = "origin", value_name = "REPO", help = ORIGIN_HELP)]
    pub origins: Vec<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics: bytes, chunks and requests per tier, hit ratios, latency histograms, errors (e.g. 127.0.0.1:9464)
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Stay attached; Ctrl-C or SIGTERM unmounts. Otherwise the mount runs in the background.
    #[arg(long)]
    pub foreground: bool,
    /// The ref as the user gave it, passed to a background mount (internal).
    #[arg(long, hide = true)]
    pub requested: Option<String>,
    /// The caller says what was mounted (`deploy mount`, one line per volume).
    #[arg(skip)]
    pub quiet: bool,
}

impl Run for Mount {
    fn run(self, ctx: &Ctx) -> Result<()> {
        mount(ctx, self)
    }
}

/// Unmount a mount made by `volume mount`, and stop the process serving it.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol volume unmount /models/qwen")]
pub struct Unmount {
    /// The mount point.
    dir: PathBuf,
    /// Detach now even if files are open under it; it goes when they close.
    #[arg(long)]
    lazy: bool,
}

impl Run for Unmount {
    fn run(self, ctx: &Ctx) -> Result<()> {
        unmount(ctx, &self.dir, self.lazy)
    }
}

/// List active mounts: what digest each serves, bytes served, hits per tier.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol volume mounts --json")]
pub struct Mounts {
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Mounts {
    fn run(self, ctx: &Ctx) -> Result<()> {
        list(ctx, self.json)
    }
}

group! {
    /// `volume profile …`: the read orders mounts record and replay.
    #[derive(clap::Subcommand, Debug)]
    pub enum ProfileCommand {
        Save(SaveProfile),
    }
}

/// Store the read order this node's latest mount of REF recorded, beside the version.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  sealvol volume mount weights/qwen3-8b:prod /models/qwen\n  (start the model server once, so it loads the weights)\n  sealvol volume profile save weights/qwen3-8b:prod\n\nEvery later mount of that version, on any node, reads ahead in that order first.\nThe version stays sealed: a profile is advisory and never changes its digest."
)]
pub struct SaveProfile {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for SaveProfile {
    fn run(self, ctx: &Ctx) -> Result<()> {
        save_profile(ctx, &self.reference, self.json)
    }
}

fn records_dir(ctx: &Ctx) -> PathBuf {
    records::dir(&ctx.settings.state)
}

/// A mount's settings once flags, config.toml and defaults are resolved and checked.
struct Resolved {
    cache_dir: PathBuf,
    cache_bytes: u64,
    memory: usize,
    peers: Peers,
    origins: Vec<String>,
    metrics: Option<std::net::SocketAddr>,
}

pub fn mount(ctx: &Ctx, req: Mount) -> Result<()> {
    let r = Ref::parse(&req.reference)?;
    let cache_dir = req
        .cache
        .clone()
        .unwrap_or_else(|| ctx.settings.cache.clone());
    let cache_bytes = match &req.cache_size {
        Some(s) => parse_size(s)?,
        None => ctx.settings.cache_size,
    };
    let memory = match &req.prefetch_memory {
        Some(s) => Some(parse_size(s)?),
        None => ctx.settings.prefetch_memory,
    }
    .map(mount::Limits::check_memory)
    .transpose()?
    .unwrap_or(mount::Limits::default_memory() as usize);
    if !(Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&req.read_timeout) {
        return Err(Error::invalid(format!(
            "--read-timeout {} is out of range",
            humantime::format_duration(req.read_timeout)
        ))
        .hint("give 1s to 1h; the default, 60s, rides out an origin's bad minute"));
    }
    let set = Resolved {
        cache_dir,
        cache_bytes,
        memory,
        peers: ctx
            .settings
            .peers_or(&req.peers, req.peers_file.as_deref())?,
        origins: (ctx.settings.mirrors_or(&req.origins)?)
            .iter()
            .map(|a| a.to_string())
            .collect(),
        metrics: req
            .metrics
            .as_deref()
            .map(|m| {
                m.parse().map_err(|_| {
                    Error::invalid(format!("--metrics {m} is not an address"))
                        .hint("give an IP and a port, e.g. 127.0.0.1:9464 (0 for any free port)")
                })
            })
            .transpose()?,
    };
    let (repo, mirrors) = ctx.open_origins(&set.origins)?;
    let digest = repo.resolve(&r)?;
    // Before anything is claimed or started: a version the policy refuses is never served.
    ctx.settings.policy()?.admit(&repo, &r.volume, &digest)?;
    if !req.foreground {
        // Checked here too so that a bad mount point is reported with its own kind;
        // the claim is the mount process's own.
        mount::check_mount_point_free(&req.dir)?;
        return spawn_background(ctx, &r.volume, &digest, &req, &set);
    }
    crate::alloc::for_mount();
    let ready = process::ReadyPipe::from_env();
    let result = serve(ctx, (repo, mirrors), &r.volume, &digest, &req, &set, &ready);
    if let Err(e) = &result {
        ready.fail(e);
    }
    result
}

/// The repository and its mirrored origins.
type Origins = (
    Arc<sealvol_core::Repository>,
    Vec<Arc<sealvol_core::Repository>>,
);

fn serve(
    ctx: &Ctx,
    (repo, mirrors): Origins,
    volume: &VolumeName,
    digest: &Digest,
    req: &Mount,
    set: &Resolved,
    ready: &process::ReadyPipe,
) -> Result<()> {
    let cache = Arc::new(ChunkCache::open(&set.cache_dir, set.cache_bytes)?);
    // Catch SIGINT/SIGTERM before the mount exists: a signal that arrives the moment it
    // is ready must unmount it, not kill the process with the mount still up.
    let signals = crate::signals::Signals::catch()?;
    let limits = mount::Limits {
        memory: set.memory,
        read_timeout: req.read_timeout,
        ..mount::Limits::for_origin(repo.concurrency())
    };
    let (ring, listed) = sealvol_setup::ring(
        &set.peers,
        ctx.settings.api_key.as_ref().map(|k| k.expose()),
        &ctx.peer_trust(Some(&repo))?,
        ctx.note,
    )?;
    let m = mount::mount(
        repo,
        volume,
        digest,
        &req.dir,
        MountOptions {
            cache: Some(Arc::clone(&cache)),
            limits,
            ring: Arc::clone(&ring),
            mirrors,
            ..MountOptions::default()
        },
    )?;
    let dir = records_dir(ctx);
    let mut rec = MountRecord {
        pid: std::process::id(),
        dir: m.dir().display().to_string(),
        volume: volume.to_string(),
        digest: digest.to_string(),
        requested: req
            .requested
            .clone()
            .unwrap_or_else(|| req.reference.clone()),
        cache: Some(set.cache_dir.display().to_string()),
        started: now_rfc3339(),
        files: m.fs().tree().files(),
        bytes: m.fs().tree().bytes(),
        peers: listed,
        ring: ring.stats(),
        metrics: None,
        stats: m.stats(),
    };
    if let Some(addr) = set.metrics {
        let fs = m.shared_fs();
        let info = sealvol_mount::metrics::MountInfo {
            volume: volume.to_string(),
            digest: digest.to_string(),
            dir: rec.dir.clone(),
        };
        let cache = Arc::clone(&cache);
        let render = Arc::new(move || {
            let held = sealvol_core::prometheus::CacheState::of(&cache);
            sealvol_mount::metrics::mount_text(&info, &fs.stats(), Some(held))
        });
        match sealvol_serve::metrics::expose("--metrics", addr, render) {
            Ok(bound) => rec.metrics = Some(format!("http://{bound}/metrics")),
            Err(e) => {
                let _ = m.unmount();
                return Err(e);
            }
        }
    }
    if let Err(e) = records::write(&dir, &rec) {
        let _ = m.unmount();
        return Err(e);
    }
    if !ctx.quiet && !req.quiet {
        errln!(
            "mounted vol:{volume}@{digest} at {} ({} file(s), {}){}",
            rec.dir,
            rec.files,
            size(rec.bytes),
            if req.foreground && !ready.is_set() {
                "; Ctrl-C unmounts"
            } else {
                ""
            }
        );
    }
    ready.ok();
    let stopped =
        process::serving::until_stopped(&m, &mut rec, &dir, &ctx.settings.state, |poll| {
            signals.wait(Duration::from_millis(100), poll)
        });
    let result = m.unmount();
    if !ctx.quiet {
        errln!("unmounted {} ({stopped})", rec.dir);
    }
    result
}

fn spawn_background(
    ctx: &Ctx,
    volume: &VolumeName,
    digest: &Digest,
    req: &Mount,
    set: &Resolved,
) -> Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::io("cannot find this program", Path::new("sealvol"), e))?;
    let abs = std::path::absolute(&req.dir).unwrap_or_else(|_| req.dir.clone());
    let mut args: Vec<OsString> = ctx.repo_args();
    args.extend([
        "--state".into(),
        ctx.settings.state.clone().into_os_string(),
    ]);
    args.extend(["volume".into(), "mount".into()]);
    args.push(format!("vol:{volume}@{digest}").into());
    args.push(abs.clone().into_os_string());
    args.extend(["--cache".into(), set.cache_dir.clone().into_os_string()]);
    args.extend(["--cache-size".into(), set.cache_bytes.to_string().into()]);
    args.extend(["--prefetch-memory".into(), set.memory.to_string().into()]);
    args.extend([
        "--read-timeout".into(),
        format!("{}ms", req.read_timeout.as_millis()).into(),
    ]);
    match &set.peers {
        Peers::Urls(urls) => {
            for p in urls {
                args.extend(["--peer".into(), p.into()]);
            }
        }
        Peers::File(f) => args.extend(["--peers-file".into(), f.clone().into_os_string()]),
    }
    for o in &set.origins {
        args.extend(["--origin".into(), o.into()]);
    }
    if let Some(a) = set.metrics {
        args.extend(["--metrics".into(), a.to_string().into()]);
    }
    args.push("--foreground".into());
    args.extend([
        "--requested".into(),
        req.requested.as_deref().unwrap_or(&req.reference).into(),
    ]);
    let started = process::start(&exe, &args, &records_dir(ctx), &abs)?;
    if !ctx.quiet && !req.quiet {
        errln!(
            "mounted vol:{volume}@{digest} at {} (pid {}; log {}); `sealvol volume unmount {}` ends it",
            abs.display(),
            started.pid,
            started.log.display(),
            abs.display()
        );
    }
    Ok(())
}

pub fn unmount(ctx: &Ctx, dir: &Path, lazy: bool) -> Result<()> {
    let done = process::unmount(&records_dir(ctx), dir, lazy)?;
    if !ctx.quiet {
        errln!(
            "unmounted {}{}",
            done.dir.display(),
            match done.still_serving {
                true => "; its process ends when the files still open there are closed",
                false => "",
            }
        );
    }
    Ok(())
}

fn list(ctx: &Ctx, as_json: bool) -> Result<()> {
    // Each mount's figures as of now: one that does not answer within a second is
    // shown as it last wrote.
    let recs = records::fresh(&records_dir(ctx), std::time::Duration::from_secs(1));
    if as_json {
        json(&serde_json::json!({ "mounts": recs }))?;
        return Ok(());
    }
    if recs.is_empty() {
        if !ctx.quiet {
            errln!("no active mounts");
        }
        return Ok(());
    }
    let pct = |n: u64, d: u64| {
        if d == 0 {
            "-".to_string()
        } else {
            format!("{:.0}%", n as f64 * 100.0 / d as f64)
        }
    };
    let rows: Vec<Vec<String>> = recs
        .iter()
        .map(|r| {
            let s = &r.stats;
            let chunks = s.memory_hits + s.cache_hits + s.peer_chunks + s.origin_chunks;
            let peers = match (r.peers.len(), s.peer_errors + s.peer_bad_chunks) {
                (0, _) => "-".to_string(),
                _ if s.peer_refused > 0 => format!("{} refused", pct(s.peer_chunks, chunks)),
                (_, 0) => pct(s.peer_chunks, chunks),
                (_, faults) => format!("{} !{faults}", pct(s.peer_chunks, chunks)),
            };
            vec![
                name(&r.dir).into_owned(),
                format!("{}@{}", r.volume, short_digest(&r.digest)),
                sealvol_views::format::as_given(&r.volume, &r.requested),
                r.pid.to_string(),
                size(s.bytes_served),
                pct(s.memory_hits, chunks),
                pct(s.cache_hits, chunks),
                peers,
                pct(s.origin_chunks, chunks),
                s.errors.to_string(),
            ]
        })
        .collect();
    let mut headers = vec![
        "DIR", "SERVES", "AS", "PID", "SERVED", "MEMORY", "CACHE", "PEERS", "ORIGIN", "ERRORS",
    ];
    // PEERS only when some mount reads through peers, as on the console.
    const PEERS: usize = 7;
    let (headers, rows) = match recs.iter().any(|r| !r.peers.is_empty()) {
        true => (headers, rows),
        false => {
            headers.remove(PEERS);
            let rows = rows
                .into_iter()
                .map(|mut r| {
                    r.remove(PEERS);
                    r
                })
                .collect();
            (headers, rows)
        }
    };
    table(&headers, &rows)?;
    Ok(())
}

/// `volume profile save REF`: stores the read order this node's latest mount of REF's
/// version recorded.
fn save_profile(ctx: &Ctx, reference: &str, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let repo = ctx.open_repo(true)?;
    let digest = repo.resolve(&r)?;
    let Some(rec) = records::read_recording(&ctx.settings.state, &digest)? else {
        return Err(Error::not_found(format!(
            "no mount of vol:{}@{} on this node has recorded a read order",
            r.volume,
            short_digest(&digest.to_string())
        ))
        .hint("mount the version, let the model load from it, then save"));
    };
    if rec.steps.is_empty() {
        return Err(Error::not_found(format!(
            "the mount of vol:{}@{} read nothing yet",
            r.volume,
            short_digest(&digest.to_string())
        ))
        .hint("let the model load from the mount, then save"));
    }
    let chunks: u64 = rec.steps.iter().map(|s| s.count as u64).sum();
    let steps = rec.steps.len();
    let key = repo.put_profile(&r.volume, &digest, rec.steps)?;
    if as_json {
        json(&serde_json::json!({
            "volume": r.volume.to_string(),
            "digest": digest.to_string(),
            "key": key,
            "steps": steps,
            "chunks": chunks,
            "recorded": rec.recorded,
        }))?;
    } else if !ctx.quiet {
        println!(
            "saved the read profile of vol:{}@{} ({chunks} chunk(s) in {steps} run(s), recorded {}) as {key}",
            r.volume,
            short_digest(&digest.to_string()),
            rec.recorded
        );
    }
    Ok(())
}
