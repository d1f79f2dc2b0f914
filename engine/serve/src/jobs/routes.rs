//! The job routes (`jobs/mod.rs` says what a key may do):
//!
//! - `GET /v1/jobs`: `{"jobs": [Job, …]}`, newest first, those the key sees;
//! - `POST /v1/jobs`: a `Submit`; answers the `Job` (queued, or the same sync already
//!   waiting or running);
//! - `GET /v1/jobs/{id}`: the live view (`JobEvent`);
//! - `POST /v1/jobs/{id}/cancel`, `POST /v1/jobs/{id}/retry`: the `Job` after;
//! - `GET /v1/jobs/{id}/logs`: the job's log, text;
//! - `GET /v1/jobs/{id}/events`: server-sent events (`feed.rs`), resumed from the
//!   `Last-Event-ID` header or `?after=ID`.

// Checks answer a request early with its response; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_node::jobs::Job;

use super::feed::{Feed, Numbered, StreamTurn};
use super::{Desk, STREAMS_PER_KEY, Submit};
use crate::keys::Grant;
use crate::reply::Reply;
use crate::reply::{failed, json};
use sealvol_wire::jobs::KEEP_ALIVE;

/// The largest submission: a source, a volume, and some tags and patterns.
const SUBMIT_BODY: usize = 64 << 10;

/// The server runs no jobs (a server built without an agent: tests of the cache tier).
fn no_desk() -> Response {
    failed(
        Error::new(ErrorKind::Unavailable, "this server runs no jobs")
            .hint("run the sync on your machine: sealvol volume sync SOURCE NS/NAME"),
    )
}

/// A job as a key holder sees it: where the server reaches the source is the server's
/// own setting (an internal endpoint's address is nobody else's business), so neither
/// the record nor its reason and error name it, nor the server's folders.
fn shown(mut job: Job) -> Job {
    job.spec.endpoint = Default::default();
    job.reason = job.reason.map(|r| crate::reply::pathless(&r));
    if let Some(e) = &mut job.error {
        e.message = crate::reply::pathless(&e.message);
        e.hint = e.hint.as_deref().map(crate::reply::pathless);
    }
    job
}

/// A line of a job's log as a key holder reads it: its time and its state word
/// (`FAILED:`) kept, and if it named the server's files, what failed but not where.
fn log_line(line: &str) -> String {
    let (at, rest) = line.split_once(' ').unwrap_or(("", line));
    let (word, said) = match rest.split_once(": ") {
        Some((w, said)) if !w.is_empty() && w.bytes().all(|b| b.is_ascii_uppercase()) => {
            (format!("{w}: "), said)
        }
        _ => (String::new(), rest),
    };
    let at = if at.is_empty() {
        String::new()
    } else {
        format!("{at} ")
    };
    format!("{at}{word}{}\n", crate::reply::pathless(said))
}

/// Runs a call of the agent off the async threads.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> std::result::Result<T, Response> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| {
            failed(Error::new(
                ErrorKind::Io,
                "the request failed on the server",
            ))
        })?
        .map_err(failed)
}

pub async fn list(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
) -> Response {
    let Some(desk) = desk else { return no_desk() };
    let jobs = blocking(move || {
        let all = desk.api.list()?;
        Ok(all
            .into_iter()
            .filter(|j| grant.sees(super::namespace_of(j)))
            .collect::<Vec<_>>())
    })
    .await;
    match jobs {
        Ok(jobs) => {
            let jobs: Vec<Job> = jobs.into_iter().map(shown).collect();
            json(&serde_json::json!({ "jobs": jobs }))
        }
        Err(r) => r,
    }
}

pub async fn submit(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let Some(desk) = desk else {
        return Err(no_desk());
    };
    let body = crate::reply::read_body(body, SUBMIT_BODY).await?;
    let sub: Submit = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return Err(failed(Error::invalid(format!("not a job: {e:.200}")).hint(
                "send {\"source\": ADDRESS, \"volume\": \"NS/NAME\", \"tags\": [..], \"secret\": NAME, \"include\": [..], \"exclude\": [..]}",
            )));
        }
    };
    let job = blocking(move || {
        let spec = desk.spec(&grant, sub)?;
        let job = desk.api.submit(spec)?;
        tracing::info!(
            "job {}: {} -> {} submitted by key {}",
            job.id,
            job.spec.source,
            job.spec.volume,
            grant.name
        );
        Ok(job)
    })
    .await;
    Ok(match job {
        Ok(j) => json(&shown(j)),
        Err(r) => r,
    })
}

pub async fn show(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(id): Path<u64>,
) -> Response {
    let Some(desk) = desk else { return no_desk() };
    match blocking(move || {
        desk.visible(&grant, id)?;
        desk.api.event(id)
    })
    .await
    {
        Ok(mut ev) => {
            ev.job = shown(ev.job);
            json(&ev)
        }
        Err(r) => r,
    }
}

pub async fn cancel(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(id): Path<u64>,
) -> Response {
    change(desk, grant, id, Change::Cancel).await
}

pub async fn retry(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(id): Path<u64>,
) -> Response {
    change(desk, grant, id, Change::Retry).await
}

/// What a key may do to a job once it runs: only where it may write.
#[derive(Clone, Copy)]
enum Change {
    Cancel,
    Retry,
}

