//! The agent's Unix socket, `<state>/agent.sock` (mode 0600): one JSON request per
//! line, one JSON reply per line; a `follow` gets a reply line per live view until the
//! job ends. Any `sealvol` process reaches the agent through `AgentClient`, which
//! offers the same `JobsApi` as the agent itself.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use serde::{Deserialize, Serialize};

use super::inner::{Inner, TICK};
use crate::jobs::{Job, JobEvent, JobSpec, JobsApi};
use crate::watch::{Watch, WatchSpec, WatchView};
use sealvol_core::error::{Error, ErrorKind, IoContext, Result, WireError};

pub fn path(state: &Path) -> PathBuf {
    state.join("agent.sock")
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Request {
    Hello,
    Submit { spec: JobSpec },
    List,
    Show { id: u64 },
    Cancel { id: u64 },
    Retry { id: u64 },
    Event { id: u64 },
    Follow { id: u64 },
    Logs { id: u64 },
    AddWatch { spec: WatchSpec, owner: Option<u32> },
    Watches,
    WatchView { id: u64 },
    StopWatch { id: u64 },
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Hello { pid: u32, version: String },
    Job(Box<Job>),
    Jobs(Vec<Job>),
    Event(Box<JobEvent>),
    Log(String),
    Watch(Box<Watch>),
    Watches(Vec<WatchView>),
    WatchView(Box<WatchView>),
    Error(WireError),
}

/// Listens on the socket. Only the process that holds the state database calls this,
/// so a socket file already there is a dead agent's, and is replaced.
pub(super) fn serve(inner: Arc<Inner>) -> Result<(JoinHandle<()>, Stopper)> {
    let p = path(&inner.state_dir);
    let _ = std::fs::remove_file(&p);
    let listener = UnixListener::bind(&p).ctx("cannot listen on", &p)?;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
        .ctx("cannot restrict", &p)?;
    let stopper = Stopper(listener.try_clone().ctx("cannot listen on", &p)?);
    std::thread::Builder::new()
        .name("sealvol-agent-socket".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if inner.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let inner = inner.clone();
                let _ = std::thread::Builder::new()
                    .name("sealvol-agent-conn".into())
                    .spawn(move || handle(&inner, conn));
            }
        })
        .map(|t| (t, stopper))
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot start the agent socket: {e}")))
}

/// Wakes the listener's `accept` so that it sees the agent stopping, even when the
/// socket's file is already gone (a test's temporary directory, say).
pub(super) struct Stopper(UnixListener);

impl Stopper {
    pub(super) fn stop(&self) {
        use std::os::fd::AsRawFd;
        // SAFETY: shutdown on a socket this process owns; it only ends pending accepts.
        unsafe {
            libc::shutdown(self.0.as_raw_fd(), libc::SHUT_RDWR);
        }
    }
}

pub(super) fn remove(state: &Path) {
    let _ = std::fs::remove_file(path(state));
}

fn send(w: &mut impl Write, reply: &Reply) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(reply).map_err(std::io::Error::other)?;
    line.push(b'\n');
    w.write_all(&line)?;
    w.flush()
}

