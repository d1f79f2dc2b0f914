//! `sealvol volume mount` with real FUSE mounts, read with ordinary file APIs.
//!
//! Needs /dev/fuse and fusermount3 (Debian's fuse3; scripts/test.sh installs it). Where
//! they are missing these tests print SKIPPED loudly; with SEALVOL_REQUIRE_FUSE=1 (set by
//! .ci/run) they fail instead, so CI can never pass without running them.

mod common;

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::mounts::{
    Mounted, is_mounted, mount, mounts_json, read_mapped, wait_stats, write_safetensors,
};
use common::{Env, assert_same_tree, fuse_available, noise, walk_files, write};

/// A tree with the awkward cases: empty files, a deep path, many small files, a link,
/// an empty directory, an executable, and a file larger than one 64 MiB pack.
fn awkward_tree(root: &Path) {
    write(&root.join("empty"), b"");
    write(&root.join("sub/also-empty"), b"");
    let mut deep = root.to_path_buf();
    for i in 0..24 {
        deep.push(format!("d{i}"));
    }
    write(&deep.join("bottom.txt"), b"the bottom");
    for i in 0..150 {
        write(
            &root.join(format!("many/f{i:03}.txt")),
            format!("file {i}\n").as_bytes(),
        );
    }
    write(&root.join("weights/big.bin"), &noise(80 << 20, 7));
    write(&root.join("weights/mid.bin"), &noise(3 << 20, 8));
    std::os::unix::fs::symlink("weights/mid.bin", root.join("link")).unwrap();
    fs::create_dir_all(root.join("nothing-here")).unwrap();
    write(&root.join("run.sh"), b"#!/bin/sh\necho hi\n");
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_mounted_version_reads_byte_identical_and_unmounts_cleanly() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    awkward_tree(&src);
    env.push(&src, "t/awkward", &["--tag", "prod"]);
    let mnt = env.path("mnt");
    let m = mount(&env, "t/awkward:prod", &mnt, &[]);

    assert_same_tree(&src, &mnt);

    // Random reads, many across chunk and pack boundaries.
    let want = fs::read(src.join("weights/big.bin")).unwrap();
    let f = fs::File::open(mnt.join("weights/big.bin")).unwrap();
    let mut x: u64 = 0x2545F4914F6CDD1D;
    for _ in 0..400 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let off = (x % want.len() as u64) as usize;
        let len = ((x >> 40) as usize % (3 << 20)).min(want.len() - off);
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, off as u64).unwrap();
        assert!(buf == want[off..off + len], "{len} bytes at {off}");
    }
    // Every byte where one 64 MiB pack ends and the next begins.
    let mut buf = vec![0u8; 1 << 20];
    let edge = (64 << 20) - (512 << 10);
    f.read_exact_at(&mut buf, edge as u64).unwrap();
    assert!(buf == want[edge..edge + (1 << 20)]);
    drop(f);

    let meta = fs::metadata(mnt.join("run.sh")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(meta.permissions().mode() & 0o777, 0o555);
    let st = statvfs(&mnt);
    assert!(st.0 > 0, "statfs reports the volume's size");

    let listed = mounts_json(&env);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["requested"], "t/awkward:prod");

    env.ok(&["volume", "unmount", mnt.to_str().unwrap()]);
    assert!(!is_mounted(&mnt));
    assert_eq!(
        fs::read_dir(&mnt).unwrap().count(),
        0,
        "the mount point is empty again"
    );
    assert!(mounts_json(&env).is_empty());
    drop(m);
}

fn statvfs(p: &Path) -> (u64, u64) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut s) }, 0);
    (s.f_blocks as u64, s.f_files as u64)
}

