//! Key scripts against the model over a real repository: what an on-call engineer does
//! (browse → tags → history → undo a move → confirm), with effects carried out by the
//! real engine in between, as the console's tasks would.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use sealvol_core::Repository;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::{Digest, Name, Ref, VolumeName};
use sealvol_node::api::{Api, Node};
use sealvol_views::Body;

use super::effects::{Effect, perform};
use super::keymap::Keymap;
use super::model::{Model, Overlay};

mod deploy;
mod palette;
mod status;
mod watch;

pub(super) struct Harness {
    _tmp: tempfile::TempDir,
    node: Node,
    model: Model,
    keys: Keymap,
    v1: Digest,
    v2: Digest,
}

fn version(repo: &Repository, dir: &std::path::Path, bytes: &[u8], vol: &VolumeName) -> Digest {
    version_of(repo, dir, &[("model.bin", bytes)], vol)
}

/// A version of `vol` holding `files` (name, bytes), pushed from `dir`.
fn version_of(
    repo: &Repository,
    dir: &std::path::Path,
    files: &[(&str, &[u8])],
    vol: &VolumeName,
) -> Digest {
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let opts = PushOptions::new(&Quiet);
    push(repo, dir, vol, &[], &opts).unwrap().digest
}

fn harness(readonly: bool) -> Harness {
    harness_with(readonly, &|_, _, _| Vec::new())
}

/// A harness whose console was given the deployment files `deploy` writes (in the
/// test's folder, given weights/tiny's two versions).
fn harness_with(
    readonly: bool,
    deploy: &dyn Fn(&std::path::Path, Digest, Digest) -> Vec<std::path::PathBuf>,
) -> Harness {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
    let vol = VolumeName::parse("weights/tiny").unwrap();
    let v1 = version(&repo, &tmp.path().join("a"), b"one", &vol);
    let v2 = version(&repo, &tmp.path().join("b"), b"two", &vol);
    let other = VolumeName::parse("adapters/lora").unwrap();
    version(&repo, &tmp.path().join("c"), b"three", &other);
    let prod = Name::parse("tag", "prod").unwrap();
    repo.move_tag(&vol, &prod, &v1, None).unwrap();
    repo.move_tag(&vol, &prod, &v2, None).unwrap();
    let files = deploy(tmp.path(), v1, v2);
    let (model, effects) = Model::new("test-repo".into(), readonly, files);
    let state = tmp.path().join("state");
    let mut h = Harness {
        _tmp: tmp,
        node: Node {
            repo,
            state,
            jobs: None,
            label: None,
            launcher: None,
            policy: sealvol_node::api::no_policy(),
        },
        model,
        keys: Keymap::load(None).unwrap(),
        v1,
        v2,
    };
    h.run(effects);
    h
}

impl Harness {
    /// Carries out effects and feeds results back until nothing is pending.
    fn run(&mut self, mut effects: Vec<Effect>) {
        while let Some(e) = effects.pop() {
            if let Some(l) = perform(&self.node as &dyn Api, e) {
                effects.extend(self.model.on_loaded(l));
            }
        }
    }

    fn keys(&mut self, script: &str) {
        for k in script.split_whitespace() {
            let code = match k {
                "enter" => KeyCode::Enter,
                "esc" => KeyCode::Esc,
                "tab" => KeyCode::Tab,
                "down" => KeyCode::Down,
                "backspace" => KeyCode::Backspace,
                c => KeyCode::Char(c.chars().next().unwrap()),
            };
            let effects = self
                .model
                .on_key(&KeyEvent::new(code, KeyModifiers::NONE), &self.keys);
            self.run(effects);
        }
    }

    fn typed(&mut self, text: &str) {
        for c in text.chars() {
            let e = self.model.on_key(
                &KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE),
                &self.keys,
            );
            self.run(e);
        }
    }

    fn prod(&self) -> Digest {
        self.node
            .repo
            .resolve(&Ref::parse("weights/tiny:prod").unwrap())
            .unwrap()
    }

    fn status(&self) -> String {
        self.model.frame(&self.keys).status.text
    }
}

