//! Only the digest is trusted: a chunk list is a hint. Two teams push files of the same
//! size into one repository; team-b's chunk list is then replaced on disk, by team-a's
//! list as it is and by a list crafted to carry team-b's own proof over team-a's chunks.
//! No read, random or whole, ever returns team-a's bytes as team-b's file.

use std::path::Path;

use sealvol_core::cache::ChunkCache;
use sealvol_core::digest::{Entry, Hash};
use sealvol_core::error::ErrorKind;
use sealvol_core::objects::FileObject;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::{Chunks, Fill, Origin, Tiers};
use sealvol_core::refs::VolumeName;
use sealvol_core::testutil::noise;
use sealvol_core::{Digest, Repository};

const SIZE: usize = 3 << 20;

fn push_file(repo: &Repository, dir: &Path, vol: &str, bytes: &[u8]) -> (Digest, Hash) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("model.bin"), bytes).unwrap();
    let opts = PushOptions::new(&Quiet);
    let vol = VolumeName::parse(vol).unwrap();
    let d = push(repo, dir, &vol, &[], &opts).unwrap().digest;
    let m = repo.manifest(&vol, &d).unwrap();
    let Entry::File { hash, .. } = &m.entries[0] else {
        panic!("{:?}", m.entries)
    };
    (d, *hash)
}

fn list_path(repo: &Path, h: &Hash) -> std::path::PathBuf {
    let hex = h.hex();
    repo.join("files").join(&hex[..2]).join(&hex)
}

struct Teams {
    _t: tempfile::TempDir,
    path: std::path::PathBuf,
    repo: Repository,
    a: Vec<u8>,
    b: Vec<u8>,
    ha: Hash,
    hb: Hash,
    db: Digest,
}

fn teams() -> Teams {
    let t = tempfile::tempdir().unwrap();
    let path = t.path().join("repo");
    let repo = Repository::open_local(&path, true, false).unwrap();
    let a = noise(SIZE, 11);
    // team-b's file shares its first MiB with team-a's (deduplicated), then differs.
    let mut b = a[..1 << 20].to_vec();
    b.extend_from_slice(&noise(SIZE - (1 << 20), 12));
    let (_, ha) = push_file(&repo, &t.path().join("a"), "team-a/model", &a);
    let (db, hb) = push_file(&repo, &t.path().join("b"), "team-b/model", &b);
    Teams {
        _t: t,
        path,
        repo,
        a,
        b,
        ha,
        hb,
        db,
    }
}

/// team-b's own proof, with team-a's chunks: the shape a forger would send.
fn forged_b(t: &Teams) -> FileObject {
    let real = t.repo.file_object(&t.hb).unwrap();
    let theirs = t.repo.file_object(&t.ha).unwrap();
    FileObject::new(
        t.hb,
        real.size,
        theirs.packs.clone(),
        theirs.chunks.clone(),
        real.proof.outboard().cloned(),
    )
}

fn read_all(chunks: &dyn Chunks, obj: &FileObject) -> sealvol_core::Result<Vec<u8>> {
    let mut out = Vec::new();
    chunks.for_each(obj, 0..obj.chunks.len(), &mut |c| {
        out.extend_from_slice(c);
        Ok(())
    })?;
    Ok(out)
}

#[test]
fn a_list_copied_from_another_file_is_refused_when_it_is_read() {
    let t = teams();
    std::fs::copy(list_path(&t.path, &t.ha), list_path(&t.path, &t.hb)).unwrap();
    let e = t.repo.file_object(&t.hb).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt);
    assert!(e.message().contains("does not prove"), "{e}");
    assert!(
        e.hint_text().is_some_and(|h| h.contains("sealvol repair")),
        "{e:?}"
    );
}