#[test]
fn nothing_can_change_a_mounted_version() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"sealed");
    write(&src.join("dir/b.txt"), b"also sealed");
    env.push(&src, "t/ro", &[]);
    let mnt = env.path("mnt");
    let _m = mount(&env, "t/ro", &mnt, &[]);
    let erofs = |r: std::io::Result<()>, what: &str| {
        let e = r.expect_err(what);
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{what}: {e}");
    };
    erofs(fs::write(mnt.join("new.txt"), b"x"), "create");
    erofs(
        fs::OpenOptions::new()
            .write(true)
            .open(mnt.join("a.txt"))
            .map(drop),
        "open for writing",
    );
    erofs(
        fs::OpenOptions::new()
            .append(true)
            .open(mnt.join("a.txt"))
            .map(drop),
        "append",
    );
    erofs(fs::remove_file(mnt.join("a.txt")), "unlink");
    erofs(fs::rename(mnt.join("a.txt"), mnt.join("c.txt")), "rename");
    erofs(fs::create_dir(mnt.join("newdir")), "mkdir");
    erofs(fs::remove_dir_all(mnt.join("dir")), "rmdir");
    use std::os::unix::fs::PermissionsExt;
    erofs(
        fs::set_permissions(mnt.join("a.txt"), fs::Permissions::from_mode(0o777)),
        "chmod",
    );
    erofs(
        std::os::unix::fs::symlink("a.txt", mnt.join("l")),
        "symlink",
    );
    erofs(fs::hard_link(mnt.join("a.txt"), mnt.join("h")), "link");
    let path = std::ffi::CString::new(mnt.join("a.txt").to_str().unwrap()).unwrap();
    erofs(
        match unsafe { libc::truncate(path.as_ptr(), 0) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        },
        "truncate",
    );
    assert_eq!(fs::read(mnt.join("a.txt")).unwrap(), b"sealed");
    assert_eq!(
        fs::read(mnt.join("missing")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    // An ioctl (Python's `open` asks whether every file is a terminal) is answered
    // "not a terminal", quietly.
    use std::os::fd::AsRawFd;
    let f = fs::File::open(mnt.join("a.txt")).unwrap();
    assert_eq!(unsafe { libc::isatty(f.as_raw_fd()) }, 0);
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENOTTY)
    );
    assert!(
        !mount_logs(&env).contains("Not Implemented"),
        "{}",
        mount_logs(&env)
    );
}

#[test]
fn a_tag_resolves_once_at_mount_time() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("model.txt"), b"version one");
    let v1 = env.push(&src, "t/tagged", &["--tag", "prod"]);
    write(&src.join("model.txt"), b"version two");
    let v2 = env.push(&src, "t/tagged", &[]);
    let mnt = env.path("mnt");
    let _m = mount(&env, "t/tagged:prod", &mnt, &[]);
    env.ok(&["volume", "tag", v2.trim_start_matches("vol:"), "prod"]);
    assert_eq!(fs::read(mnt.join("model.txt")).unwrap(), b"version one");
    let listed = mounts_json(&env);
    assert_eq!(
        format!(
            "vol:{}@{}",
            listed[0]["volume"].as_str().unwrap(),
            listed[0]["digest"].as_str().unwrap()
        ),
        v1
    );
}

/// The chunks a node cache holds: where each lies (segment, offset, length).
fn cache_chunks(cache: &Path) -> Vec<(PathBuf, u64, u32)> {
    let c = sealvol_core::cache::ChunkCache::open(cache, 1 << 40).unwrap();
    c.chunks().iter().filter_map(|h| c.locate(h)).collect()
}

/// Two mount processes share one node cache; a chunk damaged in it is fetched again,
/// the rest served from it. The chunks come from a peer (`serve`): over a local
/// repository with no peer a mount keeps no chunk it can read again from the packs.
#[test]
fn two_mounts_share_one_cache_which_heals_a_damaged_chunk() {
    if !fuse_available() {
        return;
    }
    let mut env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(6 << 20, 3));
    env.push(&src, "t/shared", &["--tag", "prod"]);
    let want = fs::read(src.join("w.bin")).unwrap();
    let server = common::servers::serve_as_started(&env, &[]);
    env.vars
        .push(("SEALVOL_API_KEY".into(), server.key.clone()));
    let peer = format!("http://{}", server.addr);

    let a = env.path("mnt-a");
    let _ma = mount(&env, "t/shared:prod", &a, &["--peer", &peer]);
    assert!(fs::read(a.join("w.bin")).unwrap() == want);
    let stats = wait_stats(&env, &a, |s| s["bytes_served"] == want.len() as u64);
    assert_eq!(stats["stats"]["origin_chunks"], 0, "{stats}");
    // The cache fills in the background.
    let deadline = Instant::now() + Duration::from_secs(30);
    while cache_chunks(&env.path("cache"))
        .iter()
        .map(|(_, _, len)| *len as u64)
        .sum::<u64>()
        < want.len() as u64
    {
        assert!(Instant::now() < deadline, "the cache never filled");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Damage one cached chunk; a second mount on the same cache reads right bytes,
    // everything else from the cache, and puts the chunk back.
    let chunks = cache_chunks(&env.path("cache"));
    let (seg, offset, _) = &chunks[chunks.len() / 2];
    let mut bytes = fs::read(seg).unwrap();
    bytes[*offset as usize + 10] ^= 0x40;
    fs::write(seg, &bytes).unwrap();
    let b = env.path("mnt-b");
    let _mb = mount(&env, "t/shared:prod", &b, &["--peer", &peer]);
    assert!(fs::read(b.join("w.bin")).unwrap() == want);
    let m = wait_stats(&env, &b, |s| s["bytes_served"] == want.len() as u64);
    let s = &m["stats"];
    assert_eq!(
        s["origin_chunks"].as_u64().unwrap() + s["peer_chunks"].as_u64().unwrap(),
        1,
        "only the damaged chunk was fetched again: {m}"
    );
    assert_eq!(
        s["cache_hits"].as_u64().unwrap() as usize,
        chunks.len() - 1,
        "{m}"
    );
    assert_eq!(mounts_json(&env).len(), 2);
}