#[test]
fn browse_then_undo_a_tag_move_with_confirmation() {
    let mut h = harness(false);
    match h.model.frame(&h.keys).body {
        Body::Volumes(v) => {
            let names: Vec<_> = v
                .rows
                .iter()
                .map(|r| format!("{}/{}", r.namespace, r.name))
                .collect();
            assert_eq!(names, ["adapters/lora", "weights/tiny"]);
        }
        other => panic!("{other:?}"),
    }
    // Down to weights/tiny, open its versions, then its tags.
    h.keys("j enter");
    match h.model.frame(&h.keys).body {
        Body::Versions(v) => assert_eq!(v.rows.len(), 2),
        other => panic!("{other:?}"),
    }
    h.keys("t");
    let Body::Tags(t) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(t.tags[0].tag, "prod");
    assert_eq!(t.tags[0].history.len(), 2);

    // Into the history; the newest move is v1 -> v2; undo it.
    h.keys("tab u");
    let Some(Overlay::Confirm(plan)) = h.model.overlay() else {
        panic!("no confirmation: {}", h.status())
    };
    assert_eq!((plan.from, plan.to), (Some(h.v2), h.v1));
    // The cursor moving now changes nothing about what is being confirmed.
    h.keys("j");
    let Some(Overlay::Confirm(same)) = h.model.overlay() else {
        panic!()
    };
    assert_eq!(same.to, h.v1);
    h.keys("y");
    assert_eq!(h.prod(), h.v1);
    assert!(h.status().contains("now points at"), "{}", h.status());

    // The undo itself is in the history and can be undone in turn.
    let Body::Tags(t) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(t.tags[0].history.len(), 3);
    h.keys("u y");
    assert_eq!(h.prod(), h.v2);
}

#[test]
fn a_confirmation_for_a_tag_that_moved_meanwhile_fails_safely() {
    let mut h = harness(false);
    h.keys("j enter t tab u");
    assert!(matches!(h.model.overlay(), Some(Overlay::Confirm(_))));
    // Someone else moves prod before we confirm.
    let vol = VolumeName::parse("weights/tiny").unwrap();
    let other = version(&h.node.repo, &h._tmp.path().join("x"), b"hotfix", &vol);
    h.node
        .repo
        .move_tag(&vol, &Name::parse("tag", "prod").unwrap(), &other, None)
        .unwrap();
    h.keys("y");
    assert_eq!(h.prod(), other, "our stale confirmation must not apply");
    assert!(h.status().contains("now points at"), "{}", h.status());
    assert_eq!(
        h.model.frame(&h.keys).status.kind,
        sealvol_views::StatusKind::Error
    );
    // The refusal reloaded the tags: the table shows where prod is now, without `r`.
    let Body::Tags(t) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(t.tags[0].digest, other.to_string());
    assert_eq!(t.tags[0].history.len(), 3);
}

#[test]
fn point_a_tag_from_the_versions_screen_and_cancel() {
    let mut h = harness(false);
    h.keys("j enter");
    // The newest version (v2) is selected; point canary at it.
    h.keys("p");
    h.typed("canary");
    h.keys("enter");
    let Some(Overlay::Confirm(plan)) = h.model.overlay() else {
        panic!("{}", h.status())
    };
    assert_eq!(
        (plan.tag.as_str(), plan.from, plan.to),
        ("canary", None, h.v2)
    );
    h.keys("n");
    assert!(h.model.overlay().is_none());
    assert!(
        h.node
            .repo
            .tag(
                &VolumeName::parse("weights/tiny").unwrap(),
                &Name::parse("tag", "canary").unwrap()
            )
            .unwrap()
            .is_none()
    );
    // A bad tag name is an error in the status line, not a crash.
    h.keys("p");
    h.typed("Not Valid");
    h.keys("enter");
    assert!(h.status().contains("invalid tag"), "{}", h.status());
}

#[test]
fn readonly_disables_every_change() {
    let mut h = harness(true);
    h.keys("j enter p");
    assert!(h.model.overlay().is_none());
    assert!(h.status().contains("read-only"), "{}", h.status());
    h.keys("t tab u");
    assert!(h.model.overlay().is_none());
    assert_eq!(h.prod(), h.v2);
    assert!(h.model.frame(&h.keys).context.contains("read-only"));
    // Neither delete nor restore: the trash can be looked at, nothing more.
    h.keys("esc esc d");
    assert!(h.model.overlay().is_none());
    assert!(h.status().contains("read-only"), "{}", h.status());
    let vol = VolumeName::parse("weights/tiny").unwrap();
    h.node
        .repo
        .delete_version(&Ref::pinned(vol.clone(), h.v1), false)
        .unwrap();
    h.keys("T");
    let Body::Trash(t) = h.model.frame(&h.keys).body else {
        panic!("{}", h.status())
    };
    assert_eq!(t.rows.len(), 1);
    h.keys("U");
    assert!(h.model.overlay().is_none());
    assert!(h.node.repo.in_trash(&vol, &h.v1).unwrap().is_some());
}

