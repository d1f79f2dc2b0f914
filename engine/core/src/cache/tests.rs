use super::*;

fn chunk(i: u32, len: usize) -> (Hash, Vec<u8>) {
    let bytes: Vec<u8> = (0..len).map(|j| (i as usize * 31 + j * 7) as u8).collect();
    (Hash::of(&bytes), bytes)
}

/// Bytes of everything in the cache folder but its temporaries: what eviction bounds.
fn on_disk(dir: &Path) -> u64 {
    let mut total = 0;
    for kind in ["packs", "files"] {
        for e in walk(&dir.join(kind)) {
            total += fs::metadata(&e).map_or(0, |m| m.len());
        }
    }
    total
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn set_mtime(p: &Path, secs: u64) {
    let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[test]
fn round_trip_across_instances_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let a = ChunkCache::open(dir.path(), 1 << 20).unwrap();
    let (h, b) = chunk(1, 1000);
    assert!(a.get(&h).is_none());
    a.put(&h, &b).unwrap();
    a.put(&h, &b).unwrap();
    // Another process (here: another instance) sees it, and so does a restart.
    let other = ChunkCache::open(dir.path(), 1 << 20).unwrap();
    other.wait_measured();
    assert_eq!(&*other.get(&h).unwrap(), &b[..]);
    assert_eq!(other.used_bytes(), on_disk(dir.path()));
    assert!(other.used_bytes() >= 1000, "{}", other.used_bytes());
    // Stored once: one segment, one entry.
    assert_eq!(other.chunks(), vec![h]);
}

#[test]
fn chunks_are_packed_into_a_few_segments_and_read_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    let chunks: Vec<_> = (0..200).map(|i| chunk(i, 10_000 + i as usize)).collect();
    for (h, b) in &chunks {
        c.put(h, b).unwrap();
    }
    let files = walk(&dir.path().join("packs"));
    assert_eq!(files.len(), 2, "one segment and its index: {files:?}");
    for (h, b) in &chunks {
        assert_eq!(&*c.get(h).unwrap(), &b[..]);
        let (seg, offset, len) = c.locate(h).unwrap();
        assert_eq!(
            fs::read(&seg).unwrap()[offset as usize..][..len as usize],
            b[..]
        );
    }
}

#[test]
fn two_processes_write_segments_of_their_own_and_read_each_others() {
    let dir = tempfile::tempdir().unwrap();
    let a = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    let b = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    let (ha, ba) = chunk(10, 5000);
    let (hb, bb) = chunk(11, 6000);
    a.put(&ha, &ba).unwrap();
    b.put(&hb, &bb).unwrap();
    assert_ne!(a.locate(&ha).unwrap().0, b.locate(&hb).unwrap().0);
    // Each finds the other's chunk on a miss (a refresh reads the indexes that grew).
    let mut hashes = a.chunks();
    hashes.sort();
    let mut want = vec![ha, hb];
    want.sort();
    assert_eq!(hashes, want);
    assert_eq!(&*a.get(&hb).unwrap(), &bb[..]);
    b.chunks();
    assert_eq!(&*b.get(&ha).unwrap(), &ba[..]);
}

#[test]
fn a_damaged_chunk_is_dropped_not_served_fetched_again_and_its_segment_goes_first() {
    let dir = tempfile::tempdir().unwrap();
    let c = ChunkCache::open(dir.path(), 1 << 20).unwrap();
    let (h, b) = chunk(2, 4096);
    c.put(&h, &b).unwrap();
    let (seg, offset, _) = c.locate(&h).unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    bytes[offset as usize + 100] ^= 1;
    fs::write(&seg, &bytes).unwrap();
    assert!(c.get(&h).is_none(), "never served");
    assert_eq!(c.damaged_chunks(), 1);
    assert!(!c.contains(&h), "forgotten, so the reader fetches it again");
    let id = seg.file_stem().unwrap().to_str().unwrap().to_string();
    assert!(
        seg.with_extension("damaged").exists(),
        "the damage is recorded"
    );
    // Fetched again and stored: served from its new place.
    c.put(&h, &b).unwrap();
    assert_eq!(&*c.get(&h).unwrap(), &b[..]);
    // The damaged segment is the first victim, however recently used.
    let (_, victims) = c.victims().unwrap();
    assert!(
        matches!(&victims[0].1, Victim::Segment(v) if *v == id),
        "the damaged segment goes first"
    );
}