#[test]
fn a_list_carrying_the_files_proof_over_other_chunks_never_serves_them() {
    let t = teams();
    let forged = forged_b(&t);
    std::fs::write(list_path(&t.path, &t.hb), forged.encode()).unwrap();
    let obj = t.repo.file_object(&t.hb).unwrap();
    assert_eq!(obj.size as usize, SIZE);

    // A whole read, through the origin and through the tiers.
    let tiers = Tiers::new(
        std::sync::Arc::new(Repository::open_local(&t.path, false, false).unwrap()),
        None,
    );
    for chunks in [&Origin(&t.repo) as &dyn Chunks, &tiers] {
        let e = read_all(chunks, &obj).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        assert!(e.message().contains("does not prove"), "{e}");
    }
    // A random read of one page deep in the file: the bytes there differ.
    let mut page = Vec::new();
    let at = 2u64 << 20;
    let e = Origin(&t.repo)
        .for_bytes(&obj, at, at + 4096, &mut |b| page.extend_from_slice(b))
        .unwrap_err();
    assert!(e.message().contains("does not prove"), "{e}");
    assert!(page.is_empty(), "bytes were handed on before their proof");
    // The first MiB is the same in both files: those blocks prove, and read.
    let fresh = t.repo.file_object(&t.hb).unwrap();
    let mut head = Vec::new();
    Origin(&t.repo)
        .for_bytes(&fresh, 4096, 8192, &mut |b| head.extend_from_slice(b))
        .unwrap();
    assert_eq!(head, t.b[4096..8192]);
    assert_ne!(
        t.a[2 << 20..(2 << 20) + 4096],
        t.b[2 << 20..(2 << 20) + 4096]
    );
}

#[test]
fn a_pull_through_a_forged_list_writes_nothing_under_the_files_name() {
    let t = teams();
    let real = t.repo.file_object(&t.hb).unwrap();
    let theirs = t.repo.file_object(&t.ha).unwrap();
    let forged = FileObject::new(
        t.hb,
        real.size,
        theirs.packs.clone(),
        theirs.chunks.clone(),
        real.proof.outboard().cloned(),
    );
    std::fs::write(list_path(&t.path, &t.hb), forged.encode()).unwrap();
    let out = t.path.parent().unwrap().join("pulled");
    let tiers = Tiers::new(
        std::sync::Arc::new(Repository::open_local(&t.path, false, false).unwrap()),
        None,
    );
    let vol = VolumeName::parse("team-b/model").unwrap();
    let e = sealvol_core::pull::pull(&tiers, &vol, &t.db, &out, false, &Quiet).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
    assert!(!out.join("model.bin").exists());
}

#[test]
fn a_push_of_the_real_file_replaces_a_forged_list() {
    let t = teams();
    let real = t.repo.file_object(&t.hb).unwrap();
    let theirs = t.repo.file_object(&t.ha).unwrap();
    let forged = FileObject::new(
        t.hb,
        real.size,
        theirs.packs.clone(),
        theirs.chunks.clone(),
        real.proof.outboard().cloned(),
    );
    std::fs::write(list_path(&t.path, &t.hb), forged.encode()).unwrap();
    // A list planted before the file is pushed is the same case: the push knows the
    // file's chunks, and a stored list naming others is replaced.
    push_file(
        &t.repo,
        &t.path.parent().unwrap().join("b2"),
        "team-b/model",
        &t.b,
    );
    let obj = t.repo.file_object(&t.hb).unwrap();
    assert_eq!(read_all(&Origin(&t.repo), &obj).unwrap(), t.b);
}