#[test]
fn delete_from_versions_then_restore_from_the_trash_with_confirmations() {
    let mut h = harness(false);
    let vol = VolumeName::parse("weights/tiny").unwrap();
    // weights/tiny's versions, newest first: v2 (prod), then v1. Delete v1.
    h.keys("j enter j d");
    let Some(Overlay::ConfirmDelete(plan)) = h.model.overlay() else {
        panic!("no confirmation: {}", h.status())
    };
    assert_eq!(
        plan.digest, h.v1,
        "the confirmation names the selected digest"
    );
    assert!(plan.tags.is_empty());
    // The cursor moving changes nothing about what is confirmed.
    h.keys("k");
    h.keys("y");
    assert!(h.node.repo.in_trash(&vol, &h.v1).unwrap().is_some());
    assert!(
        h.status().contains("to the trash") && h.status().contains("undo: T"),
        "{}",
        h.status()
    );
    let Body::Versions(v) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(v.rows.len(), 1, "deleted versions leave the list");

    // The tagged one: the confirmation says the tag goes too; cancel it.
    h.keys("d");
    let Some(Overlay::ConfirmDelete(plan)) = h.model.overlay() else {
        panic!()
    };
    assert_eq!(
        (plan.digest, plan.tags.clone()),
        (h.v2, vec!["prod".to_string()])
    );
    h.keys("n");
    assert_eq!(h.prod(), h.v2);

    // The trash of this volume, then restore (asks, naming the digest).
    h.keys("T");
    let Body::Trash(t) = h.model.frame(&h.keys).body else {
        panic!("{}", h.status())
    };
    assert_eq!(t.rows.len(), 1);
    assert_eq!(t.rows[0].digest, h.v1.to_string());
    assert!(t.rows[0].left.starts_with("6d"), "{:?}", t.rows[0]);
    h.keys("U");
    let Some(Overlay::ConfirmRestore(plan)) = h.model.overlay() else {
        panic!("{}", h.status())
    };
    assert_eq!(plan.digest, h.v1);
    h.keys("y");
    assert!(h.node.repo.in_trash(&vol, &h.v1).unwrap().is_none());
    assert!(h.status().contains("restored"), "{}", h.status());
    let Body::Trash(t) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert!(t.rows.is_empty());
    // And the palette reaches every volume's trash; an unknown volume is an error.
    h.keys(":");
    h.typed("trash weights/nothing");
    h.keys("enter");
    assert!(h.status().contains("no volume"), "{}", h.status());
    h.keys(":");
    h.typed("trash");
    h.keys("enter");
    assert!(matches!(h.model.frame(&h.keys).body, Body::Trash(_)));
}

#[test]
fn filter_palette_copy_and_errors_in_words() {
    let mut h = harness(false);
    h.keys("/");
    h.typed("lora");
    h.keys("enter");
    let Body::Volumes(v) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(v.rows.len(), 1);
    h.keys("esc");
    let Body::Volumes(v) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(v.rows.len(), 2, "esc clears the filter");

    h.keys(":");
    h.typed("versions weights/tiny");
    let effects = h
        .model
        .on_key(&KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE), &h.keys);
    h.run(effects);
    let Body::Versions(v) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(v.rows.len(), 2);

    let effects = h.model.on_key(
        &KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE),
        &h.keys,
    );
    assert_eq!(
        effects,
        vec![Effect::Copy(format!("vol:weights/tiny@{}", h.v2))]
    );
    assert!(
        h.status().contains(&h.v2.to_string()),
        "the ref is visible as a fallback"
    );

    h.keys(":");
    h.typed("versions NOPE");
    h.keys("enter");
    assert!(h.status().contains("invalid"), "{}", h.status());
    h.keys(":");
    h.typed("frobnicate");
    h.keys("enter");
    assert!(h.status().contains("unknown command"), "{}", h.status());
    h.keys("q");
    assert!(h.model.quit);
}

#[test]
fn mark_two_versions_to_see_their_diff() {
    let mut h = harness(false);
    // Versions are newest first: mark the older (v1), then the newer (v2).
    h.keys("j enter j m k m");
    let Body::Diff(d) = h.model.frame(&h.keys).body else {
        panic!("no diff: {}", h.status())
    };
    let short = |d: &Digest| format!("b3:{}", &d.hex()[..12]);
    assert!(
        d.from.ends_with(&short(&h.v1)) && d.to.ends_with(&short(&h.v2)),
        "{} {}",
        d.from,
        d.to
    );
    assert_eq!(d.files.len(), 1);
    assert_eq!(d.files[0].path, "model.bin");
    assert_eq!(d.files[0].change, sealvol_views::diff::Change::Modified);
    assert!(h.status().contains("1 modified"), "{}", h.status());

    // The same through the palette, with a tag on one side.
    h.keys("esc :");
    h.typed(&format!(
        "diff weights/tiny@{} weights/tiny:prod",
        &h.v1.hex()[..10]
    ));
    h.keys("enter");
    let Body::Diff(d) = h.model.frame(&h.keys).body else {
        panic!("{}", h.status())
    };
    assert!(d.to.ends_with(&short(&h.v2)));
    h.keys(":");
    h.typed("diff weights/tiny:nope weights/tiny:prod");
    h.keys("enter");
    assert!(h.status().contains("no tag nope"), "{}", h.status());
}

