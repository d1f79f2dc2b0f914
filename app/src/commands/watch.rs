//! `sealvol volume watch` and `sealvol watch ls|show|stop|logs`. A watch runs in the
//! agent: in the foreground the command follows it (printing each sealed version) and
//! stops it on ctrl-c; with `--detach` the agent keeps it until `watch stop`.

use std::cell::RefCell;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clap_complete::ArgValueCompleter;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sealvol_core::{Error, Result};
use sealvol_node::jobs::JobsApi;
use sealvol_node::log as job_log;
use sealvol_node::watch::{Layout, Outcome, PushRecord, WatchSpec, WatchState, WatchView};

use super::Ctx;
use super::jobs::{agent_in_background, connect_or_host_local as connect_or_host};
use super::{Run, group};
use crate::args::JSON_HELP;
use crate::complete;
use crate::output::{json, size, table, when};

/// Seal each checkpoint a trainer writes into DIR as soon as it is complete.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume watch ./out weights/run-7 --tag step-{step} --tag latest\n  sealvol volume watch ./out weights/run-7 --keep-last 3 --keep-every 1000 --detach\n  sealvol volume watch ./adapter adapters/support --layout flat --settle 30s\n\nA checkpoint is pushed once it has settled: no change for --settle, and no file of it\nopen for writing by any process this user may inspect (/proc/*/fd). Temporary names\n(*.tmp, .*, tmp*) are left out until they are renamed. Only new chunks are written.\nWithout --detach it runs until ctrl-c; with it, the agent runs it until `sealvol watch stop`."
)]
pub struct Start {
    /// The folder the trainer writes into (it may not exist yet).
    dir: PathBuf,
    /// Volume: NAMESPACE/NAME.
    #[arg(add = ArgValueCompleter::new(complete::volumes))]
    volume: String,
    /// Point these tags at each new checkpoint: `latest` moves, `step-{step}` names one (repeatable).
    #[arg(long = "tag", short = 't', value_name = "TAG")]
    tags: Vec<String>,
    /// steps: each subfolder named by a step (checkpoint-500/) is one checkpoint.
    /// flat: DIR itself is the checkpoint, pushed whenever it settles after a change.
    #[arg(long, value_enum, default_value = "steps")]
    layout: WatchLayout,
    /// How long a checkpoint must stay unchanged before it is pushed (at least 500ms).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = humantime::parse_duration)]
    settle: std::time::Duration,
    /// Keep the N newest checkpoints; move older ones no other tag holds to the trash.
    #[arg(long, value_name = "N")]
    keep_last: Option<u32>,
    /// Keep every checkpoint whose step is a multiple of K (with --layout steps).
    #[arg(long, value_name = "K")]
    keep_every: Option<u64>,
    /// Poll for changes instead of waiting for inotify events (automatic on network file systems).
    #[arg(long)]
    poll: bool,
    /// Hand the watch to the agent (started in the background if none runs), print its id, return.
    #[arg(long)]
    detach: bool,
    /// One JSON document per push (or, with --detach, the watch).
    #[arg(long)]
    json: bool,
}