#[test]
fn a_list_written_before_proofs_is_proven_by_reading_the_file_whole() {
    let t = teams();
    let real = t.repo.file_object(&t.hb).unwrap();
    // Re-encoded without its proof: the format before proofs (SVFILE01).
    let old = FileObject::new(
        t.hb,
        real.size,
        real.packs.clone(),
        real.chunks.clone(),
        None,
    );
    let bytes = old.encode();
    assert_eq!(&bytes[..8], b"SVFILE01");
    std::fs::write(list_path(&t.path, &t.hb), &bytes).unwrap();
    let obj = t.repo.file_object(&t.hb).unwrap();
    let mut page = Vec::new();
    Origin(&t.repo)
        .for_bytes(&obj, 2 << 20, (2 << 20) + 100, &mut |b| {
            page.extend_from_slice(b)
        })
        .unwrap();
    assert_eq!(page, t.b[2 << 20..(2 << 20) + 100]);
    assert!(
        obj.proof.outboard().is_some(),
        "the proof is built by the whole read"
    );

    // The same old format naming team-a's chunks: refused.
    let theirs = t.repo.file_object(&t.ha).unwrap();
    let bad = FileObject::new(
        t.hb,
        real.size,
        theirs.packs.clone(),
        theirs.chunks.clone(),
        None,
    );
    std::fs::write(list_path(&t.path, &t.hb), bad.encode()).unwrap();
    let obj = t.repo.file_object(&t.hb).unwrap();
    let e = read_all(&Origin(&t.repo), &obj).unwrap_err();
    assert!(e.message().contains("does not prove"), "{e}");
}

fn forge(t: &Teams) {
    let real = t.repo.file_object(&t.hb).unwrap();
    let theirs = t.repo.file_object(&t.ha).unwrap();
    let forged = FileObject::new(
        t.hb,
        real.size,
        theirs.packs.clone(),
        theirs.chunks.clone(),
        real.proof.outboard().cloned(),
    );
    std::fs::write(list_path(&t.path, &t.hb), forged.encode()).unwrap();
}

fn survey(
    repo: &Repository,
    read: sealvol_core::verify::ReadData,
) -> sealvol_core::verify::VerifyReport {
    sealvol_core::verify::survey_all(repo, read, None, true, &Quiet)
        .unwrap()
        .report()
}

#[test]
fn verify_with_data_names_a_forged_list_and_gc_then_deletes_nothing() {
    let t = teams();
    forge(&t);
    // The structure alone cannot tell: the list's own proof is the file's.
    let quick = survey(&t.repo, sealvol_core::verify::ReadData::None);
    assert!(quick.problems.is_empty(), "{:?}", quick.problems);
    let full = survey(&t.repo, sealvol_core::verify::ReadData::All);
    let name = format!("files/{}/{}", &t.hb.hex()[..2], t.hb.hex());
    let p = full
        .problems
        .iter()
        .find(|p| p.object == name)
        .unwrap_or_else(|| panic!("{:?}", full.problems));
    assert!(p.problem.contains("does not prove"), "{p:?}");
    assert!(
        full.damaged_versions.iter().any(|a| a
            .version
            .as_deref()
            .is_some_and(|v| v.contains("team-b/model"))),
        "{:?}",
        full.damaged_versions
    );
    // Recorded: a collection now deletes nothing, since what team-b's file needs is
    // not what its list says.
    let opts = sealvol_core::gc::GcOptions {
        dry_run: false,
        wait: false,
        progress: &Quiet,
    };
    let e = t.repo.collect(&opts, &sealvol_gc::Here).unwrap_err();
    assert!(e.message().contains("failing its proof"), "{e}");
    assert!(e.message().contains("deletes nothing"), "{e}");
}

