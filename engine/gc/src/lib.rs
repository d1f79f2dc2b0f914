//! sealvol's garbage collector: its one job is to purge versions whose time in the
//! trash is over, then reclaim the chunk lists and packs that no version (live or in
//! the trash) references, and rewrite packs that are mostly dead, safely while other
//! processes on other machines push to the same repository, with create-if-absent and
//! compare-and-swap as the only coordination. docs/GC.md is the argument; this is the
//! order of its steps:
//!
//! 1. take the lease (`lease`): one collection at a time, taken over when stale;
//! 2. purge expired versions from the trash (`Repository::purge`), and remove the
//!    summaries of versions that are gone (`summary::orphans`);
//! 3. list objects, then mark what every manifest references (`mark`);
//! 4. rewrite mostly-dead packs and relink the chunk lists that name them (`repack`);
//! 5. condemn what is unreferenced and older than the grace period: a new round
//!    (`sealvol_core::gc::rounds`), which writers may still rescue from;
//! 6. wait the grace period, then sweep every round that is due: compare-and-swap it
//!    to sweeping, mark again, delete what is still unreferenced.

mod lease;
mod mark;
mod repack;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use sealvol_core::digest::Hash;
use sealvol_core::error::{ErrorKind, Result};
use sealvol_core::objects::PackId;
use sealvol_core::progress::Progress;
use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::repo::{Kind, Listed, Repository};
use sealvol_core::trash::Purge;

pub use lease::LEASE_TTL;
pub use repack::REPACK_BELOW;
use sealvol_core::gc::rounds::{self, RoundState, Stored};
use sealvol_core::gc::{Collector, GcOptions};
use sealvol_core::outcomes::{GcReport, PurgedVersion};

/// The collector that runs on a repository's own store.
pub struct Here;

impl Collector for Here {
    fn collect_here(&self, repo: &Repository, opts: &GcOptions) -> Result<GcReport> {
        collect_here(repo, opts)
    }
}

/// Runs a garbage collection of `repo`: here, on its own store, or through the server
/// that owns its writes (which runs it itself, admin keys only).
pub fn collect(repo: &Repository, opts: &GcOptions) -> Result<GcReport> {
    repo.collect(opts, &Here)
}

/// Runs one garbage collection here (see the crate's steps).
fn collect_here(repo: &Repository, opts: &GcOptions) -> Result<GcReport> {
    repo.check_writable()?;
    let started = Instant::now();
    let grace = repo.config().gc_grace;
    let mut report = GcReport {
        dry_run: opts.dry_run,
        grace_secs: grace.as_secs(),
        ..GcReport::default()
    };
    // A repair (which moves packs) finishes first, and waits for us.
    let _writing = repo.writers_lock(false)?;
    let lease = match opts.dry_run {
        true => None,
        false => Some(lease::Lease::take(repo)?),
    };
    let done = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        if let Some(l) = &lease {
            s.spawn(|| l.keep(&done));
        }
        let r = run(repo, opts, lease.as_ref(), grace, &mut report);
        done.store(true, Ordering::Relaxed);
        r
    });
    result?;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

