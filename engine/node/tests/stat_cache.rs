//! The node's stat cache (in its state database) lets a push skip a file whose size,
//! mtime and ctime are as last pushed, and never trusts an entry that only the ctime
//! shows is stale. What the CLI prints of it is tested through the binary.

use std::path::Path;
use std::time::{Duration, SystemTime};

use sealvol_core::Repository;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, PushReport, push};
use sealvol_core::refs::VolumeName;
use sealvol_core::testutil::noise;
use sealvol_core::walk::digest_dir;
use sealvol_node::state::StateDb;

fn set_mtime(p: &Path, secs: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
    f.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
        .unwrap();
}

fn push_with(repo: &Repository, db: &StateDb, src: &Path) -> PushReport {
    let mut opts = PushOptions::new(&Quiet);
    opts.stat_cache = Some(db);
    push(repo, src, &VolumeName::parse("ns/vol").unwrap(), &[], &opts).unwrap()
}

#[test]
fn stat_cache_skips_unchanged_files_but_never_trusts_a_stale_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
    let db = StateDb::open(&tmp.path().join("state"), Duration::ZERO)
        .unwrap()
        .expect("state db");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a.bin"), noise(1 << 20, 5)).unwrap();
    std::fs::write(src.join("b.bin"), noise(1 << 20, 6)).unwrap();
    // Files written just now are "racy" and not cached; age them.
    for f in ["a.bin", "b.bin"] {
        set_mtime(&src.join(f), 1_700_000_000);
    }
    std::thread::sleep(Duration::from_millis(1100));
    let first = push_with(&repo, &db, &src);
    assert_eq!(first.files_unchanged, 0);
    let second = push_with(&repo, &db, &src);
    assert_eq!(second.files_unchanged, 2);
    assert_eq!(second.bytes_read, 0);
    assert_eq!(second.digest, first.digest);

    // Same size, same mtime, different bytes: only ctime tells. Must be re-read.
    let mut b = std::fs::read(src.join("a.bin")).unwrap();
    b[10] ^= 1;
    std::fs::write(src.join("a.bin"), &b).unwrap();
    set_mtime(&src.join("a.bin"), 1_700_000_000);
    let third = push_with(&repo, &db, &src);
    assert!(third.files_unchanged <= 1, "{}", third.files_unchanged);
    assert_eq!(third.digest, digest_dir(&src).unwrap());
    assert_ne!(third.digest, first.digest);
}