#[test]
fn a_damaged_origin_fails_reads_with_eio_not_wrong_bytes() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(2 << 20, 5));
    env.push(&src, "t/bad", &[]);
    for p in walk_files(&env.repo.join("packs")) {
        let mut b = fs::read(&p).unwrap();
        b[1000] ^= 1;
        fs::write(&p, b).unwrap();
    }
    let mnt = env.path("mnt");
    let _m = mount(&env, "t/bad", &mnt, &[]);
    let e = fs::read(mnt.join("w.bin")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let log = fs::read_to_string(
        walk_files(&env.state.join("mounts"))
            .into_iter()
            .find(|p| p.extension().is_some_and(|x| x == "log"))
            .unwrap(),
    )
    .unwrap();
    assert!(
        log.contains("fails its hash check") && log.contains("read of w.bin at offset 0"),
        "the log names the file, the offset and why: {log}"
    );
    // The mount wrote the damage down: a push of the same bytes now writes a fresh copy
    // instead of reusing the bad one, and the version reads back.
    assert!(
        !walk_files(&env.repo.join("damage")).is_empty(),
        "no damage record"
    );
    let push: serde_json::Value = serde_json::from_str(&env.ok(&[
        "volume",
        "push",
        src.to_str().unwrap(),
        "t/bad",
        "--json",
    ]))
    .unwrap();
    assert_eq!(push["files_healed"], 1, "{push}");
    env.ok(&["volume", "verify", "t/bad"]);
}