/// Benchmark, not a test (run explicitly): one frame of the versions screen with
/// 10,000 versions, model → view-model → drawn buffer, at 120×40.
///     cargo test --release -p sealvol frame_bench -- --ignored --nocapture
#[test]
#[ignore]
fn frame_bench_10k_versions() {
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use sealvol_core::registry::{VersionInfo, VolumeInfo};

    use super::action::Action;
    use super::effects::Loaded;

    let (mut m, _) = Model::new("bench".into(), false, Vec::new());
    m.on_loaded(Loaded::Volumes(vec![VolumeInfo {
        namespace: "weights".into(),
        name: "big".into(),
        versions: 10_000,
        tags: vec!["prod".into()],
        expired_tags: 0,
        latest_bytes: 1 << 34,
        updated: "2026-11-30T00:00:00.000Z".into(),
        damaged: 0,
        trashed: 0,
    }]));
    m.on_action(Action::Open);
    let versions: Vec<VersionInfo> = (0..10_000)
        .map(|i| VersionInfo {
            digest: format!("b3:{i:064x}"),
            created: format!("2026-11-{:02}T00:00:00.000Z", 1 + i % 28),
            bytes: 16 << 30,
            files: 9,
            new_bytes: (i as u64) << 20,
            source: format!("file:///data/ckpt/step-{i}"),
            pushed_by: "ci@runner".into(),
            labels: [("step".to_string(), (i * 100).to_string())].into(),
            tags: if i == 42 { vec!["prod".into()] } else { vec![] },
            expired_tags: vec![],
            damaged: None,
        })
        .collect();
    m.on_loaded(Loaded::Versions(
        VolumeName::parse("weights/big").unwrap(),
        versions,
    ));
    m.on_action(Action::Bottom);
    let keys = Keymap::load(None).unwrap();
    let theme = sealvol_themes::Theme::preset("dark").unwrap();
    let mut times = Vec::new();
    for _ in 0..200 {
        let t = std::time::Instant::now();
        let frame = m.frame(&keys);
        let mut buf = Buffer::empty(Rect::new(0, 0, 120, 40));
        sealvol_views::draw(&frame, &theme, buf.area, &mut buf);
        times.push(t.elapsed());
        std::hint::black_box(&buf);
    }
    times.sort();
    println!(
        "frame with 10,000 versions: median {:?}, p95 {:?}",
        times[times.len() / 2],
        times[times.len() * 95 / 100]
    );
}

#[test]
fn enter_on_a_version_shows_its_files_against_the_previous_one() {
    let mut h = harness(false);
    h.keys("j enter enter");
    let Body::Files(f) = h.model.frame(&h.keys).body else {
        panic!("no files screen: {}", h.status())
    };
    assert_eq!(f.rows.len(), 1);
    assert_eq!(f.rows[0].name, "model.bin");
    assert_eq!(
        (f.rows[0].size, f.rows[0].chunks, f.rows[0].shared_bytes),
        (3, 1, 0)
    );
    assert_eq!(f.previous, Some(h.v1.to_string()));
    // The oldest version has nothing before it.
    h.keys("esc j enter");
    let Body::Files(f) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(f.previous, None);
    assert!(h.status().contains("first version"), "{}", h.status());
    let e = h.model.on_key(
        &KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE),
        &h.keys,
    );
    assert_eq!(e, vec![Effect::Copy(format!("vol:weights/tiny@{}", h.v1))]);
}

#[test]
fn mouse_wheel_clicks_breadcrumbs_and_hints() {
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mut h = harness(false);
    let size = (100, 22);
    let mouse = |kind, column, row| MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    };
    let left = MouseEventKind::Down(MouseButton::Left);
    let send = |h: &mut Harness, ev: MouseEvent| {
        let e = h.model.on_mouse(&ev, size, &h.keys);
        let none = e.is_empty();
        h.run(e);
        none
    };
    // Rows: 0 header line, 1 table header, 2 first volume, 3 second.
    send(&mut h, mouse(left, 5, 3));
    send(&mut h, mouse(left, 5, 3));
    let Body::Versions(v) = h.model.frame(&h.keys).body else {
        panic!("a click on the selected row opens it: {}", h.status())
    };
    assert_eq!(v.volume, "weights/tiny");
    send(&mut h, mouse(MouseEventKind::ScrollDown, 5, 5));
    let Body::Versions(v) = h.model.frame(&h.keys).body else {
        panic!()
    };
    assert_eq!(v.selected, 1);
    // " sealvol › volumes › …": "volumes" starts at column 11.
    send(&mut h, mouse(left, 13, 0));
    assert!(matches!(h.model.frame(&h.keys).body, Body::Volumes(_)));
    // Clicks below the rows, or on the status message, do nothing.
    assert!(send(&mut h, mouse(left, 5, 15)));
    assert!(send(&mut h, mouse(left, 5, size.1 - 1)));
    // The status line's hints are buttons: click "tags".
    let status = h.model.frame(&h.keys).status;
    let col = (0..size.0)
        .find(|&c| {
            sealvol_views::chrome::hint_at(&status, size.0, c)
                .is_some_and(|i| status.hints[i].1 == "tags")
        })
        .expect("a tags hint");
    send(&mut h, mouse(left, col, size.1 - 1));
    assert!(
        matches!(h.model.frame(&h.keys).body, Body::Tags(_)),
        "{}",
        h.status()
    );
}

