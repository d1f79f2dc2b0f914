//! `sealvol volume sync`, `sealvol jobs` and `sealvol agent` (and the agent for `watch`). Each talks to the agent of
//! the state directory: over its socket when another process is the agent, or by
//! becoming the agent for as long as the command runs. With `--remote`, to the
//! server's agent instead: the job runs there, and this process only follows it.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sealvol_client::remote::jobs::RemoteJobs;
use sealvol_core::{Error, ErrorKind, Result};
use sealvol_node::agent::socket::AgentClient;
use sealvol_node::agent::{self, AgentSettings};
use sealvol_node::jobs::{Job, JobEvent, JobSpec, JobState, JobsApi};
use sealvol_node::log as job_log;
use sealvol_node::sync;
use sealvol_node::watch::WatchState;
use sealvol_source::{Connector, SourceUrl};

use super::Ctx;
use crate::args::JSON_HELP;
use crate::commands::{Run, group};
use crate::output::{json, name, size, table, when};

/// What `volume sync` was asked to do.
pub struct SyncRequest {
    pub source: String,
    pub volume: String,
    pub tags: Vec<String>,
    pub secret: Option<String>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub detach: bool,
    pub json: bool,
    /// Where the source is reached, when the command says (`volume import
    /// --tls-verify=false`); else from the settings.
    pub endpoint: Option<sealvol_source::endpoints::Resolved>,
}

/// The agent, wherever it runs. A hosted one stops (its running job is queued again
/// for the next agent) when this is dropped.
pub(super) enum Host {
    Remote(AgentClient),
    Local(Box<agent::Agent>),
    /// The server's agent (`--remote`), at this URL.
    Server(Box<RemoteJobs>, String),
}

impl Host {
    pub(super) fn api(&self) -> &dyn JobsApi {
        match self {
            Host::Remote(c) => c,
            Host::Local(a) => a.as_ref(),
            Host::Server(s, _) => s.as_ref(),
        }
    }

    /// Done with the agent: a hosted one hands what goes on to a background agent.
    pub(super) fn end(self, ctx: &Ctx) -> Result<()> {
        match self {
            Host::Remote(_) | Host::Server(..) => Ok(()),
            Host::Local(a) => hand_over(ctx, std::sync::Arc::new(*a)),
        }
    }
}

/// The server's jobs, when the command works on a remote engine.
pub(super) fn server(ctx: &Ctx) -> Result<Option<Host>> {
    let Some(url) = &ctx.settings.remote else {
        return Ok(None);
    };
    let jobs = RemoteJobs::connect(url, ctx.settings.api_key.as_ref().map(|k| k.expose()))?;
    Ok(Some(Host::Server(Box::new(jobs), url.clone())))
}

/// The agent for the console: the running one, or this process becomes it (and runs
/// queued jobs and watches while the console is open). `None`, with a warning, if
/// neither works. `true` when this process hosts it (see `hand_over`). On a remote
/// engine the jobs are the server's, and the watches still this machine's.
pub fn agent_for_console(ctx: &Ctx) -> (Option<std::sync::Arc<dyn JobsApi>>, bool) {
    let (local, hosted): (Option<std::sync::Arc<dyn JobsApi>>, bool) =
        match connect_or_host_local(ctx, true) {
            Ok(Host::Remote(c)) => (Some(std::sync::Arc::new(c)), false),
            Ok(Host::Local(a)) => (Some(std::sync::Arc::new(*a)), true),
            Ok(Host::Server(s, _)) => (Some(std::sync::Arc::new(*s)), false),
            Err(e) => {
                tracing::warn!("the console runs without the agent: {e}");
                (None, false)
            }
        };
    let server = match server(ctx) {
        Ok(Some(Host::Server(s, _))) => s,
        Ok(_) => return (local, hosted),
        Err(e) => {
            tracing::warn!("the console shows no jobs of the server: {e}");
            return (local, hosted);
        }
    };
    let jobs: std::sync::Arc<dyn JobsApi> = std::sync::Arc::from(server as Box<dyn JobsApi>);
    match local {
        Some(watches) => (
            Some(std::sync::Arc::new(sealvol_node::jobs::Split {
                jobs,
                watches,
            })),
            hosted,
        ),
        None => (Some(jobs), false),
    }
}

