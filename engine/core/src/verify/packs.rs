//! Packs as verify finds them: their trailers by ranged reads, their sizes against
//! their entries, and, for the packs chosen, every chunk read in runs and hashed, on
//! every core.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::read_data::{ReadData, SAMPLE_MIN};
use crate::digest::Hash;
use crate::error::{ErrorKind, Result};
use crate::objects::{self, FOOTER_LEN, PackEntry, PackId};
use crate::progress::Progress;
use crate::read::MAX_RUN;
use crate::repo::Repository;

/// One pack as found.
#[derive(Debug, Clone)]
pub struct PackFacts {
    pub size: u64,
    /// Its trailer's entries, or why they cannot be read.
    pub trailer: std::result::Result<Vec<PackEntry>, String>,
    /// Copies that cannot be used, by (offset, chunk hash), with why.
    pub bad: BTreeMap<(u64, Hash), String>,
    /// Whether this run read and hashed its chunks.
    pub read: bool,
}

/// What surveying the packs found.
pub(super) struct Packs {
    pub packs: BTreeMap<PackId, PackFacts>,
    pub bytes_read: u64,
    pub packs_read: u64,
    /// Every damage record: (pack, chunk).
    pub records: Vec<(PackId, Hash)>,
}

/// Which packs to read: all, a deterministic subset, or a random share.
pub(super) fn choose(present: &[(PackId, u64)], read: ReadData) -> HashSet<PackId> {
    let total: u64 = present.iter().map(|(_, s)| s).sum();
    let share = |goal: u64| {
        let mut order: Vec<&(PackId, u64)> = present.iter().collect();
        // A fresh order each run, so repeated samples cover the repository.
        let seed = Hash::of(
            format!("{:?}{}", std::time::SystemTime::now(), std::process::id()).as_bytes(),
        );
        order.sort_by_key(|(id, _)| Hash::of(&[seed.0, id.0].concat()));
        let mut got = 0u64;
        order
            .into_iter()
            .take_while(|(_, size)| {
                let take = got < goal;
                got += size;
                take
            })
            .map(|(id, _)| *id)
            .collect()
    };
    match read {
        ReadData::None => HashSet::new(),
        ReadData::All => present.iter().map(|(p, _)| *p).collect(),
        ReadData::Subset { n, t } => present
            .iter()
            .filter(|(p, _)| p.0[0] as u32 % t == n - 1)
            .map(|(p, _)| *p)
            .collect(),
        ReadData::Share(p) => share((total as f64 * p).ceil() as u64),
        ReadData::Sample => share((total / 16).max(SAMPLE_MIN)),
    }
}

/// Trailers of `present` packs, and chunk data of `chosen` ones (only the `wanted`
/// copies, when given); damage records; bad copies recorded as they are found. Packs
/// are surveyed on every core: hashing is the cost once the data is in memory.
#[allow(clippy::too_many_arguments)]
pub(super) fn survey_packs(
    repo: &Repository,
    present: &[(PackId, u64)],
    chosen: &HashSet<PackId>,
    wanted: Option<&HashMap<PackId, HashSet<(u64, Hash)>>>,
    record: bool,
    progress: &dyn Progress,
) -> Result<Packs> {
    let records: HashSet<(PackId, Hash)> = repo
        .damage_records()?
        .into_iter()
        .map(|(p, c, _)| (p, c))
        .collect();
    let to_read: u64 = present
        .iter()
        .filter(|(p, _)| chosen.contains(p))
        .map(|(_, size)| size)
        .sum();
    progress.begin("verify", to_read, chosen.len() as u64);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 4);
    let ctx = PackSurvey {
        repo,
        chosen,
        wanted,
        record,
        records: &records,
        progress,
    };
    let results: Vec<Result<Vec<(usize, PackFacts, u64)>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(id, size)) = present.get(i) else {
                            return Ok(out);
                        };
                        let (facts, bytes) = ctx.pack(&id, size)?;
                        out.push((i, facts, bytes));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(crate::error::Error::new(
                        ErrorKind::Io,
                        "a verify thread panicked",
                    ))
                })
            })
            .collect()
    });
    let mut out = Packs {
        packs: BTreeMap::new(),
        bytes_read: 0,
        packs_read: 0,
        records: records.into_iter().collect(),
    };
    for r in results {
        for (i, facts, bytes) in r? {
            out.bytes_read += bytes;
            out.packs_read += facts.read as u64;
            out.packs.insert(present[i].0, facts);
        }
    }
    Ok(out)
}

/// What surveying one pack needs.
struct PackSurvey<'a> {
    repo: &'a Repository,
    chosen: &'a HashSet<PackId>,
    wanted: Option<&'a HashMap<PackId, HashSet<(u64, Hash)>>>,
    record: bool,
    records: &'a HashSet<(PackId, Hash)>,
    progress: &'a dyn Progress,
}

