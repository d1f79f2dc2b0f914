//! Mirror: a sealed version copied from one repository into another (a local folder
//! and a bucket, either way), moving only the chunks the destination lacks, and sealed
//! there under the same digest, so that either can be a volume's origin.
//!
//! The chunks are copied as stored and checked against their hashes on the way; the
//! destination writes its own chunk lists (its packs are its own) before it seals, in
//! the order a push keeps (docs/FORMAT.md): packs and indexes, chunk lists, manifest,
//! tags. A mirror stopped part way leaves packs a later one builds on, and no version.

use std::collections::{HashMap, HashSet};

use crate::chunk_index::ChunkIndex;
use crate::copy::write_pack;
use crate::digest::{Entry, Hash};
use crate::error::{Error, Result};
use crate::objects::{ChunkRef, FileObject, PackEntry, PackId};
use crate::ops::Stored;
use crate::progress::Progress;
use crate::read::Chunks as _;
use crate::read::max_run;
use crate::refs::{Name, Ref, Target};
use crate::repo::Repository;

#[derive(Debug, Clone, serde::Serialize)]
pub struct MirrorReport {
    pub volume: String,
    /// `b3:…`
    pub digest: String,
    /// Files of the version whose chunk lists the destination did not hold.
    pub files_copied: u64,
    pub chunks_copied: u64,
    /// Stored bytes of those chunks: what crossed between the repositories.
    pub bytes_copied: u64,
    /// Chunks the destination already held (from other versions or a mirror before).
    pub chunks_present: u64,
    /// False when the destination already had the version.
    pub new: bool,
    /// Signatures of the version the destination did not hold yet.
    pub signatures_copied: u64,
    /// The tag `REF` named, pointed at the version in the destination (`moved` false
    /// when it pointed there already).
    pub tags: Vec<crate::outcomes::TagChange>,
}

/// Copies version `r` from `src` to `dest`. A tag in `r` is moved in `dest` too.
pub fn mirror(
    src: &Repository,
    dest: &Repository,
    r: &Ref,
    progress: &dyn Progress,
) -> Result<MirrorReport> {
    if src.location() == dest.location() {
        return Err(Error::invalid(format!(
            "{} is the repository the version is read from",
            dest.location()
        ))
        .hint("give --to another repository: a folder, or s3://BUCKET/PREFIX"));
    }
    let vol = &r.volume;
    let digest = src.resolve(r)?;
    let manifest = src.manifest(vol, &digest)?;
    let tags: Vec<Name> = match &r.target {
        Target::Tag(t) => vec![t.clone()],
        _ => Vec::new(),
    };
    let mut index = crate::push::index_after_recovery(dest)?;

    // Each distinct file once, and of those only what the destination lacks.
    let mut seen = HashSet::new();
    let mut files: Vec<(Hash, FileObject)> = Vec::new();
    let small = manifest.small_files();
    for e in &manifest.entries {
        if let Entry::File { hash, size, .. } = e
            && seen.insert(*hash)
            && crate::push::stored_file(dest, &index, hash)?.is_none()
        {
            files.push((*hash, src.file_list(hash, *size, &small)?));
        }
    }
    // What the destination holds where this mirror may name it is not copied.
    let owner = dest.owner();
    let mut chunks: Vec<(Hash, u32)> = files
        .iter()
        .flat_map(|(_, o)| o.chunks.iter().map(|c| (c.entry.hash, c.entry.raw_len)))
        .collect();
    chunks.sort_unstable();
    chunks.dedup_by_key(|(h, _)| *h);
    owner.learn_held(&mut index, &chunks)?;
    let mut wanted: Vec<(PackId, PackEntry)> = Vec::new();
    let mut present = 0u64;
    let mut taken = HashSet::new();
    for (_, obj) in &files {
        for c in &obj.chunks {
            if !taken.insert(c.entry.hash) {
                continue;
            }
            if index.chunks.contains_key(&c.entry.hash) {
                present += 1;
            } else {
                wanted.push((obj.packs[c.pack as usize], c.entry));
            }
        }
    }
    let bytes: u64 = wanted.iter().map(|(_, e)| e.stored_len as u64).sum();
    // A namespace with a quota in the destination: refused before a byte is copied
    // (the seal checks again).
    if let Some(mut a) = dest.allowance(&vol.namespace)? {
        a.take(bytes)?;
    }
    progress.begin("mirror", bytes, files.len() as u64);
    progress.chunks(0, present);
    copy_runs(src, dest, &mut wanted, &mut index, progress)?;

    for (hash, obj) in &files {
        owner.store_copied_list(src, &index, hash, obj)?;
        progress.file_done();
    }
    progress.sealing();
    // The version keeps the time it was made, not the mirror's (a source's bad date
    // is replaced by now: it is the source's claim, and only a display).
    let created = humantime::parse_rfc3339(&manifest.created).ok();
    let (sealed, _) = owner.seal_stored(
        &index,
        Stored {
            volume: vol,
            tags: &tags,
            entries: manifest.entries,
            stats: manifest.stats,
            provenance: manifest.provenance,
            created,
        },
    )?;
    if sealed.digest != digest {
        // The digest is a function of the entries alone; this would be a bug.
        return Err(Error::corrupt(format!(
            "{} sealed the version as {}, not {digest}",
            dest.location(),
            sealed.digest
        )));
    }
    // Signatures go with the version (each reader still checks them against its own
    // keys), and so do the SHA-256s kept for SHA-256 signatures.
    let mut signatures_copied = 0;
    for sig in src.signatures(vol, &digest)? {
        if dest.put_signature(vol, &digest, &sig.bytes)?.1 {
            signatures_copied += 1;
        }
    }
    if let Some(kept) = src.sha256s(vol, &digest)? {
        match dest.put_sha256s(vol, &digest, kept.files) {
            // A server keeps only the SHA-256s it read itself: its readers compute them.
            Err(e) if e.kind() == crate::error::ErrorKind::Denied => {
                tracing::info!("the SHA-256s were not kept at {}: {e}", dest.location());
            }
            other => other?,
        }
    }
    progress.finish();
    Ok(MirrorReport {
        signatures_copied,
        volume: vol.to_string(),
        digest: digest.to_string(),
        files_copied: files.len() as u64,
        chunks_copied: wanted.len() as u64,
        bytes_copied: bytes,
        chunks_present: present,
        new: sealed.new,
        tags: sealed.tags,
    })
}