#[test]
fn repair_rebuilds_a_list_whose_proof_alone_was_damaged_and_quarantines_a_forged_one() {
    let t = teams();
    forge(&t);
    // team-a's list: one block hash flipped; the chunks it names are still the file's.
    let pa = list_path(&t.path, &t.ha);
    let mut bytes = std::fs::read(&pa).unwrap();
    let n = bytes.len();
    bytes[n - 5] ^= 0x40;
    std::fs::write(&pa, &bytes).unwrap();
    let mut repo = Repository::open_local(&t.path, false, false).unwrap();
    let opts = sealvol_core::repair::RepairOptions {
        dry_run: false,
        read_data: true,
        from: None,
        progress: &Quiet,
    };
    let report = sealvol_core::repair::repair(&mut repo, &opts).unwrap();
    let acted = |what: &str, h: &Hash| {
        report
            .actions
            .iter()
            .any(|a| a.action == what && a.object.ends_with(&h.hex()))
    };
    assert!(acted("prove", &t.ha), "{:?}", report.actions);
    assert!(acted("quarantine", &t.hb), "{:?}", report.actions);
    // team-a reads as ever; team-b's file is missing data until it is pushed again.
    let obj = repo.file_object(&t.ha).unwrap();
    assert_eq!(read_all(&Origin(&repo), &obj).unwrap(), t.a);
    assert!(
        report.remaining_versions.iter().any(|a| a
            .version
            .as_deref()
            .is_some_and(|v| v.contains("team-b/model"))),
        "{:?}",
        report.remaining_versions
    );
    push_file(
        &repo,
        &t.path.parent().unwrap().join("b3"),
        "team-b/model",
        &t.b,
    );
    let obj = repo.file_object(&t.hb).unwrap();
    assert_eq!(read_all(&Origin(&repo), &obj).unwrap(), t.b);
    assert!(repo.list_damage().unwrap().is_empty());
}

#[test]
fn repair_writes_the_proof_of_a_list_written_before_proofs() {
    let t = teams();
    let real = t.repo.file_object(&t.hb).unwrap();
    let old = FileObject::new(
        t.hb,
        real.size,
        real.packs.clone(),
        real.chunks.clone(),
        None,
    );
    std::fs::write(list_path(&t.path, &t.hb), old.encode()).unwrap();
    let mut repo = Repository::open_local(&t.path, false, false).unwrap();
    let opts = sealvol_core::repair::RepairOptions {
        dry_run: false,
        read_data: false,
        from: None,
        progress: &Quiet,
    };
    sealvol_core::repair::repair(&mut repo, &opts).unwrap();
    let bytes = std::fs::read(list_path(&t.path, &t.hb)).unwrap();
    assert_eq!(&bytes[..8], b"SVFILE02");
    assert_eq!(repo.file_object(&t.hb).unwrap(), real);
}

#[test]
fn a_mirror_of_a_version_with_a_forged_list_seals_nothing() {
    let t = teams();
    forge(&t);
    let dest = Repository::open_local(&t.path.parent().unwrap().join("dest"), true, false).unwrap();
    let r = sealvol_core::refs::Ref::parse(&format!("team-b/model@{}", t.db)).unwrap();
    let e = sealvol_core::mirror::mirror(&t.repo, &dest, &r, &Quiet).unwrap_err();
    assert!(e.message().contains("does not prove"), "{e}");
    let vol = VolumeName::parse("team-b/model").unwrap();
    assert!(dest.version_digests(&vol).unwrap().is_empty());
    // team-a's version mirrors as ever.
    let ra = sealvol_core::refs::Ref::parse("team-a/model").unwrap();
    sealvol_core::mirror::mirror(&t.repo, &dest, &ra, &Quiet).unwrap();
}

/// The list as a client would send it to a server: its chunks, no proof.
fn without_proof(obj: &FileObject) -> FileObject {
    FileObject::new(
        obj.hash,
        obj.size,
        obj.packs.clone(),
        obj.chunks.clone(),
        None,
    )
}

#[test]
fn a_list_proven_in_one_pass_gets_the_proof_the_checked_read_gets() {
    let t = teams();
    let obj = without_proof(&t.repo.file_object(&t.hb).unwrap());
    let once = Origin(&t.repo).prove_by_reading_once(&obj).unwrap();
    let checked = Origin(&t.repo).prove_by_reading(&obj).unwrap();
    assert!(once == checked);
    assert!(once.proves(&t.hb));
    // team-a's chunks named for team-b's file: its hash says no.
    let a = t.repo.file_object(&t.ha).unwrap();
    let forged = FileObject::new(t.hb, a.size, a.packs.clone(), a.chunks.clone(), None);
    let e = Origin(&t.repo).prove_by_reading_once(&forged).unwrap_err();
    assert!(sealvol_core::proof::is_unproven(&e), "{e:?}");
}