/// Ends the agent this process hosted. If it still has work that is not this
/// process's own (detached watches, queued or running jobs), a background agent takes
/// it up, so that quitting the console or a foreground command does not pause it.
pub fn hand_over(ctx: &Ctx, agent: std::sync::Arc<dyn JobsApi>) -> Result<()> {
    let me = std::process::id();
    let watches = agent.watches().unwrap_or_default();
    let detached = watches
        .iter()
        .filter(|v| v.watch.state == WatchState::Active)
        .filter(|v| v.watch.owner.as_ref().is_none_or(|o| o.pid != me))
        .count();
    let jobs = agent
        .list()
        .unwrap_or_default()
        .iter()
        .filter(|j| !j.state.is_final())
        .count();
    // The agent stops when the last handle goes: a console task may still hold one.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::sync::Arc::strong_count(&agent) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(agent);
    if detached + jobs == 0 {
        return Ok(());
    }
    let c = agent_in_background(ctx)?;
    if !ctx.quiet {
        errln!(
            "{detached} watch(es) and {jobs} job(s) go on in a background agent (pid {}); `sealvol watch ls`, `sealvol jobs ls`",
            c.pid
        );
    }
    Ok(())
}

/// What the agent reaches remote sources with: every kind this binary knows.
fn sources() -> Option<std::sync::Arc<dyn Connector>> {
    Some(std::sync::Arc::new(sealvol_sources::Sources))
}

fn settings(ctx: &Ctx, run_queue: bool) -> AgentSettings {
    AgentSettings {
        batch_bytes: ctx.settings.sync_batch,
        streams: ctx.settings.sync_streams,
        run_queue,
        trust: sync::Trust::Machine,
        mirrors: None,
        limits: sealvol_node::agent::schedule::Limits::MACHINE,
        taps: None,
    }
}

/// Where jobs run: the server's agent with `--remote`, else this machine's (the
/// running agent, or this process as the agent). `run_queue`: whether a hosted agent
/// may start queued jobs (not for commands that only read).
pub(super) fn connect_or_host(ctx: &Ctx, run_queue: bool) -> Result<Host> {
    match server(ctx)? {
        Some(s) => Ok(s),
        None => connect_or_host_local(ctx, run_queue),
    }
}