fn handle(inner: &Inner, conn: UnixStream) {
    let Ok(read_half) = conn.try_clone() else {
        return;
    };
    let mut out = conn;
    for line in BufReader::new(read_half).lines() {
        let Ok(line) = line else { return };
        let req: Request = match serde_json::from_str(&line) {
            Ok(r) => r,
            Err(e) => {
                let err = Error::invalid(format!("the agent cannot read this request: {e}"))
                    .hint("client and agent must be the same sealvol version");
                let _ = send(&mut out, &Reply::Error(WireError::from(&err)));
                return;
            }
        };
        let reply = |r: Result<Reply>| r.unwrap_or_else(|e| Reply::Error(WireError::from(&e)));
        let sent = match req {
            Request::Hello => send(
                &mut out,
                &Reply::Hello {
                    pid: std::process::id(),
                    version: env!("CARGO_PKG_VERSION").to_string(),
                },
            ),
            Request::Submit { spec } => send(
                &mut out,
                &reply(inner.submit(spec).map(|j| Reply::Job(Box::new(j)))),
            ),
            Request::List => send(&mut out, &reply(inner.list().map(Reply::Jobs))),
            Request::Show { id } => send(
                &mut out,
                &reply(inner.show(id).map(|j| Reply::Job(Box::new(j)))),
            ),
            Request::Cancel { id } => send(
                &mut out,
                &reply(inner.cancel(id).map(|j| Reply::Job(Box::new(j)))),
            ),
            Request::Retry { id } => send(
                &mut out,
                &reply(inner.retry(id).map(|j| Reply::Job(Box::new(j)))),
            ),
            Request::Event { id } => send(
                &mut out,
                &reply(inner.event(id).map(|e| Reply::Event(Box::new(e)))),
            ),
            Request::Follow { id } => follow(inner, id, &mut out),
            Request::Logs { id } => send(&mut out, &reply(inner.logs(id).map(Reply::Log))),
            Request::AddWatch { spec, owner } => send(
                &mut out,
                &reply(
                    inner
                        .add_watch(spec, owner)
                        .map(|w| Reply::Watch(Box::new(w))),
                ),
            ),
            Request::Watches => send(&mut out, &reply(inner.watch_list().map(Reply::Watches))),
            Request::WatchView { id } => send(
                &mut out,
                &reply(inner.watch_view(id).map(|v| Reply::WatchView(Box::new(v)))),
            ),
            Request::StopWatch { id } => send(
                &mut out,
                &reply(inner.stop_watch(id).map(|w| Reply::Watch(Box::new(w)))),
            ),
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Sends live views until the job ends or the follower goes away.
fn follow(inner: &Inner, id: u64, out: &mut UnixStream) -> std::io::Result<()> {
    loop {
        inner.touch();
        let ev = match inner.event(id) {
            Ok(ev) => ev,
            Err(e) => return send(out, &Reply::Error(WireError::from(&e))),
        };
        let done = ev.job.state.is_final();
        let job = ev.job.clone();
        send(out, &Reply::Event(Box::new(ev)))?;
        if done {
            return send(out, &Reply::Job(Box::new(job)));
        }
        if inner.stop.load(Ordering::SeqCst) {
            let e = agent_gone();
            return send(out, &Reply::Error(WireError::from(&e)));
        }
        std::thread::sleep(TICK);
    }
}

/// The agent hung up mid-request: it was stopping.
fn dropped(e: &Error) -> bool {
    matches!(
        e.io_kind(),
        Some(std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe)
    ) || e.message() == AGENT_GONE
}

const AGENT_GONE: &str = "the agent stopped before the job ended";

fn agent_gone() -> Error {
    Error::new(ErrorKind::Io, AGENT_GONE)
        .hint("the job resumes when an agent starts again: `sealvol agent`, the console, or `sealvol jobs retry`")
}

/// A connection to the agent of a state directory, from another process.
pub struct AgentClient {
    path: PathBuf,
    /// The agent's process id.
    pub pid: u32,
}

impl AgentClient {
    /// Connects to the running agent; `None` if no agent runs.
    pub fn connect(state: &Path) -> Result<Option<AgentClient>> {
        // An agent that is stopping (a command that hosted it for a moment) may accept a
        // connection and then drop it: ask again until it answers or is gone.
        let mut tries = 0;
        loop {
            match AgentClient::connect_once(state) {
                Err(e) if dropped(&e) && tries < 40 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    fn connect_once(state: &Path) -> Result<Option<AgentClient>> {
        let p = path(state);
        let mut client = AgentClient { path: p, pid: 0 };
        match client.open() {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(Error::io("cannot reach the agent at", &client.path, e)),
        }
        let hello = match client.call(&Request::Hello) {
            // Gone between the first connection and the hello (its socket removed as it
            // stopped): no agent, as if it had been gone before.
            Err(e)
                if matches!(
                    e.io_kind(),
                    Some(std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused)
                ) =>
            {
                return Ok(None);
            }
            other => other?,
        };
        match hello {
            Reply::Hello { pid, .. } => {
                client.pid = pid;
                Ok(Some(client))
            }
            other => Err(unexpected(&other)),
        }
    }

    fn open(&self) -> std::io::Result<UnixStream> {
        UnixStream::connect(&self.path)
    }

    fn request(&self, req: &Request) -> Result<BufReader<UnixStream>> {
        let mut conn = self
            .open()
            .map_err(|e| Error::io("cannot reach the agent at", &self.path, e))?;
        let mut line = serde_json::to_vec(req)
            .map_err(|e| Error::new(ErrorKind::Io, format!("request: {e}")))?;
        line.push(b'\n');
        conn.write_all(&line)
            .map_err(|e| Error::io("cannot write to the agent at", &self.path, e))?;
        Ok(BufReader::new(conn))
    }

    fn read(&self, r: &mut BufReader<UnixStream>) -> Result<Reply> {
        let mut line = String::new();
        let n = r
            .read_line(&mut line)
            .map_err(|e| Error::io("cannot read from the agent at", &self.path, e))?;
        if n == 0 {
            return Err(agent_gone());
        }
        match serde_json::from_str(&line) {
            Ok(Reply::Error(w)) => Err(w.into()),
            Ok(reply) => Ok(reply),
            Err(e) => Err(Error::new(
                ErrorKind::Io,
                format!("the agent's reply is unreadable: {e}"),
            )
            .hint("client and agent must be the same sealvol version")),
        }
    }

    fn call(&self, req: &Request) -> Result<Reply> {
        let mut r = self.request(req)?;
        self.read(&mut r)
    }

    fn job(&self, req: &Request) -> Result<Job> {
        match self.call(req)? {
            Reply::Job(j) => Ok(*j),
            other => Err(unexpected(&other)),
        }
    }
}

fn unexpected(r: &Reply) -> Error {
    Error::new(
        ErrorKind::Io,
        format!("the agent answered out of turn: {r:?}"),
    )
    .hint("client and agent must be the same sealvol version")
}

impl JobsApi for AgentClient {
    fn submit(&self, spec: JobSpec) -> Result<Job> {
        self.job(&Request::Submit { spec })
    }

    fn list(&self) -> Result<Vec<Job>> {
        match self.call(&Request::List)? {
            Reply::Jobs(j) => Ok(j),
            other => Err(unexpected(&other)),
        }
    }

    fn show(&self, id: u64) -> Result<Job> {
        self.job(&Request::Show { id })
    }

    fn cancel(&self, id: u64) -> Result<Job> {
        self.job(&Request::Cancel { id })
    }

    fn retry(&self, id: u64) -> Result<Job> {
        self.job(&Request::Retry { id })
    }

    fn event(&self, id: u64) -> Result<JobEvent> {
        match self.call(&Request::Event { id })? {
            Reply::Event(e) => Ok(*e),
            other => Err(unexpected(&other)),
        }
    }

    fn follow(&self, id: u64, on_event: &mut dyn FnMut(&JobEvent)) -> Result<Job> {
        let mut r = self.request(&Request::Follow { id })?;
        loop {
            match self.read(&mut r)? {
                Reply::Event(e) => on_event(&e),
                Reply::Job(j) => return Ok(*j),
                other => return Err(unexpected(&other)),
            }
        }
    }

    fn logs(&self, id: u64) -> Result<String> {
        match self.call(&Request::Logs { id })? {
            Reply::Log(text) => Ok(text),
            other => Err(unexpected(&other)),
        }
    }

    fn add_watch(&self, spec: WatchSpec, owner: Option<u32>) -> Result<Watch> {
        match self.call(&Request::AddWatch { spec, owner })? {
            Reply::Watch(w) => Ok(*w),
            other => Err(unexpected(&other)),
        }
    }

    fn watches(&self) -> Result<Vec<WatchView>> {
        match self.call(&Request::Watches)? {
            Reply::Watches(w) => Ok(w),
            other => Err(unexpected(&other)),
        }
    }

    fn watch_view(&self, id: u64) -> Result<WatchView> {
        match self.call(&Request::WatchView { id })? {
            Reply::WatchView(v) => Ok(*v),
            other => Err(unexpected(&other)),
        }
    }

    fn stop_watch(&self, id: u64) -> Result<Watch> {
        match self.call(&Request::StopWatch { id })? {
            Reply::Watch(w) => Ok(*w),
            other => Err(unexpected(&other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An agent that is stopping accepts a connection, hangs up, and is gone: a client
    /// that met it finds no agent (and so may host one), not an error.
    #[test]
    fn an_agent_that_hangs_up_while_stopping_is_no_agent() {
        let dir = tempfile::tempdir().unwrap();
        let listener = std::os::unix::net::UnixListener::bind(path(dir.path())).unwrap();
        let p = path(dir.path());
        let stopping = std::thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            drop(conn);
            std::fs::remove_file(&p).unwrap();
        });
        assert!(AgentClient::connect(dir.path()).unwrap().is_none());
        stopping.join().unwrap();
    }
}
