//! The server's own upkeep: a garbage collection every so often (`serve --gc-every`),
//! off unless asked for. Each run is logged, and counted in `/metrics`
//! (`sealvol_serve_gc_*`). A run condemns what nothing references and sweeps what an
//! earlier run condemned once its grace period is over: it never waits that period out
//! itself (`GcOptions::wait` off), so a run takes as long as marking does, and the
//! interval is the grace between condemning and deleting at worst.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sealvol_core::ops::GcOptions;
use sealvol_core::progress::Quiet;
use sealvol_core::repo::Repository;

/// What the scheduled collections did, for `/metrics`.
#[derive(Default)]
pub struct GcStats {
    pub runs: AtomicU64,
    pub failures: AtomicU64,
    pub bytes_freed: AtomicU64,
    pub versions_purged: AtomicU64,
    /// Of the last run that finished: how long it took (ms) and when it ended (Unix s).
    pub last_millis: AtomicU64,
    pub last_end: AtomicU64,
}

/// Runs a collection every `every` until the task is dropped; the first one `every`
/// after the start, so that a restart loop does not collect over and over.
pub async fn gc_every(repo: Arc<Repository>, every: Duration, stats: Arc<GcStats>) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    // A run that took longer than the interval is not followed by a burst of others.
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let (repo, s) = (Arc::clone(&repo), Arc::clone(&stats));
        let ran = tokio::task::spawn_blocking(move || run_once(&repo, &s)).await;
        if ran.is_err() {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!("scheduled gc: the run panicked; the next one runs on time");
        }
    }
}

/// One scheduled collection, logged and counted.
pub fn run_once(repo: &Repository, stats: &GcStats) {
    let started = Instant::now();
    let report = repo.collect(
        &GcOptions {
            dry_run: false,
            wait: false,
            progress: &Quiet,
        },
        &sealvol_gc::Here,
    );
    let took = started.elapsed();
    stats.runs.fetch_add(1, Ordering::Relaxed);
    stats
        .last_millis
        .store(took.as_millis() as u64, Ordering::Relaxed);
    stats.last_end.store(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        Ordering::Relaxed,
    );
    match report {
        Ok(r) => {
            stats
                .bytes_freed
                .fetch_add(r.bytes_freed, Ordering::Relaxed);
            stats
                .versions_purged
                .fetch_add(r.purged.len() as u64, Ordering::Relaxed);
            tracing::info!(
                "scheduled gc: {} version(s) purged, {} pack(s) and {} chunk list(s) condemned, {} bytes freed, in {:.1} s",
                r.purged.len(),
                r.condemned_packs,
                r.condemned_files,
                r.bytes_freed,
                took.as_secs_f64()
            );
        }
        Err(e) => {
            stats.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("scheduled gc failed: {e}; the next one runs on time");
        }
    }
}