#[test]
fn a_segment_cut_mid_chunk_is_cut_back_to_its_whole_chunks_and_sealed() {
    let dir = tempfile::tempdir().unwrap();
    let chunks: Vec<_> = (0..5).map(|i| chunk(20 + i, 3000)).collect();
    let (seg, idx) = {
        let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        for (h, b) in &chunks {
            c.put(h, b).unwrap();
        }
        let seg = c.locate(&chunks[0].0).unwrap().0;
        (seg.clone(), seg.with_extension("idx"))
    };
    // As a power loss leaves it: the last chunk half written, its entry torn, no seal
    // (the writer's drop above may have sealed it: take the seal off).
    let index = fs::read(&idx).unwrap();
    assert!(index.len() >= 5 * 48, "five entries");
    fs::write(&idx, &index[..4 * 48 + 20]).unwrap();
    let seg_len = fs::metadata(&seg).unwrap().len();
    File::options()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(seg_len - 1500)
        .unwrap();

    let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    for (h, b) in &chunks[..4] {
        assert_eq!(&*c.get(h).unwrap(), &b[..]);
    }
    assert!(c.get(&chunks[4].0).is_none(), "the torn chunk is a miss");
    assert_eq!(
        fs::metadata(&seg).unwrap().len(),
        4 * 3000,
        "the torn tail is cut"
    );
    assert_eq!(
        fs::read(&idx).unwrap().len(),
        5 * 48,
        "four entries and a seal"
    );
    // Put again, it lands in a new segment; the sealed one is never written again.
    c.put(&chunks[4].0, &chunks[4].1).unwrap();
    assert_ne!(c.locate(&chunks[4].0).unwrap().0, seg);
    assert_eq!(fs::metadata(&seg).unwrap().len(), 4 * 3000);
}

#[test]
fn an_index_naming_bytes_past_its_segment_or_a_giant_chunk_is_not_believed() {
    let dir = tempfile::tempdir().unwrap();
    let packs = dir.path().join("packs");
    fs::create_dir_all(&packs).unwrap();
    let (h, b) = chunk(30, 1000);
    fs::write(packs.join("0011223344556677.seg"), &b).unwrap();
    let mut idx = Vec::new();
    idx.extend(packs::entry(&h.0, 0, 1000));
    idx.extend(packs::entry(&chunk(31, 1).0.0, 500, 1000)); // past the end
    idx.extend(packs::entry(&chunk(32, 1).0.0, 0, u32::MAX)); // a giant
    idx.extend([0xAB; 48]); // not an entry
    fs::write(packs.join("0011223344556677.idx"), &idx).unwrap();
    let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    assert_eq!(c.chunks(), vec![h]);
    assert_eq!(&*c.get(&h).unwrap(), &b[..]);
}

#[test]
fn eviction_takes_whole_segments_least_recently_used_first() {
    let dir = tempfile::tempdir().unwrap();
    // 4 KiB segments (a sixteenth of the bound, at least 4 KiB): four chunks each.
    let c = ChunkCache::open(dir.path(), 10 * 1000).unwrap();
    c.wait_measured();
    let chunks: Vec<_> = (0..8).map(|i| chunk(i, 1000)).collect();
    for (h, b) in &chunks {
        c.put(h, b).unwrap();
    }
    let first = c.locate(&chunks[0].0).unwrap().0;
    let second = c.locate(&chunks[4].0).unwrap().0;
    assert_ne!(first, second);
    // The first segment is older, but using one of its chunks makes it the most recent.
    set_mtime(&first, 1_000_000);
    set_mtime(&second, 1_000_001);
    assert!(c.get(&chunks[0].0).is_some());
    for i in 8..10 {
        let (h, b) = chunk(i, 1000);
        c.put(&h, &b).unwrap();
    }
    let held = on_disk(dir.path());
    assert!(held <= 10 * 1000, "{held}");
    assert_eq!(c.used_bytes(), held);
    assert!(
        c.get(&chunks[1].0).is_some(),
        "the recently used segment survives whole"
    );
    assert!(
        !second.exists(),
        "the least recently used segment goes, whole"
    );
    assert!(c.get(&chunks[4].0).is_none() && c.get(&chunks[7].0).is_none());
    assert_eq!(c.evicted().0, 1);
}