/// This machine's agent, whatever repository the command works on: watches run here
/// even on a remote engine, since they read a folder of this machine.
pub(super) fn connect_or_host_local(ctx: &Ctx, run_queue: bool) -> Result<Host> {
    let state = &ctx.settings.state;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(c) = AgentClient::connect(state)? {
            return Ok(Host::Remote(c));
        }
        let repo = ctx.open_repo(true)?;
        if let Some(a) = agent::Agent::start(repo, state, settings(ctx, run_queue), sources())? {
            return Ok(Host::Local(Box::new(a)));
        }
        // Another process holds the database: an agent still starting, or a push
        // using the stat cache for a moment.
        if Instant::now() > deadline {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!(
                    "another process holds the state database in {} but no agent answers",
                    state.display()
                ),
            )
            .hint("wait for it to finish, and try again"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Checks every input before a job exists, so that a bad one leaves no trace. A job for
/// the server goes as it was asked: the server checks it against its own secrets and
/// settings, and resolves where the source is itself.
fn spec(ctx: &Ctx, r: &SyncRequest) -> Result<JobSpec> {
    if ctx.settings.remote.is_some() {
        return Ok(JobSpec {
            source: r.source.clone(),
            volume: r.volume.clone(),
            tags: r.tags.clone(),
            secret: r.secret.clone(),
            include: r.include.clone(),
            exclude: r.exclude.clone(),
            endpoint: Default::default(),
            mirror_to: None,
            started_by: None,
        });
    }
    let url = SourceUrl::parse(&r.source)?;
    // The agent that runs the job may have another working directory.
    let absolute =
        |p: &std::path::Path| p.canonicalize().map_err(|e| Error::io("cannot open", p, e));
    let source = match &url {
        SourceUrl::Local(p) => format!("file://{}", absolute(p)?.display()),
        SourceUrl::OciLayout { dir, name } => SourceUrl::OciLayout {
            dir: absolute(dir)?,
            name: name.clone(),
        }
        .to_string(),
        _ => url.to_string(),
    };
    let spec = JobSpec {
        source,
        volume: r.volume.clone(),
        tags: r.tags.clone(),
        secret: r.secret.clone(),
        include: r.include.clone(),
        exclude: r.exclude.clone(),
        endpoint: r
            .endpoint
            .clone()
            .unwrap_or_else(|| ctx.settings.endpoints.resolve(&url)),
        mirror_to: None,
        started_by: None,
    };
    sync::check_spec(&spec, &ctx.settings.state, sync::Trust::Machine)?;
    Ok(spec)
}

pub fn sync(ctx: &Ctx, r: SyncRequest) -> Result<()> {
    let spec = spec(ctx, &r)?;
    if let Some(host) = server(ctx)? {
        let job = host.api().submit(spec)?;
        if r.detach {
            return detached(ctx, &host, &job, r.json);
        }
        return follow(ctx, &host, job, r.json);
    }
    if r.detach {
        let client = agent_in_background(ctx)?;
        let job = client.submit(spec)?;
        if r.json {
            json(&job)?;
        } else {
            if !ctx.quiet {
                errln!(
                    "job {} queued in the agent (pid {}); follow it with `sealvol jobs show {}`",
                    job.id,
                    client.pid,
                    job.id
                );
            }
            outln!("{}", job.id)?;
        }
        return Ok(());
    }
    let host = connect_or_host(ctx, true)?;
    let job = host.api().submit(spec)?;
    follow(ctx, &host, job, r.json)
}

/// `--remote volume mirror REF --to NAME`: a mirror job on the server, to one of the
/// destinations it was started with; followed like a sync unless `detach`.
pub fn mirror_on_server(
    ctx: &Ctx,
    reference: &str,
    to: &str,
    detach: bool,
    as_json: bool,
) -> Result<()> {
    let r = sealvol_core::Ref::parse(reference)?;
    let Some(host) = server(ctx)? else {
        return Err(Error::invalid("a mirror job runs on a server").hint("pass --remote URL"));
    };
    let spec = JobSpec {
        source: r.to_string(),
        volume: r.volume.to_string(),
        tags: Vec::new(),
        secret: None,
        include: Vec::new(),
        exclude: Vec::new(),
        endpoint: Default::default(),
        mirror_to: Some(to.to_string()),
        started_by: None,
    };
    let job = host.api().submit(spec)?;
    if detach {
        return detached(ctx, &host, &job, as_json);
    }
    follow(ctx, &host, job, as_json)
}

/// A job handed to the server: its id, and how to follow it.
fn detached(ctx: &Ctx, host: &Host, job: &Job, as_json: bool) -> Result<()> {
    if as_json {
        return json(job);
    }
    if !ctx.quiet
        && let Host::Server(_, url) = host
    {
        errln!(
            "job {} queued on the server {url}; follow it with `sealvol --remote {url} jobs show {} --follow`",
            job.id,
            job.id
        );
    }
    outln!("{}", job.id)
}

/// Draws the job's progress until it ends; prints its pinned ref, or fails with its error.
fn follow(ctx: &Ctx, host: &Host, job: Job, as_json: bool) -> Result<()> {
    let id = job.id;
    if !ctx.quiet {
        // The attempt the log counts: the one running, else the one that starts next.
        let n = match job.state {
            JobState::Running | JobState::Sealing => job.attempts.max(1),
            _ => job.attempts + 1,
        };
        let verb = if n > 1 { "resuming" } else { "syncing" };
        let attempt = if n > 1 {
            format!(" (attempt {n})")
        } else {
            String::new()
        };
        match host {
            Host::Remote(c) => errln!(
                "job {id}: {verb} {}{attempt} in the agent (pid {}); ctrl-c stops following, not the job",
                name(&job.spec.source),
                c.pid
            ),
            Host::Server(_, url) => errln!(
                "job {id}: {verb} {}{attempt} on the server {url}; ctrl-c stops following, not the job",
                name(&job.spec.source)
            ),
            Host::Local(_) => errln!("job {id}: {verb} {}{attempt}", name(&job.spec.source)),
        }
    }
    let bar = JobBar::new(ctx.quiet);
    let job = host.api().follow(id, &mut |ev| bar.draw(ev))?;
    bar.done();
    finished(ctx, job, as_json)
}

fn finished(ctx: &Ctx, job: Job, as_json: bool) -> Result<()> {
    if job.state != JobState::Ready {
        return Err(match job.error {
            Some(w) => Error::from(w),
            None => Error::new(
                ErrorKind::Io,
                format!(
                    "job {} is {}: {}",
                    job.id,
                    job.state,
                    job.reason.as_deref().unwrap_or("no reason recorded")
                ),
            )
            .hint(format!("`sealvol jobs logs {}` tells more", job.id)),
        });
    }
    if as_json {
        json(&job)?;
        return Ok(());
    }
    if !ctx.quiet {
        let p = &job.progress;
        errln!(
            "job {} READY: {} in {} file(s); {} new chunk(s), {} reused",
            job.id,
            size(p.bytes_total),
            p.files_total,
            p.chunks_new,
            p.chunks_reused
        );
    }
    if let Some(r) = &job.sealed {
        outln!("{r}")?;
    }
    Ok(())
}

/// Starts `sealvol agent` in the background when none runs, and connects to it.
pub(super) fn agent_in_background(ctx: &Ctx) -> Result<AgentClient> {
    let state = &ctx.settings.state;
    if let Some(c) = AgentClient::connect(state)? {
        return Ok(c);
    }
    sealvol_core::private::dir(state)?;
    let log_path = state.join("agent.log");
    let open_log = || {
        sealvol_core::private::append(&log_path)
            .map_err(|e| Error::io("cannot open log", &log_path, e))
    };
    let exe = std::env::current_exe()
        .map_err(|e| Error::io("cannot find this program", Path::new("sealvol"), e))?;
    let mut cmd = Command::new(exe);
    cmd.args(ctx.repo_args())
        .arg("--state")
        .arg(state)
        .args(["agent", "--idle-exit", "60s"])
        .stdin(Stdio::null())
        .stdout(open_log()?)
        .stderr(open_log()?);
    // SAFETY: setsid is async-signal-safe; the agent outlives this shell and its Ctrl-C.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| Error::io("cannot start the agent for", state, e))?;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(c) = AgentClient::connect(state)? {
            return Ok(c);
        }
        if let Ok(Some(status)) = child.try_wait() {
            // It lost the race to another agent, which then answers; or it failed.
            if let Some(c) = AgentClient::connect(state)? {
                return Ok(c);
            }
            let why = why_agent_ended(&log_path, state);
            let hint = match why.ends_with(" is full") {
                true => "free some space on that disk and run this again".to_string(),
                false => format!("see {}", log_path.display()),
            };
            return Err(Error::new(
                ErrorKind::Io,
                format!("the background agent ended at once ({status}){why}"),
            )
            .hint(hint));
        }
        if Instant::now() > deadline {
            return Err(
                Error::new(ErrorKind::Io, "the background agent did not start")
                    .hint(format!("see {}", log_path.display())),
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What an agent that ended at once said last in its log; or, when it could say
/// nothing there, whether the state directory's disk is full (then it could not).
fn why_agent_ended(log: &Path, state: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    if let Some(last) = text.lines().rev().find(|l| !l.trim().is_empty()) {
        return format!(": {}", last.trim());
    }
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    let full = std::ffi::CString::new(state.as_os_str().as_encoded_bytes())
        .ok()
        // SAFETY: a NUL-terminated path and a buffer statvfs fills when it returns 0.
        .filter(|p| unsafe { libc::statvfs(p.as_ptr(), st.as_mut_ptr()) } == 0)
        .map(|_| unsafe { st.assume_init() })
        .is_some_and(|s| s.f_bavail == 0);
    match full {
        true => format!(
            ": its log is empty, and the disk of {} is full",
            crate::output::shown(state)
        ),
        false => String::new(),
    }
}

/// Run the agent headless: it runs sync jobs and answers other sealvol processes.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol agent\n  sealvol agent --idle-exit 10m\n\nOne process per state directory is the agent: this command, a console, or a foreground sync."
)]
pub struct Agent {
    /// Stop after this long with nothing to do (e.g. 60s, 10m).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    idle_exit: Option<std::time::Duration>,
}

impl Run for Agent {
    fn run(self, ctx: &Ctx) -> Result<()> {
        agent(ctx, self.idle_exit)
    }
}

/// `sealvol agent`: hosts the agent until SIGINT or SIGTERM (or, with `idle_exit`,
/// until it has had nothing to do for that long).
fn agent(ctx: &Ctx, idle_exit: Option<Duration>) -> Result<()> {
    if let Some(c) = AgentClient::connect(&ctx.settings.state)? {
        return Err(Error::new(
            ErrorKind::Conflict,
            format!(
                "an agent already runs for this state directory (pid {})",
                c.pid
            ),
        )
        .hint("one agent per state directory; stop that one first"));
    }
    let signals = crate::signals::Signals::catch()?;
    let repo = ctx.open_repo(true)?;
    let Some(agent) =
        agent::Agent::start(repo, &ctx.settings.state, settings(ctx, true), sources())?
    else {
        return Err(Error::new(
            ErrorKind::Conflict,
            "another process holds the state database",
        )
        .hint("a console or a foreground sync is the agent now; try again when it ends"));
    };
    if !ctx.quiet {
        errln!(
            "agent (pid {}) serving {}",
            std::process::id(),
            sealvol_node::agent::socket::path(&ctx.settings.state).display()
        );
    }
    let why = signals.wait(Duration::from_secs(1), || {
        idle_exit
            .is_some_and(|d| agent.idle_for(d))
            .then_some("idle")
    });
    tracing::info!("agent stopping: {why}");
    drop(agent);
    Ok(())
}

group! {
    // `sealvol jobs …`: the sync and mirror jobs, here or on the server.
    #[derive(clap::Subcommand, Debug)]
    pub enum JobsCommand {
        Ls(Ls),
        Show(Show),
        Cancel(Cancel),
        Retry(Retry),
        Logs(Logs),
    }
}

/// List sync jobs, newest first.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol jobs ls --json")]
pub struct Ls {
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Ls {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Ls { json: as_json } = self;
        let host = connect_or_host(ctx, false)?;
        let jobs = host.api().list()?;
        if as_json {
            json(&serde_json::json!({ "jobs": jobs }))?;
        } else if jobs.is_empty() {
            if !ctx.quiet {
                errln!("no jobs; start one with: sealvol volume sync SOURCE NS/NAME");
            }
        } else {
            let rows: Vec<Vec<String>> = jobs.iter().map(row).collect();
            table(
                &["ID", "STATE", "SOURCE", "VOLUME", "DONE", "UPDATED"],
                &rows,
            )?;
        }
        Ok(())
    }
}

/// Show one job: its source, state, progress and, if it failed, why.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol jobs show 7\n  sealvol --remote https://sealvol.internal:7420 jobs show 7 --follow"
)]
pub struct Show {
    /// The job's number, from `sealvol jobs ls`.
    id: u64,
    /// Follow it to its end, as `volume sync --wait` does (ctrl-c stops following, not the job).
    #[arg(long)]
    follow: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Show {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Show {
            id,
            follow: following,
            json: as_json,
        } = self;
        if following {
            let host = connect_or_host(ctx, true)?;
            let job = host.api().show(id)?;
            return follow(ctx, &host, job, as_json);
        }
        let host = connect_or_host(ctx, false)?;
        let ev = host.api().event(id)?;
        if as_json {
            json(&ev)?;
        } else {
            show(&ev)?;
        }
        Ok(())
    }
}

