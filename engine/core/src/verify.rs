//! Verify: checks every pack (header, trailer, each chunk's hash, agreement with its
//! index), every chunk list (its chunks exist where it says, its bytes hash to the
//! file's hash) and every manifest (entries hash to its name, every file is stored),
//! and reports each damaged object by name instead of stopping at the first.

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use crate::digest::{Entry, Hash};
use crate::error::{ErrorKind, Result};
use crate::objects::{self, FOOTER_LEN, PackEntry, PackId};
use crate::progress::Progress;
use crate::read::{Chunks, Origin};
use crate::refs::{Digest, VolumeName};
use crate::repo::{Kind, Repository};

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Problem {
    /// The damaged object: `packs/ab/…`, `files/…`, `vol:ns/name@b3:…`.
    pub object: String,
    pub problem: String,
}

#[derive(Debug, Default, Serialize)]
pub struct VerifyReport {
    pub packs: u64,
    pub chunks: u64,
    pub files: u64,
    pub versions: u64,
    pub bytes: u64,
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    fn problem(&mut self, object: impl Into<String>, problem: impl Into<String>) {
        self.problems.push(Problem {
            object: object.into(),
            problem: problem.into(),
        });
    }
}

/// Checks the whole repository.
pub fn verify_all(repo: &Repository, progress: &dyn Progress) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();

    // Packs and their index objects.
    let mut good: HashMap<PackId, HashSet<(u64, Hash)>> = HashMap::new();
    let packs = repo.list(Kind::Pack)?;
    let total: u64 = packs.iter().map(|p| p.size).sum();
    progress.begin("verify", total, packs.len() as u64);
    let mut present: HashSet<PackId> = HashSet::new();
    for listed in &packs {
        let Some(id) = listed.id else {
            report.problem(&listed.name, "unexpected object name in packs/");
            continue;
        };
        if listed.name == Kind::Pack.name(&id) {
            present.insert(id);
        }
        report.packs += 1;
        match check_pack(repo, &id, &mut report) {
            Some(entries) => {
                good.insert(id, entries.iter().map(|e| (e.offset, e.hash)).collect());
            }
            None => continue,
        }
        progress.file_done();
    }
    for listed in repo.list(Kind::Index)? {
        let Some(id) = listed.id else {
            report.problem(&listed.name, "unexpected object name in index/");
            continue;
        };
        if !present.contains(&id) {
            report.problem(&listed.name, "indexes a pack that is missing");
        }
    }

    // Chunk lists, each read back in full against its file hash.
    let mut stored_files: HashSet<Hash> = HashSet::new();
    for listed in repo.list(Kind::File)? {
        let Some(hash) = listed.id else {
            report.problem(&listed.name, "unexpected object name in files/");
            continue;
        };
        report.files += 1;
        if check_file(repo, &hash, Some(&good), &mut report) {
            stored_files.insert(hash);
        }
    }

    // Manifests.
    for vol in repo.volumes(None)? {
        for digest in repo.version_digests(&vol)? {
            report.versions += 1;
            check_manifest(
                repo,
                &vol,
                &digest,
                |h, r| {
                    if stored_files.contains(h) {
                        true
                    } else {
                        r.problem(
                            format!("vol:{vol}@{digest}"),
                            format!("file with hash {} is missing or damaged", h.hex()),
                        );
                        false
                    }
                },
                &mut report,
            );
        }
    }
    progress.finish();
    Ok(report)
}

/// Checks one version: its manifest, chunk lists and every chunk it reads.
pub fn verify_version(
    repo: &Repository,
    vol: &VolumeName,
    digest: &Digest,
    progress: &dyn Progress,
) -> Result<VerifyReport> {
    let mut report = VerifyReport {
        versions: 1,
        ..VerifyReport::default()
    };
    let mut seen = HashSet::new();
    check_manifest(
        repo,
        vol,
        digest,
        |h, r| {
            if seen.insert(*h) {
                r.files += 1;
                check_file(repo, h, None, r)
            } else {
                true
            }
        },
        &mut report,
    );
    progress.finish();
    Ok(report)
}

