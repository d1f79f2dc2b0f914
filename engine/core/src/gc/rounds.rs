//! Rounds: what one garbage collection condemned, `gc/rounds/<id>`, and the protocol
//! that writers follow with them. A round goes condemned → sweeping → swept, each step
//! a compare-and-swap; a writer that needs something a condemned round holds takes it
//! out (a rescue, by compare-and-swap on the same object), so a rescue and the start
//! of a sweep exclude each other. docs/GC.md has the whole argument.

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::digest::{Entry, Hash};
use crate::error::{Error, ErrorKind, Result};
use crate::objects::{FileObject, PackId};
use crate::repo::{Kind, Repository, json_error};
use crate::stamp::{parse_rfc3339, rfc3339, whoami};
use crate::store::ETag;

pub(crate) const ROUNDS: &str = "gc/rounds/";

/// A swept round is kept this long, so that a writer that read the repository before
/// the sweep learns what went (one that started longer ago checks every object).
pub const KEEP_SWEPT: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a writer waits for a sweep of something it needs to finish.
const SWEEP_WAIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RoundState {
    /// Proposed for deletion; writers may still rescue what they need.
    Condemned,
    /// Being swept: nothing can be rescued; what no version references is deleted.
    Sweeping,
    /// Done; kept for `KEEP_SWEPT` so late writers can tell what went.
    Swept,
}

/// `gc/rounds/<id>`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Round {
    pub id: String,
    pub state: RoundState,
    pub by: String,
    /// When it was condemned, by the store's clock.
    pub condemned_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep_started: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swept_at: Option<String>,
    /// Packs (hex ids) and chunk lists (hex file hashes) condemned and not rescued.
    pub packs: Vec<String>,
    pub files: Vec<String>,
    /// How many objects writers rescued.
    #[serde(default)]
    pub rescued: u64,
    /// Filled in by the sweep.
    #[serde(default)]
    pub deleted_packs: u64,
    #[serde(default)]
    pub deleted_files: u64,
    #[serde(default)]
    pub bytes_freed: u64,
}

impl Round {
    pub fn condemned_time(&self) -> Option<SystemTime> {
        parse_rfc3339(&self.condemned_at)
    }

    fn swept_time(&self) -> Option<SystemTime> {
        self.swept_at.as_deref().and_then(parse_rfc3339)
    }

    pub fn pack_ids(&self) -> impl Iterator<Item = PackId> + '_ {
        self.packs.iter().filter_map(|h| Hash::parse_hex(h))
    }

    pub fn file_ids(&self) -> impl Iterator<Item = Hash> + '_ {
        self.files.iter().filter_map(|h| Hash::parse_hex(h))
    }

    /// What of `uses` this round holds: (packs, files), as hex.
    fn hits(&self, uses: &Uses) -> (Vec<String>, Vec<String>) {
        let packs = self
            .packs
            .iter()
            .filter(|h| Hash::parse_hex(h).is_some_and(|p| uses.packs.contains(&p)))
            .cloned()
            .collect();
        let files = self
            .files
            .iter()
            .filter(|h| Hash::parse_hex(h).is_some_and(|f| uses.files.contains(&f)))
            .cloned()
            .collect();
        (packs, files)
    }
}

/// A round as read, with the version to compare-and-swap against.
pub struct Stored {
    pub key: String,
    pub round: Round,
    pub etag: ETag,
}

/// Every round, oldest first. One whose record cannot be read is skipped with a
/// warning: no one can sweep what it lists, so it can condemn nothing.
pub fn list(repo: &Repository) -> Result<Vec<Stored>> {
    let mut out = Vec::new();
    for o in repo.store().list(ROUNDS)? {
        if let Some(s) = read(repo, &o.key)? {
            out.push(s);
        }
    }
    Ok(out)
}

pub fn read(repo: &Repository, key: &str) -> Result<Option<Stored>> {
    let Some((bytes, etag)) = repo.store().get_versioned(key)? else {
        return Ok(None);
    };
    match serde_json::from_slice::<Round>(&bytes) {
        Ok(round) => Ok(Some(Stored {
            key: key.to_string(),
            round,
            etag,
        })),
        Err(e) => {
            tracing::warn!("{key} is damaged ({e}); it is ignored, and the next gc removes it");
            Ok(None)
        }
    }
}