#[test]
fn a_killed_mount_leaves_no_stuck_mount_point() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"a");
    env.push(&src, "t/kill", &[]);
    let mnt = env.path("mnt");
    let _m = mount(&env, "t/kill", &mnt, &[]);
    let pid = mounts_json(&env)[0]["pid"].as_u64().unwrap();
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(10);
    while is_mounted(&mnt) {
        assert!(
            Instant::now() < deadline,
            "the mount point is stuck after kill -9"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(fs::read_dir(&mnt).unwrap().count(), 0);
    assert!(
        mounts_json(&env).is_empty(),
        "the dead mount's record is dropped"
    );
    // And the directory can be mounted again at once.
    let _again = mount(&env, "t/kill", &mnt, &[]);
    assert_eq!(fs::read(mnt.join("a.txt")).unwrap(), b"a");
}

#[test]
fn foreground_mount_unmounts_on_sigterm() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"a");
    env.push(&src, "t/fg", &[]);
    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let mut child = env
        .cmd()
        .args([
            "volume",
            "mount",
            "t/fg",
            mnt.to_str().unwrap(),
            "--foreground",
            "--cache",
        ])
        .arg(env.path("cache"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !is_mounted(&mnt) {
        assert!(Instant::now() < deadline, "never mounted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _guard = Mounted {
        env: &env,
        dir: mnt.clone(),
    };
    assert_eq!(fs::read(mnt.join("a.txt")).unwrap(), b"a");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!is_mounted(&mnt));
}

#[test]
fn bad_mount_input_gets_one_clear_line_and_changes_nothing() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"a");
    env.push(&src, "t/bad-input", &[]);
    let s = |p: &Path| p.to_str().unwrap().to_string();

    let missing = env.path("no-such-dir");
    let e = env.fails(1, &["volume", "mount", "t/bad-input", &s(&missing)]);
    assert!(e.contains("create the directory first"), "{e}");

    let file = env.path("a-file");
    write(&file, b"x");
    let e = env.fails(1, &["volume", "mount", "t/bad-input", &s(&file)]);
    assert!(e.contains("not a directory"), "{e}");

    let full = env.path("full");
    write(&full.join("keep.txt"), b"mine");
    let e = env.fails(1, &["volume", "mount", "t/bad-input", &s(&full)]);
    assert!(e.contains("not empty"), "{e}");
    assert_eq!(fs::read(full.join("keep.txt")).unwrap(), b"mine");

    let mnt = env.path("mnt");
    fs::create_dir_all(&mnt).unwrap();
    let e = env.fails(1, &["volume", "mount", "t/nope", &s(&mnt)]);
    assert!(e.contains("t/nope"), "{e}");
    let e = env.fails(
        1,
        &[
            "volume",
            "mount",
            "t/bad-input",
            &s(&mnt),
            "--cache-size",
            "lots",
        ],
    );
    assert!(e.contains("not a size"), "{e}");
    // A memory bound that is not a size, too small to hold a range read, or so large
    // that read-ahead could make the node swap.
    for (bound, says) in [
        ("plenty", "not a size"),
        ("1M", "below the smallest bound"),
        ("1P", "more than half of this node's"),
    ] {
        let e = env.fails(
            1,
            &[
                "volume",
                "mount",
                "t/bad-input",
                &s(&mnt),
                "--prefetch-memory",
                bound,
            ],
        );
        assert!(e.contains(says) && e.lines().count() <= 2, "{bound}: {e}");
        assert!(!is_mounted(&mnt));
    }
    for timeout in ["0s", "2h"] {
        let e = env.fails(
            1,
            &[
                "volume",
                "mount",
                "t/bad-input",
                &s(&mnt),
                "--read-timeout",
                timeout,
            ],
        );
        assert!(
            e.contains("out of range") && e.contains("1s to 1h"),
            "{timeout}: {e}"
        );
    }
    let e = env.fails(
        2,
        &[
            "volume",
            "mount",
            "t/bad-input",
            &s(&mnt),
            "--read-timeout",
            "soon",
        ],
    );
    assert!(e.contains("--read-timeout"), "{e}");
    assert!(!is_mounted(&mnt));
    let e = env.fails(
        1,
        &[
            "volume",
            "mount",
            "t/bad-input",
            &s(&mnt),
            "--cache",
            &s(&file.join("sub")),
        ],
    );
    assert!(e.contains("cannot create cache directory"), "{e}");
    let e = env.fails(1, &["volume", "mount", "not a ref", &s(&mnt)]);
    assert!(e.lines().count() <= 2, "{e}");

    let _m = mount(&env, "t/bad-input", &mnt, &[]);
    let e = env.fails(1, &["volume", "mount", "t/bad-input", &s(&mnt)]);
    assert!(e.contains("already mounted"), "{e}");
    assert_eq!(
        mounts_json(&env).len(),
        1,
        "the failed mount left no record"
    );

    // Unmounting by another name of the same directory works: mount points are compared
    // by their canonical path.
    let alias = env.path("alias");
    std::os::unix::fs::symlink(&mnt, &alias).unwrap();
    env.ok(&["volume", "unmount", &s(&alias)]);
    assert!(!is_mounted(&mnt));
    let _m = mount(&env, "t/bad-input", &mnt, &[]);

    let e = env.fails(1, &["volume", "unmount", &s(&full)]);
    assert!(e.contains("not a sealvol mount"), "{e}");
    assert!(e.contains("volume mounts"), "{e}");
    assert!(mounts_json(&env).len() == 1 && is_mounted(&mnt));
}