/// Cancel a queued or running job.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol jobs cancel 7")]
pub struct Cancel {
    /// The job's number, from `sealvol jobs ls`.
    id: u64,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Cancel {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Cancel { id, json: as_json } = self;
        let host = connect_or_host(ctx, false)?;
        let job = host.api().cancel(id)?;
        if as_json {
            json(&job)?;
        } else if !ctx.quiet {
            errln!("job {id} {}", job.state);
        }
        Ok(())
    }
}

/// Run a failed or cancelled job again; what it already stored is not fetched again.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol jobs retry 7")]
pub struct Retry {
    /// The job's number, from `sealvol jobs ls`.
    id: u64,
    /// Hand it to the agent and return at once.
    #[arg(long)]
    detach: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Retry {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Retry {
            id,
            detach,
            json: as_json,
        } = self;
        if let Some(host) = server(ctx)? {
            let job = host.api().retry(id)?;
            if detach {
                return detached(ctx, &host, &job, as_json);
            }
            return follow(ctx, &host, job, as_json);
        }
        if detach {
            let client = agent_in_background(ctx)?;
            let job = client.retry(id)?;
            if as_json {
                json(&job)?;
            } else {
                outln!("{}", job.id)?;
            }
            return Ok(());
        }
        let host = connect_or_host(ctx, true)?;
        let job = host.api().retry(id)?;
        follow(ctx, &host, job, as_json)
    }
}

