//! The client of the server's jobs (serve's `jobs`): the same `JobsApi` as a local
//! agent, so `volume sync`, `jobs …` and the console work the same on a remote engine,
//! with the work done on the server. Following a job reads its event stream and, when
//! the connection is cut (a network blip, the server restarting), comes back with the
//! id of the last event it saw, so nothing is missed and nothing is shown twice.
//! Watches are not the server's: a watch reads a folder of the machine it runs on.

use std::io::{BufRead, BufReader, Read};
use std::time::{Duration, Instant};

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_node::jobs::{Job, JobEvent, JobSpec, JobsApi};
use sealvol_node::watch::{Watch, WatchSpec, WatchView};
use serde::de::DeserializeOwned;

use super::link::{Link, encode};
use sealvol_wire::jobs::Listed;
use sealvol_wire::jobs::Submit;

/// The longest line of an event stream a client reads: a live view is a few KiB.
const MAX_LINE: u64 = 1 << 20;
/// How long a follower keeps coming back to a server it lost before it gives up.
const COME_BACK_FOR: Duration = Duration::from_secs(600);

pub struct RemoteJobs {
    link: Link,
    /// For event streams: no total time, a read timeout well over the server's
    /// keep-alive.
    streams: reqwest::blocking::Client,
}

impl RemoteJobs {
    /// The jobs of the server at `url`, for key `key`.
    pub fn connect(url: &str, key: Option<&str>) -> Result<RemoteJobs> {
        let base = super::check_remote(url)?;
        let key = super::required_key(&base, key)?;
        let quiet = sealvol_wire::jobs::KEEP_ALIVE * 3;
        Ok(RemoteJobs {
            link: Link::new(&base, &key)?,
            streams: crate::protocol::client(
                sealvol_core::patience::connect(),
                sealvol_core::patience::total().max(quiet),
            )?,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/v1/{path}", self.link.base)
    }

    fn answer<T: DeserializeOwned>(&self, resp: reqwest::blocking::Response) -> Result<T> {
        if !resp.status().is_success() {
            return Err(self.link.error(resp));
        }
        let mut body = Vec::new();
        self.link.bytes(resp, &mut body)?;
        serde_json::from_slice(&body).map_err(|e| {
            Error::new(
                ErrorKind::Io,
                format!(
                    "the server at {} answered out of shape: {e}",
                    self.link.base
                ),
            )
            .hint("client and server must be the same sealvol version")
        })
    }

    fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T> {
        self.link.traffic.get();
        let resp = self.link.send(self.link.client.get(self.url(path)))?;
        self.answer(resp)
    }

    fn post<T: DeserializeOwned>(&self, path: &str, body: Vec<u8>) -> Result<T> {
        self.link.traffic.put(body.len() as u64);
        let resp = self.link.send(
            self.link
                .client
                .post(self.url(path))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body),
        )?;
        self.answer(resp)
    }

    /// Stores a secret for the server's jobs in namespace `ns`.
    pub fn set_secret(&self, ns: &str, name: &str, value: Vec<u8>) -> Result<()> {
        let resp = self.link.send(
            self.link
                .client
                .put(self.url(&format!("secrets/{}/{}", encode(ns), encode(name))))
                .body(value),
        )?;
        match resp.status().is_success() {
            true => Ok(()),
            false => Err(self.link.error(resp)),
        }
    }

    pub fn remove_secret(&self, ns: &str, name: &str) -> Result<()> {
        let resp = self.link.send(self.link.client.delete(self.url(&format!(
            "secrets/{}/{}",
            encode(ns),
            encode(name)
        ))))?;
        match resp.status().is_success() {
            true => Ok(()),
            false => Err(self.link.error(resp)),
        }
    }

    /// The server's secrets the key sees: names, never values.
    pub fn secrets(&self) -> Result<Vec<Listed>> {
        #[derive(serde::Deserialize)]
        struct Secrets {
            secrets: Vec<Listed>,
        }
        Ok(self.get::<Secrets>("secrets")?.secrets)
    }

    /// One connection to a job's events: `Ok(Some(job))` once it ended, `Ok(None)` if
    /// the stream ended first. `last` is the id of the last event seen, kept up to date.
    fn stream_once(
        &self,
        id: u64,
        last: &mut Option<String>,
        seen: &mut Option<Instant>,
        on_event: &mut dyn FnMut(&JobEvent),
    ) -> Result<Option<Job>> {
        let mut req = self
            .streams
            .get(self.url(&format!("jobs/{id}/events")))
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(l) = last.as_deref() {
            req = req.header("last-event-id", l);
        }
        let resp = self.link.send(req)?;
        if !resp.status().is_success() {
            return Err(self.link.error(resp));
        }
        let mut r = BufReader::new(resp);
        let mut event = Sse::default();
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut r)
                .take(MAX_LINE)
                .read_until(b'\n', &mut line)
                .map_err(|e| cut(&self.link.base, e))?;
            self.link.traffic.received(n as u64);
            if n == 0 {
                return Ok(None);
            }
            if line.last() != Some(&b'\n') {
                if n as u64 >= MAX_LINE {
                    return Err(Error::corrupt(format!(
                        "the server at {} sent an event line over {MAX_LINE} bytes",
                        self.link.base
                    )));
                }
                return Ok(None);
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            if !text.is_empty() {
                event.take(text);
                continue;
            }
            let done = std::mem::take(&mut event);
            match done.kind.as_deref() {
                Some("state" | "progress") => {
                    let ev: JobEvent = serde_json::from_str(&done.data).map_err(|e| {
                        Error::corrupt(format!(
                            "the server at {} sent an event out of shape: {e}",
                            self.link.base
                        ))
                        .hint("client and server must be the same sealvol version")
                    })?;
                    if done.id.is_some() {
                        *last = done.id;
                    }
                    *seen = Some(Instant::now());
                    on_event(&ev);
                    if ev.job.state.is_final() {
                        return Ok(Some(ev.job));
                    }
                }
                Some("error") => return Err(sent_error(&done.data)),
                // A keep-alive, or a kind this client does not know.
                _ => {}
            }
        }
    }
}