/// A large file read whole is kept whole in the node cache (written once: from a local
/// repository not as chunks too); later opens hand it to the kernel (FUSE passthrough). A damaged whole file is caught when a mount first opens it,
/// dropped, and the reads go through the verified chunk path instead.
#[test]
fn a_file_read_whole_is_passed_through_and_a_damaged_one_is_not() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    let want = noise(20 << 20, 9);
    write(&src.join("shard.bin"), &want);
    env.push(&src, "t/pass", &[]);
    let mnt = env.path("mnt");
    let m = mount(&env, "t/pass", &mnt, &[]);
    assert!(fs::read(mnt.join("shard.bin")).unwrap() == want);
    let files = env.path("cache").join("files");
    let deadline = Instant::now() + Duration::from_secs(20);
    while walk_files(&files).is_empty() {
        assert!(Instant::now() < deadline, "the file was never kept whole");
        std::thread::sleep(Duration::from_millis(50));
    }
    // From a local repository the file was written to the cache once, whole, and not
    // as chunks too.
    assert_eq!(cache_chunks(&env.path("cache")), vec![]);
    assert!(fs::read(mnt.join("shard.bin")).unwrap() == want);
    let s = wait_stats(&env, &mnt, |s| s["passthrough_opens"].as_u64() >= Some(1));
    assert_eq!(s["stats"]["passthrough_opens"], 1, "{s}");
    env.ok(&["volume", "unmount", mnt.to_str().unwrap()]);
    drop(m);

    // The kept file, beside the stamp of its check.
    let kept: Vec<_> = walk_files(&files);
    assert_eq!(kept.len(), 2, "{kept:?}");
    let kept = kept.into_iter().find(|p| p.extension().is_none()).unwrap();
    let mut b = fs::read(&kept).unwrap();
    b[12345] ^= 0x10;
    fs::write(&kept, &b).unwrap();
    let _m = mount(&env, "t/pass", &mnt, &[]);
    assert!(fs::read(mnt.join("shard.bin")).unwrap() == want);
    assert!(!kept.exists(), "the damaged whole file was dropped");
    let s = wait_stats(&env, &mnt, |s| {
        s["bytes_served"].as_u64() == Some(want.len() as u64)
    });
    assert_eq!(s["stats"]["passthrough_opens"], 0, "{s}");
}

/// Unmounting while a file is open fails with a hint, changes nothing, and `--lazy`
/// detaches at once.
#[test]
fn unmount_while_busy_says_so_and_lazy_detaches() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"busy");
    env.push(&src, "t/busy", &[]);
    let mnt = env.path("mnt");
    let _m = mount(&env, "t/busy", &mnt, &[]);
    let open = fs::File::open(mnt.join("a.txt")).unwrap();
    let e = env.fails(1, &["volume", "unmount", mnt.to_str().unwrap()]);
    assert!(e.contains("--lazy"), "{e}");
    // It names who holds it (this test, reading a.txt), not the unmount helper.
    assert!(
        e.contains("a.txt is open in pid") && e.contains(&format!("pid {} (", std::process::id())),
        "{e}"
    );
    assert!(!e.contains("fusermount"), "{e}");
    assert!(is_mounted(&mnt));
    let mut s = String::new();
    use std::io::Read;
    (&open).read_to_string(&mut s).unwrap();
    assert_eq!(s, "busy", "the open file still reads");
    env.ok(&["volume", "unmount", "--lazy", mnt.to_str().unwrap()]);
    assert!(!is_mounted(&mnt));
    drop(open);
}

/// Mounts started at the same moment on one directory do not stack: one wins, every
/// other fails with "already mounted", and the kernel holds one mount there.
#[test]
fn mounts_started_at_once_on_one_directory_do_not_stack() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"once");
    env.push(&src, "t/base", &["--tag", "prod"]);
    let mnt = env.path("m/d");
    fs::create_dir_all(&mnt).unwrap();
    let cache = env.path("cache");
    let children: Vec<_> = (0..4)
        .map(|_| {
            env.cmd()
                .args(["volume", "mount", "t/base:prod", mnt.to_str().unwrap()])
                .args(["--cache", cache.to_str().unwrap()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let _m = Mounted {
        env: &env,
        dir: mnt.clone(),
    };
    let won = outs.iter().filter(|o| o.status.success()).count();
    assert_eq!(won, 1, "exactly one mount wins");
    for o in outs.iter().filter(|o| !o.status.success()) {
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{e}");
        assert!(e.contains("already mounted"), "{e}");
    }
    let canonical = mnt.canonicalize().unwrap();
    let stacked = fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.split(' ').nth(4) == canonical.to_str())
        .count();
    assert_eq!(
        stacked,
        1,
        "the kernel holds one mount at {}",
        mnt.display()
    );
    assert_eq!(fs::read(mnt.join("a.txt")).unwrap(), b"once");
    assert_eq!(mounts_json(&env).len(), 1);
}

fn mount_logs(env: &Env) -> String {
    let mut all = String::new();
    for e in fs::read_dir(env.state.join("mounts")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "log") {
            all.push_str(&fs::read_to_string(e.path()).unwrap());
        }
    }
    all
}

/// The mount's log says who ended it: `sealvol volume unmount`, or someone outside.
#[test]
fn the_mount_log_says_who_unmounted_it() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.txt"), b"a");
    env.push(&src, "t/log", &[]);
    let mnt = env.path("mnt");
    let m = mount(&env, "t/log", &mnt, &[]);
    env.ok(&["volume", "unmount", mnt.to_str().unwrap()]);
    let log = mount_logs(&env);
    assert!(log.contains("(by `sealvol volume unmount`)"), "{log}");
    assert!(!log.contains("from outside"), "{log}");
    drop(m);

    let m = mount(&env, "t/log", &mnt, &[]);
    let status = Command::new("fusermount3")
        .arg("-u")
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !mount_logs(&env).contains("from outside") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = mount_logs(&env);
    assert!(
        log.contains("(from outside: fusermount3 -u or umount)"),
        "{log}"
    );
    drop(m);
}

