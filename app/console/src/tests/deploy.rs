//! The Deployments screen as the on-call engineer uses it at 3 a.m.: D, find the volume
//! whose deployments disagree, tab to the deployment, b, pick the version before, read
//! the confirmation (file, volume, both digests, the line), y; the file changes in that
//! one ref and nowhere else. And the refusals: a file changed meanwhile, a read-only
//! console, no deployment files at all.

use std::path::{Path, PathBuf};

use sealvol_core::refs::Digest;
use sealvol_views::Body;
use sealvol_views::chrome::Overlay as ViewOverlay;
use sealvol_views::deployments::{CellState, DeploymentsView};

use super::{Harness, harness, harness_with};
use crate::model::Overlay;

/// staging follows `prod` (v2 now); production pins v2; canary pins v1. With comments
/// and CRLF, to see that nothing else moves.
fn files(dir: &Path, v1: Digest, v2: Digest) -> Vec<PathBuf> {
    let d = dir.join("deploy");
    std::fs::create_dir_all(&d).unwrap();
    let write = |name: &str, text: String| {
        std::fs::write(d.join(name), text).unwrap();
    };
    write(
        "staging.yaml",
        "sealvol:\n  mounts:\n    - ref: weights/tiny:prod\n      path: /w\n".into(),
    );
    write(
        "production.yaml",
        format!(
            "# production: change with care\r\nreplicas: 12\r\nsealvol:\r\n  mounts:\r\n    - ref: 'vol:weights/tiny@{v2}'  # pinned 2026-11\r\n      path: /w\r\n    - ref: adapters/lora\r\n      path: /l\r\n"
        ),
    );
    write(
        "canary.yaml",
        format!("sealvol:\n  mounts:\n    - ref: vol:weights/tiny@{v1}\n      path: /w\n"),
    );
    vec![d]
}

fn view(h: &Harness) -> DeploymentsView {
    match h.model.frame(&h.keys).body {
        Body::Deployments(v) => v,
        other => panic!("not the deployments screen: {other:?}"),
    }
}

fn production(h: &Harness) -> PathBuf {
    h._tmp.path().join("deploy/production.yaml")
}