impl Run for Start {
    fn run(self, ctx: &Ctx) -> Result<()> {
        start(ctx, self)
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum WatchLayout {
    Steps,
    Flat,
}

/// Checks every input before a watch exists, so that a bad one leaves no trace.
fn spec(ctx: &Ctx, r: &Start) -> Result<WatchSpec> {
    let given = r.dir.to_string_lossy();
    if let Some((scheme, _)) = given.split_once("://") {
        return Err(Error::invalid(format!(
            "{given} is not a local folder: a watch follows a folder on this machine"
        ))
        .hint(format!(
            "for a {scheme}:// source, seal each checkpoint with `sealvol volume sync`"
        )));
    }
    let dir = match r.dir.canonicalize() {
        Ok(d) => d,
        // Not there yet: the watch waits for it.
        Err(_) => {
            std::path::absolute(&r.dir).map_err(|e| Error::io("cannot resolve", &r.dir, e))?
        }
    };
    let spec = WatchSpec {
        dir: dir.to_string_lossy().into_owned(),
        volume: r.volume.clone(),
        tags: r.tags.clone(),
        layout: match r.layout {
            WatchLayout::Steps => Layout::Steps,
            WatchLayout::Flat => Layout::Flat,
        },
        settle_secs: r.settle.as_secs_f64(),
        keep_last: r.keep_last,
        keep_every: r.keep_every,
        poll: r.poll,
    };
    let mut inside: Vec<&std::path::Path> = vec![&ctx.settings.state];
    inside.extend(ctx.settings.repo.local());
    spec.check(&inside)?;
    Ok(spec)
}

fn start(ctx: &Ctx, r: Start) -> Result<()> {
    let spec = spec(ctx, &r)?;
    if r.detach {
        let client = agent_in_background(ctx)?;
        let w = client.add_watch(spec, None)?;
        if r.json {
            json(&w)?;
        } else {
            if !ctx.quiet {
                errln!(
                    "watch {} runs in the agent (pid {}); follow it with `sealvol watch show {}`",
                    w.id,
                    client.pid,
                    w.id
                );
            }
            outln!("{}", w.id)?;
        }
        return Ok(());
    }
    // Caught before the watch exists: a ctrl-c at any moment stops it cleanly.
    let signals = crate::signals::Signals::catch()?;
    let host = connect_or_host(ctx, true)?;
    let api = host.api();
    let me = std::process::id();
    let w = api.add_watch(spec, Some(me))?;
    let ours = w.owner.as_ref().is_some_and(|o| o.pid == me);
    if !ctx.quiet {
        let how = if ours {
            "ctrl-c stops it"
        } else {
            "it runs in the agent; ctrl-c stops following, not the watch"
        };
        errln!(
            "watch {}: {} -> {} ({how})",
            w.id,
            w.spec.dir,
            w.spec.volume
        );
    }
    let status = Status::new(ctx.quiet);
    let mut last = w.pushes.last().cloned();
    let failure: RefCell<Option<Error>> = RefCell::new(None);
    let why = signals.wait(Duration::from_millis(250), || {
        let view = match api.watch_view(w.id) {
            Ok(v) => v,
            Err(e) => {
                *failure.borrow_mut() = Some(e);
                return Some("error");
            }
        };
        for p in pushes_after(&view.watch.pushes, last.as_ref()) {
            if let Err(e) = status.push(p, r.json) {
                *failure.borrow_mut() = Some(e);
                return Some("error");
            }
        }
        last = view.watch.pushes.last().cloned();
        if let Some(n) = view.notifier.as_ref().filter(|n| n.starts_with("polling")) {
            status.once(&format!("change events: {n}"));
        }
        status.draw(&view);
        (view.watch.state == WatchState::Stopped).then_some("stopped")
    });
    status.done();
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    if why != "stopped" && ours {
        api.stop_watch(w.id)?;
    }
    if !ctx.quiet {
        let view = api.watch_view(w.id)?;
        let live = view.watch.sealed.iter().filter(|s| !s.trashed).count();
        errln!(
            "watch {} {}: {} checkpoint(s) sealed, {live} live",
            w.id,
            if why == "stopped" {
                format!(
                    "was stopped ({})",
                    view.watch.reason.as_deref().unwrap_or("-")
                )
            } else {
                "stopped".to_string()
            },
            view.watch.sealed.len()
        );
    }
    host.end(ctx)
}

/// The pushes recorded after `last` (all of them when `last` is gone from the history).
fn pushes_after<'a>(pushes: &'a [PushRecord], last: Option<&PushRecord>) -> &'a [PushRecord] {
    match last {
        None => pushes,
        Some(l) => match pushes.iter().rposition(|p| p == l) {
            Some(i) => &pushes[i + 1..],
            None => pushes,
        },
    }
}