#[test]
fn eviction_while_another_process_reads_never_gives_wrong_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let reader = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    let chunks: Vec<_> = (0..8).map(|i| chunk(40 + i, 2000)).collect();
    {
        let writer = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        for (h, b) in &chunks {
            writer.put(h, b).unwrap();
        }
    }
    reader.chunks();
    assert_eq!(&*reader.get(&chunks[0].0).unwrap(), &chunks[0].1[..]);
    // Another process with a tiny bound evicts everything it may.
    let evictor = ChunkCache::open(dir.path(), 1).unwrap();
    evictor.evict().unwrap();
    assert!(walk(&dir.path().join("packs")).is_empty());
    // The reader had the segment open: it reads on from it, or misses once it has
    // noticed; never anything else.
    for (h, b) in &chunks {
        if let Some(got) = reader.get(h) {
            assert_eq!(&got[..], &b[..]);
        }
    }
    reader.chunks();
    assert!(
        reader.get(&chunks[1].0).is_none(),
        "forgotten after a refresh"
    );
}

#[test]
fn a_cache_of_the_old_layout_is_moved_into_segments_once() {
    let dir = tempfile::tempdir().unwrap();
    let (good, bytes) = chunk(50, 3000);
    let (liar, _) = chunk(51, 3000);
    for (h, b) in [(good, &bytes), (liar, &bytes)] {
        let hex = h.hex();
        let p = dir.path().join("chunks").join(&hex[..2]).join(&hex);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, b).unwrap();
    }
    let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    c.wait_measured();
    assert!(
        !dir.path().join("chunks").exists(),
        "the old folder is gone"
    );
    assert_eq!(
        c.chunks(),
        vec![good],
        "checked on the way: the liar is dropped"
    );
    assert_eq!(&*c.get(&good).unwrap(), &bytes[..]);
    assert!(c.get(&liar).is_none());
    assert_eq!(c.used_bytes(), on_disk(dir.path()));
}

/// The cache's disk fills: the write that found it full leaves nothing half written,
/// later puts are skipped quietly for a while, and what is cached is still served.
/// Needs a small filesystem of its own: a tmpfs, which only root can mount.
#[test]
fn a_full_disk_loses_nothing_and_pauses_caching() {
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    fs::create_dir_all(&mnt).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mnt)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        assert!(
            std::env::var_os("SEALVOL_REQUIRE_NETNS").is_none(),
            "CI runs as root and must run this test"
        );
        eprintln!("skipped: cannot mount a tmpfs (not root)");
        return;
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(mnt.clone());
    let c = ChunkCache::open(&mnt.join("cache"), 1 << 30).unwrap();
    let chunks: Vec<_> = (0..10).map(|i| chunk(60 + i, 40_000)).collect();
    let mut stored = Vec::new();
    let mut failed = None;
    for (i, (h, b)) in chunks.iter().enumerate() {
        match c.put(h, b) {
            Ok(()) => stored.push(i),
            Err(e) => {
                failed = Some(i);
                assert!(e.to_string().contains("cannot write cache segment"), "{e}");
                break;
            }
        }
    }
    let failed = failed.expect("a 256 KiB disk fills");
    // Paused: no error, nothing stored.
    let (h, b) = &chunks[failed + 1];
    c.put(h, b).unwrap();
    assert!(!c.contains(h));
    for i in &stored {
        assert_eq!(&*c.get(&chunks[*i].0).unwrap(), &chunks[*i].1[..]);
    }
    // The failed write was cut: the segment ends at the last stored chunk.
    let (seg, offset, len) = c.locate(&chunks[*stored.last().unwrap()].0).unwrap();
    assert_eq!(fs::metadata(&seg).unwrap().len(), offset + len as u64);
    drop(c);
}

fn whole(c: &ChunkCache, seed: u32, len: usize) -> (Hash, Vec<u8>) {
    let (_, bytes) = chunk(seed, len);
    let h = Hash::of(&bytes);
    let pieces = bytes.chunks(4096).map(Ok::<_, crate::error::Error>);
    c.put_file(&h, pieces).unwrap();
    (h, bytes)
}

