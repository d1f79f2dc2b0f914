//! The one check before `sealvol.repo` is written anew: the default chunker must cut a
//! stored file exactly where its chunk list does.

use crate::chunk::{ChunkParams, Cutter};
use crate::error::{Error, Result};
use crate::read::{Chunks, Origin};
use crate::repo::Repository;
use crate::verify::Survey;

/// Refuses to rewrite `sealvol.repo` with the default chunker unless it cuts a stored
/// file exactly where its chunk list does (a repository made with other settings would
/// stop deduplicating, silently).
pub(super) fn check_default(repo: &Repository, s: &Survey) -> Result<()> {
    let params = ChunkParams::DEFAULT;
    let sample = s
        .files
        .values()
        .filter_map(|f| f.as_ref().ok())
        .filter(|o| o.chunks.len() >= 2 && o.size <= 64 << 20)
        .filter(|o| {
            o.chunks
                .iter()
                .all(|c| s.copy_ok(&o.packs[c.pack as usize], &c.entry))
        })
        .max_by_key(|o| o.chunks.len());
    let Some(obj) = sample else { return Ok(()) };
    let mut data = Vec::with_capacity(obj.size as usize);
    Origin(repo).for_each(obj, 0..obj.chunks.len(), &mut |c| {
        data.extend_from_slice(c);
        Ok(())
    })?;
    let mut lens = Vec::new();
    Cutter::new(params).cut(&data, true, &mut lens);
    let stored: Vec<u32> = obj.chunks.iter().map(|c| c.entry.raw_len).collect();
    if lens != stored {
        return Err(Error::corrupt(
            "sealvol.repo is damaged, and the stored files were not cut with the default chunker settings",
        )
        .hint("restore sealvol.repo from a backup or a mirror of this repository; repair cannot guess its settings"));
    }
    Ok(())
}