/// Hints come from the keymap: a rebound action shows its new key, the old key does
/// nothing, and a click on the hint does the action whatever key it is bound to.
#[test]
fn a_rebound_key_shows_in_its_hint_and_a_click_on_it_does_the_action() {
    use ratatui::crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
    let mut h = harness(false);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("keymap.toml");
    std::fs::write(
        &p,
        "[[normal]]\nkeys = [\"P\"]\naction = \"point-tag\"\ndesc = \"point a tag\"\n",
    )
    .unwrap();
    h.keys = Keymap::load(Some(&p)).unwrap();
    h.keys(":");
    h.typed("versions weights/tiny");
    h.keys("enter");
    let status = h.model.frame(&h.keys).status;
    let tag = status.hints.iter().find(|(_, d)| d == "tag");
    assert_eq!(
        tag.map(|(k, _)| k.as_str()),
        Some("P"),
        "{:?}",
        status.hints
    );
    h.keys("p");
    assert!(
        h.model.frame(&h.keys).overlay.is_none(),
        "p is no longer bound"
    );
    // Wide enough for every hint beside the status text.
    let size = (220, 22);
    let col = (0..size.0)
        .find(|&c| {
            sealvol_views::chrome::hint_at(&status, size.0, c)
                .is_some_and(|i| status.hints[i].1 == "tag")
        })
        .expect("a tag hint");
    let click = MouseEvent {
        kind: MouseEventKind::Down(MouseButton::Left),
        column: col,
        row: size.1 - 1,
        modifiers: KeyModifiers::NONE,
    };
    let e = h.model.on_mouse(&click, size, &h.keys);
    h.run(e);
    assert!(
        h.model.frame(&h.keys).overlay.is_some(),
        "the click points a tag: {}",
        h.status()
    );
}

#[test]
fn files_by_palette() {
    let mut h = harness(false);
    h.keys(":");
    h.typed("files weights/tiny:prod");
    h.keys("enter");
    let Body::Files(f) = h.model.frame(&h.keys).body else {
        panic!("{}", h.status())
    };
    assert!(f.version.ends_with(&h.v2.to_string()));
    h.keys(":");
    h.typed("files weights/tiny:missing");
    h.keys("enter");
    assert!(h.status().contains("no tag missing"), "{}", h.status());
}

/// A real FUSE mount of v1 while `prod` points at v2: the Mounts screen lists it, the
/// versions screen marks v1 as mounted, and enter opens the files it serves.
#[test]
fn the_mounts_screen_shows_what_each_mount_serves() {
    if !std::path::Path::new("/dev/fuse").exists() {
        assert!(
            std::env::var_os("SEALVOL_REQUIRE_FUSE").is_none(),
            "SEALVOL_REQUIRE_FUSE is set but /dev/fuse is missing"
        );
        eprintln!("SKIPPED: no /dev/fuse; the console's mounts test did not run");
        return;
    }
    use sealvol_mount::records::{self as records, MountRecord};
    use sealvol_mount::{self as mount, MountOptions};
    let mut h = harness(false);
    let dir = h._tmp.path().join("mnt");
    std::fs::create_dir_all(&dir).unwrap();
    let vol = VolumeName::parse("weights/tiny").unwrap();
    let repo = std::sync::Arc::new(
        Repository::open_local(&h._tmp.path().join("repo"), false, false).unwrap(),
    );
    let m = mount::mount(repo, &vol, &h.v1, &dir, MountOptions::default()).unwrap();
    assert_eq!(std::fs::read(dir.join("model.bin")).unwrap(), b"one");
    records::write(
        &records::dir(&h.node.state),
        &MountRecord {
            pid: std::process::id(),
            dir: m.dir().display().to_string(),
            volume: vol.to_string(),
            digest: h.v1.to_string(),
            requested: format!("{vol}@{}", h.v1),
            cache: None,
            started: sealvol_core::registry::now_rfc3339(),
            files: 1,
            bytes: 3,
            peers: Vec::new(),
            ring: Vec::new(),
            metrics: None,
            stats: m.stats(),
        },
    )
    .unwrap();

    h.keys("M");
    let Body::Mounts(v) = h.model.frame(&h.keys).body else {
        panic!("not the mounts screen")
    };
    assert_eq!(v.rows.len(), 1);
    assert_eq!(v.rows[0].digest, h.v1.to_string());
    assert!(v.rows[0].bytes_served == 0 || v.rows[0].bytes_served == 3);

    h.keys("/");
    h.typed("no-such-mount");
    h.keys("enter");
    assert!(
        matches!(h.model.frame(&h.keys).body, Body::Mounts(ref m) if m.rows.is_empty() && m.empty.contains("no mount matches")),
        "the filter hides it"
    );
    h.keys("/");
    for _ in 0.."no-such-mount".len() {
        h.keys("backspace");
    }
    h.typed("tiny");
    h.keys("enter");
    let Body::Mounts(v) = h.model.frame(&h.keys).body else {
        panic!("the filter matches the volume")
    };
    assert_eq!(v.rows.len(), 1);

    h.keys("enter");
    let Body::Files(f) = h.model.frame(&h.keys).body else {
        panic!("enter opens the files of the served version")
    };
    assert_eq!(f.version, format!("vol:{vol}@{}", h.v1));

    h.keys(":");
    h.typed("versions weights/tiny");
    h.keys("enter");
    let Body::Versions(v) = h.model.frame(&h.keys).body else {
        panic!("not the versions screen")
    };
    let marked: Vec<(&str, usize)> = v
        .rows
        .iter()
        .map(|r| (r.digest.as_str(), r.mounts))
        .collect();
    let v1 = h.v1.to_string();
    let v2 = h.v2.to_string();
    assert!(marked.contains(&(v1.as_str(), 1)), "{marked:?}");
    assert!(marked.contains(&(v2.as_str(), 0)), "{marked:?}");
    m.unmount().unwrap();
}

