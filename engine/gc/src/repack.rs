//! Rewriting mostly-dead packs: their live chunks are copied into new packs (each
//! checked against its hash), every chunk list that names them is pointed at the new
//! copies, and the old packs, now unreferenced, are condemned with the rest. A reader
//! holding an old chunk list finds the new copy through the index (`other_copy`).

use std::collections::{HashMap, HashSet};
use std::time::SystemTime;

use crate::mark::Marked;
use sealvol_core::error::{ErrorKind, Result};
use sealvol_core::objects::{FileObject, PackEntry, PackId};
use sealvol_core::progress::Progress;
use sealvol_core::repo::{Kind, Listed, Repository};

/// Packs worth rewriting: referenced, older than the grace period, not already
/// condemned, and less than `REPACK_BELOW` live by bytes.
pub(super) fn candidates(
    repo: &Repository,
    marked: &Marked,
    packs: &[Listed],
    pending: &HashSet<PackId>,
    old: &dyn Fn(Option<SystemTime>) -> bool,
) -> Result<Vec<PackId>> {
    let mut out = Vec::new();
    for l in packs {
        let Some(id) = l.id.filter(|id| l.name == Kind::Pack.name(id)) else {
            continue;
        };
        if !marked.live.contains_key(&id) || pending.contains(&id) || !old(l.modified) {
            continue;
        }
        let Ok(Some(entries)) = repo.index(&id) else {
            continue;
        };
        let all: u64 = entries.iter().map(|e| e.stored_len as u64).sum();
        if all > 0 && (marked.live_bytes(&id) as f64) < REPACK_BELOW * all as f64 {
            out.push(id);
        }
    }
    Ok(out)
}

pub(super) struct Repacked {
    /// Old packs whose every live chunk now has a new copy that the chunk lists name.
    pub rewritten: Vec<PackId>,
    pub new_packs: usize,
    pub new_bytes: u64,
    pub relinked: usize,
    /// Packs left as they were: a live chunk in them fails its hash.
    pub kept: usize,
}

pub(super) fn repack(
    repo: &Repository,
    marked: &Marked,
    packs: &[PackId],
    progress: &dyn Progress,
) -> Result<Repacked> {
    let mut chunks: Vec<(PackId, PackEntry)> = Vec::new();
    for id in packs {
        if let Some(live) = marked.live.get(id) {
            let mut entries: Vec<PackEntry> = live.values().copied().collect();
            entries.sort_by_key(|e| e.offset);
            chunks.extend(entries.into_iter().map(|e| (*id, e)));
        }
    }
    let bytes: u64 = chunks.iter().map(|(_, e)| e.stored_len as u64).sum();
    progress.begin("repack", bytes, packs.len() as u64);
    // Copies by chunk hash; `copy_chunks` checks every chunk before copying it.
    let mut good = HashMap::new();
    let (new, _copied, _failed) = sealvol_core::copy::copy_chunks(repo, &chunks, "gc", &mut good)?;
    progress.advance(bytes);
    let moved: HashMap<(PackId, u64), (PackId, PackEntry)> = chunks
        .iter()
        .filter_map(|(p, e)| good.get(&e.hash).map(|n| ((*p, e.offset), *n)))
        .collect();
    // A pack keeps its place where one of its live chunks could not be copied.
    let kept: HashSet<PackId> = chunks
        .iter()
        .filter(|(p, e)| !moved.contains_key(&(*p, e.offset)))
        .map(|(p, _)| *p)
        .collect();
    // Every chunk list that names a rewritten pack, read as it is now.
    let users: HashSet<sealvol_core::digest::Hash> = packs
        .iter()
        .filter_map(|id| marked.users.get(id))
        .flatten()
        .copied()
        .collect();
    let mut relinked = 0;
    for h in users {
        let obj = match repo.file_object_if_stored(&h) {
            Ok(Some(obj)) => obj,
            // A small file read from its version's small pack: once its copy moves,
            // a chunk list names the new one (readers take a list where the small
            // pack no longer holds the file).
            Ok(None) => match marked.small.get(&h) {
                Some(obj) => obj.clone(),
                None => continue,
            },
            Err(e) if e.kind() == ErrorKind::Corrupt => continue,
            Err(e) => return Err(e),
        };
        if let Some(new_obj) = relink(&obj, &moved) {
            // Same bytes, other copies: the one replacement a chunk list allows. No
            // rescue needed: the new list names only packs this gc has just written.
            repo.replace_file_object(&h, &new_obj)?;
            relinked += 1;
        }
    }
    repo.barrier()?;
    let new_bytes = new
        .iter()
        .map(|id| {
            repo.object_store()
                .size(&Kind::Pack.name(id))
                .ok()
                .flatten()
                .unwrap_or(0)
        })
        .sum();
    progress.finish();
    Ok(Repacked {
        rewritten: packs
            .iter()
            .filter(|p| !kept.contains(p))
            .copied()
            .collect(),
        new_packs: new.len(),
        new_bytes,
        relinked,
        kept: kept.len(),
    })
}

/// The chunk list with every moved copy replaced by its new one; `None` if it names
/// none of them.
fn relink(
    obj: &FileObject,
    moved: &HashMap<(PackId, u64), (PackId, PackEntry)>,
) -> Option<FileObject> {
    let mut changed = false;
    let relinked = obj.with_copies(|old, e| match moved.get(&(old, e.offset)) {
        Some(&(p, moved)) if moved.hash == e.hash => {
            changed = true;
            (p, moved)
        }
        _ => (old, *e),
    });
    changed.then_some(relinked)
}

/// A pack whose live chunks are less than this share of its bytes is rewritten.
pub const REPACK_BELOW: f64 = 0.5;