#[test]
fn roll_production_back_by_keyboard_and_only_its_ref_changes() {
    let mut h = harness_with(false, &files);
    let before = std::fs::read_to_string(production(&h)).unwrap();
    h.keys("D");
    let v = view(&h);
    assert_eq!(v.names, ["canary.yaml", "production.yaml", "staging.yaml"]);
    let tiny = v.rows.iter().find(|r| r.volume == "weights/tiny").unwrap();
    assert!(!tiny.agree, "canary serves v1, the others v2");
    let states: Vec<&CellState> = tiny.cells.iter().map(|c| &c.state).collect();
    assert_eq!(
        states,
        [&CellState::Pinned, &CellState::Pinned, &CellState::Unpinned]
    );
    assert_eq!(tiny.cells[1].text, h.v2.short(12));
    let lora = v.rows.iter().find(|r| r.volume == "adapters/lora").unwrap();
    assert_eq!(lora.cells[0].state, CellState::Missing);
    assert!(
        h.status().contains("1 disagree, 2 unpinned"),
        "{}",
        h.status()
    );

    // The weights row, production's column (tab), then b.
    let row = v
        .rows
        .iter()
        .position(|r| r.volume == "weights/tiny")
        .unwrap();
    for _ in 0..row {
        h.keys("j");
    }
    h.keys("tab");
    assert!(
        view(&h).detail[0].starts_with("production.yaml:5  /w"),
        "{:?}",
        view(&h).detail
    );
    h.keys("b");
    let Body::Rollback(r) = h.model.frame(&h.keys).body else {
        panic!("not the picker");
    };
    assert!(r.rows[0].serving, "v2, the newest, is served");
    assert_eq!(r.selected, 1, "the selection starts on the version before");
    assert!(
        r.history.iter().any(|l| l.starts_with("prod")),
        "{:?}",
        r.history
    );
    h.keys("enter");
    let Some(Overlay::ConfirmRollback(plan)) = h.model.overlay() else {
        panic!("no confirmation: {}", h.status());
    };
    assert_eq!((plan.from, plan.to), (Some(h.v2), h.v1));
    let frame = h.model.frame(&h.keys);
    let Some(ViewOverlay::Confirm { lines, yes, .. }) = frame.overlay else {
        panic!("no confirmation drawn");
    };
    let text: Vec<String> = lines.into_iter().map(|(l, _)| l).collect();
    assert!(
        text[0].ends_with("production.yaml"),
        "names the file: {text:?}"
    );
    assert!(
        text.iter()
            .any(|l| l == &format!("from b3:{}", h.v2.short(16)))
    );
    assert!(
        text.iter()
            .any(|l| l == &format!("to   b3:{}", h.v1.short(16)))
    );
    assert!(
        text.iter().any(|l| l.starts_with("-   5:"))
            && text.iter().any(|l| l.starts_with("+   5:"))
    );
    assert!(yes.starts_with("write"));
    // Digests shortened to what tells them apart, so the dialog fits 80 columns; the
    // full ones a key away; the status line says how to answer.
    let full = |h: &Harness| match h.model.frame(&h.keys).overlay {
        Some(ViewOverlay::Confirm { lines, full, .. }) => (
            full,
            lines
                .iter()
                .any(|(l, _)| l.contains(&h.v1.to_string()[3..])),
        ),
        _ => panic!("no confirmation drawn"),
    };
    assert_eq!(full(&h), (false, false));
    assert!(h.status().contains("y writes"), "{}", h.status());
    h.keys("f");
    assert_eq!(full(&h), (true, true));
    h.keys("f");
    assert_eq!(full(&h), (false, false));
    h.keys("y");
    let after = std::fs::read_to_string(production(&h)).unwrap();
    assert_eq!(after, before.replace(&h.v2.to_string(), &h.v1.to_string()));
    assert!(h.status().starts_with("wrote"), "{}", h.status());
    // Back on the matrix, which now shows production on v1.
    let v = view(&h);
    let tiny = v.rows.iter().find(|r| r.volume == "weights/tiny").unwrap();
    assert_eq!(tiny.cells[1].text, h.v1.short(12));
}

/// D, the weights row, production's column, b, enter: the rollback to v1 is planned.
fn roll_production_to_the_version_before(h: &mut Harness) {
    h.keys("D");
    let row = view(h)
        .rows
        .iter()
        .position(|r| r.volume == "weights/tiny")
        .unwrap();
    for _ in 0..row {
        h.keys("j");
    }
    h.keys("tab b enter");
}

#[test]
fn a_file_changed_after_the_diff_was_shown_is_not_written() {
    let mut h = harness_with(false, &files);
    roll_production_to_the_version_before(&mut h);
    assert!(matches!(
        h.model.overlay(),
        Some(Overlay::ConfirmRollback(_))
    ));
    // Someone edits the file while the confirmation is open.
    let theirs = std::fs::read_to_string(production(&h))
        .unwrap()
        .replace("replicas: 12", "replicas: 14");
    std::fs::write(production(&h), &theirs).unwrap();
    h.keys("y");
    assert!(
        h.status().contains("changed since it was read"),
        "{}",
        h.status()
    );
    assert_eq!(std::fs::read_to_string(production(&h)).unwrap(), theirs);
    // Cancelling writes nothing either.
    h.keys("esc b enter n");
    assert!(h.status().contains("is unchanged"), "{}", h.status());
    assert_eq!(std::fs::read_to_string(production(&h)).unwrap(), theirs);
}