#[test]
fn a_whole_file_is_checked_once_per_fill_not_once_per_process() {
    let dir = tempfile::tempdir().unwrap();
    let (h, bytes) = whole(&ChunkCache::open(dir.path(), 1 << 30).unwrap(), 3, 100_000);
    // Other processes (here: other instances) trust the check of the fill.
    for _ in 0..3 {
        let other = ChunkCache::open(dir.path(), 1 << 30).unwrap();
        let mut f = other.open_file(&h).unwrap();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut got).unwrap();
        assert_eq!(got, bytes);
        assert_eq!(other.files_hashed(), 0);
    }
    // A stamp that is not one (torn, edited) only costs a hash, then is rewritten.
    let stamp = stamp_path(&ChunkCache::open(dir.path(), 1 << 30).unwrap().file_path(&h));
    fs::write(&stamp, "garbage").unwrap();
    let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    assert!(c.open_file(&h).is_some());
    assert_eq!(c.files_hashed(), 1);
    let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    assert!(c.open_file(&h).is_some());
    assert_eq!(c.files_hashed(), 0, "the stamp was written again");
}

#[test]
fn a_whole_file_changed_after_its_check_is_checked_again_and_dropped_if_bad() {
    let dir = tempfile::tempdir().unwrap();
    let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    let (h, bytes) = whole(&c, 4, 100_000);
    let p = c.file_path(&h);
    let m = fs::metadata(&p).unwrap();
    // A tamperer who puts the mtime back still moves the change time.
    let mut bad = bytes.clone();
    bad[777] ^= 1;
    let mut perms = m.permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    fs::set_permissions(&p, perms).unwrap();
    fs::write(&p, &bad).unwrap();
    File::options()
        .write(true)
        .open(&p)
        .unwrap()
        .set_modified(m.modified().unwrap())
        .unwrap();
    let other = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    assert!(
        other.open_file(&h).is_none(),
        "a changed file is not served"
    );
    assert_eq!(other.files_hashed(), 1);
    assert!(
        !p.exists() && !stamp_path(&p).exists(),
        "file and stamp dropped"
    );
    // Filled again, it is trusted again.
    let (h2, _) = whole(&other, 4, 100_000);
    assert_eq!(h2, h);
    let third = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    assert!(third.open_file(&h).is_some());
    assert_eq!(third.files_hashed(), 0);
}

#[test]
fn a_whole_files_last_use_is_its_stamp_and_eviction_takes_both() {
    let dir = tempfile::tempdir().unwrap();
    let c = ChunkCache::open(dir.path(), 1 << 30).unwrap();
    c.wait_measured();
    let (a, _) = whole(&c, 5, 50_000);
    let (b, _) = whole(&c, 6, 50_000);
    let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    for h in [a, b] {
        let stamp = stamp_path(&c.file_path(&h));
        File::options()
            .write(true)
            .open(&stamp)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }
    // Opening `a` makes it the most recent, without touching the file itself.
    let before = fs::metadata(c.file_path(&a)).unwrap().modified().unwrap();
    assert!(c.open_file(&a).is_some());
    assert_eq!(
        fs::metadata(c.file_path(&a)).unwrap().modified().unwrap(),
        before
    );
    let (total, _) = c.victims().unwrap();
    let small = ChunkCache::open(dir.path(), total - 1).unwrap();
    small.evict().unwrap();
    assert!(c.file_path(&a).exists(), "recently opened survives");
    assert!(!c.file_path(&b).exists() && !stamp_path(&c.file_path(&b)).exists());
    // A stamp left without its file goes at the next scan.
    let orphan = stamp_path(&c.file_path(&b));
    fs::write(&orphan, "x").unwrap();
    c.scan_files().unwrap();
    assert!(!orphan.exists());
}

#[test]
fn many_users_at_once_never_see_wrong_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let chunks: Vec<_> = (0..64).map(|i| chunk(i, 2000 + i as usize)).collect();
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let (dir, chunks) = (dir.path(), &chunks);
            s.spawn(move || {
                // One instance per "process", all on one small cache.
                let c = ChunkCache::open(dir, 40_000).unwrap();
                for round in 0..200u32 {
                    let (h, b) = &chunks[((round * 7 + t * 13) % 64) as usize];
                    if let Some(got) = c.get(h) {
                        assert_eq!(&got[..], &b[..]);
                    } else {
                        c.put(h, b).unwrap();
                    }
                }
            });
        }
    });
    let c = ChunkCache::open(dir.path(), 40_000).unwrap();
    c.wait_measured();
    // Over the bound by at most what each process was still appending to.
    let slack = 4 * (packs::segment_bytes(40_000) + 3000);
    assert!(c.used_bytes() <= 40_000 + slack, "{}", c.used_bytes());
}