/// Returns the pack's entries if the whole pack is sound.
fn check_pack(repo: &Repository, id: &PackId, report: &mut VerifyReport) -> Option<Vec<PackEntry>> {
    let key = Kind::Pack.name(id);
    let bytes = match repo.pack(id) {
        Ok(Some(b)) => b,
        Ok(None) => {
            report.problem(&key, "vanished while being checked");
            return None;
        }
        Err(e) => {
            report.problem(&key, format!("cannot be read: {e}"));
            return None;
        }
    };
    report.bytes += bytes.len() as u64;
    if bytes.len() < objects::PACK_MAGIC.len() + FOOTER_LEN || &bytes[..8] != objects::PACK_MAGIC {
        report.problem(&key, "is not a pack (bad header)");
        return None;
    }
    let footer = &bytes[bytes.len() - FOOTER_LEN..];
    let entries = objects::decode_footer(&key, footer).and_then(|count| {
        let table = (count as usize).saturating_mul(objects::ENTRY_LEN);
        let end = bytes.len() - FOOTER_LEN;
        if table > end {
            return Err(crate::Error::corrupt("entry table longer than the pack"));
        }
        objects::decode_entries(&key, &bytes[end - table..end], count)
    });
    let entries = match entries {
        Ok(e) => e,
        Err(e) => {
            report.problem(&key, format!("trailer is damaged: {}", e.message()));
            return None;
        }
    };
    if objects::pack_id(&entries) != *id {
        report.problem(&key, "its entry table does not match its name");
        return None;
    }
    let mut sound = true;
    for e in &entries {
        report.chunks += 1;
        let (start, end) = (e.offset as usize, e.offset as usize + e.stored_len as usize);
        if end > bytes.len() - FOOTER_LEN || start < objects::PACK_MAGIC.len() {
            report.problem(
                &key,
                format!("chunk {} lies outside the pack", e.hash.hex()),
            );
            sound = false;
        } else if Hash::of(&bytes[start..end]) != e.hash {
            report.problem(
                &key,
                format!(
                    "chunk {} at offset {} fails its hash check",
                    e.hash.hex(),
                    e.offset
                ),
            );
            sound = false;
        }
    }
    let index = Kind::Index.name(id);
    match repo.index(id) {
        Ok(Some(ie)) if ie == entries => {}
        Ok(Some(_)) => report.problem(index, "disagrees with its pack's trailer"),
        Ok(None) => tracing::info!(
            "{key} has no index yet (left by an interrupted push; the next push re-indexes it)"
        ),
        Err(e) if e.kind() == ErrorKind::Corrupt => report.problem(index, e.message().to_string()),
        Err(e) => report.problem(index, format!("cannot be read: {e}")),
    }
    sound.then_some(entries)
}

/// Checks a chunk list: every chunk where it says (against verified packs, if given,
/// otherwise by reading and hashing it) and the bytes hash to the file hash.
fn check_file(
    repo: &Repository,
    hash: &Hash,
    packs: Option<&HashMap<PackId, HashSet<(u64, Hash)>>>,
    report: &mut VerifyReport,
) -> bool {
    let key = Kind::File.name(hash);
    let obj = match repo.file_object(hash) {
        Ok(o) => o,
        Err(e) => {
            report.problem(&key, e.message().to_string());
            return false;
        }
    };
    if let Some(packs) = packs {
        for c in &obj.chunks {
            let pack = obj.packs[c.pack as usize];
            let ok = packs
                .get(&pack)
                .is_some_and(|set| set.contains(&(c.entry.offset, c.entry.hash)));
            if !ok {
                report.problem(
                    &key,
                    format!(
                        "chunk {} is not sound in pack {}",
                        c.entry.hash.hex(),
                        pack.hex()
                    ),
                );
                return false;
            }
        }
    }
    let mut whole = blake3::Hasher::new();
    let (mut chunks, mut bytes) = (0u64, 0u64);
    let read = Origin(repo).for_each(&obj, 0..obj.chunks.len(), &mut |c| {
        whole.update(c);
        chunks += 1;
        bytes += c.len() as u64;
        Ok(())
    });
    if packs.is_none() {
        report.chunks += chunks;
        report.bytes += bytes;
    }
    if let Err(e) = read {
        report.problem(&key, e.message().to_string());
        return false;
    }
    if Hash(*whole.finalize().as_bytes()) != *hash {
        report.problem(&key, "its chunks do not add up to the file's hash");
        return false;
    }
    true
}

fn check_manifest(
    repo: &Repository,
    vol: &VolumeName,
    digest: &Digest,
    mut file_ok: impl FnMut(&Hash, &mut VerifyReport) -> bool,
    report: &mut VerifyReport,
) {
    let name = format!("vol:{vol}@{digest}");
    let m = match repo.manifest(vol, digest) {
        Ok(m) => m,
        Err(e) => {
            report.problem(&name, e.message().to_string());
            return;
        }
    };
    for e in &m.entries {
        if let Entry::File { path, hash, .. } = e
            && !file_ok(hash, report)
        {
            report.problem(&name, format!("file {path} cannot be read back"));
        }
    }
}
