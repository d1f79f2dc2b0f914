//! `repair --from DIR`: healing versions that are missing data from a folder. A folder
//! whose digest is such a version is pushed again as that version; otherwise each file
//! whose bytes hash to a missing file is stored (the digest, and each file's hash, tell
//! which bytes belong, so nothing else can slip in).

use std::collections::{HashMap, HashSet};
use std::path::Path;

use super::state::Repair;
use crate::digest::{Entry, Hash};
use crate::error::Result;
use crate::push;
use crate::refs::VolumeName;
use crate::repo::Kind;
use crate::walk::{WalkEntry, WalkKind};

pub(super) fn from_folder(r: &mut Repair, dir: &Path) -> Result<()> {
    let digest = crate::walk::digest_dir(dir)?;
    let matches: Vec<VolumeName> = r
        .damaged_versions
        .keys()
        .filter(|(_, d)| *d == digest)
        .map(|(v, _)| v.clone())
        .collect();
    if !matches.is_empty() {
        for vol in matches {
            if r.write {
                let options = push::PushOptions::new(r.opts.progress);
                push::push(r.repo, dir, &vol, &[], &options)?;
            }
            r.healed.insert((vol.clone(), digest));
            r.report.act(
                "heal",
                format!("vol:{vol}@{digest}"),
                format!("pushed again from {} (same digest)", dir.display()),
            );
        }
        return Ok(());
    }
    heal_files(r, dir, &digest.to_string())
}

/// Stores each file of `dir` whose bytes hash to a file some version is missing.
fn heal_files(r: &mut Repair, dir: &Path, digest: &str) -> Result<()> {
    // Missing files by size, so that only candidates are hashed.
    let mut by_size: HashMap<u64, HashSet<Hash>> = HashMap::new();
    for (_, _, m) in &r.s.manifests {
        for e in m.iter().flat_map(|m| &m.entries) {
            if let Entry::File { hash, size, .. } = e
                && (r.lost_files.contains(hash) || !r.s.files.contains_key(hash))
            {
                by_size.entry(*size).or_default().insert(*hash);
            }
        }
    }
    let listing = crate::walk::walk(dir)?;
    let mut found: Vec<(&WalkEntry, Hash)> = Vec::new();
    for e in &listing {
        let WalkKind::File { stamp, .. } = e.kind else {
            continue;
        };
        let Some(wanted) = by_size.get(&stamp.size) else {
            continue;
        };
        let h = Hash::of_file(&e.abs)?;
        if wanted.contains(&h) && !found.iter().any(|(_, f)| *f == h) {
            found.push((e, h));
        }
    }
    if found.is_empty() {
        r.report.act(
            "heal",
            dir.display().to_string(),
            format!("holds none of the missing files (its digest is {digest})"),
        );
        return Ok(());
    }
    if r.write {
        let entries: Vec<&WalkEntry> = found.iter().map(|(e, _)| *e).collect();
        push::store_files(r.repo, &entries, r.opts.progress)?;
    }
    for (e, h) in &found {
        r.lost_files.remove(h);
        r.report.act(
            "heal",
            Kind::File.name(h),
            format!("stored again from {}", e.abs.display()),
        );
    }
    // A version whose every file is back is healed (its manifest was readable).
    for (vol, digest, m) in &r.s.manifests {
        let Ok(m) = m else { continue };
        let key = (vol.clone(), *digest);
        let back = r.damaged_versions.get(&key) == Some(&false)
            && m.entries.iter().all(|e| match e {
                Entry::File { hash, .. } => {
                    !r.lost_files.contains(hash) && r.s.files.contains_key(hash)
                        || found.iter().any(|(_, f)| f == hash)
                }
                _ => true,
            });
        if back {
            r.healed.insert(key);
        }
    }
    Ok(())
}
