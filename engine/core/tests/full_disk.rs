//! A repository on a disk that fills up mid-push: the push fails saying so, leaves no
//! staging file behind (it used to stay until the next writer called it "left by
//! killed processes"), and nothing it wrote is referenced; once space is freed the same
//! push succeeds and the repository verifies.

use sealvol_core::Repository;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::VolumeName;
use sealvol_core::testutil::{Tmpfs, noise};

#[test]
fn a_push_that_fills_the_disk_fails_and_leaves_no_staging() {
    let dir = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::mount(dir.path(), "4M") else {
        eprintln!("SKIPPED: no tmpfs (not root)");
        return;
    };
    let src = tempfile::tempdir().unwrap();
    std::fs::write(src.path().join("weights.bin"), noise(8 << 20, 7)).unwrap();
    std::fs::write(src.path().join("config.json"), b"{}").unwrap();
    let root = fs.path().join("repo");
    let repo = Repository::open_local(&root, true, true).unwrap();
    let vol = VolumeName::parse("weights/full").unwrap();
    let opts = PushOptions::new(&Quiet);
    let err = push(&repo, src.path(), &vol, &[], &opts).unwrap_err();
    assert!(
        err.to_string().contains("No space left") || err.io_kind().is_some(),
        "{err}"
    );
    let staging: Vec<_> = std::fs::read_dir(root.join("tmp"))
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with("lock-"))
                .collect()
        })
        .unwrap_or_default();
    assert!(staging.is_empty(), "staging left behind: {staging:?}");
    assert!(repo.versions(&vol).unwrap_or_default().is_empty());

    // A smaller push fits now: the failed one's space came back.
    std::fs::write(src.path().join("weights.bin"), noise(1 << 20, 8)).unwrap();
    let pushed = push(&repo, src.path(), &vol, &[], &opts).unwrap();
    assert_eq!(repo.versions(&vol).unwrap().len(), 1, "{pushed:?}");
}
