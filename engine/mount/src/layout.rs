//! A file's chunk list as a mount uses it: where each chunk starts, and one shared copy
//! per file however many handles (and read-ahead plans) use it.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, Weak};

use sealvol_core::digest::Hash;
use sealvol_core::error::{Error, Result};
use sealvol_core::objects::FileObject;
use sealvol_core::repo::Repository;
use sealvol_core::small::SmallFiles;

/// A file's chunk list with the end offset of every chunk, for finding a chunk by offset.
pub struct Layout {
    /// The file's content hash (what the manifest names it by).
    pub hash: Hash,
    pub obj: FileObject,
    ends: Vec<u64>,
}

impl Layout {
    pub fn new(hash: Hash, obj: FileObject) -> Layout {
        let mut end = 0;
        let ends = obj
            .chunks
            .iter()
            .map(|c| {
                end += c.entry.raw_len as u64;
                end
            })
            .collect();
        Layout { hash, obj, ends }
    }

    /// The chunk holding byte `off`, or the chunk count when `off` is at or past the end.
    pub fn chunk_at(&self, off: u64) -> usize {
        self.ends.partition_point(|&e| e <= off)
    }

    pub fn start_of(&self, i: usize) -> u64 {
        if i == 0 { 0 } else { self.ends[i - 1] }
    }

    /// The chunks that hold bytes `[start, end)`.
    pub fn chunks_of(&self, start: u64, end: u64) -> Range<usize> {
        if start >= end {
            let i = self.chunk_at(start);
            return i..i;
        }
        self.chunk_at(start)..self.chunk_at(end - 1) + 1
    }

    /// The chunks that hold the proof blocks bytes `[start, end)` lie in: what a plan
    /// reads ahead for a reader of those bytes, so that proving them before they are
    /// served needs nothing more (`proof/`).
    pub fn blocks_of(&self, start: u64, end: u64) -> Range<usize> {
        let log = self
            .obj
            .proof
            .outboard()
            .map_or(sealvol_core::proof::BLOCK_LOG, |o| o.log());
        let size = self.obj.size;
        let s = (start >> log) << log;
        let e = (end.div_ceil(1 << log) << log).min(size);
        self.chunks_of(s.min(start), e.max(end.min(size)))
    }

    /// Splits chunks `range` into pieces of at most `max` bytes that each lie in one
    /// pack, so that each piece is one range read and workers can share them.
    pub fn pieces(&self, range: Range<usize>, max: u64) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut start = range.start;
        while start < range.end {
            let limit = self.start_of(start) + max;
            let pack = self.obj.chunks[start].pack;
            let mut end = start + 1;
            while end < range.end
                && self.start_of(end + 1) <= limit
                && self.obj.chunks[end].pack == pack
            {
                end += 1;
            }
            out.push(start..end);
            start = end;
        }
        out
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// Chunk lists, loaded on first use and shared while anything holds them.
#[derive(Default)]
pub struct Layouts {
    loaded: Mutex<HashMap<Hash, Weak<Layout>>>,
    /// Where the version's small files are: they have no lists of their own.
    small: SmallFiles,
}

impl Layouts {
    pub fn new(small: SmallFiles) -> Layouts {
        Layouts {
            loaded: Mutex::default(),
            small,
        }
    }

    /// The chunk list of the file `hash`, which the manifest says has `size` bytes.
    pub fn get(&self, repo: &Repository, hash: &Hash, size: u64) -> Result<Arc<Layout>> {
        if let Some(l) = sealvol_core::lock(&self.loaded)
            .get(hash)
            .and_then(Weak::upgrade)
        {
            return Ok(l);
        }
        let obj = repo.file_list(hash, size, &self.small)?;
        if obj.size != size {
            return Err(Error::corrupt(format!(
                "chunk list {} has {} bytes, the manifest says {size}",
                hash.hex(),
                obj.size
            )));
        }
        let l = Arc::new(Layout::new(*hash, obj));
        let mut map = sealvol_core::lock(&self.loaded);
        map.retain(|_, w| w.strong_count() > 0);
        map.insert(*hash, Arc::downgrade(&l));
        Ok(l)
    }
}