/// Writes a round (`expected`: its version, `None` for a new one).
pub fn write(repo: &Repository, key: &str, round: &Round, expected: Option<&ETag>) -> Result<()> {
    let bytes = serde_json::to_vec(round).map_err(json_error)?;
    repo.store().put_if_match(key, &bytes, expected)?;
    repo.barrier()
}

/// A new round's key: sortable by time, unique per process.
pub fn new_key(now: SystemTime) -> String {
    let t = humantime::format_rfc3339_millis(now)
        .to_string()
        .replace([':', '-', '.'], "");
    format!("{ROUNDS}{t}-{}", std::process::id())
}

/// Packs that condemned or sweeping rounds hold: a writer builds nothing new on them.
pub fn condemned_packs(repo: &Repository) -> Result<Vec<PackId>> {
    Ok(list(repo)?
        .into_iter()
        .filter(|s| s.round.state != RoundState::Swept)
        .flat_map(|s| s.round.pack_ids().collect::<Vec<_>>())
        .collect())
}

/// The chunk lists and packs a manifest names, as stored now: a small file found in
/// the version's small packs names its pack, and no chunk list.
struct Uses {
    files: HashSet<Hash>,
    packs: HashSet<PackId>,
}

impl Uses {
    fn of(repo: &Repository, entries: &[Entry], small: &crate::small::SmallFiles) -> Result<Uses> {
        let mut files = HashSet::new();
        let mut packs = HashSet::new();
        for e in entries {
            if let Entry::File {
                hash, path, size, ..
            } = e
                && !files.contains(hash)
            {
                if let Some(obj) = small.list(repo, hash, *size) {
                    packs.extend(obj.packs.iter().copied());
                    continue;
                }
                files.insert(*hash);
                let obj = repo.file_object_if_stored(hash)?.ok_or_else(|| {
                    collected(format!(
                        "the chunk list of {path} ({}) was removed by a garbage collection",
                        Kind::File.name(hash)
                    ))
                })?;
                packs.extend(obj.packs.iter().copied());
            }
        }
        Ok(Uses { files, packs })
    }
}

fn collected(what: String) -> Error {
    Error::new(ErrorKind::Collected, what)
        .hint("push again: what the collection removed is written anew (pushes and syncs do this themselves)")
}

/// Returned by `protect`; the seal reports through it when it has written the manifest.
pub(crate) struct Protected {
    started: Instant,
    grace: Duration,
}

impl Protected {
    /// The manifest is written. The argument in docs/GC.md needs it to have been
    /// written within half the grace period of the check; say so if it was not.
    pub(crate) fn sealed(self) {
        let took = self.started.elapsed();
        if took > self.grace / 2 {
            tracing::warn!(
                "the manifest was written {}s after its garbage-collection check, more than half the grace period ({}s); `sealvol volume verify` checks the version",
                took.as_secs(),
                self.grace.as_secs()
            );
        }
    }
}

/// The writer's side of the protocol, just before it writes a manifest naming
/// `entries`: every chunk list and pack it names is taken out of any condemned round
/// (rescued), and if a round that holds one is sweeping or swept, the writer waits for
/// the sweep and then fails with `ErrorKind::Collected` if anything it needs is gone.
/// `since` is when the writer first read the repository (the store's clock).
pub(crate) fn protect(
    repo: &Repository,
    manifest: &crate::manifest::Manifest,
    since: Option<SystemTime>,
) -> Result<Protected> {
    let grace = repo.config().gc_grace;
    let protected = Protected {
        started: Instant::now(),
        grace,
    };
    let now = repo.store().now()?;
    let old_writer = since.is_none_or(|s| now.duration_since(s).is_ok_and(|d| d > KEEP_SWEPT / 2));
    let rounds: Vec<Stored> = list(repo)?
        .into_iter()
        .filter(|s| match s.round.state {
            RoundState::Condemned | RoundState::Sweeping => true,
            // A sweep that ended before this writer read anything removed nothing it
            // could have seen (the grace covers the two clocks' disagreement).
            RoundState::Swept => match (since, s.round.swept_time()) {
                (Some(since), Some(swept)) => swept + grace >= since,
                _ => true,
            },
        })
        .collect();
    if rounds.is_empty() && !old_writer {
        return Ok(protected);
    }
    let uses = Uses::of(repo, &manifest.entries, &manifest.small_files())?;
    if old_writer {
        // Rounds this writer could have missed are gone: check every pack is there.
        let present: HashSet<PackId> = repo
            .list(Kind::Pack)?
            .into_iter()
            .filter_map(|l| l.id)
            .collect();
        if let Some(p) = uses.packs.iter().find(|p| !present.contains(p)) {
            return Err(collected(format!(
                "pack {} was removed by a garbage collection",
                p.hex()
            )));
        }
    }
    for s in rounds {
        rescue(repo, s, &uses)?;
    }
    Ok(protected)
}