#[test]
fn a_deleted_version_keeps_serving_where_mounted_and_mounts_again_once_restored() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("a.bin"), &noise(3 << 20, 41));
    write(&src.join("b.bin"), &noise(3 << 20, 42));
    // Never read until the version is purged.
    write(&src.join("c.bin"), &noise(2 << 20, 44));
    let r = env.push(&src, "t/del", &[]);
    let same = |dir: &Path| {
        assert_eq!(fs::read(dir.join("a.bin")).unwrap(), noise(3 << 20, 41));
        assert_eq!(fs::read(dir.join("b.bin")).unwrap(), noise(3 << 20, 42));
        assert_eq!(fs::metadata(dir.join("c.bin")).unwrap().len(), 2 << 20);
    };
    let other = env.path("other");
    write(&other.join("o.bin"), &noise(1 << 20, 43));
    env.push(&other, "t/del", &[]);
    let mnt = env.path("mnt");
    let _m = mount(&env, &r, &mnt, &[]);
    assert_eq!(fs::read(mnt.join("a.bin")).unwrap(), noise(3 << 20, 41));

    // In the trash: the running mount serves it all; a new mount is refused, by name.
    let held = fs::File::open(mnt.join("a.bin")).unwrap();
    env.ok(&["volume", "delete", &r, "--yes"]);
    same(&mnt);
    let again = env.path("again");
    fs::create_dir_all(&again).unwrap();
    let err = env.fails(1, &["volume", "mount", &r, again.to_str().unwrap()]);
    assert!(
        err.contains("in the trash") && err.contains("sealvol volume restore"),
        "{err}"
    );
    assert!(!is_mounted(&again));

    // Restored: the same digest mounts again, with the same bytes.
    env.ok(&["volume", "restore", &r]);
    {
        let _m2 = mount(&env, &r, &again, &[]);
        same(&again);
        assert!(mounts_json(&env).iter().all(|m| format!(
            "vol:{}@{}",
            m["volume"].as_str().unwrap(),
            m["digest"].as_str().unwrap()
        ) == r));
    }

    // Purged and swept while still mounted (docs/SEMANTICS.md): a file held open keeps
    // being served from what the mount holds and the node cache; opening a file whose
    // chunk list the sweep removed fails with EIO. Never wrong bytes.
    env.ok(&["volume", "delete", &r, "--yes"]);
    env.ok(&["settings", "--gc-grace", "1s"]);
    std::thread::sleep(Duration::from_millis(1100));
    let gc = env.ok_at(&common::days_ahead(8), &["volume", "gc"]);
    assert!(gc.contains("purged"), "{gc}");
    let mut whole = vec![0u8; 3 << 20];
    held.read_exact_at(&mut whole, 0).unwrap();
    assert_eq!(
        whole,
        noise(3 << 20, 41),
        "a file held open keeps being served"
    );
    for name in ["b.bin", "c.bin"] {
        let err = fs::read(mnt.join(name)).expect_err("its chunk list is gone");
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "{name}: {err}");
    }
    env.ok(&["volume", "verify"]);
}