#[test]
fn a_damaged_copy_met_by_the_one_pass_proof_is_recorded_as_damage_not_taken_for_a_lie() {
    let t = teams();
    let obj = without_proof(&t.repo.file_object(&t.hb).unwrap());
    // One byte of the file's last chunk flipped in its pack.
    let bad = damage_chunk(&t, &obj, obj.chunks.len() - 1);
    let e = Origin(&t.repo).prove_by_reading_once(&obj).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e:?}");
    assert!(!sealvol_core::proof::is_unproven(&e), "{e:?}");
    let recorded = t.repo.damage_records().unwrap();
    assert!(
        recorded.iter().any(|(_, chunk, _)| *chunk == bad),
        "{recorded:?}"
    );
}

// --- A run read hashing each byte once (`Chunks::fetch_for_proof` over `Tiers`) ---

fn concat(chunks: &[sealvol_core::read::ChunkBytes]) -> Vec<u8> {
    chunks.iter().flat_map(|c| c.to_vec()).collect()
}

fn spared(tiers: &Tiers) -> u64 {
    tiers
        .counters
        .chunks_proven_by_blocks
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// Flips one byte of chunk `i` of `obj` in its pack.
fn damage_chunk(t: &Teams, obj: &FileObject, i: usize) -> Hash {
    let c = &obj.chunks[i];
    let pack = obj.packs[c.pack as usize].hex();
    let path = t.path.join("packs").join(&pack[..2]).join(&pack);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[c.entry.offset as usize + 7] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    c.entry.hash
}

fn tiers_with_cache(t: &Teams, cache: Option<&Path>) -> Tiers {
    let cache = cache.map(|d| std::sync::Arc::new(ChunkCache::open(d, 1 << 30).unwrap()));
    Tiers::with_fill(
        std::sync::Arc::new(Repository::open_local(&t.path, false, false).unwrap()),
        cache,
        Fill::Inline,
    )
}

#[test]
fn a_run_is_proven_by_its_blocks_with_only_its_end_chunks_hashed_as_chunks() {
    let t = teams();
    let obj = t.repo.file_object(&t.hb).unwrap();
    let n = obj.chunks.len();
    assert!(n > 8, "{n} chunks");
    let tiers = tiers_with_cache(&t, None);
    let got = tiers.fetch_for_proof(&obj, 2..n - 2).unwrap();
    let (s, e) = (obj.start_of(2) as usize, obj.start_of(n - 2) as usize);
    assert!(concat(&got) == t.b[s..e]);
    // Every chunk but the two at the ends (whose blocks reach beyond the run) was taken
    // on its blocks' proof, and those blocks are proven for the readers that follow.
    assert_eq!(spared(&tiers), (n - 6) as u64);
    let log = obj.proof.outboard().unwrap().log();
    let inner = (s as u64).div_ceil(1 << log)..(e as u64 >> log);
    assert!(inner.clone().all(|b| obj.proof.is_proven(b)), "{inner:?}");
    // The whole file: every chunk, every block.
    let whole = t.repo.file_object(&t.hb).unwrap();
    let got = tiers.fetch_for_proof(&whole, 0..n).unwrap();
    assert!(concat(&got) == t.b);
    assert_eq!(spared(&tiers), (n - 6 + n) as u64);
}

#[test]
fn a_damaged_chunk_inside_a_run_is_recorded_as_damage_and_never_served() {
    let t = teams();
    let obj = t.repo.file_object(&t.hb).unwrap();
    let n = obj.chunks.len();
    // A chunk of team-b's own (past the MiB shared with team-a, so no other copy).
    let bad = damage_chunk(&t, &obj, n - 3);
    let tiers = tiers_with_cache(&t, None);
    let e = tiers.fetch_for_proof(&obj, 0..n).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e:?}");
    assert!(!sealvol_core::proof::is_unproven(&e), "{e:?}");
    assert!(e.message().contains(&bad.hex()), "{e}");
    let recorded = t.repo.damage_records().unwrap();
    assert!(recorded.iter().any(|(_, c, _)| *c == bad), "{recorded:?}");
    assert_eq!(spared(&tiers), 0);
}

