//! The origin repository alone, with no cache: what verify and diff read, because they
//! judge what the repository holds and not what a cache remembers.

use std::ops::Range;

use super::chunks::Chunks;
use super::runs::plan_runs;
use super::runs::{Upstream, read_runs};
use super::shared::max_run;
use super::stats::Counters;
use crate::chunk_bytes::ChunkBytes;
use crate::error::{ErrorKind, Result};
use crate::objects::FileObject;
use crate::proof::{Outboard, TreeHasher};
use crate::recycled::{self};
use crate::repo::Repository;

/// The origin repository alone, with no cache: what verify and diff read.
pub struct Origin<'a>(pub &'a Repository);

impl Chunks for Origin<'_> {
    fn fetch_unproven(&self, obj: &FileObject, range: Range<usize>) -> Result<Vec<ChunkBytes>> {
        let mut out = vec![None; range.len()];
        let misses: Vec<usize> = range.clone().collect();
        let up = Upstream {
            origin: self.0,
            origin_backoff: None,
            peers: &[],
            mirrors: &[],
            by_blocks: &|_| false,
        };
        read_runs(
            &up,
            obj,
            &misses,
            range.start,
            &mut out,
            &Counters::default(),
            &mut |_| {},
        )?;
        Ok(out.into_iter().flatten().collect())
    }
}

impl Origin<'_> {
    /// `prove_by_reading`, hashing each byte once: the runs the list names are read
    /// and hashed into the file's tree without each chunk being hashed on its own first.
    /// The file's hash decides. When it disagrees, or a run cannot be read whole, the
    /// list is read again with every chunk checked (`prove_by_reading`), so that a
    /// damaged copy is recorded and told apart from a list that names other bytes.
    ///
    /// For a server writing the list a client sent: the chunks' own names were checked
    /// when their packs came in, and what the list promises (these bytes, at these
    /// places, are the file) is what the file's hash proves. A chunk stored otherwise
    /// than as its bytes is read the checked way.
    pub fn prove_by_reading_once(&self, obj: &FileObject) -> Result<Outboard> {
        if obj
            .chunks
            .iter()
            .any(|c| c.entry.flags != crate::objects::FLAG_RAW)
        {
            return self.prove_by_reading(obj);
        }
        let all: Vec<usize> = (0..obj.chunks.len()).collect();
        let mut hasher = TreeHasher::default();
        let mut read = || -> Result<()> {
            for (k, _, start, end) in plan_runs(obj, &all, max_run(self.0), false) {
                let pack = obj.packs[obj.chunks[k].pack as usize];
                let mut buf = recycled::take((end - start) as usize);
                self.0
                    .file_range_into(&obj.hash, &pack, start, buf.as_mut_vec())?;
                hasher.update(&buf);
            }
            Ok(())
        };
        match read() {
            Ok(()) => {
                let (hash, ob) = hasher.finalize();
                if hash == obj.hash {
                    return Ok(ob);
                }
            }
            // A pack gone or cut short: the checked read says which chunk, and tries
            // other copies.
            Err(e) if e.kind() == ErrorKind::Corrupt || e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        self.prove_by_reading(obj)
    }
}
