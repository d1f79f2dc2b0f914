//! `sealvol volume sync` and `sealvol jobs`: sync jobs, run by this process as the
//! agent (it holds the state database while a job runs).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use sealvol_engine::jobs::{Job, JobSpec, JobState};
use sealvol_engine::sources::SourceUrl;
use sealvol_engine::sources::filter::Filter;
use sealvol_engine::state::StateDb;
use sealvol_engine::sync::{SyncOptions, run_job};
use sealvol_engine::{Error, ErrorKind, Name, Result, VolumeName, secrets};

use super::Ctx;
use crate::cli::JobsCommand;
use crate::output::{json, size, table, when};

/// What `volume sync` was asked to do.
pub struct SyncRequest {
    pub source: String,
    pub volume: String,
    pub tags: Vec<String>,
    pub secret: Option<String>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub json: bool,
}

/// Checks every input before a job exists, so that a bad one leaves no trace.
fn spec(ctx: &Ctx, r: SyncRequest) -> Result<JobSpec> {
    let url = SourceUrl::parse(&r.source)?;
    let volume = VolumeName::parse(&r.volume)?;
    for t in &r.tags {
        Name::parse("tag", t)?;
    }
    Filter::new(&r.include, &r.exclude)?;
    if let Some(name) = &r.secret {
        secrets::get(&ctx.settings.state, name)?;
    }
    let source = match &url {
        SourceUrl::Local(p) => {
            let abs = p
                .canonicalize()
                .map_err(|e| Error::io("cannot open", p, e))?;
            format!("file://{}", abs.display())
        }
        _ => url.to_string(),
    };
    Ok(JobSpec {
        source,
        volume: volume.to_string(),
        tags: r.tags,
        secret: r.secret,
        include: r.include,
        exclude: r.exclude,
        endpoint: ctx.settings.endpoints.resolve(&url),
    })
}

/// The state database, held by this process while it works as the agent.
fn open_db(ctx: &Ctx) -> Result<StateDb> {
    StateDb::open(&ctx.settings.state, Duration::from_secs(2))?.ok_or_else(|| {
        Error::new(
            ErrorKind::Conflict,
            format!(
                "another sealvol process holds the state database in {}",
                ctx.settings.state.display()
            ),
        )
        .hint("a console or another sync is running: wait for it to end, or run this there")
    })
}

pub fn sync(ctx: &Ctx, r: SyncRequest) -> Result<()> {
    let as_json = r.json;
    let spec = spec(ctx, r)?;
    let repo = ctx.open_repo(true)?;
    let db = open_db(ctx)?;
    // A job a killed process left behind is resumed, not started again.
    let interrupted = db.requeue_interrupted()?;
    let resumed = interrupted
        .iter()
        .filter_map(|id| db.job(*id).ok())
        .find(|j| j.spec == spec);
    let job = match resumed {
        Some(j) => {
            if !ctx.quiet {
                eprintln!("resuming job {} (attempt {})", j.id, j.attempts + 1);
            }
            j
        }
        None => db.add_job(spec)?,
    };
    follow(ctx, &repo, &db, job.id, as_json)
}

/// Runs job `id` here, drawing its progress, and prints the outcome.
fn follow(
    ctx: &Ctx,
    repo: &sealvol_engine::Repository,
    db: &StateDb,
    id: u64,
    as_json: bool,
) -> Result<()> {
    let progress = ctx.progress();
    let opts = SyncOptions {
        state_dir: &ctx.settings.state,
        batch_bytes: ctx.settings.sync_batch,
        streams: ctx.settings.sync_streams,
        progress: progress.as_ref(),
        cancel: Arc::new(AtomicBool::new(false)),
    };
    if !ctx.quiet {
        eprintln!("job {id}: syncing {}", db.job(id)?.spec.source);
    }
    let job = run_job(repo, db, id, &opts)?;
    if as_json {
        json(&job);
        return Ok(());
    }
    if !ctx.quiet {
        let p = &job.progress;
        eprintln!(
            "job {id} READY: {} in {} file(s); {} new chunk(s), {} reused",
            size(p.bytes_total),
            p.files_total,
            p.chunks_new,
            p.chunks_reused
        );
    }
    if let Some(r) = &job.sealed {
        println!("{r}");
    }
    Ok(())
}

pub fn run(ctx: &Ctx, cmd: JobsCommand) -> Result<()> {
    match cmd {
        JobsCommand::Ls { json: as_json } => {
            let jobs = open_db(ctx)?.jobs()?;
            if as_json {
                json(&serde_json::json!({ "jobs": jobs }));
            } else if jobs.is_empty() {
                if !ctx.quiet {
                    eprintln!("no jobs; start one with: sealvol volume sync SOURCE NS/NAME");
                }
            } else {
                let rows: Vec<Vec<String>> = jobs.iter().map(row).collect();
                table(
                    &["ID", "STATE", "SOURCE", "VOLUME", "DONE", "UPDATED"],
                    &rows,
                );
            }
            Ok(())
        }
        JobsCommand::Show { id, json: as_json } => {
            let job = open_db(ctx)?.job(id)?;
            if as_json {
                json(&job);
            } else {
                show(&job);
            }
            Ok(())
        }
        JobsCommand::Cancel { id, json: as_json } => {
            let db = open_db(ctx)?;
            let job = db.move_job(
                id,
                JobState::Cancelled,
                Some("cancelled by the user".into()),
            )?;
            if as_json {
                json(&job);
            } else if !ctx.quiet {
                eprintln!("job {id} CANCELLED");
            }
            Ok(())
        }
        JobsCommand::Retry { id, json: as_json } => {
            let repo = ctx.open_repo(true)?;
            let db = open_db(ctx)?;
            let job = db.job(id)?;
            if job
                .spec
                .secret
                .as_ref()
                .is_some_and(|s| secrets::get(&ctx.settings.state, s).is_err())
            {
                // Say so before the job moves: the secret was removed since.
                secrets::get(
                    &ctx.settings.state,
                    job.spec.secret.as_deref().unwrap_or(""),
                )?;
            }
            db.move_job(id, JobState::Queued, None)?;
            follow(ctx, &repo, &db, id, as_json)
        }
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
        job.spec.volume.clone(),
        done(job),
        when(&job.updated),
    ]
}

fn show(job: &Job) {
    let p = &job.progress;
    println!("job       {}", job.id);
    println!("state     {}", job.state);
    println!("source    {}", job.spec.source);
    if let Some(u) = &job.spec.endpoint.url {
        println!("endpoint  {u}");
    }
    println!("volume    {}", job.spec.volume);
    if !job.spec.tags.is_empty() {
        println!("tags      {}", job.spec.tags.join(", "));
    }
    if let Some(s) = &job.spec.secret {
        println!("secret    {s}");
    }
    for i in &job.spec.include {
        println!("include   {i}");
    }
    for e in &job.spec.exclude {
        println!("exclude   {e}");
    }
    println!("created   {}", job.created);
    println!("updated   {}", job.updated);
    println!("attempts  {}", job.attempts);
    println!("bytes     {}", done(job));
    println!("files     {}/{}", p.files_done, p.files_total);
    println!("chunks    {} new, {} reused", p.chunks_new, p.chunks_reused);
    if let Some(r) = &job.sealed {
        println!("sealed    {r}");
    }
    if let Some(r) = &job.reason {
        println!("reason    {r}");
    }
}
