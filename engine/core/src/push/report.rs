//! What a push reports when it is done.

use std::time::Duration;

use crate::outcomes::VersionStats;
use crate::refs::{Digest, VolumeName};

impl PushReport {
    pub fn pinned_ref(&self) -> String {
        format!("vol:{}@{}", self.volume, self.digest)
    }
}

#[derive(Debug, Clone)]
pub struct PushReport {
    pub volume: VolumeName,
    pub digest: Digest,
    /// False when an identical version was already sealed.
    pub sealed_new: bool,
    pub stats: VersionStats,
    pub bytes_read: u64,
    pub chunks_reused: u64,
    /// Stored files whose chunk lists named damaged copies, healed by this push.
    pub files_healed: u64,
    /// Files the stat cache let us skip without reading.
    pub files_unchanged: u64,
    pub elapsed: Duration,
    /// What happened to each tag the push moved.
    pub tags: Vec<crate::outcomes::TagChange>,
}
