//! What a push refuses of the folder it is given, each with an error that names the
//! path and seals nothing: a file or a missing folder, a file that changes while it is
//! read, a symlink that leaves the folder, a name that is not UTF-8. And what a
//! repository refuses to be opened as: one of a newer format. A verify names the
//! version and the file a missing chunk list breaks. What the CLI prints of the same
//! (exit codes, one `error:` line and a `hint:`) is tested through the binary
//! (`tests/cli/`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sealvol_core::Repository;
use sealvol_core::error::Error;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::VolumeName;
use sealvol_core::testutil::noise;
use sealvol_core::verify::{ReadData, survey_all};

fn vol() -> VolumeName {
    VolumeName::parse("ns/vol").unwrap()
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn repository(dir: &Path) -> Repository {
    Repository::open_local(&dir.join("repo"), true, false).unwrap()
}

fn push_err(repo: &Repository, src: &Path) -> Error {
    push(repo, src, &vol(), &[], &PushOptions::new(&Quiet)).unwrap_err()
}

/// Nothing was sealed: no volume, and the repository verifies.
fn nothing_sealed(repo: &Repository) {
    assert!(repo.volumes(None).unwrap().is_empty());
    let report = survey_all(repo, ReadData::All, None, false, &Quiet)
        .unwrap()
        .report();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn pushing_a_file_or_a_missing_dir_fails_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    let f = tmp.path().join("file.bin");
    write(&f, b"x");
    let e = push_err(&repo, &f);
    assert!(e.to_string().contains("is a file, not a directory"), "{e}");
    let e = push_err(&repo, &tmp.path().join("nope"));
    assert!(e.to_string().contains("nope"), "{e}");
    nothing_sealed(&repo);
}

#[test]
fn a_file_changing_during_the_push_is_detected() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    let src = tmp.path().join("src");
    let big = src.join("growing.bin");
    write(&big, &noise(48 << 20, 9));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let big = big.clone();
        std::thread::spawn(move || {
            use std::os::unix::fs::FileExt;
            let f = std::fs::OpenOptions::new().write(true).open(&big).unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                f.write_all_at(&i.to_le_bytes(), (i * 4096) % (48 << 20))
                    .unwrap();
                i += 1;
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        })
    };
    let e = push_err(&repo, &src);
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(
        e.to_string().contains("changed while it was being pushed"),
        "{e}"
    );
    // Nothing sealed, and what was written is sound.
    nothing_sealed(&repo);
}

#[test]
fn symlinks_leaving_the_directory_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    for (name, target) in [("abs", "/etc/passwd"), ("up", "../../outside")] {
        let src = tmp.path().join(format!("src-{name}"));
        write(&src.join("sub/f"), b"x");
        std::os::unix::fs::symlink(target, src.join("sub/link")).unwrap();
        let e = push_err(&repo, &src);
        assert!(
            e.to_string().contains("points outside the directory"),
            "{e}"
        );
        assert!(e.hint_text().is_some(), "{e}");
    }
    nothing_sealed(&repo);
}

#[test]
fn non_utf8_file_names_are_refused_by_name() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let name = std::ffi::OsStr::from_bytes(b"bad-\xff-name");
    std::fs::write(src.join(name), b"x").unwrap();
    let e = push_err(&repo, &src);
    assert!(
        e.to_string().contains("not UTF-8") && e.to_string().contains("bad-"),
        "{e}"
    );
    nothing_sealed(&repo);
}

#[test]
fn a_newer_repository_format_is_refused_with_its_version() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    let src = tmp.path().join("src");
    write(&src.join("f"), b"x");
    push(&repo, &src, &vol(), &[], &PushOptions::new(&Quiet)).unwrap();
    drop(repo);
    let cfg = tmp.path().join("repo/sealvol.repo");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("\"format\": 1", "\"format\": 7");
    std::fs::write(&cfg, &text).unwrap();
    // Opened to read or to write: refused the same, and the file is left as it was.
    for create in [false, true] {
        let Err(e) = Repository::open_local(&tmp.path().join("repo"), create, false) else {
            panic!("a format-7 repository was opened");
        };
        let said = format!("{e} {}", e.hint_text().unwrap_or(""));
        assert!(
            said.contains("format 7") && said.contains("upgrade"),
            "{said}"
        );
    }
    assert_eq!(std::fs::read_to_string(&cfg).unwrap(), text);
}

#[test]
fn verify_reports_a_missing_chunk_list() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository(tmp.path());
    let src = tmp.path().join("src");
    // Larger than a small file, which has no chunk list (docs/FORMAT.md).
    write(&src.join("a.bin"), &noise(200 << 10, 3));
    let d = push(&repo, &src, &vol(), &[], &PushOptions::new(&Quiet))
        .unwrap()
        .digest;
    let files = tmp.path().join("repo/files");
    let mut lists = Vec::new();
    for sub in std::fs::read_dir(&files).unwrap() {
        for f in std::fs::read_dir(sub.unwrap().path()).unwrap() {
            lists.push(f.unwrap().path());
        }
    }
    assert_eq!(lists.len(), 1);
    std::fs::remove_file(&lists[0]).unwrap();
    let report = survey_all(&repo, ReadData::None, None, false, &Quiet)
        .unwrap()
        .report();
    let pinned = format!("vol:ns/vol@{d}");
    let hit = report
        .damaged_versions
        .iter()
        .find(|a| a.version.as_deref() == Some(pinned.as_str()))
        .unwrap_or_else(|| panic!("{pinned} not in {:?}", report.damaged_versions));
    assert_eq!(hit.files, ["a.bin"]);
}
