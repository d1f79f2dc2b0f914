//! After a pull the target is exactly the version: its digest (`walk::digest_dir`) is
//! the pulled digest whatever was there before. A target that is not empty is refused
//! unless forced, naming what is in the way; forced, everything the version does not
//! hold is removed (and listed), a symlink in the target is removed and never written
//! through, files already right are kept, and what an interrupted pull left is not the
//! user's. A pull of a subset writes and reads only what it takes. What the CLI prints
//! of the same, and a pull killed by a signal, are tested through the binary
//! (`tests/cli/pull.rs`).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

use sealvol_core::progress::Quiet;
use sealvol_core::pull::{pull, pull_selected};
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::Tiers;
use sealvol_core::refs::VolumeName;
use sealvol_core::store::MemoryStore;
use sealvol_core::testutil::noise;
use sealvol_core::walk::digest_dir;
use sealvol_core::{Digest, Repository};

struct Setup {
    repo: Arc<Repository>,
    tmp: tempfile::TempDir,
}

fn setup() -> Setup {
    let mem = Arc::new(MemoryStore::new().unwrap());
    let repo = Repository::open(Box::new(mem), "memory".into(), true).unwrap();
    Setup {
        repo: Arc::new(repo),
        tmp: tempfile::tempdir().unwrap(),
    }
}

