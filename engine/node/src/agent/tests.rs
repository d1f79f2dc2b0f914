//! The agent's scheduling with real threads and a fake source: one namespace's stuck
//! jobs never delay another's, queue caps refuse with the cap and the count, and a job
//! that only waits out retries lets another job run in its slot. Every wait here is
//! on a gate the test opens, never on a clock.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::schedule::Limits;
use super::{Agent, AgentSettings};
use crate::jobs::{Job, JobSpec, JobState, JobsApi};
use crate::sync::Trust;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::repo::Repository;
use sealvol_source::endpoints::Resolved;
use sealvol_source::{
    Access, Connector, Fetch, Filter, Listing, Notes, Object, RawObject, Remote, SourceUrl,
};

/// Opened once by the test; sources that wait for it wait until then (or a cancel).
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    opened: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
    fn is_open(&self) -> bool {
        *self.open.lock().unwrap()
    }
    /// Waits for the gate, giving up when `cancel` is set.
    fn wait(&self, cancel: &AtomicBool) -> Result<()> {
        let mut open = self.open.lock().unwrap();
        while !*open {
            if cancel.load(Ordering::SeqCst) {
                return Err(Error::cancelled());
            }
            open = self
                .opened
                .wait_timeout(open, Duration::from_millis(20))
                .unwrap()
                .0;
        }
        Ok(())
    }
}

/// Sources by bucket: `s3://stuck/…` answers nothing until the gate opens,
/// `s3://retrying/…` fails and waits out a backoff until it does, anything else lists
/// one small file at once.
struct FakeSources {
    gate: Arc<Gate>,
    /// Files opened for reading, over all jobs.
    opened: Arc<std::sync::atomic::AtomicUsize>,
}

impl Connector for FakeSources {
    fn connect(
        &self,
        url: &SourceUrl,
        _at: &Resolved,
        _access: Access<'_>,
        notes: Notes,
        cancel: Arc<AtomicBool>,
    ) -> Result<Box<dyn Remote>> {
        Ok(Box::new(FakeRemote {
            bucket: url.to_string(),
            gate: self.gate.clone(),
            opened: self.opened.clone(),
            notes,
            cancel,
        }))
    }
}

struct FakeRemote {
    bucket: String,
    gate: Arc<Gate>,
    opened: Arc<std::sync::atomic::AtomicUsize>,
    notes: Notes,
    cancel: Arc<AtomicBool>,
}

impl Remote for FakeRemote {
    fn list(&mut self, filter: &Filter) -> Result<Listing> {
        if self.bucket.starts_with("s3://stuck") {
            self.gate.wait(&self.cancel)?;
        } else if self.bucket.starts_with("s3://retrying") {
            // As a client's retries do: a backoff at a time, under the job's notes.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap();
            let (gate, cancel) = (self.gate.clone(), self.cancel.clone());
            rt.block_on(sealvol_source::retry::logged(self.notes.clone(), async {
                while !gate.is_open() {
                    if cancel.load(Ordering::SeqCst) {
                        return Err(Error::cancelled());
                    }
                    sealvol_source::retry::back_off(Duration::from_millis(20)).await;
                }
                Ok(())
            }))?;
        }
        let raw = vec![RawObject {
            key: "a.bin".into(),
            size: 1024,
            version: "1".into(),
            expect: Vec::new(),
            exec: false,
        }];
        Listing::build(raw, filter, None)
    }

    fn fetch(&self, objects: Vec<Object>, _streams: usize) -> Box<dyn Fetch + '_> {
        Box::new(FakeFetch(objects, self.opened.clone()))
    }
}

struct FakeFetch(Vec<Object>, Arc<std::sync::atomic::AtomicUsize>);

impl sealvol_core::push::Inputs for FakeFetch {
    fn open(&self, i: usize) -> Result<Box<dyn Read + Send + '_>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Ok(Box::new(std::io::Cursor::new(vec![
            i as u8;
            self.0[i].size as usize
        ])))
    }
    fn name(&self, i: usize) -> String {
        self.0[i].path.clone()
    }
    fn finished(&self, _i: usize, _total: u64) -> Result<()> {
        Ok(())
    }
}

impl Fetch for FakeFetch {
    fn take_failure(&self) -> Option<Error> {
        None
    }
}

struct Setup {
    agent: Agent,
    gate: Arc<Gate>,
    opened: Arc<std::sync::atomic::AtomicUsize>,
    tmp: tempfile::TempDir,
}

fn agent(limits: Limits) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
    let gate = Arc::new(Gate::default());
    let settings = AgentSettings {
        batch_bytes: 1 << 20,
        streams: 2,
        run_queue: true,
        trust: Trust::Server { ambient: false },
        mirrors: None,
        limits,
        taps: None,
    };
    let opened = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let connector = Arc::new(FakeSources {
        gate: gate.clone(),
        opened: opened.clone(),
    });
    let agent = Agent::start(repo, &tmp.path().join("state"), settings, Some(connector))
        .unwrap()
        .expect("no other agent");
    Setup {
        agent,
        gate,
        opened,
        tmp,
    }
}

