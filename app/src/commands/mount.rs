//! `sealvol volume mount | unmount | mounts`.
//!
//! A background mount is this same binary re-run with `--foreground` in a new session,
//! its output going to a log in `<state>/mounts/`. The parent waits on a pipe until the
//! child says the mount is ready, or passes on the child's error: so `volume mount`
//! either returns with a working mount or fails with the reason, never in between.

use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sealvol_core::cache::ChunkCache;
use sealvol_core::registry::now_rfc3339;
use sealvol_core::{Digest, Error, ErrorKind, Ref, Result, VolumeName};
use sealvol_mount::records::{self as records, MountRecord};
use sealvol_mount::{self as mount, MountOptions};

use super::Ctx;
use crate::config::parse_size;
use sealvol_views::format::short_digest;

use crate::output::{json, name, size, table};

pub struct Request {
    pub reference: String,
    pub dir: PathBuf,
    pub cache: Option<PathBuf>,
    pub cache_size: Option<String>,
    pub prefetch_memory: Option<String>,
    pub read_timeout: Duration,
    /// Cache servers to read through (`--peer`); none: config.toml's `peers`.
    pub peers: Vec<String>,
    /// Mirrored origins (`--origin`); none: config.toml's `mirrors`.
    pub origins: Vec<String>,
    /// Where to serve Prometheus metrics (`--metrics ADDR`).
    pub metrics: Option<String>,
    pub foreground: bool,
    pub requested: Option<String>,
    /// The caller says what was mounted (`deploy mount`, one line per volume).
    pub quiet: bool,
}

const READY_FD: &str = "SEALVOL_READY_FD";

fn records_dir(ctx: &Ctx) -> PathBuf {
    records::dir(&ctx.settings.state)
}

/// A mount's settings once flags, config.toml and defaults are resolved and checked.
struct Resolved {
    cache_dir: PathBuf,
    cache_bytes: u64,
    memory: usize,
    peers: Vec<String>,
    origins: Vec<String>,
    metrics: Option<std::net::SocketAddr>,
}