fn vol() -> VolumeName {
    VolumeName::parse("ns/vol").unwrap()
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

impl Setup {
    fn path(&self, name: &str) -> std::path::PathBuf {
        self.tmp.path().join(name)
    }

    fn push(&self, dir: &Path) -> Digest {
        push(&self.repo, dir, &vol(), &[], &PushOptions::new(&Quiet))
            .unwrap()
            .digest
    }

    fn tiers(&self) -> Tiers {
        Tiers::new(Arc::clone(&self.repo), None)
    }

    fn pull(
        &self,
        d: &Digest,
        out: &Path,
        force: bool,
    ) -> sealvol_core::error::Result<sealvol_core::pull::PullReport> {
        pull(&self.tiers(), &vol(), d, out, force, &Quiet)
    }
}

#[test]
fn pull_refuses_a_non_empty_directory_unless_forced_and_names_what_is_in_the_way() {
    let s = setup();
    let src = s.path("src");
    write(&src.join("f"), b"new");
    let d = s.push(&src);
    let out = s.path("out");
    write(&out.join("f"), b"old");
    write(&out.join("keep"), b"mine");
    let e = s.pull(&d, &out, false).unwrap_err();
    let said = format!("{e} {}", e.hint_text().unwrap_or(""));
    assert!(
        said.contains("not empty")
            && said.contains("f, keep in the way")
            && said.contains("--force"),
        "{said}"
    );
    assert_eq!(std::fs::read(out.join("f")).unwrap(), b"old");
    assert_eq!(std::fs::read(out.join("keep")).unwrap(), b"mine");

    let report = s.pull(&d, &out, true).unwrap();
    assert_eq!(report.removed, ["keep"]);
    assert_eq!(std::fs::read(out.join("f")).unwrap(), b"new");
    assert!(!out.join("keep").exists());
    assert_eq!(digest_dir(&out).unwrap(), d);
}

#[test]
fn pull_force_over_another_version_leaves_exactly_the_pulled_version() {
    let s = setup();
    let canary = s.path("canary");
    write(&canary.join("config.json"), b"{\"v\": 2}\n");
    write(&canary.join("model.bin"), &noise(300_000, 1));
    write(&canary.join("adapter.safetensors"), &noise(5000, 2));
    write(&canary.join("extra/deep/notes.txt"), b"canary only\n");
    std::fs::create_dir_all(canary.join("empty-in-canary")).unwrap();
    std::os::unix::fs::symlink("model.bin", canary.join("link-in-canary")).unwrap();
    // Where prod has a file, canary has a directory, and the other way round.
    write(&canary.join("swap/inner"), b"a directory here\n");
    write(&canary.join("flip"), b"a file here\n");
    let prod = s.path("prod");
    write(&prod.join("config.json"), b"{\"v\": 1}\n");
    write(&prod.join("model.bin"), &noise(300_000, 3));
    write(&prod.join("swap"), b"a file here\n");
    write(&prod.join("flip/inner"), b"a directory here\n");
    std::fs::create_dir_all(prod.join("empty-in-prod")).unwrap();
    std::os::unix::fs::symlink("config.json", prod.join("link")).unwrap();
    let d_canary = s.push(&canary);
    let d_prod = s.push(&prod);

    let out = s.path("out");
    s.pull(&d_canary, &out, false).unwrap();
    assert_eq!(digest_dir(&out).unwrap(), d_canary);
    // Things of the user's own that no version holds: also removed, and listed.
    std::os::unix::fs::symlink("/etc/passwd", out.join("my-link")).unwrap();
    std::fs::create_dir_all(out.join("my-empty-dir")).unwrap();

    let report = s.pull(&d_prod, &out, true).unwrap();
    assert_eq!(digest_dir(&out).unwrap(), d_prod);
    for removed in [
        "adapter.safetensors",
        "extra/deep/notes.txt",
        "extra/deep/",
        "extra/",
        "empty-in-canary/",
        "link-in-canary",
        "my-link",
        "my-empty-dir/",
        "swap/inner",
        "swap/",
        "flip",
    ] {
        assert!(
            report.removed.iter().any(|r| r == removed),
            "{removed:?} not in {:?}",
            report.removed
        );
    }
    assert_eq!(report.removed.len(), 11, "{:?}", report.removed);
    assert!(std::fs::metadata("/etc/passwd").is_ok());

    // And back: the same holds the other way.
    s.pull(&d_canary, &out, true).unwrap();
    assert_eq!(digest_dir(&out).unwrap(), d_canary);
}

#[test]
fn a_folder_holding_only_an_interrupted_pulls_temporaries_counts_as_empty() {
    let s = setup();
    let src = s.path("src");
    write(&src.join("a/f"), b"payload");
    let d = s.push(&src);
    let out = s.path("out");
    // What a pull killed before its first rename leaves (the name is the pull's own).
    write(&out.join(".sealvol-part-4242-0"), b"half");
    write(&out.join("a/.sealvol-part-4242-1"), b"half");
    let report = s.pull(&d, &out, false).unwrap();
    assert_eq!(report.temporaries_removed, 2);
    assert!(report.removed.is_empty(), "{:?}", report.removed);
    assert_eq!(digest_dir(&out).unwrap(), d);
}

#[test]
fn pull_never_writes_through_a_symlink_in_the_target() {
    let s = setup();
    let src = s.path("src");
    write(&src.join("sub/f"), b"payload");
    let d = s.push(&src);
    let out = s.path("out");
    let outside = s.path("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(&outside, out.join("sub")).unwrap();
    let e = s.pull(&d, &out, false).unwrap_err();
    assert!(e.to_string().contains("sub in the way"), "{e}");
    // Forced, the link is removed (not followed) and a real directory takes its place.
    let report = s.pull(&d, &out, true).unwrap();
    assert_eq!(report.removed, ["sub"]);
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert!(std::fs::symlink_metadata(out.join("sub")).unwrap().is_dir());
    assert_eq!(digest_dir(&out).unwrap(), d);
}

/// Pulling over a close version writes only what differs: a file already there with
/// the version's bytes keeps its inode; a changed one is replaced; the result is the
/// version exactly, modes included.
#[test]
fn pull_force_over_a_close_version_keeps_what_is_already_right() {
    let s = setup();
    let a = s.path("a");
    write(&a.join("big.bin"), &noise(2 << 20, 1));
    write(&a.join("config.json"), b"{\"v\": 1}");
    let b = s.path("b");
    write(&b.join("big.bin"), &noise(2 << 20, 1));
    write(&b.join("config.json"), b"{\"v\": 2}");
    let da = s.push(&a);
    let db = s.push(&b);
    let out = s.path("out");
    s.pull(&da, &out, false).unwrap();
    let ino = |p: &str| std::fs::metadata(out.join(p)).unwrap().ino();
    let (big, config) = (ino("big.bin"), ino("config.json"));
    // A mode the version does not have is put right even on a kept file.
    std::fs::set_permissions(out.join("big.bin"), std::fs::Permissions::from_mode(0o600)).unwrap();

    let report = s.pull(&db, &out, true).unwrap();
    assert_eq!(report.kept, 1);
    assert_eq!(ino("big.bin"), big, "the identical file was not rewritten");
    assert_ne!(ino("config.json"), config, "the changed file was");
    let mode = std::fs::metadata(out.join("big.bin")).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o644);
    assert_eq!(digest_dir(&out).unwrap(), db);

    // A file of the right size but other bytes is not mistaken for the version's.
    write(&out.join("big.bin"), &noise(2 << 20, 9));
    let report = s.pull(&db, &out, true).unwrap();
    assert_eq!(report.kept, 1, "only config.json was right");
    assert_eq!(digest_dir(&out).unwrap(), db);
}

/// A pull of the paths a selection takes writes only those, each verified, and does
/// not read the rest of the version; a selection that takes nothing is an error with
/// nothing written.
#[test]
fn pull_takes_a_subset_of_a_version_when_asked() {
    let s = setup();
    let src = s.path("src");
    write(&src.join("model.safetensors"), &noise(3 << 20, 4));
    write(&src.join("config.json"), b"{}\n");
    write(&src.join("tokenizer/vocab.json"), b"{\"a\": 1}\n");
    write(&src.join("onnx/model.onnx"), &noise(1 << 20, 5));
    let d = s.push(&src);

    let out = s.path("configs");
    let tiers = s.tiers();
    let takes = |p: &str| p.ends_with(".json") && !p.starts_with("tokenizer/");
    let report = pull_selected(&tiers, &vol(), &d, &out, false, Some(&takes), &Quiet).unwrap();
    assert_eq!(report.files, 1);
    let got: Vec<String> = sealvol_testkit::files::under(&out)
        .iter()
        .map(|p| p.strip_prefix(&out).unwrap().display().to_string())
        .collect();
    assert_eq!(got, ["config.json"]);
    assert_eq!(std::fs::read(out.join("config.json")).unwrap(), b"{}\n");
    // The weights were not read: only the small file's bytes left the repository.
    let read = tiers.counters.snapshot().origin_bytes;
    assert!(read < 64 << 10, "{read} bytes read from the origin");

    let none = s.path("none");
    let nothing = |p: &str| p.ends_with(".bin");
    let e = pull_selected(&tiers, &vol(), &d, &none, false, Some(&nothing), &Quiet).unwrap_err();
    assert!(e.to_string().contains("take none of the 4 file(s)"), "{e}");
    assert!(!none.exists(), "nothing written");
}
