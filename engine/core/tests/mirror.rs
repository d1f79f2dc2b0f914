//! Mirrors between real local repositories: a version copied with only the chunks the
//! destination lacks, sealed under the same digest; and reads that fail over from an
//! origin whose packs go away mid-read to a mirror, with the right bytes.

use std::path::Path;

use sealvol_core::error::ErrorKind;
use sealvol_core::mirror::mirror;
use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::read::{Chunks, Tiers};
use sealvol_core::refs::{Ref, VolumeName};
use sealvol_core::testutil::noise;
use sealvol_core::{Digest, Repository};

fn push_dir(repo: &Repository, dir: &Path, files: &[(&str, &[u8])]) -> Digest {
    std::fs::create_dir_all(dir).unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    let opts = PushOptions::new(&Quiet);
    let vol = VolumeName::parse("weights/m").unwrap();
    let tags = [sealvol_core::refs::Name::parse("tag", "prod").unwrap()];
    push(repo, dir, &vol, &tags, &opts).unwrap().digest
}

fn repo(path: &Path) -> Repository {
    Repository::open_local(path, true, false).unwrap()
}

/// The bytes of `name` in `vol@digest`, read through `tiers`.
fn read(tiers: &Tiers, digest: &Digest, name: &str) -> sealvol_core::Result<Vec<u8>> {
    let vol = VolumeName::parse("weights/m").unwrap();
    let m = tiers.repo().manifest(&vol, digest)?;
    let hash = m
        .entries
        .iter()
        .find_map(|e| match e {
            sealvol_core::digest::Entry::File { path, hash, .. } if path == name => Some(*hash),
            _ => None,
        })
        .unwrap();
    let obj = tiers.repo().file_object(&hash)?;
    let mut out = Vec::new();
    tiers.for_each(&obj, 0..obj.chunks.len(), &mut |c| {
        out.extend_from_slice(c);
        Ok(())
    })?;
    Ok(out)
}

#[test]
fn a_mirror_copies_only_missing_chunks_and_keeps_the_digest_and_tag() {
    let t = tempfile::tempdir().unwrap();
    let (a, b) = (repo(&t.path().join("a")), repo(&t.path().join("b")));
    let big = noise(6 << 20, 1);
    let d1 = push_dir(&a, &t.path().join("v1"), &[("w.bin", &big), ("cfg", b"{}")]);

    let r = Ref::parse("weights/m:prod").unwrap();
    let first = mirror(&a, &b, &r, &Quiet).unwrap();
    assert_eq!(first.digest, d1.to_string());
    assert!(first.new);
    assert_eq!(first.files_copied, 2);
    assert!(first.chunks_copied > 2, "{first:?}");
    assert!(first.bytes_copied >= 6 << 20, "{first:?}");
    let tags: Vec<(&str, bool)> = first
        .tags
        .iter()
        .map(|t| (t.tag.as_str(), t.moved))
        .collect();
    assert_eq!(tags, [("prod", true)]);
    assert_eq!(b.resolve(&r).unwrap(), d1);
    let tiers = Tiers::new(std::sync::Arc::new(b), None);
    assert_eq!(read(&tiers, &d1, "w.bin").unwrap(), big);
    let b = repo(&t.path().join("b"));

    // Again: nothing to copy.
    let again = mirror(&a, &b, &r, &Quiet).unwrap();
    assert!(!again.new);
    assert_eq!((again.files_copied, again.chunks_copied), (0, 0));
    assert!(!again.tags[0].moved, "prod pointed there already");

    // A close second version: only its changed chunks cross.
    let mut v2 = big.clone();
    v2[5 << 20..].copy_from_slice(&noise(1 << 20, 2));
    let d2 = push_dir(&a, &t.path().join("v2"), &[("w.bin", &v2), ("cfg", b"{}")]);
    let second = mirror(
        &a,
        &b,
        &Ref::parse(&format!("weights/m@{d2}")).unwrap(),
        &Quiet,
    )
    .unwrap();
    assert_eq!(second.digest, d2.to_string());
    assert_eq!(second.files_copied, 1);
    assert!(second.chunks_present > 0, "{second:?}");
    assert!(second.bytes_copied < 3 << 20, "{second:?}");
    assert!(second.tags.is_empty());
    // A pinned mirror moves no tag: prod still names v1 there.
    assert_eq!(b.resolve(&r).unwrap(), d1);
}

#[test]
fn mirroring_into_the_same_repository_or_an_unknown_ref_is_an_error() {
    let t = tempfile::tempdir().unwrap();
    let a = repo(&t.path().join("a"));
    push_dir(&a, &t.path().join("v1"), &[("f", b"x")]);
    let same = repo(&t.path().join("a"));
    let e = mirror(&a, &same, &Ref::parse("weights/m").unwrap(), &Quiet).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Invalid, "{e}");
    let b = repo(&t.path().join("b"));
    let e = mirror(&a, &b, &Ref::parse("weights/nope:prod").unwrap(), &Quiet).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(b.volumes(None).unwrap().is_empty());
}

