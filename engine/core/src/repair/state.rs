//! What a repair is asked (`RepairOptions`), what it answers (`RepairReport`), and
//! its working state step by step (`Repair`), which the steps in `mod.rs` and
//! `heal.rs` share.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use std::path::Path;

use serde::Serialize;

use crate::digest::Hash;
use crate::objects::{PackEntry, PackId};
use crate::progress::Progress;
use crate::refs::{Digest, VolumeName};
use crate::repo::Repository;
use crate::verify::{self, Problem, Survey};

impl RepairReport {
    pub(super) fn act(
        &mut self,
        action: &'static str,
        object: impl Into<String>,
        detail: impl Into<String>,
    ) {
        self.actions.push(Action {
            action,
            object: object.into(),
            detail: detail.into(),
        });
    }
}

pub struct RepairOptions<'a> {
    /// Show the plan; change nothing.
    pub dry_run: bool,
    /// Read and hash every pack first, as `verify --read-data` does.
    pub read_data: bool,
    /// A folder holding the files of versions that are missing data.
    pub from: Option<&'a Path>,
    pub progress: &'a dyn Progress,
}

/// One thing repair did (or, with `--dry-run`, would do).
#[derive(Debug, Clone, Serialize)]
pub struct Action {
    /// `rewrite config`, `clear record`, `salvage`, `write index`, `relink`,
    /// `quarantine`, `heal`, `restore tag`, `write summary`.
    pub action: &'static str,
    pub object: String,
    pub detail: String,
}

#[derive(Debug, Default, Serialize)]
pub struct RepairReport {
    pub dry_run: bool,
    pub actions: Vec<Action>,
    /// What is still wrong afterwards (after a dry run: what repair alone cannot fix).
    pub remaining: Vec<Problem>,
    pub remaining_versions: Vec<verify::Affected>,
    pub fix: Vec<verify::Fix>,
}

/// Repair's working state, step by step (the module comment gives the order).
pub(super) struct Repair<'a> {
    pub(super) repo: &'a Repository,
    pub(super) opts: &'a RepairOptions<'a>,
    pub(super) write: bool,
    pub(super) s: Survey,
    pub(super) report: RepairReport,
    pub(super) damaged_packs: BTreeSet<PackId>,
    /// A healthy copy of every chunk that has one (after salvage, the new ones).
    pub(super) good: HashMap<Hash, (PackId, PackEntry)>,
    /// Files with a chunk that has no healthy copy anywhere, or no readable list.
    pub(super) lost_files: BTreeSet<Hash>,
    /// Versions missing data; `true` for a whole version (its manifest is gone).
    pub(super) damaged_versions: BTreeMap<(VolumeName, Digest), bool>,
    pub(super) healed: HashSet<(VolumeName, Digest)>,
}
