//! The Watch screen over a real agent running a real watch: the row, the detail with
//! the last sealed version and its history, enter for its files, and a stop that asks
//! first.

use std::time::{Duration, Instant};

use sealvol_node::watch::{Layout, Phase, WatchSpec};
use sealvol_views::Body;

use super::with_agent;
use crate::model::Overlay;

fn watch_view(h: &super::Harness) -> sealvol_views::watch::WatchesView {
    match h.model.frame(&h.keys).body {
        Body::Watch(v) => v,
        other => panic!("not the watch screen: {other:?}"),
    }
}

#[test]
fn the_watch_screen_shows_what_a_watch_sealed_and_stops_it_with_confirmation() {
    let mut h = with_agent(true);
    h.keys("W");
    let v = watch_view(&h);
    assert!(v.rows.is_empty() && v.empty.contains("no watches"), "{v:?}");

    let run = h._tmp.path().join("run");
    std::fs::create_dir_all(run.join("checkpoint-10")).unwrap();
    std::fs::write(run.join("checkpoint-10/model.safetensors"), b"weights").unwrap();
    let api = h.node.jobs.clone().unwrap();
    let spec = WatchSpec {
        dir: run.canonicalize().unwrap().display().to_string(),
        volume: "weights/run".into(),
        tags: vec!["latest".into()],
        layout: Layout::Steps,
        settle_secs: 0.5,
        keep_last: Some(3),
        keep_every: None,
        poll: false,
    };
    let w = api.add_watch(spec, None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    // Sealed, and the push's bookkeeping done: the runner is idle again.
    while {
        let v = api.watch_view(w.id).unwrap();
        v.watch.sealed.is_empty() || !matches!(v.now, Phase::Idle)
    } {
        assert!(Instant::now() < deadline, "{:?}", api.watch_view(w.id));
        std::thread::sleep(Duration::from_millis(20));
    }

    h.keys("r");
    let v = watch_view(&h);
    assert_eq!(v.rows.len(), 1);
    assert_eq!(v.rows[0].sealed, 1);
    let d = v.detail.expect("the watch in detail");
    assert_eq!(d.now.phase, "idle");
    assert_eq!(d.retention.as_deref(), Some("the last 3"));
    let last = d.last.expect("the last sealed version");
    assert_eq!(last.name, "checkpoint-10");
    assert_eq!((last.bytes_new, last.bytes_total), (7, 7));
    assert!(last.digest.as_deref().unwrap().starts_with("b3:"));
    assert_eq!(d.pushes.len(), 1);

    // Enter: the files of the version it sealed.
    h.keys("enter");
    match h.model.frame(&h.keys).body {
        Body::Files(f) => assert!(f.version.starts_with("vol:weights/run@b3:"), "{f:?}"),
        other => panic!("{other:?}"),
    }
    h.keys("esc");

    // Stop asks first, naming the folder; n keeps it, y stops it.
    h.keys("x");
    match h.model.overlay() {
        Some(Overlay::ConfirmStopWatch(id, what)) => {
            assert_eq!(*id, w.id);
            assert!(what.contains("weights/run"), "{what}");
        }
        other => panic!("{other:?}"),
    }
    h.keys("n");
    assert_eq!(watch_view(&h).rows[0].state, "ACTIVE");
    h.keys("x y");
    let v = watch_view(&h);
    assert_eq!(v.rows[0].state, "STOPPED", "{}", h.status());
    assert!(h.status().contains("stopped"), "{}", h.status());
    // Stopping again says why not.
    h.keys("x");
    assert!(h.model.overlay().is_none());
    assert!(h.status().contains("already stopped"), "{}", h.status());
}

#[test]
fn a_read_only_console_does_not_stop_a_watch() {
    let mut h = super::harness(true);
    h.keys("W x");
    assert!(h.model.overlay().is_none());
    assert!(h.status().contains("read-only"), "{}", h.status());
}
