//! Pack writing, off the pipeline's critical path: the pack writer thread appends new
//! chunks to a staging file and its trailer; publisher threads publish finished packs
//! (the pack, fsynced, then its index), so fsync and upload latency overlap with the
//! rest of the push.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender};

use super::buffers::BufferPool;
use crate::chunk_index::{ChunkIndex, ChunkLoc};
use crate::digest::Hash;
use crate::error::{Error, ErrorKind, IoContext, Result};
use crate::objects::{self, FLAG_RAW, PackEntry, PackId};
use crate::repo::Repository;
use crate::store::Staged;

/// What the pack writer thread is asked to do, in order.
pub(super) enum PackOp {
    /// Start a new staging file.
    Open(PathBuf),
    /// Append these byte ranges of a block to the open pack.
    Write(Arc<Vec<u8>>, Vec<(u32, u32)>),
    /// Append the trailer and hand the pack to the publisher.
    Close(PackId, Vec<PackEntry>),
}

/// Bookkeeping for the pack being filled: which slot and offset each new chunk gets.
struct OpenPack {
    slot: u32,
    offset: u64,
    entries: Vec<PackEntry>,
}

pub(super) struct Packer {
    current: Option<OpenPack>,
    target: u64,
    ops: Sender<PackOp>,
    /// Ranges of the current block waiting to be written to the current pack.
    ranges: Vec<(u32, u32)>,
}

impl Packer {
    pub(super) fn new(target: u64, ops: Sender<PackOp>) -> Packer {
        Packer {
            current: None,
            target,
            ops,
            ranges: Vec::new(),
        }
    }

    fn send(&self, op: PackOp) -> Result<()> {
        self.ops
            .send(op)
            .map_err(|_| Error::new(ErrorKind::Io, "pack writer stopped"))
    }

    /// Gives a new chunk its place in the current pack (opening one if needed).
    pub(super) fn place(
        &mut self,
        repo: &Repository,
        index: &mut ChunkIndex,
        hash: Hash,
        data: &Arc<Vec<u8>>,
        off: u32,
        len: u32,
    ) -> Result<ChunkLoc> {
        if self.current.is_none() {
            self.send(PackOp::Open(repo.staging_path()?))?;
            // The slot's id is filled in when the pack is closed.
            index.packs.push(Hash([0; 32]));
            self.current = Some(OpenPack {
                slot: index.packs.len() as u32 - 1,
                offset: objects::PACK_MAGIC.len() as u64,
                entries: Vec::new(),
            });
        }
        let Some(p) = self.current.as_mut() else {
            unreachable!("a pack was just opened");
        };
        let entry = PackEntry {
            hash,
            offset: p.offset,
            stored_len: len,
            raw_len: len,
            flags: FLAG_RAW,
        };
        p.offset += len as u64;
        p.entries.push(entry);
        let loc = ChunkLoc {
            slot: p.slot,
            entry,
        };
        self.ranges.push((off, len));
        if p.offset >= self.target {
            self.flush(data)?;
            self.close(index)?;
        }
        Ok(loc)
    }

    /// Sends the current block's pending ranges to the pack writer.
    pub(super) fn flush(&mut self, data: &Arc<Vec<u8>>) -> Result<()> {
        if self.ranges.is_empty() {
            return Ok(());
        }
        let ranges = std::mem::take(&mut self.ranges);
        self.send(PackOp::Write(Arc::clone(data), ranges))
    }

    pub(super) fn close(&mut self, index: &mut ChunkIndex) -> Result<()> {
        let Some(p) = self.current.take() else {
            return Ok(());
        };
        let id = objects::pack_id(&p.entries);
        index.packs[p.slot as usize] = id;
        let trailer = (p.entries.len() * objects::ENTRY_LEN + objects::FOOTER_LEN) as u64;
        index.add_new_pack(id, p.offset + trailer);
        self.send(PackOp::Close(id, p.entries))
    }
}

/// The pack writer thread: performs `PackOp`s in order. After a failure it keeps
/// draining (returning buffers to the pool) and reports the first error at the end.
pub(super) fn write_packs(
    rx: Receiver<PackOp>,
    publish: Sender<FinishedPack>,
    pool: &BufferPool,
) -> Result<()> {
    // Dropped on the way out: a pack still open when the push fails is removed.
    let mut current: Option<(Staged, File)> = None;
    let mut first_error: Option<Error> = None;
    for op in rx {
        if first_error.is_some() {
            if let PackOp::Write(data, _) = op {
                pool.give_back_shared(data);
            }
            continue;
        }
        if let Err(e) = apply_pack_op(op, &mut current, &publish, pool) {
            first_error = Some(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

fn apply_pack_op(
    op: PackOp,
    current: &mut Option<(Staged, File)>,
    publish: &Sender<FinishedPack>,
    pool: &BufferPool,
) -> Result<()> {
    match op {
        PackOp::Open(path) => {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .ctx("cannot create", &path)?;
            let path = Staged::new(path);
            f.write_all(objects::PACK_MAGIC)
                .ctx("cannot write", path.path())?;
            *current = Some((path, f));
        }
        PackOp::Write(data, ranges) => {
            let result = match current.as_mut() {
                Some((path, f)) => ranges.iter().try_for_each(|&(off, len)| {
                    f.write_all(&data[off as usize..(off + len) as usize])
                        .ctx("cannot write", path.path())
                }),
                None => Err(Error::new(ErrorKind::Io, "pack write before open")),
            };
            pool.give_back_shared(data);
            result?;
        }
        PackOp::Close(id, entries) => {
            let Some((path, mut f)) = current.take() else {
                return Err(Error::new(ErrorKind::Io, "pack close before open"));
            };
            f.write_all(&objects::encode_trailer(&entries))
                .ctx("cannot write", path.path())?;
            drop(f);
            publish
                .send(FinishedPack { path, id, entries })
                .map_err(|_| Error::new(ErrorKind::Io, "pack publisher stopped"))?;
        }
    }
    Ok(())
}

pub(super) struct FinishedPack {
    /// Removed when dropped: published, or not (a failed push leaves none behind).
    path: Staged,
    id: PackId,
    entries: Vec<PackEntry>,
}

/// Publishes finished packs: each pack, then its index. Runs apart so that fsync
/// latency overlaps with the rest of the push; on a store that takes several requests
/// at once (`Repository::concurrency`), that many packs go up together. Order
/// between packs does not matter: no chunk list names them until all are published.
pub(super) fn publish_packs(repo: &Repository, rx: Receiver<FinishedPack>) -> Result<()> {
    let failed = std::sync::Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..repo.concurrency() {
            let (rx, failed) = (rx.clone(), &failed);
            s.spawn(move || {
                for p in rx {
                    let mut first = failed.lock().unwrap_or_else(|e| e.into_inner());
                    if first.is_some() {
                        continue;
                    }
                    drop(first);
                    if let Err(e) = repo.publish_pack(&p.id, p.path.path(), &p.entries) {
                        first = failed.lock().unwrap_or_else(|e| e.into_inner());
                        first.get_or_insert(e);
                    }
                }
            });
        }
    });
    failed
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .map_or(Ok(()), Err)
}
