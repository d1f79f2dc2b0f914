//! The mark: what every version (live or in the trash) references, from its manifest
//! down through its files' chunk lists to the chunk copies in packs.

use std::collections::{HashMap, HashSet};

use sealvol_core::digest::{Entry, Hash};
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::objects::{PackEntry, PackId};
use sealvol_core::progress::Progress;
use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::repo::{Kind, Repository};

/// What the versions reference.
#[derive(Default)]
pub struct Marked {
    pub versions: usize,
    /// Chunk lists, by file hash.
    pub files: HashSet<Hash>,
    /// Per pack, the copies referenced (by offset).
    pub live: HashMap<PackId, HashMap<u64, PackEntry>>,
    /// Per pack, the chunk lists that name it (for repacking).
    pub users: HashMap<PackId, Vec<Hash>>,
    /// Chunk lists a manifest names that are not stored (a version missing data).
    pub missing_files: usize,
    /// Small files found in their versions' small packs (`small.rs`), as lists made
    /// from those copies: what a repack that moves such a copy writes a list for.
    pub small: HashMap<Hash, sealvol_core::objects::FileObject>,
}

impl Marked {
    pub fn live_bytes(&self, pack: &PackId) -> u64 {
        self.live
            .get(pack)
            .map_or(0, |l| l.values().map(|e| e.stored_len as u64).sum())
    }
}

/// Marks from every manifest except those in `skip` (versions a dry run would purge).
/// A manifest or chunk list that cannot be read stops the mark: what it references is
/// unknown, and deleting on a guess could delete a version's data.
pub fn mark(
    repo: &Repository,
    skip: &HashSet<(VolumeName, Digest)>,
    progress: &dyn Progress,
) -> Result<Marked> {
    let mut m = Marked::default();
    let mut versions = Vec::new();
    for vol in repo.volumes(None)? {
        for d in repo.version_digests(&vol)? {
            if !skip.contains(&(vol.clone(), d)) {
                versions.push((vol.clone(), d));
            }
        }
    }
    progress.begin("mark", 0, versions.len() as u64);
    // Every version's small packs together: a chunk whose hash is a file's is that
    // file, whichever version's pack holds it.
    let mut small_packs = Vec::new();
    let mut sizes: HashMap<Hash, u64> = HashMap::new();
    for (vol, d) in &versions {
        let manifest = match repo.manifest(vol, d) {
            Ok(manifest) => manifest,
            // Purged since the listing (only a gc purges, and it holds the lease).
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(refuse(e, &format!("vol:{vol}@{}", d.short(16)))),
        };
        m.versions += 1;
        small_packs.extend(manifest.small_files().packs().iter().copied());
        for e in &manifest.entries {
            if let Entry::File { hash, size, .. } = e {
                m.files.insert(*hash);
                sizes.insert(*hash, *size);
            }
        }
        progress.file_done();
    }
    // A list found failing its proof names other chunks than its file needs: what the
    // file really references is unknown.
    if let Some((h, rec)) = repo
        .list_damage()?
        .into_iter()
        .find(|(h, _)| m.files.contains(h))
    {
        let why = rec.map(|r| r.problem).unwrap_or_default();
        return Err(refuse(
            Error::corrupt(format!(
                "{} was found failing its proof ({why:.200})",
                Kind::File.name(&h)
            )),
            &Kind::File.name(&h),
        ));
    }
    small_packs.sort_unstable();
    small_packs.dedup();
    let small = sealvol_core::small::SmallFiles::of(small_packs);
    let files: Vec<Hash> = m.files.iter().copied().collect();
    for h in &files {
        let obj = match repo.file_object_if_stored(h) {
            Ok(Some(obj)) => obj,
            // A small file: its copy in a small pack is what its versions read.
            Ok(None) if let Some(obj) = small.list(repo, h, sizes.get(h).copied().unwrap_or(0)) => {
                mark_copies(&mut m, h, &obj);
                m.small.insert(*h, obj);
                continue;
            }
            Ok(None) => {
                m.missing_files += 1;
                continue;
            }
            Err(e) => return Err(refuse(e, &Kind::File.name(h))),
        };
        // A stored list wins: it was written when the small pack's copy moved (gc) or
        // failed (repair), and once that pack is gone readers take the list.
        mark_copies(&mut m, h, &obj);
    }
    Ok(m)
}

/// Marks the copies `obj` names as live, and `h` as a user of their packs.
fn mark_copies(m: &mut Marked, h: &Hash, obj: &sealvol_core::objects::FileObject) {
    for p in &obj.packs {
        m.users.entry(*p).or_default().push(*h);
    }
    for c in &obj.chunks {
        let pack = obj.packs[c.pack as usize];
        m.live
            .entry(pack)
            .or_default()
            .insert(c.entry.offset, c.entry);
    }
}

fn refuse(e: Error, what: &str) -> Error {
    Error::new(
        e.kind(),
        format!(
            "{}; garbage collection cannot tell what {what} references, so it deletes nothing",
            e.message()
        ),
    )
    .hint(
        "`sealvol volume verify` shows the damage and `sealvol repair` fixes it; then run gc again",
    )
}