fn spec(source: &str, volume: &str, key: &str) -> JobSpec {
    JobSpec {
        source: source.into(),
        volume: volume.into(),
        tags: vec![],
        secret: None,
        include: vec![],
        exclude: vec![],
        endpoint: Default::default(),
        mirror_to: None,
        started_by: Some(key.into()),
    }
}

/// Waits until `job` is in a final state; a deadline only for a test that would
/// otherwise hang (the properties asserted do not depend on it).
fn ended(api: &dyn JobsApi, id: u64) -> Job {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let j = api.show(id).unwrap();
        if j.state.is_final() {
            return j;
        }
        assert!(Instant::now() < deadline, "job {id} never ended: {j:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn stuck_jobs_of_one_namespace_never_delay_another_namespaces_job() {
    let s = agent(Limits::SERVER);
    let stuck: Vec<u64> = (0..10)
        .map(|i| {
            let j = s
                .agent
                .submit(spec(
                    &format!("s3://stuck/{i}/"),
                    &format!("team-a/v{i}"),
                    "a",
                ))
                .unwrap();
            j.id
        })
        .collect();
    let b = s
        .agent
        .submit(spec("s3://quick/model/", "team-b/model", "b"))
        .unwrap();
    let done = ended(&s.agent, b.id);
    assert_eq!(done.state, JobState::Ready, "{done:?}");
    // Every one of team-a's jobs still waits on a source that answers nothing.
    let jobs = s.agent.list().unwrap();
    let a_states: Vec<JobState> = jobs
        .iter()
        .filter(|j| stuck.contains(&j.id))
        .map(|j| j.state)
        .collect();
    assert!(a_states.iter().all(|s| !s.is_final()), "{a_states:?}");
    assert!(
        a_states.iter().filter(|s| **s == JobState::Running).count() <= 2,
        "team-a runs at most its namespace's 2: {a_states:?}"
    );
    s.gate.open();
    for id in stuck {
        assert_eq!(ended(&s.agent, id).state, JobState::Ready);
    }
}

#[test]
fn past_a_keys_queue_cap_a_submission_is_refused_with_the_cap_and_the_count() {
    let s = agent(Limits::SERVER);
    let mut accepted = 0;
    let mut refused = None;
    for i in 0..300 {
        match s.agent.submit(spec(
            &format!("s3://stuck/{i}/"),
            &format!("team-a/v{i}"),
            "a",
        )) {
            Ok(_) => accepted += 1,
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("the cap refused one");
    assert_eq!(e.kind(), ErrorKind::Busy);
    assert!(
        e.message()
            .contains("key a already has 32 job(s) queued, its cap (serve --queue-per-key 32)"),
        "{e}"
    );
    // 32 queued, plus the ones already running when the cap was reached (at most the
    // key's 2), whatever the dispatcher had done by then.
    assert!((32..=34).contains(&accepted), "{accepted}");
    // Another team is not refused, and its job runs.
    let b = s
        .agent
        .submit(spec("s3://quick/m/", "team-b/m", "b"))
        .unwrap();
    assert_eq!(ended(&s.agent, b.id).state, JobState::Ready);
    s.gate.open();
}

#[test]
fn a_job_waiting_out_retries_lets_another_run_in_its_only_slot() {
    let s = agent(Limits {
        running: 1,
        ..Limits::SERVER
    });
    let a = s
        .agent
        .submit(spec("s3://retrying/x/", "team-a/x", "a"))
        .unwrap();
    let b = s
        .agent
        .submit(spec("s3://quick/m/", "team-b/m", "b"))
        .unwrap();
    // One slot, and team-a's job never ends while the gate is shut: team-b's ran in
    // the slot team-a's gave up while it waited.
    assert_eq!(ended(&s.agent, b.id).state, JobState::Ready);
    assert!(!s.agent.show(a.id).unwrap().state.is_final());
    let log = s.agent.logs(a.id).unwrap();
    assert!(
        log.contains("its slot goes to other jobs meanwhile"),
        "{log}"
    );
    s.gate.open();
    assert_eq!(ended(&s.agent, a.id).state, JobState::Ready);
}

#[test]
fn a_sync_past_its_namespaces_quota_fails_before_it_fetches_a_byte() {
    let s = agent(Limits::SERVER);
    let mut repo = Repository::open_local(&s.tmp.path().join("repo"), false, false).unwrap();
    repo.change_settings(|c| {
        c.quotas.insert("team-a".into(), 100);
    })
    .unwrap();
    let a = s
        .agent
        .submit(spec("s3://quick/m/", "team-a/m", "a"))
        .unwrap();
    let failed = ended(&s.agent, a.id);
    assert_eq!(failed.state, JobState::Failed);
    let reason = failed.reason.unwrap_or_default();
    assert!(
        reason.contains(
            "namespace team-a would pass its quota of 100 B: it stores 0 B and this adds 1.0 KiB"
        ),
        "{reason}"
    );
    assert_eq!(s.opened.load(Ordering::SeqCst), 0, "nothing was fetched");
    let b = s
        .agent
        .submit(spec("s3://quick/m/", "team-b/m", "b"))
        .unwrap();
    assert_eq!(ended(&s.agent, b.id).state, JobState::Ready);
    assert_eq!(s.opened.load(Ordering::SeqCst), 1);
}