/// The harness with an agent of its own (hosted here, as the console does), and a job
/// syncing folder `dir` (missing folders fail) into `weights/synced`.
pub(super) fn with_agent(run_queue: bool) -> Harness {
    use sealvol_node::agent::{Agent, AgentSettings};
    let mut h = harness(false);
    let repo = Repository::open_local(&h._tmp.path().join("repo"), false, false).unwrap();
    let agent = Agent::start(
        repo,
        &h.node.state,
        AgentSettings {
            batch_bytes: 1 << 20,
            streams: 2,
            run_queue,
            trust: Default::default(),
            mirrors: None,
            limits: sealvol_node::agent::schedule::Limits::MACHINE,
            taps: None,
        },
        // The jobs here sync local folders, which need no remote source.
        None,
    )
    .unwrap()
    .expect("no other agent");
    h.node.jobs = Some(std::sync::Arc::new(agent));
    h
}

fn submit(h: &Harness, dir: &std::path::Path) -> u64 {
    let spec = sealvol_node::jobs::JobSpec {
        mirror_to: None,
        started_by: None,
        source: format!("file://{}", dir.display()),
        volume: "weights/synced".into(),
        tags: vec![],
        secret: None,
        include: vec![],
        exclude: vec![],
        endpoint: Default::default(),
    };
    h.node.jobs.as_ref().unwrap().submit(spec).unwrap().id
}

fn jobs_view(h: &Harness) -> sealvol_views::jobs::JobsView {
    match h.model.frame(&h.keys).body {
        Body::Jobs(v) => v,
        other => panic!("not the jobs screen: {other:?}"),
    }
}

#[test]
fn the_jobs_screen_cancels_with_confirmation_and_retries() {
    let mut h = with_agent(false);
    h.keys("J");
    assert!(
        matches!(h.model.frame(&h.keys).body, Body::Jobs(ref j) if j.rows.is_empty() && j.empty.contains("no sync jobs")),
        "an empty jobs screen keeps its headers and says how to start one"
    );
    let dir = h._tmp.path().join("a");
    submit(&h, &dir);
    h.keys("r");
    let v = jobs_view(&h);
    assert_eq!(v.rows.len(), 1);
    assert_eq!(v.rows[0].state, "QUEUED");

    // Cancel asks first, naming the job; n keeps it.
    h.keys("x");
    assert!(matches!(
        h.model.overlay(),
        Some(Overlay::ConfirmCancel(1, _))
    ));
    h.keys("n");
    assert_eq!(jobs_view(&h).rows[0].state, "QUEUED");
    h.keys("x y");
    assert_eq!(jobs_view(&h).rows[0].state, "CANCELLED", "{}", h.status());
    assert!(h.status().contains("CANCELLED"));
    // Cancelling again says why not; retry queues it again.
    h.keys("x");
    assert!(h.model.overlay().is_none());
    assert!(
        h.status().contains("only queued or running"),
        "{}",
        h.status()
    );
    // Retry asks first too; n leaves it cancelled, y queues it again.
    h.keys("R");
    assert!(matches!(
        h.model.overlay(),
        Some(Overlay::ConfirmRetry(1, _))
    ));
    h.keys("n");
    assert_eq!(jobs_view(&h).rows[0].state, "CANCELLED");
    h.keys("R y");
    assert_eq!(jobs_view(&h).rows[0].state, "QUEUED");
    // `n` opens the palette with `:sync ` typed, to start another.
    h.keys("n");
    match h.model.overlay() {
        Some(Overlay::Prompt(p)) => assert_eq!(p.input, "sync "),
        _ => panic!("no palette"),
    }
}