/// An event as its lines build it (the fields this protocol uses).
#[derive(Default)]
struct Sse {
    id: Option<String>,
    kind: Option<String>,
    data: String,
}

impl Sse {
    fn take(&mut self, line: &str) {
        if line.starts_with(':') {
            return;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "id" => self.id = Some(value.to_string()),
            "event" => self.kind = Some(value.to_string()),
            "data" => {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value);
            }
            _ => {}
        }
    }
}

fn sent_error(data: &str) -> Error {
    super::link::rebuilt(data).unwrap_or_else(|| {
        Error::new(
            ErrorKind::Io,
            "the server ended the job's events with an error",
        )
    })
}

fn cut(base: &str, e: std::io::Error) -> Error {
    Error::new(
        ErrorKind::Unavailable,
        format!("the event stream from {base} was cut: {e}"),
    )
}

/// Watches run where their folder is.
fn watches_are_local() -> Error {
    Error::invalid("a watch runs on the machine that has the folder, not on the server").hint(
        "run `sealvol --remote URL watch DIR NS/NAME` there: it pushes to the server as it goes",
    )
}

impl JobsApi for RemoteJobs {
    fn submit(&self, spec: JobSpec) -> Result<Job> {
        let body = serde_json::to_vec(&submit_of(&spec))
            .map_err(|e| Error::new(ErrorKind::Io, format!("cannot encode the job: {e}")))?;
        self.post("jobs", body)
    }

    fn list(&self) -> Result<Vec<Job>> {
        #[derive(serde::Deserialize)]
        struct Jobs {
            jobs: Vec<Job>,
        }
        Ok(self.get::<Jobs>("jobs")?.jobs)
    }

    fn show(&self, id: u64) -> Result<Job> {
        Ok(self.event(id)?.job)
    }

    fn cancel(&self, id: u64) -> Result<Job> {
        self.post(&format!("jobs/{id}/cancel"), Vec::new())
    }

    fn retry(&self, id: u64) -> Result<Job> {
        self.post(&format!("jobs/{id}/retry"), Vec::new())
    }

    fn event(&self, id: u64) -> Result<JobEvent> {
        self.get(&format!("jobs/{id}"))
    }

    /// Follows the job's events to its end. A cut connection is taken up again (from
    /// the last event seen) for up to `COME_BACK_FOR`; the job goes on on the server
    /// whatever happens here.
    fn follow(&self, id: u64, on_event: &mut dyn FnMut(&JobEvent)) -> Result<Job> {
        let mut last = None;
        let mut seen = Some(Instant::now());
        let mut pause = Duration::from_millis(200);
        loop {
            let before = seen;
            match self.stream_once(id, &mut last, &mut seen, on_event) {
                Ok(Some(job)) => return Ok(job),
                Ok(None) => {}
                Err(e) if e.kind() == ErrorKind::Unavailable => {
                    tracing::info!("following job {id}: {e}; coming back");
                }
                Err(e) => return Err(e),
            }
            if seen.is_some_and(|t| t.elapsed() > COME_BACK_FOR) {
                return Err(Error::new(
                    ErrorKind::Unavailable,
                    format!(
                        "lost the server at {} while following job {id}",
                        self.link.base
                    ),
                )
                .hint(format!(
                    "the job goes on on the server; follow it again with `sealvol --remote {} jobs show {id} --follow`",
                    self.link.base
                )));
            }
            if seen != before {
                pause = Duration::from_millis(200);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(5));
        }
    }

    fn logs(&self, id: u64) -> Result<String> {
        self.link.traffic.get();
        let resp = self
            .link
            .send(self.link.client.get(self.url(&format!("jobs/{id}/logs"))))?;
        if !resp.status().is_success() {
            return Err(self.link.error(resp));
        }
        let mut body = Vec::new();
        self.link.bytes(resp, &mut body)?;
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    fn add_watch(&self, _spec: WatchSpec, _owner: Option<u32>) -> Result<Watch> {
        Err(watches_are_local())
    }

    fn watches(&self) -> Result<Vec<WatchView>> {
        Ok(Vec::new())
    }

    fn watch_view(&self, _id: u64) -> Result<WatchView> {
        Err(watches_are_local())
    }

    fn stop_watch(&self, _id: u64) -> Result<Watch> {
        Err(watches_are_local())
    }
}

/// A job as this client asks the server for it.
fn submit_of(s: &JobSpec) -> Submit {
    Submit {
        source: s.source.clone(),
        volume: s.volume.clone(),
        tags: s.tags.clone(),
        secret: s.secret.clone(),
        include: s.include.clone(),
        exclude: s.exclude.clone(),
        mirror_to: s.mirror_to.clone(),
    }
}