#[test]
fn a_read_fails_over_to_a_mirror_when_the_origin_packs_go_mid_read() {
    let t = tempfile::tempdir().unwrap();
    let (a_path, b_path) = (t.path().join("a"), t.path().join("b"));
    let a = repo(&a_path);
    let big = noise(8 << 20, 3);
    let d = push_dir(&a, &t.path().join("v1"), &[("w.bin", &big)]);
    mirror(
        &a,
        &repo(&b_path),
        &Ref::parse("weights/m").unwrap(),
        &Quiet,
    )
    .unwrap();

    let tiers = Tiers::new(std::sync::Arc::new(a), None)
        .with_mirrors(vec![std::sync::Arc::new(repo(&b_path))]);
    let vol = VolumeName::parse("weights/m").unwrap();
    let m = tiers.repo().manifest(&vol, &d).unwrap();
    let sealvol_core::digest::Entry::File { hash, .. } = &m.entries[0] else {
        panic!("{:?}", m.entries)
    };
    let obj = tiers.repo().file_object(hash).unwrap();
    let half = obj.chunks.len() / 2;
    assert!(half > 0);
    let mut got = Vec::new();
    tiers
        .for_each(&obj, 0..half, &mut |c| {
            got.extend_from_slice(c);
            Ok(())
        })
        .unwrap();
    assert_eq!(tiers.counters.snapshot().failovers, 0);
    // The origin loses its packs in the middle of the read.
    std::fs::rename(a_path.join("packs"), a_path.join("packs.gone")).unwrap();
    tiers
        .for_each(&obj, half..obj.chunks.len(), &mut |c| {
            got.extend_from_slice(c);
            Ok(())
        })
        .unwrap();
    assert!(got == big, "the bytes read across the failover differ");
    let s = tiers.counters.snapshot();
    assert!(
        s.failovers > 0 && s.mirror_chunks as usize >= obj.chunks.len() - half,
        "{s:?}"
    );
    // Proving the block that straddles the two halves read the first chunk of the
    // second half from the origin too, before its packs went.
    assert!(
        (half..=half + 1).contains(&(s.origin_chunks as usize)),
        "{s:?}"
    );
}

#[test]
fn a_mirror_that_lacks_a_chunk_is_passed_over_and_the_read_fails_clearly() {
    let t = tempfile::tempdir().unwrap();
    let (a_path, b_path) = (t.path().join("a"), t.path().join("b"));
    let a = repo(&a_path);
    let d = push_dir(&a, &t.path().join("v1"), &[("w.bin", &noise(3 << 20, 4))]);
    // The mirror holds another version only.
    let b = repo(&b_path);
    push_dir(
        &b,
        &t.path().join("other"),
        &[("w.bin", &noise(1 << 20, 5))],
    );
    let tiers = Tiers::new(std::sync::Arc::new(a), None).with_mirrors(vec![std::sync::Arc::new(b)]);
    std::fs::rename(a_path.join("packs"), a_path.join("packs.gone")).unwrap();
    let e = read(&tiers, &d, "w.bin").unwrap_err();
    assert!(e.to_string().contains("pack"), "{e}");
    let s = tiers.counters.snapshot();
    assert!(s.mirror_errors > 0 && s.mirror_chunks == 0, "{s:?}");
}

/// A destination whose namespace has a quota: a mirror past it is refused before a
/// chunk is copied, with the quota's line; under it, the mirror goes through.
#[test]
fn a_mirror_past_the_destinations_quota_copies_nothing() {
    let t = tempfile::tempdir().unwrap();
    let (a, mut b) = (repo(&t.path().join("a")), repo(&t.path().join("b")));
    push_dir(&a, &t.path().join("v1"), &[("w.bin", &noise(3 << 20, 5))]);
    b.change_settings(|c| {
        c.quotas.insert("weights".into(), 1 << 20);
    })
    .unwrap();
    let r = Ref::parse("weights/m:prod").unwrap();
    let e = mirror(&a, &b, &r, &Quiet).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Quota);
    assert!(
        e.message().contains("would pass its quota of 1.0 MiB"),
        "{e}"
    );
    let packs = t.path().join("b/packs");
    let copied = std::fs::read_dir(&packs).map_or(0, |d| d.count());
    assert_eq!(copied, 0, "no pack was copied");
    b.change_settings(|c| {
        c.quotas.insert("weights".into(), 10 << 20);
    })
    .unwrap();
    assert!(mirror(&a, &b, &r, &Quiet).unwrap().new);
}
