//! Retention: which checkpoints a watch sealed stay live. `--keep-last N` keeps the N
//! newest, `--keep-every K` those whose step is a multiple of K, and the newest is
//! always kept. The rest go to the trash (restorable for the repository's retention
//! period), except a version some tag holds: the watch's own per-step tag
//! (`step-{step}`) is removed with it, any other tag (`prod`, `latest`) keeps it.
//! Only versions this watch sealed are ever considered.

use std::collections::HashSet;

use super::names::TagTemplate;
use super::{Layout, Watch};
use sealvol_core::error::{ErrorKind, Result};
use sealvol_core::refs::{Digest, Name, Ref, VolumeName};
use sealvol_core::repo::Repository;

/// The indexes into `watch.sealed` of the live checkpoints the rules let go.
pub fn doomed(watch: &Watch) -> Vec<usize> {
    let spec = &watch.spec;
    if spec.keep_last.is_none() && spec.keep_every.is_none() {
        return Vec::new();
    }
    let mut live: Vec<usize> = (0..watch.sealed.len())
        .filter(|&i| !watch.sealed[i].trashed)
        .collect();
    if spec.layout == Layout::Steps {
        live.sort_by_key(|&i| (watch.sealed[i].step, i));
    }
    let keep_last = spec.keep_last.map_or(1, |n| n.max(1)) as usize;
    let newest: HashSet<usize> = live.iter().rev().take(keep_last).copied().collect();
    let kept_digests: HashSet<&str> = live
        .iter()
        .filter(|i| newest.contains(i) || every(watch, **i))
        .map(|&i| watch.sealed[i].digest.as_str())
        .collect();
    live.into_iter()
        .filter(|i| !newest.contains(i) && !every(watch, *i))
        // Two checkpoints with the same files are one version: kept if either is.
        .filter(|&i| !kept_digests.contains(watch.sealed[i].digest.as_str()))
        .collect()
}

fn every(watch: &Watch, i: usize) -> bool {
    match (watch.spec.keep_every, watch.sealed[i].step) {
        (Some(k), Some(step)) => step % k == 0,
        _ => false,
    }
}

/// What retention did to one checkpoint.
pub enum Kept {
    /// Moved to the trash.
    Trashed,
    /// Left live: a tag other than the watch's own holds it.
    Held(String),
    /// Already gone from the live versions (someone deleted it).
    Gone,
}

/// Applies the rules to one checkpoint that `doomed` picked.
pub fn trash_one(
    repo: &Repository,
    volume: &VolumeName,
    templates: &[TagTemplate],
    step: Option<u64>,
    digest: &str,
) -> Result<Kept> {
    let own: HashSet<String> = templates
        .iter()
        .filter(|t| t.per_step())
        .filter_map(|t| t.expand(step).ok())
        .map(|t| t.to_string())
        .collect();
    let holding: Vec<_> = repo
        .tags(volume)?
        .into_iter()
        .filter(|t| t.digest == digest)
        .collect();
    if let Some(other) = holding.iter().find(|t| !own.contains(&t.tag)) {
        return Ok(Kept::Held(other.tag.clone()));
    }
    let r = Ref::pinned(volume.clone(), Digest::parse(digest)?);
    let d = match repo.resolve(&r) {
        Ok(d) => d,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Kept::Gone),
        Err(e) => return Err(e),
    };
    for t in &holding {
        let name = Name::parse("tag", &t.tag)?;
        match repo.remove_tag(volume, &name, Some(d)) {
            Ok(_) => {}
            // Moved or removed meanwhile: it no longer holds this version.
            Err(e) if matches!(e.kind(), ErrorKind::Race | ErrorKind::NotFound) => {}
            Err(e) => return Err(e),
        }
    }
    // Without --untag: a tag moved here meanwhile keeps the version live.
    match repo.delete_version(&r, false) {
        Ok(_) => Ok(Kept::Trashed),
        Err(e) if e.kind() == ErrorKind::Conflict => Ok(Kept::Held(e.to_string())),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Kept::Gone),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{SealedCheckpoint, WatchSpec, WatchState};
    use super::*;

    fn watch(steps: &[u64], keep_last: Option<u32>, keep_every: Option<u64>) -> Watch {
        Watch {
            id: 1,
            spec: WatchSpec {
                dir: "/run".into(),
                volume: "w/x".into(),
                tags: vec![],
                layout: Layout::Steps,
                settle_secs: 1.0,
                keep_last,
                keep_every,
                poll: false,
            },
            state: WatchState::Active,
            owner: None,
            created: String::new(),
            updated: String::new(),
            reason: None,
            sealed: steps
                .iter()
                .map(|s| SealedCheckpoint {
                    name: format!("checkpoint-{s}"),
                    step: Some(*s),
                    digest: format!("b3:{s}"),
                    sealed_at: String::new(),
                    trashed: false,
                })
                .collect(),
            pushes: vec![],
        }
    }

    fn steps(w: &Watch, idx: Vec<usize>) -> Vec<u64> {
        idx.into_iter().filter_map(|i| w.sealed[i].step).collect()
    }

    #[test]
    fn keep_last_and_keep_every_together() {
        let w = watch(&[500, 1000, 1500, 2000, 2500, 3000], Some(2), Some(1000));
        assert_eq!(steps(&w, doomed(&w)), vec![500, 1500]);
        let w = watch(&[500, 1000, 1500], Some(1), None);
        assert_eq!(steps(&w, doomed(&w)), vec![500, 1000]);
        let w = watch(&[500, 1000, 1500], None, Some(1000));
        assert_eq!(
            steps(&w, doomed(&w)),
            vec![500],
            "the newest is always kept"
        );
        let w = watch(&[500, 1000], None, None);
        assert!(doomed(&w).is_empty(), "no rule, nothing trashed");
    }

    #[test]
    fn by_step_not_by_sealing_order_and_never_twice() {
        let mut w = watch(&[1500, 500, 1000], Some(1), None);
        assert_eq!(steps(&w, doomed(&w)), vec![500, 1000]);
        w.sealed[1].trashed = true;
        assert_eq!(steps(&w, doomed(&w)), vec![1000]);
        // The same files sealed at two steps are one version: kept if either is.
        w.sealed[2].digest = w.sealed[0].digest.clone();
        assert!(doomed(&w).is_empty());
    }
}