fn run(
    repo: &Repository,
    opts: &GcOptions,
    lease: Option<&lease::Lease>,
    grace: Duration,
    report: &mut GcReport,
) -> Result<()> {
    if !opts.dry_run {
        clean_leftovers(repo, report)?;
    }

    // 2. The trash, and the summaries and listings of versions that are gone.
    let skip = purge_expired(repo, opts.dry_run, report)?;
    remove_orphans(repo, opts.dry_run, grace, report)?;

    // 3. Objects, then the mark: anything listed here existed before the mark began.
    let earlier = rounds::list(repo)?;
    let census = Census::take(repo, &skip, &earlier, grace, opts.progress, report)?;
    let mut condemned = census.unreferenced(report);

    // 4. Mostly-dead packs: their live chunks are copied, their users relinked, and
    // they join the condemned.
    let rewritten = repack_mostly_dead(repo, opts, &census, report)?;
    condemned.packs.extend(rewritten);
    census.tally(&condemned, report);
    if opts.dry_run {
        if let Some(note) = due_note(&earlier, census.now, grace) {
            report.notes.push(note);
        }
        return Ok(());
    }
    stop_if_lost(lease)?;

    // 5. The round.
    let mut due: Vec<Stored> = earlier
        .into_iter()
        .filter(|s| is_due(s, census.now, grace))
        .collect();
    let mut mine = None;
    if !condemned.packs.is_empty() || !condemned.files.is_empty() {
        let key = rounds::new_key(census.now);
        let round = rounds::new_round(&key, census.now, &condemned.packs, &condemned.files);
        rounds::write(repo, &key, &round, None)?;
        mine = Some(key);
    }

    // 6. Wait, then sweep.
    if let Some(key) = mine {
        if opts.wait {
            wait(grace, opts.progress, lease)?;
            if let Some(s) = rounds::read(repo, &key)? {
                due.push(s);
            }
        } else {
            report.sweep_pending = true;
        }
    }
    if !due.is_empty() {
        sweep(repo, due, &census.sizes, opts.progress, report)?;
    }
    prune(repo, census.now, report)?;
    Ok(())
}

/// Before step 2: what killed processes left (abandoned uploads, staging files).
fn clean_leftovers(repo: &Repository, report: &mut GcReport) -> Result<()> {
    repo.clean_abandoned()?;
    let (files, bytes) = repo.clean_staging()?;
    if files > 0 {
        report.notes.push(format!(
            "removed {files} staging file(s) ({bytes} bytes) left by killed processes"
        ));
    }
    Ok(())
}

/// Step 2, after the purge: the summaries, listings and profiles of versions that are
/// gone (`summary::orphans`).
fn remove_orphans(
    repo: &Repository,
    dry_run: bool,
    grace: Duration,
    report: &mut GcReport,
) -> Result<()> {
    let orphans = sealvol_core::summary::orphans(repo, grace)?;
    if orphans.is_empty() {
        return Ok(());
    }
    if !dry_run {
        for key in &orphans {
            repo.object_store().delete(key)?;
        }
    }
    report.notes.push(format!(
        "{} {} summary, listing and profile object(s) of versions that are gone",
        if dry_run { "would remove" } else { "removed" },
        orphans.len()
    ));
    Ok(())
}

/// What step 3 found: the objects listed before the mark, what the mark reached, what
/// earlier rounds still hold, and the store's time, against which ages are taken.
struct Census {
    packs: Vec<Listed>,
    files: Vec<Listed>,
    marked: mark::Marked,
    /// Packs and chunk lists in rounds not yet swept: theirs to delete or rescue.
    pending_packs: HashSet<PackId>,
    pending_files: HashSet<Hash>,
    sizes: HashMap<PackId, u64>,
    now: SystemTime,
    grace: Duration,
}

/// What a run condemns: packs and chunk lists no version references.
struct Condemned {
    packs: Vec<PackId>,
    files: Vec<Hash>,
}

impl Census {
    fn take(
        repo: &Repository,
        skip: &HashSet<(VolumeName, Digest)>,
        earlier: &[Stored],
        grace: Duration,
        progress: &dyn Progress,
        report: &mut GcReport,
    ) -> Result<Census> {
        let packs = repo.list(Kind::Pack)?;
        let files = repo.list(Kind::File)?;
        report.packs_before = packs.len();
        report.pack_bytes_before = packs.iter().map(|p| p.size).sum();
        report.files_before = files.len();
        let marked = mark::mark(repo, skip, progress)?;
        report.versions = marked.versions;
        if marked.missing_files > 0 {
            report.notes.push(format!(
                "{} chunk list(s) that versions name are missing; `sealvol volume verify` says which versions",
                marked.missing_files
            ));
        }
        let unswept = || {
            earlier
                .iter()
                .filter(|s| s.round.state != RoundState::Swept)
        };
        Ok(Census {
            pending_packs: unswept().flat_map(|s| s.round.pack_ids()).collect(),
            pending_files: unswept().flat_map(|s| s.round.file_ids()).collect(),
            sizes: packs.iter().filter_map(|l| Some((l.id?, l.size))).collect(),
            now: repo.object_store().now()?,
            packs,
            files,
            marked,
            grace,
        })
    }