/// `Owner::store_copied_list` where the destination writes its own lists: a chunk list
/// is a hint in the source as anywhere, so before `dest` holds file `hash`'s list, the
/// chunks it names are read in order and hashed into the file's hash, on whichever
/// side reads cheaper (a folder rather than a bucket). A small file is its one chunk,
/// copied and checked against its hash: the version names the pack it landed in, not
/// a list (`small.rs`).
pub(crate) fn store_copied_list_here(
    src: &Repository,
    dest: &Repository,
    index: &ChunkIndex,
    hash: &Hash,
    obj: &FileObject,
) -> Result<()> {
    if crate::small::is_small(dest, obj.size, obj.chunks.len())
        && obj.chunks[0].entry.hash == *hash
        && index.chunks.contains_key(hash)
    {
        return Ok(());
    }
    let relocated = relocate(obj, index).ok_or_else(|| {
        Error::corrupt(format!(
            "a chunk of file {} was not copied to {}",
            hash.hex(),
            dest.location()
        ))
    })?;
    let prove_in_dest = dest.concurrency() <= 1 || src.concurrency() > 1;
    let proven = match prove_in_dest {
        true => crate::read::Origin(dest).prove_by_reading(&relocated),
        false => crate::read::Origin(src).prove_by_reading(obj),
    };
    let ob = proven.map_err(|e| {
        if crate::proof::is_unproven(&e) {
            src.record_list_damage(hash, e.message(), "mirror");
        }
        Error::new(e.kind(), format!("{} (mirroring to {})", e.message(), dest.location()))
            .hint(format!(
                "`sealvol volume verify --read-data` on {} names what is wrong, and `sealvol repair` there fixes it; then mirror again",
                src.location()
            ))
    })?;
    let relocated = FileObject::new(
        *hash,
        relocated.size,
        relocated.packs.clone(),
        relocated.chunks.clone(),
        Some(ob),
    );
    dest.put_file_object_here(hash, &relocated)?;
    Ok(())
}