/// The writer's side for a chunk list it replaces (a heal, a relink): the packs the new
/// list names are rescued from any round that holds them before the list is visible,
/// or the replacement fails with `ErrorKind::Collected` (docs/GC.md, case 2).
pub fn replace_chunk_list(repo: &Repository, hash: &Hash, obj: &FileObject) -> Result<()> {
    let rounds = list(repo)?;
    let uses = Uses {
        files: HashSet::new(),
        packs: obj.packs.iter().copied().collect(),
    };
    for s in rounds {
        rescue(repo, s, &uses)?;
    }
    repo.replace_file_object(hash, obj)
}

/// Takes what `uses` needs out of one round, or waits out its sweep.
fn rescue(repo: &Repository, mut s: Stored, uses: &Uses) -> Result<()> {
    let waited = Instant::now();
    loop {
        let (packs, files) = s.round.hits(uses);
        if packs.is_empty() && files.is_empty() {
            return Ok(());
        }
        match s.round.state {
            RoundState::Condemned => {
                let mut r = s.round.clone();
                r.packs.retain(|p| !packs.contains(p));
                r.files.retain(|f| !files.contains(f));
                r.rescued += (packs.len() + files.len()) as u64;
                match write(repo, &s.key, &r, Some(&s.etag)) {
                    Ok(()) => {
                        tracing::info!(
                            "rescued {} pack(s) and {} chunk list(s) from garbage collection {}",
                            packs.len(),
                            files.len(),
                            r.id
                        );
                        return Ok(());
                    }
                    Err(e) if e.kind() == ErrorKind::Race => {}
                    Err(e) => return Err(e),
                }
            }
            RoundState::Sweeping => {
                if waited.elapsed() > SWEEP_WAIT {
                    return Err(collected(format!(
                        "garbage collection {} is sweeping data this push reuses and has not finished",
                        s.round.id
                    ))
                    .hint("run `sealvol volume gc` to finish it (a killed one is resumed), then push again"));
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            RoundState::Swept => {
                // Swept, but a version still referenced these: they were kept.
                for p in packs.iter().filter_map(|h| Hash::parse_hex(h)) {
                    if repo.store().size(&Kind::Pack.name(&p))?.is_none() {
                        return Err(collected(format!(
                            "pack {} this push reuses was removed by garbage collection {}",
                            p.hex(),
                            s.round.id
                        )));
                    }
                }
                for f in files.iter().filter_map(|h| Hash::parse_hex(h)) {
                    if repo.file_object_if_stored(&f)?.is_none() {
                        return Err(collected(format!(
                            "chunk list {} this push reuses was removed by garbage collection {}",
                            Kind::File.name(&f),
                            s.round.id
                        )));
                    }
                }
                return Ok(());
            }
        }
        match read(repo, &s.key)? {
            Some(again) => s = again,
            // Removed: only swept rounds are, long after; the objects' absence is
            // what matters, and `Uses::of` read the chunk lists just now.
            None => return Ok(()),
        }
    }
}

/// A new round, condemning these.
pub fn new_round(id: &str, now: SystemTime, packs: &[PackId], files: &[Hash]) -> Round {
    Round {
        id: id.rsplit('/').next().unwrap_or(id).to_string(),
        state: RoundState::Condemned,
        by: whoami(),
        condemned_at: rfc3339(now),
        sweep_started: None,
        swept_at: None,
        packs: packs.iter().map(|p| p.hex()).collect(),
        files: files.iter().map(|f| f.hex()).collect(),
        rescued: 0,
        deleted_packs: 0,
        deleted_files: 0,
        bytes_freed: 0,
    }
}