    /// Older than the grace period, by the store's clock.
    fn old(&self, modified: Option<SystemTime>) -> bool {
        modified.is_some_and(|m| {
            self.now
                .duration_since(m)
                .is_ok_and(|age| age >= self.grace)
        })
    }

    fn size(&self, id: &PackId) -> u64 {
        self.sizes.get(id).copied().unwrap_or(0)
    }

    /// What no version references and no earlier round holds: old enough, condemned;
    /// younger, counted and left for a later run.
    fn unreferenced(&self, report: &mut GcReport) -> Condemned {
        let mut out = Condemned {
            packs: Vec::new(),
            files: Vec::new(),
        };
        for l in &self.packs {
            let Some(id) = l.id.filter(|id| l.name == Kind::Pack.name(id)) else {
                continue;
            };
            if self.marked.live.contains_key(&id) || self.pending_packs.contains(&id) {
                continue;
            }
            match self.old(l.modified) {
                true => out.packs.push(id),
                false => report.young_packs += 1,
            }
        }
        for l in &self.files {
            let Some(h) = l.id.filter(|h| l.name == Kind::File.name(h)) else {
                continue;
            };
            if self.marked.files.contains(&h) || self.pending_files.contains(&h) {
                continue;
            }
            match self.old(l.modified) {
                true => out.files.push(h),
                false => report.young_files += 1,
            }
        }
        out
    }

    /// Counts what a run condemns, and its bytes.
    fn tally(&self, condemned: &Condemned, report: &mut GcReport) {
        report.condemned_packs = condemned.packs.len();
        report.condemned_files = condemned.files.len();
        report.condemned_bytes = condemned.packs.iter().map(|id| self.size(id)).sum::<u64>()
            + self
                .files
                .iter()
                .filter(|l| l.id.is_some_and(|h| condemned.files.contains(&h)))
                .map(|l| l.size)
                .sum::<u64>();
    }
}

/// Step 4: rewrites packs whose live chunks are less than `REPACK_BELOW` of their
/// bytes (a dry run only counts them); returns the packs rewritten, now unreferenced.
fn repack_mostly_dead(
    repo: &Repository,
    opts: &GcOptions,
    census: &Census,
    report: &mut GcReport,
) -> Result<Vec<PackId>> {
    let candidates = repack::candidates(
        repo,
        &census.marked,
        &census.packs,
        &census.pending_packs,
        &|m| census.old(m),
    )?;
    report.repacked_bytes = candidates.iter().map(|id| census.size(id)).sum();
    if opts.dry_run {
        report.repacked = candidates.len();
        report.repack_new_bytes = candidates
            .iter()
            .map(|id| census.marked.live_bytes(id))
            .sum();
        return Ok(Vec::new());
    }
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let done = repack::repack(repo, &census.marked, &candidates, opts.progress)?;
    report.repacked = done.rewritten.len();
    report.repacked_bytes = done.rewritten.iter().map(|id| census.size(id)).sum();
    report.repack_new_packs = done.new_packs;
    report.repack_new_bytes = done.new_bytes;
    report.relinked_files = done.relinked;
    if done.kept > 0 {
        report.notes.push(format!(
            "{} pack(s) were not rewritten: a chunk in them fails its hash (`sealvol volume verify` names it)",
            done.kept
        ));
    }
    Ok(done.rewritten)
}