#[test]
fn blocks_proven_before_are_hashed_again_for_chunks_not_hashed_as_chunks() {
    let t = teams();
    let obj = t.repo.file_object(&t.hb).unwrap();
    let n = obj.chunks.len();
    let tiers = tiers_with_cache(&t, None);
    tiers.fetch_for_proof(&obj, 0..n).unwrap();
    // The same list, its blocks all proven, read again after a byte rotted: a proof
    // that trusted its marks would hand the rotten chunk on unchecked.
    damage_chunk(&t, &obj, n - 3);
    let e = tiers.fetch_for_proof(&obj, 0..n).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e:?}");
    assert!(!sealvol_core::proof::is_unproven(&e), "{e:?}");
}

#[test]
fn a_cached_chunk_damaged_on_disk_is_dropped_and_read_again_from_the_origin() {
    let t = teams();
    let dir = tempfile::tempdir().unwrap();
    let tiers = tiers_with_cache(&t, Some(dir.path()));
    let obj = t.repo.file_object(&t.hb).unwrap();
    let n = obj.chunks.len();
    tiers.fetch_for_proof(&obj, 0..n).unwrap();
    let h = obj.chunks[n / 2].entry.hash;
    let (file, offset, _) = tiers.cache().unwrap().locate(&h).unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[offset as usize + 3] ^= 0x01;
    std::fs::write(&file, &bytes).unwrap();
    // A fresh list (no block proven yet), as after a remount.
    let fresh = t.repo.file_object(&t.hb).unwrap();
    let before = tiers.counters.snapshot();
    let got = tiers.fetch_for_proof(&fresh, 0..n).unwrap();
    assert!(concat(&got) == t.b);
    // The damaged copy is no hit: the rest came from the cache, it from the origin.
    let after = tiers.counters.snapshot();
    assert_eq!(after.cache_hits - before.cache_hits, (n - 1) as u64);
    assert_eq!(after.origin_chunks - before.origin_chunks, 1);
    // The damage is recorded, and the good copy fetched again is what is cached now.
    let cache = tiers.cache().unwrap();
    assert_eq!(cache.damaged_chunks(), 1);
    let good = cache.get(&h).expect("the chunk fetched again is cached");
    assert_eq!(sealvol_core::digest::Hash::of(&good), h);
    let (now_in, now_at, _) = cache.locate(&h).unwrap();
    assert_ne!(
        (now_in, now_at),
        (file, offset),
        "stored anew, not where it was damaged"
    );
}

#[test]
fn a_run_through_a_list_that_lies_is_refused_whole() {
    let t = teams();
    let forged = forged_b(&t);
    let tiers = tiers_with_cache(&t, None);
    let n = forged.chunks.len();
    let e = tiers.fetch_for_proof(&forged, 0..n).err().unwrap();
    assert!(sealvol_core::proof::is_unproven(&e), "{e:?}");
    assert_eq!(spared(&tiers), 0);
}

// --- A pull proves every byte, hashing each about once (`Tiers::fetch`) ---

/// A file of three pull windows (8 MiB each) pushed beside the teams' files.
fn big_file(t: &Teams) -> (Digest, FileObject, Vec<u8>) {
    let bytes = noise(20 << 20, 13);
    let dir = t.path.parent().unwrap().join("c");
    let (d, h) = push_file(&t.repo, &dir, "team-c/big", &bytes);
    (d, t.repo.file_object(&h).unwrap(), bytes)
}

fn pull_big(
    t: &Teams,
    tiers: &Tiers,
    d: &Digest,
) -> (sealvol_core::Result<()>, std::path::PathBuf) {
    let out = t.path.parent().unwrap().join("pulled-big");
    let vol = VolumeName::parse("team-c/big").unwrap();
    let r = sealvol_core::pull::pull(tiers, &vol, d, &out, true, &Quiet).map(|_| ());
    (r, out)
}