pub fn mount(ctx: &Ctx, req: Request) -> Result<()> {
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
        peers: ctx.settings.peers_or(&req.peers)?,
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
    if !req.foreground {
        // Checked here too so that a bad mount point is reported with its own kind.
        drop(mount::check_mount_point(&req.dir)?);
        return spawn_background(ctx, &r.volume, &digest, &req, &set);
    }
    crate::alloc::for_mount();
    let ready = ReadyPipe::from_env();
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
    req: &Request,
    set: &Resolved,
    ready: &ReadyPipe,
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
    let m = mount::mount(
        repo,
        volume,
        digest,
        &req.dir,
        MountOptions {
            cache: Some(Arc::clone(&cache)),
            limits,
            peers: crate::commands::peers(
                &set.peers,
                ctx.settings.api_key.as_ref().map(|k| k.expose()),
            )?,
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
        peers: set.peers.clone(),
        metrics: None,
        stats: m.stats(),
    };
    if let Some(addr) = set.metrics {
        let fs = m.shared_fs();
        let info = sealvol_serve::metrics::MountInfo {
            volume: volume.to_string(),
            digest: digest.to_string(),
            dir: rec.dir.clone(),
        };
        let cache = Arc::clone(&cache);
        let render = Arc::new(move || {
            let held = sealvol_serve::metrics::CacheState::of(&cache);
            sealvol_serve::metrics::mount_text(&info, &fs.stats(), Some(held))
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
    let pid = rec.pid;
    // The order readers first asked for chunks, kept for `volume profile save`:
    // written at most once a second while it changes, and once more at the end.
    let mut recorded = Instant::now();
    let keep_recording = |m: &mount::Mount| {
        if let Some(steps) = m.fs().recording() {
            let r = records::Recording {
                volume: volume.to_string(),
                digest: digest.to_string(),
                recorded: now_rfc3339(),
                steps,
            };
            if let Err(e) = records::write_recording(&ctx.settings.state, digest, &r) {
                tracing::warn!("cannot keep the read profile: {e}");
            }
        }
    };
    let stopped = wait_for_stop(
        &m,
        signals,
        || records::take_unmount_note(&dir, pid),
        |stats| {
            rec.stats = stats;
            let _ = records::write(&dir, &rec);
            if recorded.elapsed() >= Duration::from_secs(1) {
                keep_recording(&m);
                recorded = Instant::now();
            }
        },
    );
    keep_recording(&m);
    records::remove(&dir, rec.pid);
    let result = m.unmount();
    if !ctx.quiet {
        errln!("unmounted {} ({stopped})", rec.dir);
    }
    result
}

/// Blocks until SIGINT/SIGTERM or until the mount is unmounted; publishes the counters
/// within 100 ms of a change meanwhile, so `volume mounts` is current right after a
/// read. Returns why it stopped.
fn wait_for_stop(
    m: &mount::Mount,
    signals: crate::signals::Signals,
    mut unmounted_by_us: impl FnMut() -> bool,
    mut publish: impl FnMut(mount::TierStats),
) -> &'static str {
    let mut last = m.stats();
    signals.wait(Duration::from_millis(100), || {
        if !m.is_running() {
            return Some(if unmounted_by_us() {
                "by `sealvol volume unmount`"
            } else {
                "from outside: fusermount3 -u or umount"
            });
        }
        let now = m.stats();
        if now != last {
            publish(now);
            last = now;
        }
        None
    })
}

fn spawn_background(
    ctx: &Ctx,
    volume: &VolumeName,
    digest: &Digest,
    req: &Request,
    set: &Resolved,
) -> Result<()> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::io("cannot find this program", Path::new("sealvol"), e))?;
    let dir = records_dir(ctx);
    sealvol_core::private::dir(&dir)?;
    let abs = std::path::absolute(&req.dir).unwrap_or_else(|_| req.dir.clone());
    let log_path = dir.join(format!("{}.log", log_name(&abs)));
    let log = sealvol_core::private::append(&log_path)
        .map_err(|e| Error::io("cannot open log", &log_path, e))?;
    let log2 = log
        .try_clone()
        .map_err(|e| Error::io("cannot open log", &log_path, e))?;
    let (read_end, write_end) = pipe()?;
    let child_fd = write_end.as_raw_fd();
    let mut cmd = Command::new(exe);
    cmd.args(ctx.repo_args())
        .arg("--state")
        .arg(&ctx.settings.state)
        .args(["volume", "mount"])
        .arg(format!("vol:{volume}@{digest}"))
        .arg(&abs)
        .arg("--cache")
        .arg(&set.cache_dir)
        .arg("--cache-size")
        .arg(set.cache_bytes.to_string())
        .arg("--prefetch-memory")
        .arg(set.memory.to_string())
        .arg("--read-timeout")
        .arg(format!("{}ms", req.read_timeout.as_millis()))
        .args(set.peers.iter().flat_map(|p| ["--peer", p]))
        .args(set.origins.iter().flat_map(|o| ["--origin", o]))
        .args(
            set.metrics
                .iter()
                .flat_map(|a| ["--metrics".to_string(), a.to_string()]),
        )
        .arg("--foreground")
        .arg("--requested")
        .arg(req.requested.as_deref().unwrap_or(&req.reference))
        .env(READY_FD, child_fd.to_string())
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // A new session: the mount outlives this shell and its Ctrl-C.
            libc::setsid();
            // Keep the ready pipe open across exec (it was made close-on-exec).
            if libc::fcntl(child_fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| Error::io("cannot start the mount process", &abs, e))?;
    drop(write_end);
    // One line: "ready", or the child's error. EOF without one means it died.
    let mut msg = String::new();
    let mut reader = std::io::BufReader::new(std::fs::File::from(read_end));
    let _ = std::io::BufRead::read_line(&mut reader, &mut msg);
    if msg.starts_with("ready") {
        if !ctx.quiet && !req.quiet {
            errln!(
                "mounted vol:{volume}@{digest} at {} (pid {}; log {}); `sealvol volume unmount {}` ends it",
                abs.display(),
                child.id(),
                log_path.display(),
                abs.display()
            );
        }
        return Ok(());
    }
    // The child failed before it was ready: pass its reason on.
    let mut parts = msg.trim_end().splitn(3, '\t');
    let (_, message, hint) = (parts.next(), parts.next(), parts.next());
    let e = match message {
        Some(m) if !m.is_empty() => Error::new(ErrorKind::Io, m.to_string()),
        _ => Error::new(
            ErrorKind::Io,
            "the mount process ended before the mount was ready",
        )
        .hint(format!("see {}", log_path.display())),
    };
    Err(match hint {
        Some(h) if !h.is_empty() => e.hint(h.to_string()),
        _ => e,
    })
}

fn log_name(dir: &Path) -> String {
    let s: String = dir
        .to_string_lossy()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.trim_start_matches('_').chars().take(150).collect()
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::io(
            "cannot create a pipe",
            Path::new("pipe"),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: both are fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The write end of the parent's pipe, in a background mount's process.
struct ReadyPipe(std::cell::RefCell<Option<std::fs::File>>);

impl ReadyPipe {
    fn from_env() -> ReadyPipe {
        let fd = std::env::var(READY_FD)
            .ok()
            .and_then(|v| v.parse::<i32>().ok())
            .filter(|fd| *fd > 2);
        // SAFETY: the parent handed us this descriptor for exactly this purpose; it is
        // made close-on-exec again so that helpers we start (fusermount3 stays running
        // for auto-unmount) do not hold the parent's pipe open.
        let file = fd.map(|fd| unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            std::fs::File::from_raw_fd(fd)
        });
        // Not inherited by anything we start.
        // SAFETY: unsetting the variable before any thread of ours reads the environment.
        unsafe { std::env::remove_var(READY_FD) };
        ReadyPipe(std::cell::RefCell::new(file))
    }

    fn is_set(&self) -> bool {
        self.0.borrow().is_some()
    }

    fn ok(&self) {
        if let Some(mut f) = self.0.borrow_mut().take() {
            let _ = f.write_all(b"ready\n");
        }
    }

    fn fail(&self, e: &Error) {
        if let Some(mut f) = self.0.borrow_mut().take() {
            let one_line = |s: &str| s.replace(['\t', '\n'], " ");
            let _ = writeln!(
                f,
                "error\t{}\t{}",
                one_line(&e.to_string()),
                one_line(e.hint_text().unwrap_or(""))
            );
        }
    }
}

pub fn unmount(ctx: &Ctx, dir: &Path, lazy: bool) -> Result<()> {
    // Mount records and the kernel name the mount point by its canonical path.
    let abs = dir
        .canonicalize()
        .or_else(|_| std::path::absolute(dir))
        .unwrap_or_else(|_| dir.to_path_buf());
    let serving: Vec<MountRecord> = records::list(&records_dir(ctx))
        .into_iter()
        .filter(|r| Path::new(&r.dir) == abs)
        .collect();
    let notes = records_dir(ctx);
    for r in &serving {
        records::note_unmount(&notes, r.pid);
    }
    if let Err(e) = mount::unmount_dir(&abs, lazy) {
        for r in &serving {
            records::take_unmount_note(&notes, r.pid);
        }
        return Err(e);
    }
    // Wait for the serving process to notice and exit, so a remount right after works.
    // After a lazy detach it serves the files still open and ends when they close.
    let wait = if lazy {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(10)
    };
    let deadline = Instant::now() + wait;
    for r in &serving {
        while records::alive(r.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    if !ctx.quiet {
        let still = serving.iter().any(|r| records::alive(r.pid));
        errln!(
            "unmounted {}{}",
            abs.display(),
            if still {
                "; its process ends when the files still open there are closed"
            } else {
                ""
            }
        );
    }
    Ok(())
}

pub fn list(ctx: &Ctx, as_json: bool) -> Result<()> {
    let recs = records::list(&records_dir(ctx));
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
pub fn save_profile(ctx: &Ctx, reference: &str, as_json: bool) -> Result<()> {
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