#[test]
fn read_only_and_unconfigured_consoles_change_nothing() {
    let mut h = harness_with(true, &files);
    let before = std::fs::read_to_string(production(&h)).unwrap();
    h.keys("D tab b");
    assert!(h.status().contains("read-only"), "{}", h.status());
    assert_eq!(std::fs::read_to_string(production(&h)).unwrap(), before);
    let mut h = harness(false);
    h.keys("D");
    let v = view(&h);
    assert!(v.names.is_empty() && v.empty.contains("--deploy"), "{v:?}");
    // b says what is missing, not that some deployment lacks the volume.
    h.keys("b");
    assert!(
        h.status()
            .starts_with("no deployment files to roll back: start with --deploy"),
        "{}",
        h.status()
    );
    // A folder with no deployment file in it, and a filter that hides every volume.
    let mut h = harness_with(false, &|dir, _, _| {
        let d = dir.join("empty-deploy");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("notes.txt"), "nothing here").unwrap();
        vec![d]
    });
    h.keys("D");
    assert!(
        h.status().contains("holds no deployment files"),
        "{}",
        h.status()
    );
    h.keys("b");
    assert!(
        h.status().starts_with("no deployments could be read from")
            && h.status().ends_with("(r reads them again)"),
        "{}",
        h.status()
    );
    let mut h = harness_with(false, &files);
    h.keys("D / z z z enter b");
    assert!(
        h.status()
            .ends_with("no volume matches /zzz (esc clears the filter)"),
        "{}",
        h.status()
    );
}

/// The signing fixtures (keys made by openssl, as the model-signing tests use).
fn key(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../engine/sign/tests/fixtures")
        .join(name)
}

/// config.toml's trust, as the app gives it: weights signed by signer.pub.pem; v2 is
/// signed, v1 is not.
fn under_policy(h: &mut Harness) {
    let vol = sealvol_core::refs::VolumeName::parse("weights/tiny").unwrap();
    let m = h.node.repo.manifest(&vol, &h.v2).unwrap();
    let st = sealvol_sign::version::statement(&m, sealvol_sign::Algorithm::Blake3, None).unwrap();
    let k = sealvol_sign::SigningKey::load(&key("signer.key.pem")).unwrap();
    let sig = sealvol_sign::sign(&st, &k).unwrap();
    h.node.repo.put_signature(&vol, &h.v2, &sig).unwrap();
    h.node.policy = std::sync::Arc::new(|| {
        let trust = std::collections::BTreeMap::from([(
            "weights".to_string(),
            vec![key("signer.pub.pem")],
        )]);
        let rules = sealvol_sign::Rules::load("config.toml", Path::new("/"), &trust)?;
        Ok(sealvol_sign::Policy::default().with(rules))
    });
}

#[test]
fn a_rollback_to_a_version_no_trusted_key_signed_is_refused_before_the_confirmation() {
    let mut h = harness_with(false, &files);
    under_policy(&mut h);
    let before = std::fs::read_to_string(production(&h)).unwrap();
    roll_production_to_the_version_before(&mut h);
    assert!(h.model.overlay().is_none(), "no confirmation for v1");
    let s = h.status();
    assert!(
        s.contains(&format!("vol:weights/tiny@{}", h.v1))
            && s.contains("not signed by a key config.toml trusts for weights")
            && s.contains("it has no signature"),
        "{s}"
    );
    assert_eq!(std::fs::read_to_string(production(&h)).unwrap(), before);
}

#[test]
fn the_versions_screen_shows_who_signed_each_version_and_the_files_screen_why() {
    let mut h = harness_with(false, &files);
    under_policy(&mut h);
    // The volumes screen lists adapters/lora, then weights/tiny.
    h.keys("j enter");
    let Body::Versions(v) = h.model.frame(&h.keys).body else {
        panic!("not the versions screen: {}", h.status());
    };
    use sealvol_views::versions::Signed;
    let by: Vec<(String, Signed)> = v
        .rows
        .iter()
        .map(|r| (r.digest.clone(), r.signed.clone()))
        .collect();
    assert_eq!(
        by,
        [
            (h.v2.to_string(), Signed::Trusted("signer.pub.pem".into())),
            (h.v1.to_string(), Signed::Refused),
        ]
    );
    // The unsigned one's details say why.
    h.keys("j enter");
    let s = h.status();
    assert!(s.contains("it has no signature"), "{s}");
}