/// Step 2: purges what is past its window (a dry run only says which), and returns the
/// versions a dry run's mark must leave out as if they were purged.
fn purge_expired(
    repo: &Repository,
    dry_run: bool,
    report: &mut GcReport,
) -> Result<HashSet<(VolumeName, Digest)>> {
    let now = sealvol_core::stamp::now();
    let retention = repo.config().retention;
    let mut skip = HashSet::new();
    for (vol, d) in repo.all_trashed()? {
        let item = PurgedVersion {
            volume: vol.to_string(),
            digest: d.to_string(),
        };
        // A damaged record cannot say when its version was deleted: the version stays
        // (it is marked like any other), and the rest of the trash is purged as due.
        let damaged =
            |e: &sealvol_core::error::Error| e.kind() == sealvol_core::error::ErrorKind::Corrupt;
        let record = match repo.in_trash(&vol, &d) {
            Err(e) if damaged(&e) => {
                report.notes.push(format!(
                    "{}; vol:{vol}@{} stays in the trash, kept whole, until `sealvol repair` writes its record anew",
                    e.message(),
                    d.short(16)
                ));
                report.in_trash += 1;
                continue;
            }
            r => r?,
        };
        let outcome = match dry_run {
            false => repo.purge(&vol, &d, now)?,
            true => match record {
                None => Purge::NotInTrash,
                Some(r) if r.expires(retention).is_none_or(|end| now < end) => Purge::TooEarly,
                Some(_) if repo.tags(&vol)?.iter().any(|t| t.digest == d.to_string()) => {
                    Purge::Tagged
                }
                Some(_) => {
                    skip.insert((vol, d));
                    Purge::Purged
                }
            },
        };
        match outcome {
            Purge::Purged => report.purged.push(item),
            Purge::Tagged => report.kept_tagged.push(item),
            Purge::TooEarly => report.in_trash += 1,
            Purge::NotInTrash => {}
        }
    }
    Ok(skip)
}

/// Step 6: the grace period, as a countdown.
fn wait(grace: Duration, progress: &dyn Progress, lease: Option<&lease::Lease>) -> Result<()> {
    let secs = grace.as_secs_f64();
    progress.begin("wait", (secs * 1000.0) as u64, 0);
    let start = Instant::now();
    let mut shown = 0u64;
    while start.elapsed() < grace {
        stop_if_lost(lease)?;
        std::thread::sleep(Duration::from_millis(100).min(grace.saturating_sub(start.elapsed())));
        let ms = (start.elapsed().as_millis() as u64).min((secs * 1000.0) as u64);
        progress.advance(ms - shown);
        shown = ms;
    }
    progress.finish();
    Ok(())
}

/// Step 6: every due round goes to sweeping (after which no writer can rescue from
/// it), then one mark decides, then what it does not reference is deleted.
fn sweep(
    repo: &Repository,
    due: Vec<Stored>,
    sizes: &HashMap<PackId, u64>,
    progress: &dyn Progress,
    report: &mut GcReport,
) -> Result<()> {
    let mut sweeping = Vec::new();
    for mut s in due {
        loop {
            if s.round.state == RoundState::Swept {
                break;
            }
            let mut r = s.round.clone();
            r.state = RoundState::Sweeping;
            r.sweep_started = Some(sealvol_core::stamp::rfc3339(repo.object_store().now()?));
            match rounds::write(repo, &s.key, &r, Some(&s.etag)) {
                Ok(()) => {
                    sweeping.push((s.key.clone(), r));
                    break;
                }
                // A writer rescued something meanwhile: read it again.
                Err(e) if e.kind() == ErrorKind::Race => match rounds::read(repo, &s.key)? {
                    Some(again) => s = again,
                    None => break,
                },
                Err(e) => return Err(e),
            }
        }
    }
    if sweeping.is_empty() {
        return Ok(());
    }
    let marked = mark::mark(repo, &HashSet::new(), progress)?;
    let total: u64 = sweeping
        .iter()
        .map(|(_, r)| (r.packs.len() + r.files.len()) as u64)
        .sum();
    progress.begin("sweep", 0, total);
    // Chunk lists of every round first, then packs: a sweep killed in between leaves
    // unreferenced packs, never a chunk list naming a pack that is gone.
    let mut freed: Vec<(u64, u64, u64)> = vec![(0, 0, 0); sweeping.len()];
    for ((_, r), (_, files, bytes)) in sweeping.iter().zip(freed.iter_mut()) {
        for h in r.file_ids().collect::<Vec<_>>() {
            progress.file_done();
            if marked.files.contains(&h) {
                continue;
            }
            let size = repo.object_store().size(&Kind::File.name(&h))?.unwrap_or(0);
            repo.delete_object(Kind::File, &h)?;
            *files += 1;
            *bytes += size;
        }
    }
    for ((_, r), (packs, _, bytes)) in sweeping.iter().zip(freed.iter_mut()) {
        for id in r.pack_ids().collect::<Vec<_>>() {
            progress.file_done();
            if marked.live.contains_key(&id) {
                continue;
            }
            // Index first: a pack left without one (a crash here) is still a pack,
            // condemned in this round; an index without its pack would be damage.
            repo.delete_object(Kind::Index, &id)?;
            repo.delete_object(Kind::Pack, &id)?;
            // A writer may have re-indexed the pack between the two deletes.
            repo.delete_object(Kind::Index, &id)?;
            repo.clear_pack_damage(&id)?;
            *packs += 1;
            *bytes += sizes.get(&id).copied().unwrap_or(0);
        }
    }
    repo.barrier()?;
    for ((key, mut r), (packs, files, bytes)) in sweeping.into_iter().zip(freed) {
        report.rounds_swept += 1;
        report.deleted_packs += packs;
        report.deleted_files += files;
        report.bytes_freed += bytes;
        report.rescued += r.rescued;
        r.state = RoundState::Swept;
        r.swept_at = Some(sealvol_core::stamp::rfc3339(repo.object_store().now()?));
        r.deleted_packs = packs;
        r.deleted_files = files;
        r.bytes_freed = bytes;
        // No writer changes a sweeping round, so this cannot race.
        let etag = repo.object_store().get_versioned(&key)?.map(|(_, e)| e);
        rounds::write(repo, &key, &r, etag.as_ref())?;
    }
    progress.finish();
    Ok(())
}