/// Print what happened to a job, line by line.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol jobs logs 7")]
pub struct Logs {
    /// The job's number, from `sealvol jobs ls`.
    id: u64,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Logs {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Logs { id, json: as_json } = self;
        let text = match server(ctx)? {
            Some(host) => host.api().logs(id)?,
            None => job_log::read(&ctx.settings.state, id)?,
        };
        crate::output::log(id, &text, as_json)
    }
}

fn done(job: &Job) -> String {
    let p = &job.progress;
    if p.bytes_total == 0 {
        return "-".into();
    }
    format!(
        "{}/{} ({}%)",
        size(p.bytes_done),
        size(p.bytes_total),
        p.bytes_done * 100 / p.bytes_total
    )
}

fn row(job: &Job) -> Vec<String> {
    vec![
        job.id.to_string(),
        job.state.to_string(),
        job.spec.source.clone(),
        match &job.spec.mirror_to {
            Some(to) => format!("mirror to {to}"),
            None => job.spec.volume.clone(),
        },
        done(job),
        when(&job.updated),
    ]
}

fn show(ev: &JobEvent) -> Result<()> {
    let job = &ev.job;
    let p = &job.progress;
    outln!("job       {}", job.id)?;
    outln!("state     {}", job.state)?;
    outln!("source    {}", name(&job.spec.source))?;
    if let Some(u) = &job.spec.endpoint.url {
        outln!("endpoint  {u}")?;
    }
    outln!("volume    {}", job.spec.volume)?;
    if let Some(to) = &job.spec.mirror_to {
        outln!("mirror to {to}")?;
    }
    if !job.spec.tags.is_empty() {
        outln!("tags      {}", job.spec.tags.join(", "))?;
    }
    if let Some(s) = &job.spec.secret {
        outln!("secret    {s}")?;
    }
    for i in &job.spec.include {
        outln!("include   {i}")?;
    }
    for e in &job.spec.exclude {
        outln!("exclude   {e}")?;
    }
    outln!("created   {}", job.created)?;
    outln!("updated   {}", job.updated)?;
    outln!("attempts  {}", job.attempts)?;
    outln!("bytes     {}", done(job))?;
    outln!("files     {}/{}", p.files_done, p.files_total)?;
    outln!("chunks    {} new, {} reused", p.chunks_new, p.chunks_reused)?;
    if job.state == JobState::Running {
        outln!("rate      {}/s", size(ev.rate))?;
        if let Some(eta) = ev.eta_secs {
            outln!("eta       {eta} s")?;
        }
    }
    if ev.queued_ahead > 0 {
        outln!("ahead     {} job(s)", ev.queued_ahead)?;
    }
    if let Some(r) = &job.sealed {
        outln!("sealed    {r}")?;
    }
    if let Some(r) = &job.reason {
        outln!("reason    {r}")?;
    }
    Ok(())
}