/// The foreground watch's status line on stderr, and its sealed versions on stdout.
struct Status {
    bar: Option<ProgressBar>,
    quiet: bool,
    said: RefCell<std::collections::HashSet<String>>,
}

impl Status {
    fn new(quiet: bool) -> Status {
        use std::io::IsTerminal;
        if quiet || !std::io::stderr().is_terminal() {
            return Status {
                bar: None,
                quiet,
                said: Default::default(),
            };
        }
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Status {
            bar: Some(bar),
            quiet,
            said: Default::default(),
        }
    }

    fn draw(&self, v: &WatchView) {
        if let Some(bar) = &self.bar {
            bar.set_message(v.now.to_string());
        }
    }

    /// Says `line` the first time only.
    fn once(&self, line: &str) {
        if self.said.borrow_mut().insert(line.to_string()) {
            self.say(line);
        }
    }

    fn say(&self, line: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(bar) => bar.suspend(|| errln!("{line}")),
            None => errln!("{line}"),
        }
    }

    /// A sealed version's pinned ref on stdout; what else happened on stderr.
    fn push(&self, p: &PushRecord, as_json: bool) -> Result<()> {
        if as_json {
            let out = || json(p);
            return match &self.bar {
                Some(bar) => bar.suspend(out),
                None => out(),
            };
        }
        match p.outcome {
            Outcome::Sealed | Outcome::Unchanged => {
                self.say(&format!(
                    "{}: {} new of {}{}{}",
                    p.name,
                    size(p.bytes_new),
                    size(p.bytes_total),
                    p.latency_secs
                        .map(|l| format!(", sealed {l:.1} s after its last write"))
                        .unwrap_or_default(),
                    if p.trashed.is_empty() {
                        String::new()
                    } else {
                        format!("; {} older version(s) moved to the trash", p.trashed.len())
                    }
                ));
                if let Some(d) = &p.digest {
                    let out = || outln!("{d}");
                    match &self.bar {
                        Some(bar) => bar.suspend(out)?,
                        None => out()?,
                    }
                }
            }
            Outcome::Abandoned => self.say(&format!(
                "{}: changed while it was pushed; nothing sealed, tried again once it settles",
                p.name
            )),
            Outcome::Failed => self.say(&format!(
                "{}: {}",
                p.name,
                p.reason.as_deref().unwrap_or("failed")
            )),
        }
        Ok(())
    }

    fn done(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

group! {
    // `sealvol watch …`: the watches the agent runs.
    #[derive(clap::Subcommand, Debug)]
    pub enum WatchCommand {
        Ls(Ls),
        Show(Show),
        Stop(Stop),
        Logs(Logs),
    }
}

/// List watches: their folder, volume, state and last sealed version.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol watch ls --json")]
pub struct Ls {
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Ls {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Ls { json: as_json } = self;
        let host = connect_or_host(ctx, false)?;
        let watches = host.api().watches()?;
        if as_json {
            json(&serde_json::json!({ "watches": watches }))?;
        } else if watches.is_empty() {
            if !ctx.quiet {
                errln!("no watches; start one with: sealvol volume watch DIR NS/NAME");
            }
        } else {
            let rows: Vec<Vec<String>> = watches.iter().map(row).collect();
            table(
                &["ID", "STATE", "DIR", "VOLUME", "SEALED", "LAST", "NOW"],
                &rows,
            )?;
        }
        Ok(())
    }
}

/// Show one watch: what it is doing, what it sealed, and its recent pushes.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol watch show 3")]
pub struct Show {
    /// The watch's number, from `sealvol watch ls`.
    id: u64,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Show {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Show { id, json: as_json } = self;
        let host = connect_or_host(ctx, false)?;
        let view = host.api().watch_view(id)?;
        if as_json { json(&view) } else { show(&view) }
    }
}

/// Stop a watch; the versions it sealed stay.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol watch stop 3")]
pub struct Stop {
    /// The watch's number, from `sealvol watch ls`.
    id: u64,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Stop {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Stop { id, json: as_json } = self;
        let host = connect_or_host(ctx, false)?;
        let w = host.api().stop_watch(id)?;
        if as_json {
            json(&w)?;
        } else if !ctx.quiet {
            errln!(
                "watch {id} stopped; the {} version(s) it sealed stay",
                w.sealed.len()
            );
        }
        Ok(())
    }
}

/// Print a watch's log: each push, each abandoned one and why.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol watch logs 3")]
pub struct Logs {
    /// The watch's number, from `sealvol watch ls`.
    id: u64,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Logs {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Logs { id, json: as_json } = self;
        crate::output::log(id, &job_log::read_watch(&ctx.settings.state, id)?, as_json)
    }
}

fn row(v: &WatchView) -> Vec<String> {
    let w = &v.watch;
    vec![
        w.id.to_string(),
        w.state.to_string(),
        w.spec.dir.clone(),
        w.spec.volume.clone(),
        w.sealed.len().to_string(),
        w.last_sealed()
            .map(|s| format!("{} {}", s.name, short(&s.digest)))
            .unwrap_or_else(|| "-".into()),
        v.now.to_string(),
    ]
}

fn short(digest: &str) -> &str {
    digest.get(..15).unwrap_or(digest)
}

fn show(v: &WatchView) -> Result<()> {
    let w = &v.watch;
    let s = &w.spec;
    outln!("watch     {}", w.id)?;
    outln!("state     {}", w.state)?;
    outln!("now       {}", v.now)?;
    outln!("dir       {}", s.dir)?;
    outln!("volume    {}", s.volume)?;
    outln!("layout    {}", s.layout)?;
    outln!(
        "settle    {}",
        humantime::format_duration(Duration::from_millis((s.settle_secs * 1000.0) as u64))
    )?;
    if !s.tags.is_empty() {
        outln!("tags      {}", s.tags.join(", "))?;
    }
    if let Some(n) = s.keep_last {
        outln!("keep      the last {n}")?;
    }
    if let Some(k) = s.keep_every {
        outln!("keep      every step that is a multiple of {k}")?;
    }
    match &w.owner {
        Some(o) => outln!("runs      in the foreground, for pid {}", o.pid)?,
        None => outln!("runs      in the agent (detached)")?,
    }
    if let Some(n) = &v.notifier {
        outln!("changes   {n}")?;
    }
    if !v.pending.is_empty() {
        outln!("pending   {}", v.pending.join(", "))?;
    }
    outln!("created   {}", w.created)?;
    if let Some(r) = &w.reason {
        outln!("reason    {r}")?;
    }
    outln!("sealed    {} checkpoint(s)", w.sealed.len())?;
    if !w.pushes.is_empty() {
        outln!("")?;
        let rows: Vec<Vec<String>> = w
            .pushes
            .iter()
            .rev()
            .take(20)
            .map(|p| {
                vec![
                    when(&p.at),
                    p.name.clone(),
                    format!("{:?}", p.outcome).to_lowercase(),
                    p.digest.as_deref().map(short).unwrap_or("-").to_string(),
                    format!("{}/{}", size(p.bytes_new), size(p.bytes_total)),
                    p.latency_secs
                        .map(|l| format!("{l:.1}s"))
                        .unwrap_or_else(|| "-".into()),
                    p.reason.clone().unwrap_or_default(),
                ]
            })
            .collect();
        table(
            &[
                "WHEN",
                "CHECKPOINT",
                "OUTCOME",
                "DIGEST",
                "NEW/TOTAL",
                "LATENCY",
                "NOTE",
            ],
            &rows,
        )?;
    }
    Ok(())
}