/// Removes indexes left behind for swept packs, swept rounds older than `KEEP_SWEPT`,
/// and quarantine folders older than the retention window.
fn prune(repo: &Repository, now: SystemTime, report: &mut GcReport) -> Result<()> {
    let all = rounds::list(repo)?;
    // An index a push re-wrote for a pack while the sweep removed it.
    let collected: HashSet<PackId> = all
        .iter()
        .filter(|s| s.round.state == RoundState::Swept)
        .flat_map(|s| s.round.pack_ids().collect::<Vec<_>>())
        .collect();
    if !collected.is_empty() {
        let present: HashSet<PackId> = repo
            .list(Kind::Pack)?
            .into_iter()
            .filter_map(|l| l.id)
            .collect();
        for l in repo.list(Kind::Index)? {
            if let Some(id) =
                l.id.filter(|id| collected.contains(id) && !present.contains(id))
            {
                repo.delete_object(Kind::Index, &id)?;
            }
        }
    }
    for s in all {
        let swept = s
            .round
            .swept_at
            .as_deref()
            .and_then(sealvol_core::stamp::parse_rfc3339);
        if s.round.state == RoundState::Swept
            && swept.is_some_and(|t| t + rounds::KEEP_SWEPT <= now)
        {
            repo.object_store().delete(&s.key)?;
        }
    }
    let removed = repo.prune_quarantine(now - repo.config().retention)?;
    if removed > 0 {
        report.notes.push(format!(
            "removed {removed} object(s) kept in quarantine/ longer than the retention window"
        ));
    }
    Ok(())
}

fn stop_if_lost(lease: Option<&lease::Lease>) -> Result<()> {
    match lease.is_some_and(|l| l.lost()) {
        true => Err(sealvol_core::error::Error::new(
            ErrorKind::Race,
            "another garbage collection took over this one's lease (it stopped renewing in time)",
        )
        .hint("what was done so far is safe; the other collection carries on")),
        false => Ok(()),
    }
}

/// A round a run sweeps without waiting: condemned at least the grace period ago, or
/// left sweeping by a collection that was killed.
fn is_due(s: &Stored, now: SystemTime, grace: Duration) -> bool {
    match s.round.state {
        RoundState::Condemned => s.round.condemned_time().is_some_and(|t| t + grace <= now),
        RoundState::Sweeping => true,
        RoundState::Swept => false,
    }
}

fn due_note(earlier: &[Stored], now: SystemTime, grace: Duration) -> Option<String> {
    let due = earlier.iter().filter(|s| is_due(s, now, grace)).count();
    (due > 0).then(|| format!("{due} earlier round(s) are due to be swept: a run would sweep them"))
}