#[test]
fn a_pull_takes_most_chunks_on_their_blocks_and_reads_only_the_edges_twice() {
    let t = teams();
    let (d, obj, bytes) = big_file(&t);
    let n = obj.chunks.len() as u64;
    let tiers = tiers_with_cache(&t, None);
    let (r, out) = pull_big(&t, &tiers, &d);
    r.unwrap();
    assert!(std::fs::read(out.join("model.bin")).unwrap() == bytes);
    // Three windows: each hashes its two end chunks as chunks, the rest on its blocks
    // (a pull that hashed every chunk, or the file whole besides, spares none).
    let spared = spared(&tiers);
    assert!(spared >= n - 6 && spared < n, "{spared} of {n} chunks");
    // The blocks at the windows' ends cost a few KiB of the next chunk, not whole chunks.
    let c = tiers.counters.snapshot();
    assert_eq!(c.origin_chunks, n);
    let extra = c.origin_bytes - bytes.len() as u64;
    assert!(
        extra > 0 && extra < 2 * 64 * 1024,
        "{extra} bytes read twice"
    );
}

#[test]
fn a_pull_meeting_a_damaged_chunk_at_a_window_edge_records_it_and_writes_nothing() {
    let t = teams();
    let (d, obj, _) = big_file(&t);
    // The first chunk past the first window: the first window's last block reaches
    // into it, cheaply (unchecked), before the second window reads it whole.
    let mut i = 0;
    let mut at = 0u64;
    while at < 8 << 20 {
        at += obj.chunks[i].entry.stored_len as u64;
        i += 1;
    }
    let bad = damage_chunk(&t, &obj, i);
    let tiers = tiers_with_cache(&t, None);
    let (r, out) = pull_big(&t, &tiers, &d);
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Corrupt, "{e:?}");
    assert!(!sealvol_core::proof::is_unproven(&e), "{e:?}");
    let recorded = t.repo.damage_records().unwrap();
    assert!(recorded.iter().any(|(_, c, _)| *c == bad), "{recorded:?}");
    assert!(!out.join("model.bin").exists());
}

// --- A read of a few bytes (`Chunks::fetch_covering`, `Tiers::read_proven`) ---

#[test]
fn a_read_of_a_few_bytes_is_proven_to_its_edges_and_a_list_that_lies_is_written_down() {
    let t = teams();
    let obj = t.repo.file_object(&t.hb).unwrap();
    let tiers = tiers_with_cache(&t, None);
    // Across a chunk boundary, inside one chunk, at the very end.
    let at = obj.start_of(obj.chunks.len() / 2);
    for (offset, len) in [(at - 5, 11), (at + 70_000, 3), (obj.size - 2, 9)] {
        let got = tiers.read_proven(&obj, offset, len).unwrap();
        let end = (offset as usize + len).min(SIZE);
        assert!(got == t.b[offset as usize..end], "{offset}+{len}");
    }
    let log = obj.proof.outboard().unwrap().log();
    assert!(
        obj.proof.is_proven((at - 5) >> log) && obj.proof.is_proven(at >> log),
        "the blocks the read touched are proven"
    );
    assert!(tiers.read_proven(&obj, obj.size, 4).unwrap().is_empty());

    // Past the MiB the teams share, every few bytes read through a list that names
    // team-a's chunks are refused, and the list is written down for gc and verify.
    let forged = forged_b(&t);
    let e = tiers
        .read_proven(&forged, (SIZE - 4096) as u64, 16)
        .err()
        .unwrap();
    assert!(sealvol_core::proof::is_unproven(&e), "{e:?}");
    let recorded = t.repo.list_damage().unwrap();
    assert!(recorded.iter().any(|(h, _)| *h == t.hb), "{recorded:?}");
}