impl PackSurvey<'_> {
    /// One pack's facts, and the chunk bytes read.
    fn pack(&self, id: &PackId, size: u64) -> Result<(PackFacts, u64)> {
        let repo = self.repo;
        let trailer = read_trailer(repo, id, size);
        let mut facts = PackFacts {
            size,
            trailer: trailer.clone(),
            bad: BTreeMap::new(),
            read: false,
        };
        // The copies this pack should hold: from its trailer, else from its index.
        let entries = match trailer {
            Ok(e) => Some(e),
            Err(_) => match repo.index(id) {
                Ok(Some(e)) => Some(e),
                _ => None,
            },
        };
        for e in entries.iter().flatten() {
            if e.offset + e.stored_len as u64 > size {
                facts.bad.insert(
                    (e.offset, e.hash),
                    format!(
                        "is cut short at {size} bytes: chunk {} at offset {} is gone",
                        e.hash.hex(),
                        e.offset
                    ),
                );
            }
        }
        let mut bytes = 0;
        if self.chosen.contains(id)
            && let Some(entries) = &entries
        {
            let mut check: Vec<&PackEntry> = entries
                .iter()
                .filter(|e| e.offset + e.stored_len as u64 <= size)
                .filter(|e| {
                    self.wanted.is_none_or(|w| {
                        w.get(id)
                            .is_some_and(|set| set.contains(&(e.offset, e.hash)))
                    })
                })
                .collect();
            check.sort_by_key(|e| e.offset);
            for (e, ok) in hash_copies(repo, id, &check, &mut bytes, self.progress)? {
                if !ok {
                    let why = format!(
                        "chunk {} at offset {} fails its hash check",
                        e.hash.hex(),
                        e.offset
                    );
                    if self.record {
                        repo.record_damage(id, &e, "verify");
                    }
                    facts.bad.insert((e.offset, e.hash), why);
                }
            }
            facts.read = true;
            self.progress.file_done();
        }
        // What earlier reads found, unless this run read the copy and found it sound.
        for e in entries.iter().flatten() {
            if self.records.contains(&(*id, e.hash))
                && !facts.read
                && !facts.bad.contains_key(&(e.offset, e.hash))
            {
                facts.bad.insert(
                    (e.offset, e.hash),
                    format!("chunk {} at offset {} failed its hash check when it was read (damage record)", e.hash.hex(), e.offset),
                );
            }
        }
        Ok((facts, bytes))
    }
}

/// Reads the copies `check` (sorted by offset) in runs and says of each whether its
/// bytes hash to its name.
fn hash_copies(
    repo: &Repository,
    pack: &PackId,
    check: &[&PackEntry],
    bytes_read: &mut u64,
    progress: &dyn Progress,
) -> Result<Vec<(PackEntry, bool)>> {
    let mut out = Vec::with_capacity(check.len());
    let mut k = 0;
    while k < check.len() {
        let start = check[k].offset;
        let mut end = start + check[k].stored_len as u64;
        let mut n = 1;
        while k + n < check.len() {
            let e = check[k + n];
            if e.offset < end || e.offset + e.stored_len as u64 - start > MAX_RUN {
                break;
            }
            end = e.offset + e.stored_len as u64;
            n += 1;
        }
        let bytes = match repo.pack_range(pack, start, end - start) {
            Ok(b) => b,
            Err(e) if matches!(e.kind(), ErrorKind::Corrupt) || e.kind() == ErrorKind::Io => {
                // Unreadable here: every copy of the run counts as bad.
                for e in &check[k..k + n] {
                    out.push((**e, false));
                }
                k += n;
                continue;
            }
            Err(e) => return Err(e),
        };
        *bytes_read += bytes.len() as u64;
        progress.advance(bytes.len() as u64);
        for e in &check[k..k + n] {
            let at = (e.offset - start) as usize;
            let ok = Hash::of(&bytes[at..at + e.stored_len as usize]) == e.hash;
            out.push((**e, ok));
        }
        k += n;
    }
    Ok(out)
}

fn read_trailer(
    repo: &Repository,
    id: &PackId,
    size: u64,
) -> std::result::Result<Vec<PackEntry>, String> {
    let entries = match repo.read_pack_entries(id) {
        Ok(e) => e,
        Err(e) if size < (objects::PACK_MAGIC.len() + FOOTER_LEN) as u64 => {
            return Err(format!(
                "is too short to be a pack ({size} bytes): {}",
                e.message()
            ));
        }
        Err(e) => {
            return Err(format!(
                "its trailer is damaged or gone (cut short?): {}",
                e.message()
            ));
        }
    };
    if objects::pack_id(&entries) != *id {
        return Err("its trailer does not match its name".into());
    }
    Ok(entries)
}