#[test]
fn a_mapped_safetensors_file_is_read_ahead_within_the_memory_bound() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    let one = write_safetensors(&src.join("model-00001-of-00002.safetensors"), 64, 1);
    let two = write_safetensors(&src.join("model-00002-of-00002.safetensors"), 64, 2);
    env.push(&src, "t/tensors", &[]);
    let mnt = env.path("mnt");
    let _m = mount(&env, "t/tensors", &mnt, &["--prefetch-memory", "16M"]);
    assert!(read_mapped(&mnt.join("model-00001-of-00002.safetensors")) == one);
    assert!(read_mapped(&mnt.join("model-00002-of-00002.safetensors")) == two);
    let m = wait_stats(&env, &mnt, |s| s["bytes_served"].as_u64() >= Some(64 << 20));
    let s = &m["stats"];
    assert_eq!(s["memory_bound"], 16 << 20, "{m}");
    assert!(s["memory_peak"].as_u64().unwrap() <= 16 << 20, "{m}");
    // Read ahead, though not all of it: a reader that does nothing but fault pages in
    // fetches what read-ahead has not reached yet itself, and on a loaded machine (CI
    // runs these tests side by side on 2 cores) that is up to three quarters of it.
    assert!(
        s["prefetched_bytes"].as_u64().unwrap() >= 8 << 20,
        "the shards were read ahead by their headers: {m}"
    );
    assert!(s["memory_hits"].as_u64().unwrap() > 0, "{m}");
    assert_eq!(s["errors"], 0, "{m}");
}

#[test]
fn a_read_profile_recorded_by_one_mount_is_replayed_by_the_next() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    for (name, seed) in [("a.bin", 1), ("b.bin", 2), ("c.bin", 3)] {
        write(&src.join(name), &noise(8 << 20, seed));
    }
    let pinned = env.push(&src, "t/profiled", &[]);
    let s = |p: &Path| p.to_str().unwrap().to_string();

    // No mount has read it yet: nothing to save.
    let e = env.fails(1, &["volume", "profile", "save", &pinned]);
    assert!(
        e.contains("has recorded a read order") && e.lines().count() <= 2,
        "{e}"
    );
    let e = env.fails(1, &["volume", "profile", "save", "t/nope"]);
    assert!(e.contains("t/nope"), "{e}");

    // The first mount: the loader reads c.bin, then the first half of a.bin.
    let mnt = env.path("mnt");
    {
        let _m = mount(&env, &pinned, &mnt, &[]);
        fs::read(mnt.join("c.bin")).unwrap();
        let mut head = vec![0; 4 << 20];
        fs::File::open(mnt.join("a.bin"))
            .unwrap()
            .read_exact_at(&mut head, 0)
            .unwrap();
        // Not lazily: the mount process writes its recording down as it ends.
        env.ok(&["volume", "unmount", &s(&mnt)]);
    }
    let saved: serde_json::Value =
        serde_json::from_str(&env.ok(&["volume", "profile", "save", &pinned, "--json"])).unwrap();
    assert!(saved["chunks"].as_u64().unwrap() > 0, "{saved}");
    assert!(
        saved["key"]
            .as_str()
            .unwrap()
            .starts_with("profiles/t/profiled/"),
        "{saved}"
    );

    // A second mount, on a cold cache, reads ahead in that order before anyone reads:
    // c.bin first, then a.bin's head, and nothing of b.bin.
    fs::remove_dir_all(env.path("cache")).unwrap();
    let mnt2 = env.path("mnt2");
    let _m2 = mount(&env, &pinned, &mnt2, &["--prefetch-memory", "64M"]);
    // Until read-ahead is done: nothing queued, under way or planned.
    let m = wait_stats(&env, &mnt2, |s| {
        s["prefetched_bytes"].as_u64() >= Some(12 << 20) && s["prefetch_pending"] == 0
    });
    let before = m["stats"].clone();
    assert!(fs::read(mnt2.join("c.bin")).unwrap() == fs::read(src.join("c.bin")).unwrap());
    let after = wait_stats(&env, &mnt2, |s| s["reads"] != before["reads"])["stats"].clone();
    assert_eq!(
        after["origin_bytes"], before["origin_bytes"],
        "c.bin came from memory, read ahead in the profile's order: {after}"
    );
    assert!(fs::read(mnt2.join("b.bin")).unwrap() == fs::read(src.join("b.bin")).unwrap());
    let last = wait_stats(&env, &mnt2, |s| s["origin_bytes"] != after["origin_bytes"]);
    assert!(
        last["stats"]["origin_bytes"].as_u64() > after["origin_bytes"].as_u64(),
        "b.bin, not in the profile, came from the origin: {last}"
    );
}