async fn change(desk: Option<Arc<Desk>>, grant: Arc<Grant>, id: u64, c: Change) -> Response {
    let Some(desk) = desk else { return no_desk() };
    let what = match c {
        Change::Cancel => "cancel",
        Change::Retry => "retry",
    };
    match blocking(move || {
        let job = desk.writable(&grant, id, &format!("{what} jobs"))?;
        if let (Change::Retry, Some(by)) = (c, &job.spec.started_by)
            && !desk.is_live(by)
        {
            return Err(Error::new(
                ErrorKind::Denied,
                format!("job {id} acts for key {by}, which is revoked"),
            )
            .hint("start the sync anew with your key: sealvol --remote URL volume sync SOURCE NS/NAME"));
        }
        tracing::info!("job {id}: {what} asked by key {}", grant.name);
        match c {
            Change::Cancel => desk.api.cancel(id),
            Change::Retry => desk.api.retry(id),
        }
    })
    .await
    {
        Ok(j) => json(&shown(j)),
        Err(r) => r,
    }
}

pub async fn logs(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(id): Path<u64>,
) -> Response {
    let Some(desk) = desk else { return no_desk() };
    match blocking(move || {
        desk.visible(&grant, id)?;
        desk.api.logs(id)
    })
    .await
    {
        Ok(text) => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            // Line by line: each keeps its time, and one that named the server's
            // files says what failed, not where.
            text.lines().map(log_line).collect::<String>(),
        )
            .into_response(),
        Err(r) => r,
    }
}

#[derive(serde::Deserialize)]
pub struct EventsQuery {
    after: Option<String>,
}

/// Server-sent events of one job until it ends; the stream ends after the event that
/// shows it READY, FAILED or CANCELLED.
pub async fn events(
    State(desk): State<Option<Arc<Desk>>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(id): Path<u64>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(desk) = desk else { return no_desk() };
    {
        let (d, g) = (Arc::clone(&desk), Arc::clone(&grant));
        if let Err(r) = blocking(move || d.visible(&g, id)).await {
            return r;
        }
    }
    let Some(turn) = desk.feeds.turn(&grant.name, STREAMS_PER_KEY) else {
        return failed(
            Error::new(
                ErrorKind::Unavailable,
                format!("key {} follows {STREAMS_PER_KEY} jobs already", grant.name),
            )
            .hint("stop following one (ctrl-c), then try again"),
        );
    };
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or(q.after);
    let (feed, rx) = match desk.feeds.follow(id).await {
        Ok(f) => f,
        Err(e) => return failed(e),
    };
    let after = feed.after(last.as_deref());
    let follower = Follower {
        feed,
        rx,
        after,
        pending: VecDeque::new(),
        done: false,
        desk: Arc::clone(&desk),
        key: grant.name.clone(),
        _turn: turn,
    };
    let stream = futures::stream::unfold(follower, |mut f| async move {
        f.next().await.map(|ev| (Ok::<Event, Infallible>(ev), f))
    });
    let mut r = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    // Proxies that buffer would hold the events back.
    r.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    *r.status_mut() = StatusCode::OK;
    r
}

/// One follower of a feed.
struct Follower {
    feed: Arc<Feed>,
    rx: tokio::sync::watch::Receiver<u64>,
    after: u64,
    pending: VecDeque<Numbered>,
    done: bool,
    /// Whose stream it is: it ends when that key is revoked.
    desk: Arc<Desk>,
    key: String,
    _turn: StreamTurn,
}

/// How often an open stream looks whether its key was revoked.
const KEY_CHECK: Duration = Duration::from_millis(250);

impl Follower {
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(n) = self.pending.pop_front() {
                self.after = n.seq;
                if n.event.job.state.is_final() {
                    self.done = true;
                    self.pending.clear();
                }
                return Some(sse(&self.feed, &n));
            }
            if self.done {
                return None;
            }
            self.rx.borrow_and_update();
            let new = self.feed.since(self.after);
            if !new.is_empty() {
                self.pending.extend(new);
                continue;
            }
            if let Some(e) = self.feed.failure() {
                self.done = true;
                let body = serde_json::json!({
                    "kind": e.kind(),
                    "message": crate::reply::pathless(e.message()),
                    "hint": e.hint_text().map(crate::reply::pathless),
                });
                return Some(Event::default().event("error").data(body.to_string()));
            }
            if !self.desk.is_live(&self.key) {
                self.done = true;
                let body = serde_json::json!({
                    "kind": ErrorKind::Denied,
                    "message": format!("API key {} was revoked", self.key),
                    "hint": "ask the server's operator for a new one",
                });
                return Some(Event::default().event("error").data(body.to_string()));
            }
            // Woken by the next event, the poller's end, or the time to look at the
            // key again.
            tokio::select! {
                changed = self.rx.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                _ = tokio::time::sleep(KEY_CHECK) => {}
            }
        }
    }
}

fn sse(feed: &Feed, n: &Numbered) -> Event {
    let mut ev = (*n.event).clone();
    ev.job = shown(ev.job);
    let data = serde_json::to_string(&ev).unwrap_or_else(|_| "{}".into());
    Event::default()
        .id(feed.event_id(n.seq))
        .event(n.kind.name())
        .data(data)
}
