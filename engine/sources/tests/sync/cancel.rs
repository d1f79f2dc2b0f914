//! A cancel ends a sync at once whatever it is doing: waiting out retries of a source
//! that fails, in the middle of a slow read, or reading a local folder; and a local
//! folder syncs like a push. (Detached jobs answered over the agent's socket, an agent
//! killed mid-job and one started in the background are tested on the binary:
//! `tests/sync/agent.rs`.)

use std::time::{Duration, Instant};

use super::common::{Here, digest_of, endpoints, here, sample, write};
use sealvol_core::testutil::noise;
use sealvol_node::jobs::{JobSpec, JobState, JobsApi};
use sealvol_source::{Endpoints, SourceUrl};
use sealvol_testkit::servers::{FailingServer, Moto, SlowProxy};

/// `jobs cancel ID`: the job ends CANCELLED at once, its log says who cancelled it,
/// and it never FAILED.
fn cancel_ends_it(h: &Here, id: u64) {
    let t = Instant::now();
    h.agent.cancel(id).unwrap();
    let job = h.ended(id);
    assert_eq!(job.state, JobState::Cancelled, "{job:?}");
    // Not a speed figure: without the fix the job ran out its retries (26 s) and FAILED.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let logs = h.agent.logs(id).unwrap();
    for line in ["cancel requested by the user", "CANCELLED: cancelled"] {
        assert!(logs.contains(line), "no {line:?} in\n{logs}");
    }
    assert!(!logs.contains("FAILED"), "{logs}");
}

#[test]
fn cancel_takes_effect_while_a_sync_waits_out_retries() {
    let down = FailingServer::start();
    let h = here();
    let eps = endpoints(&format!("http://127.0.0.1:{}", down.port));
    let id = h.detached_until(&eps, "s3://down/ckpt", "retrying in");
    // A retry names the source once, not once per layer that passed the error on.
    let logs = h.agent.logs(id).unwrap();
    let retry = logs.lines().find(|l| l.contains("retrying in")).unwrap();
    assert_eq!(retry.matches("s3://down/ckpt/").count(), 1, "{retry}");
    cancel_ends_it(&h, id);
}

#[test]
fn cancel_takes_effect_during_a_slow_read() {
    let moto = Moto::start(&[]);
    let h = here();
    let src = h.path("src");
    for i in 0..12 {
        write(
            &src.join(format!("shard-{i:02}.bin")),
            &noise(3 << 20, 200 + i),
        );
    }
    moto.seed(&["big", "ckpt", src.to_str().unwrap()]);
    // 4 KiB/s: each part's read stays in flight for minutes.
    let proxy = SlowProxy::start(moto.port, 4 << 10);
    let eps = endpoints(&format!("http://127.0.0.1:{}", proxy.port));
    let id = h.detached_until(&eps, "s3://big/ckpt", "listed 12 object(s)");
    std::thread::sleep(Duration::from_millis(300));
    cancel_ends_it(&h, id);
}

#[test]
fn cancel_takes_effect_during_a_local_folder_sync() {
    let h = here();
    // A sparse 16 GiB file: read at memory speed, but long enough that only a cancel
    // that every read looks at can stop it within a moment.
    let src = h.path("big-local");
    std::fs::create_dir_all(&src).unwrap();
    let f = std::fs::File::create(src.join("sparse.bin")).unwrap();
    f.set_len(16 << 30).unwrap();
    let id = h.detached_until(
        &Endpoints::default(),
        src.to_str().unwrap(),
        "attempt 1 started",
    );
    std::thread::sleep(Duration::from_millis(300));
    cancel_ends_it(&h, id);
    assert!(h.volumes().is_empty(), "nothing sealed");
}

#[test]
fn a_local_folder_syncs_like_a_push() {
    let h = here();
    let src = h.path("src");
    sample(&src);
    let local = src.to_str().unwrap();
    let job = h.submit(&Endpoints::default(), local, "x/local", |s| {
        s.tags = vec!["v1".into()];
        s.secret = None;
    });
    assert_eq!(job.state, JobState::Ready, "{job:?}");
    assert!(job.sealed.as_deref().unwrap().ends_with(&digest_of(&src)));
    // Filters are a remote source's: refused for a folder, whether at submission or
    // when the job starts.
    let url = SourceUrl::parse(local).unwrap();
    let spec = JobSpec {
        source: url.to_string(),
        volume: "x/local".into(),
        tags: vec![],
        secret: None,
        include: vec![],
        exclude: vec!["*.bin".into()],
        endpoint: Endpoints::default().resolve(&url),
        mirror_to: None,
        started_by: None,
    };
    let said = match h.agent.submit(spec) {
        Err(e) => e.to_string(),
        Ok(job) => {
            let job = h.ended(job.id);
            assert_eq!(job.state, JobState::Failed, "{job:?}");
            job.reason.unwrap_or_default()
        }
    };
    assert!(said.contains("apply to remote sources"), "{said}");
}