/// A `.safetensors` file whose header names `n` one-byte tensors (65 bytes of JSON
/// each), then their `n` bytes.
fn many_tensors(n: usize, seed: u8) -> Vec<u8> {
    let mut header = String::with_capacity(n * 70);
    header.push('{');
    for i in 0..n {
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            r#""t{seed}.{i:07}":{{"dtype":"U8","shape":[1],"data_offsets":[{i},{}]}}"#,
            i + 1
        ));
    }
    header.push('}');
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend((0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    out
}

/// Three shards whose headers (65 MB each) name a million one-byte tensors: opening
/// them and reading a few bytes kept a mount bounded to 512 MiB at a peak of 2.6 GB,
/// while it reported 68 MiB. A header is planned only within a quarter of the bound
/// (these are not: the files are read ahead as any other), what planning reads and
/// parses is counted against the bound, and the mount reports its process's real peak.
#[test]
fn million_tensor_headers_keep_a_mount_within_its_memory_bound() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    let mut want = Vec::new();
    for i in 1..=3u8 {
        let name = format!("model-0000{i}-of-00003.safetensors");
        let bytes = many_tensors(1_000_000, i);
        write(&src.join(&name), &bytes);
        want.push((name, bytes));
    }
    env.push(&src, "t/many", &[]);
    let mnt = env.path("mnt");
    let _m = mount(&env, "t/many", &mnt, &["--prefetch-memory", "512M"]);
    // Counters are published every second: wait for ones that saw this read, with
    // read-ahead settled, however long a busy machine takes.
    let settled = |reads: u64| {
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let m = wait_stats(&env, &mnt, |s| {
                s["reads"].as_u64() >= Some(reads) && s["prefetch_pending"] == 0
            });
            let s = m["stats"].clone();
            if s["reads"].as_u64() >= Some(reads) && s["prefetch_pending"] == 0 {
                return s;
            }
            assert!(Instant::now() < deadline, "read-ahead never settled: {s}");
        }
    };
    let mut s = serde_json::Value::Null;
    for (n, (name, bytes)) in want.iter().enumerate() {
        let f = fs::File::open(mnt.join(name)).unwrap();
        let at = bytes.len() as u64 - 100;
        let mut got = [0u8; 8];
        f.read_exact_at(&mut got, at).unwrap();
        assert_eq!(&got[..], &bytes[at as usize..at as usize + 8], "{name}");
        s = settled(n as u64 + 1);
    }
    let bound = 512u64 << 20;
    let (peak, process) = (
        s["memory_peak"].as_u64().unwrap(),
        s["process_peak"].as_u64().unwrap(),
    );
    assert!(peak <= bound, "{s}");
    // The process holds the program and its threads besides what the bound counts.
    // Measured here: 394 MiB counted, a process peak of 379 MiB (2.6 GB before).
    assert!(
        process > 0 && process <= bound + (128 << 20),
        "process peak {process}: {s}"
    );
}

/// `volume mounts` right after a read shows it: the mount rewrites its record when
/// asked, so no figure lags the mount's last report.
#[test]
fn volume_mounts_right_after_a_read_shows_the_read() {
    if !fuse_available() {
        return;
    }
    let env = Env::new();
    let src = env.path("src");
    write(&src.join("w.bin"), &noise(3 << 20, 9));
    env.push(&src, "t/now", &[]);
    let mnt = env.path("mnt");
    let _m = mount(&env, "t/now", &mnt, &[]);
    for round in 1..=3u64 {
        assert_eq!(fs::read(mnt.join("w.bin")).unwrap().len(), 3 << 20);
        // Once, with no waiting: the figures of the reads just done.
        let m = common::mounts::mounts_json(&env)
            .into_iter()
            .find(|m| m["dir"] == mnt.to_str().unwrap())
            .unwrap();
        let served = m["stats"]["bytes_served"].as_u64().unwrap();
        // Later reads of the same pages may come from the kernel's page cache.
        assert!(served >= 3 << 20, "round {round}: {m}");
    }
}