/// Copies `wanted` chunks from `src` into new packs of `dest`, reading runs of chunks
/// that lie back to back in a source pack in one request each (several at once from a
/// bucket), every chunk checked against its hash before it is written; adds the copies
/// to `index`.
fn copy_runs(
    src: &Repository,
    dest: &Repository,
    wanted: &mut [(PackId, PackEntry)],
    index: &mut ChunkIndex,
    progress: &dyn Progress,
) -> Result<()> {
    wanted.sort_by_key(|(p, e)| (p.0, e.offset));
    let max = max_run(src);
    let mut runs: Vec<&[(PackId, PackEntry)]> = Vec::new();
    let mut start = 0;
    for i in 1..=wanted.len() {
        let (p0, e0) = &wanted[start];
        let (_, prev) = &wanted[i - 1];
        let continues = wanted.get(i).is_some_and(|(p, e)| {
            p == p0
                && e.offset == prev.offset + prev.stored_len as u64
                && e.offset + e.stored_len as u64 - e0.offset <= max
        });
        if !continues {
            runs.push(&wanted[start..i]);
            start = i;
        }
    }
    // Packs of about the destination's target size, read a batch of runs at a time.
    let target = dest.config().pack_target;
    let mut k = 0;
    while k < runs.len() {
        let mut end = k;
        let mut bytes = 0u64;
        while end < runs.len() && (end == k || bytes < target) {
            bytes += runs[end]
                .iter()
                .map(|(_, e)| e.stored_len as u64)
                .sum::<u64>();
            end += 1;
        }
        let read =
            crate::store::in_parallel(&runs[k..end], src.concurrency(), |run| read_run(src, run))?;
        let batch: Vec<(PackEntry, Vec<u8>)> = read.into_iter().flatten().collect();
        let (id, entries) = write_pack(dest, &batch)?;
        let last = entries.last().map_or(0, |e| e.offset + e.stored_len as u64);
        index.add_new_pack(
            id,
            last + crate::objects::encode_trailer(&entries).len() as u64,
        );
        index.add_pack(id, &entries);
        progress.chunks(entries.len() as u64, 0);
        progress.advance(bytes);
        k = end;
    }
    Ok(())
}

/// One run's chunks, each checked.
fn read_run(src: &Repository, run: &[(PackId, PackEntry)]) -> Result<Vec<(PackEntry, Vec<u8>)>> {
    let (pack, first) = run[0];
    let (_, last) = run[run.len() - 1];
    let len = last.offset + last.stored_len as u64 - first.offset;
    let buf = src.pack_range(&pack, first.offset, len)?;
    run.iter()
        .map(|(_, e)| {
            let at = (e.offset - first.offset) as usize;
            let bytes = &buf[at..at + e.stored_len as usize];
            if Hash::of(bytes) != e.hash {
                src.record_damage(&pack, e, "mirror");
                return Err(Error::corrupt(format!(
                    "chunk {} in pack {} at offset {} of {} fails its hash check",
                    e.hash.hex(),
                    pack.hex(),
                    e.offset,
                    src.location()
                ))
                .hint(format!(
                    "run `sealvol repair` on {}, then mirror again",
                    src.location()
                )));
            }
            Ok((*e, bytes.to_vec()))
        })
        .collect()
}

/// `obj`'s chunk list with every chunk where `index` has it, or `None` if one is not
/// there.
fn relocate(obj: &FileObject, index: &ChunkIndex) -> Option<FileObject> {
    let mut packs: Vec<PackId> = Vec::new();
    let mut slot_of: HashMap<u32, u32> = HashMap::new();
    let mut chunks = Vec::with_capacity(obj.chunks.len());
    for c in &obj.chunks {
        let loc = index.chunks.get(&c.entry.hash)?;
        let pack = *slot_of.entry(loc.slot).or_insert_with(|| {
            packs.push(index.packs[loc.slot as usize]);
            packs.len() as u32 - 1
        });
        chunks.push(ChunkRef {
            pack,
            entry: loc.entry,
        });
    }
    Some(obj.relocated(packs, chunks))
}