/// A job's progress as an indicatif bar on stderr (when it is a terminal).
struct JobBar {
    bar: Option<ProgressBar>,
}

impl JobBar {
    fn new(quiet: bool) -> JobBar {
        use std::io::IsTerminal;
        if quiet || !std::io::stderr().is_terminal() {
            return JobBar { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        let style =
            ProgressStyle::with_template("{prefix:>8} [{bar:30}] {bytes}/{total_bytes} {msg}")
                .map(|s| s.progress_chars("=> "))
                .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        JobBar { bar: Some(bar) }
    }

    fn draw(&self, ev: &JobEvent) {
        let Some(bar) = &self.bar else { return };
        let p = &ev.job.progress;
        bar.set_prefix(ev.job.state.to_string());
        bar.set_length(p.bytes_total);
        bar.set_position(p.bytes_done);
        let msg = if ev.job.state == JobState::Queued {
            format!("waiting behind {} job(s)", ev.queued_ahead)
        } else {
            format!(
                "{}/s eta {} · files {}/{} · chunks {} new {} reused",
                size(ev.rate),
                ev.eta_secs.map_or("-".into(), |s| format!("{s}s")),
                p.files_done,
                p.files_total,
                p.chunks_new,
                p.chunks_reused
            )
        };
        bar.set_message(msg);
    }

    fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