#[test]
fn the_jobs_screen_shows_a_ready_job_and_a_failed_one_in_full() {
    let mut h = with_agent(true);
    let bad = submit(&h, &h._tmp.path().join("no-such-folder"));
    let good = submit(&h, &h._tmp.path().join("a"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let api = h.node.jobs.clone().unwrap();
    while !api.show(good).unwrap().state.is_final() || !api.show(bad).unwrap().state.is_final() {
        assert!(
            std::time::Instant::now() < deadline,
            "jobs did not end: {:?}",
            api.list().unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    h.keys("J");
    let v = jobs_view(&h);
    let states: Vec<&str> = v.rows.iter().map(|r| r.state.as_str()).collect();
    assert_eq!(states, ["READY", "FAILED"], "newest first");
    let d = v.detail.expect("the newest job in detail");
    assert!(
        d.sealed
            .as_deref()
            .unwrap()
            .starts_with("vol:weights/synced@b3:")
    );
    assert_eq!(d.files_done, 1);

    h.keys("j");
    let d = jobs_view(&h).detail.unwrap();
    assert_eq!(d.state, "FAILED");
    assert!(
        d.reason.as_deref().unwrap().contains("no-such-folder"),
        "{d:?}"
    );

    // Enter on the READY job opens the files of the version it sealed.
    h.keys("k enter");
    match h.model.frame(&h.keys).body {
        Body::Files(f) => assert!(f.version.starts_with("vol:weights/synced@b3:")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_read_only_console_neither_cancels_nor_retries() {
    let mut h = harness(true);
    h.keys("J x R");
    assert!(h.model.overlay().is_none());
    assert!(h.status().contains("read-only"), "{}", h.status());
}

#[test]
fn a_damaged_manifest_and_tag_are_marked_and_the_rest_still_browses() {
    let h0 = harness(false);
    let repo = h0._tmp.path().join("repo");
    let manifest = repo.join("manifests/weights/tiny").join(h0.v1.hex());
    let bytes = std::fs::read(&manifest).unwrap();
    std::fs::write(&manifest, &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(repo.join("tags/weights/tiny/prod"), b"{\"tag\":").unwrap();
    // A fresh console over the damaged repository.
    let (model, effects) = Model::new("test-repo".into(), false, Vec::new());
    let mut h = Harness { model, ..h0 };
    h.run(effects);
    let Body::Volumes(v) = h.model.frame(&h.keys).body else {
        panic!("volumes first")
    };
    let tiny = v.rows.iter().find(|r| r.name == "tiny").unwrap();
    assert_eq!(tiny.damaged, 2, "one manifest, one tag");
    assert_eq!(v.rows.len(), 2, "the other volume still lists");
    h.keys("down enter");
    let Body::Versions(v) = h.model.frame(&h.keys).body else {
        panic!("versions")
    };
    assert_eq!(v.rows.len(), 2);
    let bad = v.rows.last().unwrap();
    assert_eq!(bad.digest, h.v1.to_string(), "damaged versions sort last");
    assert!(
        bad.damaged.as_deref().unwrap().contains("damaged"),
        "{bad:?}"
    );
    assert!(v.rows[0].damaged.is_none());
    h.keys("t");
    let Body::Tags(t) = h.model.frame(&h.keys).body else {
        panic!("tags")
    };
    assert!(
        t.tags
            .iter()
            .any(|t| t.tag == "prod" && t.damaged.is_some())
    );
}

/// A checkpoint whose changed tensors lie far past the first screen (the last layers of
/// sixty): the diff opens on the changed file, enter moves the keys into its tensors,
/// the changed ones come first, `/` filters the tensors (not the files), `G` reaches
/// the last one, esc goes back to the files and then closes the diff.
#[test]
fn the_tensors_of_a_diff_are_reached_filtered_and_scrolled_by_keyboard() {
    use sealvol_core::testutil::{noise, safetensors};
    use sealvol_views::diff::{Change, DiffFocus};
    let mut h = harness(false);
    let vol = VolumeName::parse("weights/deep").unwrap();
    let tensors = |changed: &[usize], extra: bool| {
        let mut t: Vec<(String, Vec<u8>)> = (0..60)
            .map(|i| {
                let seed = 1 + i as u64 + if changed.contains(&i) { 1000 } else { 0 };
                (format!("model.layers.{i}.weight"), noise(4096, seed))
            })
            .collect();
        if extra {
            t.push(("model.lora_extra.weight".into(), noise(4096, 7777)));
        }
        safetensors(&t)
    };
    let push_version = |dir: &str, st: Vec<u8>| {
        let files: [(&str, &[u8]); 2] = [("config.json", b"{}"), ("model.safetensors", &st)];
        version_of(&h.node.repo, &h._tmp.path().join(dir), &files, &vol)
    };
    let a = push_version("deep1", tensors(&[], false));
    let b = push_version("deep2", tensors(&[50, 51, 52, 53], true));
    h.keys(":");
    h.typed(&format!(
        "diff weights/deep@{} weights/deep@{}",
        &a.hex()[..12],
        &b.hex()[..12]
    ));
    h.keys("enter");
    let diff = |h: &Harness| match h.model.frame(&h.keys).body {
        Body::Diff(d) => d,
        _ => panic!("no diff: {}", h.status()),
    };
    let d = diff(&h);
    assert_eq!(d.files[d.selected].path, "model.safetensors");
    assert_eq!(d.focus, DiffFocus::Files);
    assert_eq!(d.tensor_summary, "1 added · 4 modified · 56 unchanged");
    // Changed first, in the file's order: what a screen of any height shows first.
    let names: Vec<_> = d.tensors.iter().take(5).map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "model.layers.50.weight",
            "model.layers.51.weight",
            "model.layers.52.weight",
            "model.layers.53.weight",
            "model.lora_extra.weight"
        ]
    );
    assert_eq!(d.tensors[4].change, Change::Added);
    assert!(d.tensors[5..].iter().all(|t| t.change == Change::Unchanged));

    h.keys("enter");
    let d = diff(&h);
    assert_eq!(d.focus, DiffFocus::Tensors);
    assert!(
        h.status().contains("5 of 61 tensor(s) changed"),
        "{}",
        h.status()
    );
    h.keys("j j");
    assert_eq!(diff(&h).tensor_selected, 2);
    h.keys("G");
    let d = diff(&h);
    assert_eq!(d.tensor_selected, 60);
    assert_eq!(d.tensors.len(), 61);

    // `/` filters the tensors; the files stay.
    h.keys("/");
    h.typed("layers.5");
    h.keys("enter");
    let d = diff(&h);
    assert_eq!(d.files.len(), 2, "the files are not filtered");
    let names: Vec<_> = d.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names.len(), 11, "{names:?}"); // 50..=59, and 5
    assert_eq!(names[0], "model.layers.50.weight");
    assert!(names.contains(&"model.layers.5.weight"));
    assert!(d.tensor_selected < names.len());

    // esc clears the filter, esc again goes back to the files, and again closes.
    h.keys("esc");
    assert_eq!(diff(&h).tensors.len(), 61);
    h.keys("esc");
    let d = diff(&h);
    assert_eq!(d.focus, DiffFocus::Files);
    assert_eq!(d.files[d.selected].path, "model.safetensors");
    // tab goes in and out too; on a file without tensors, enter says why.
    h.keys("tab");
    assert_eq!(diff(&h).focus, DiffFocus::Tensors);
    h.keys("tab k");
    let d = diff(&h);
    assert_eq!(
        (d.focus, d.files[d.selected].path.as_str()),
        (DiffFocus::Files, "config.json")
    );
    h.keys("enter");
    assert!(
        h.status().contains("not a .safetensors file"),
        "{}",
        h.status()
    );
    assert_eq!(diff(&h).focus, DiffFocus::Files);
    h.keys("esc");
    assert!(!matches!(h.model.frame(&h.keys).body, Body::Diff(_)));
}

/// A tag that expires shows the time it has left on the Tags screen; a permanent one
/// shows none.
#[test]
fn the_tags_screen_shows_the_time_a_tag_has_left() {
    let mut h = harness(false);
    let vol = VolumeName::parse("weights/tiny").unwrap();
    let week = sealvol_core::stamp::now() + std::time::Duration::from_secs(7 * 86_400);
    h.node
        .repo
        .move_tag_until(
            &vol,
            &Name::parse("tag", "preview").unwrap(),
            &h.v1,
            None,
            Some(humantime::format_rfc3339_millis(week).to_string()),
        )
        .unwrap();
    h.keys("j enter t");
    let Body::Tags(t) = h.model.frame(&h.keys).body else {
        panic!("not the tags screen: {}", h.status())
    };
    let left: Vec<(&str, Option<&str>)> = t
        .tags
        .iter()
        .map(|r| (r.tag.as_str(), r.expires_in.as_deref()))
        .collect();
    assert_eq!(left, [("preview", Some("6d 23h")), ("prod", None)]);
}

/// A namespace with a quota: the Volumes screen shows what it stores against it, and
/// a namespace without one is not named.
#[test]
fn the_volumes_screen_shows_each_quota_and_its_usage() {
    let mut h = harness(false);
    h.node
        .repo
        .change_settings(|c| {
            c.quotas.insert("weights".into(), 1 << 20);
        })
        .unwrap();
    // Reloaded (`r`), the screen asks for the quotas with the volumes.
    h.keys("r");
    let frame = h.model.frame(&h.keys);
    let sealvol_views::Body::Volumes(v) = &frame.body else {
        panic!("not the volumes screen")
    };
    assert_eq!(v.quotas.len(), 1);
    assert_eq!(v.quotas[0].namespace, "weights");
    assert_eq!(v.quotas[0].quota, 1 << 20);
    // Two versions of three bytes each: their chunks, as stored.
    assert!(
        v.quotas[0].used > 0 && v.quotas[0].used < 1024,
        "{:?}",
        v.quotas
    );
}
