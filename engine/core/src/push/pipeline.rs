//! The push pipeline: files in, chunks placed in packs, chunk lists stored.
//!
//! One thread reads each file in large blocks and cuts chunks; a pool hashes them; the
//! calling thread takes hashed blocks in file order, feeds each file's whole-content
//! hash, reuses chunks the repository holds and hands new ones to the pack writer.
//! Bounded queues and the buffer pool bound memory whatever the input.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, bounded};

use super::buffers::BufferPool;
use super::inputs::Inputs;
use super::packs::{FinishedPack, PackOp, Packer, publish_packs, write_packs};
use super::stored::ASK_AT_ONCE;
use crate::chunk::{Block, BlockReader, ChunkParams};
use crate::chunk_index::{ChunkIndex, ChunkLoc, HashedFile};
use crate::digest::Hash;
use crate::error::{Error, ErrorKind, Result};
use crate::owner::Owner;
use crate::possession::{Challenge, Proof};
use crate::progress::Progress;
use crate::proof::TreeHasher;
use crate::remote::Held;
use crate::repo::Repository;

/// What one run of the pipeline read and stored.
pub(super) struct Outcome {
    /// By listing index.
    pub files: HashMap<usize, HashedFile>,
    pub bytes_read: u64,
    pub new_bytes: u64,
    pub new_chunks: u64,
    pub chunks_reused: u64,
    /// Stored chunk lists that named damaged copies and were replaced.
    pub files_healed: u64,
}

/// A block on its way through the pipeline, tagged with its place in the sequence.
struct Work {
    seq: u64,
    file: usize,
    block: Result<Block>,
}

struct Hashed {
    seq: u64,
    file: usize,
    block: Result<Block>,
    hashes: Vec<Hash>,
    /// Through a server: which of `hashes` it holds already, and how this push names
    /// them.
    on_server: Vec<OnServer>,
}

/// Reads `files` (listing index, size) through `inputs` into packs and stores their
/// chunk lists: when it returns, each file can be named by its hash in a manifest.
pub(super) fn run_pipeline(
    repo: &Repository,
    index: &mut ChunkIndex,
    files: &[(usize, u64)],
    inputs: &dyn Inputs,
    progress: &dyn Progress,
) -> Result<Outcome> {
    let params = repo.config().chunker.params;
    let pack_target = repo.config().pack_target;
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 8);
    // Small queues bound memory: each item holds up to one BLOCK of file data.
    let (work_tx, work_rx) = bounded::<Work>(1);
    let (done_tx, done_rx) = bounded::<Hashed>(2);
    let (ops_tx, ops_rx) = bounded::<PackOp>(4);
    let (pub_tx, pub_rx) = bounded::<FinishedPack>(1);
    // Blocks in flight: one being read, queued ones, one per hasher, the writer's
    // reorder window, the pack writer's queue. The pool holds at most this many
    // buffers, which bounds memory whatever the input.
    let pool = BufferPool::new(workers + 10);

    let owner = repo.owner();
    std::thread::scope(|s| {
        let pool = &pool;
        let owner: &dyn Owner = &*owner;
        s.spawn(move || read_files(files, inputs, params, pool, work_tx));
        for _ in 0..workers {
            let rx = work_rx.clone();
            let tx = done_tx.clone();
            s.spawn(move || hash_blocks(rx, tx, owner));
        }
        drop(work_rx);
        drop(done_tx);
        let pack_writer = s.spawn(move || write_packs(ops_rx, pub_tx, pool));
        let publisher = s.spawn(move || publish_packs(repo, pub_rx));

        let result = write_in_order(repo, index, done_rx, pack_target, ops_tx, pool, progress);
        pool.close();
        // Both threads end once their input channel's sender is dropped (inside
        // write_in_order), after finishing what they were given.
        let written = pack_writer
            .join()
            .unwrap_or_else(|_| Err(Error::new(ErrorKind::Io, "pack writer panicked")));
        let published = publisher
            .join()
            .unwrap_or_else(|_| Err(Error::new(ErrorKind::Io, "pack publisher panicked")));
        let outcome = result?;
        written?;
        published?;
        Ok(outcome)
    })
    .and_then(|mut outcome| {
        outcome.files_healed = owner.store_lists(index, outcome.files.values().collect())?;
        Ok(outcome)
    })
}

fn read_files(
    files: &[(usize, u64)],
    inputs: &dyn Inputs,
    params: ChunkParams,
    pool: &BufferPool,
    tx: Sender<Work>,
) {
    let mut seq = 0u64;
    for &(file, _size) in files {
        let mut send = |block: Result<Block>| {
            let failed = block.is_err();
            let ok = tx.send(Work { seq, file, block }).is_ok();
            seq += 1;
            ok && !failed
        };
        let r = match inputs.open(file) {
            Ok(r) => r,
            Err(e) => {
                send(Err(e));
                return;
            }
        };
        let mut reader = BlockReader::new(r, params);
        let mut total = 0u64;
        loop {
            let block = match reader.next_block(pool.take(reader.buffer_capacity())) {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    send(Err(Error::new(
                        ErrorKind::Io,
                        format!("cannot read {}: {e}", inputs.name(file)),
                    )));
                    return;
                }
            };
            total += block.data.len() as u64;
            let last = block.last;
            // Before the last block leaves, the input confirms it is complete and
            // unchanged.
            let block = if last {
                inputs.finished(file, total).map(|()| block)
            } else {
                Ok(block)
            };
            if !send(block) || last {
                break;
            }
        }
    }
}

/// Blocks that queue up are asked about together, up to this many bytes of them: a
/// folder of tiny files is a block per file, and one question each cost a round trip
/// per file through a server. Large blocks still go one per question, side by side with
/// the other workers', so that a question never waits for much hashing.
const ASK_TOGETHER_BYTES: usize = 4 << 20;

/// Hashes each block's chunks; through a server, also asks it which of them it holds:
/// one question per block, or for the blocks queued behind it when they are small.
fn hash_blocks(rx: Receiver<Work>, tx: Sender<Hashed>, owner: &dyn Owner) {
    let asks = owner.asks_held();
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        if asks {
            let mut bytes = block_bytes(&batch[0]);
            while bytes < ASK_TOGETHER_BYTES && batch.len() < ASK_AT_ONCE / 64 {
                match rx.try_recv() {
                    Ok(w) => {
                        bytes += block_bytes(&w);
                        batch.push(w);
                    }
                    Err(_) => break,
                }
            }
        }
        let hashes: Vec<Vec<Hash>> = batch.iter().map(chunk_hashes).collect();
        let mut on_server: Vec<Vec<OnServer>> = vec![Vec::new(); batch.len()];
        if asks {
            let asked: Vec<Hash> = batch
                .iter()
                .zip(&hashes)
                .filter(|(w, _)| w.block.is_ok())
                .flat_map(|(_, h)| h.iter().copied())
                .collect();
            let answer = match asked.is_empty() {
                true => Ok(None),
                false => owner
                    .held(&asked)
                    .and_then(|have| match have.held.len() == asked.len() {
                        true => Ok(Some(have)),
                        false => Err(Error::new(
                            ErrorKind::Io,
                            "the server answered for another number of chunks than it was asked",
                        )),
                    }),
            };
            match answer {
                Ok(None) => {}
                Ok(Some(have)) => {
                    let mut at = 0;
                    for ((w, h), mine) in batch.iter_mut().zip(&hashes).zip(&mut on_server) {
                        if let Ok(block) = &w.block {
                            match on_server_of(block, &have.held[at..at + h.len()], have.challenge)
                            {
                                Ok(held) => *mine = held,
                                Err(e) => w.block = Err(e),
                            }
                            at += h.len();
                        }
                    }
                }
                Err(e) => {
                    // Each block of the question fails with the server's reason.
                    for w in batch.iter_mut().filter(|w| w.block.is_ok()) {
                        let again = Error::new(e.kind(), e.message().to_string());
                        w.block = Err(match e.hint_text() {
                            Some(h) => again.hint(h.to_string()),
                            None => again,
                        });
                    }
                }
            }
        }
        for ((w, hashes), on_server) in batch.into_iter().zip(hashes).zip(on_server) {
            let msg = Hashed {
                seq: w.seq,
                file: w.file,
                block: w.block,
                hashes,
                on_server,
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    }
}

/// What a push knows of a chunk of a block through its server.
#[derive(Debug, Clone, Copy)]
enum OnServer {
    /// To be uploaded.
    No,
    /// Held, and the key reaches it.
    Yours,
    /// Held elsewhere: named with this proof that the push holds its bytes.
    Proven(Challenge, Proof),
}

/// The server's answer for a block's chunks, with a proof of possession made from the
/// block's own bytes for each chunk held where the key does not reach it (hashed only
/// for those, on the hashing threads).
fn on_server_of(
    block: &Block,
    held: &[Held],
    challenge: Option<Challenge>,
) -> Result<Vec<OnServer>> {
    let mut off = 0usize;
    let mut out = Vec::with_capacity(held.len());
    for (&len, &h) in block.lens.iter().zip(held) {
        let bytes = &block.data[off..off + len as usize];
        off += len as usize;
        out.push(match h {
            Held::No => OnServer::No,
            Held::Yours => OnServer::Yours,
            Held::Prove => {
                let c = challenge.ok_or_else(|| {
                    Error::new(
                        ErrorKind::Io,
                        "the server asked for a proof of possession and sent no challenge",
                    )
                })?;
                OnServer::Proven(c, c.prove(bytes))
            }
        });
    }
    Ok(out)
}

fn block_bytes(w: &Work) -> usize {
    w.block.as_ref().map_or(0, |b| b.data.len())
}

/// The hashes of a block's chunks, in order.
fn chunk_hashes(w: &Work) -> Vec<Hash> {
    let Ok(b) = &w.block else {
        return Vec::new();
    };
    let mut off = 0usize;
    b.lens
        .iter()
        .map(|&l| {
            let h = Hash::of(&b.data[off..off + l as usize]);
            off += l as usize;
            h
        })
        .collect()
}

/// Per file, while its blocks stream by.
struct OpenFile {
    /// The file's hash and its proof (block hashes) in one pass.
    hasher: TreeHasher,
    size: u64,
    chunks: Vec<ChunkLoc>,
}

/// Takes hashed blocks in file order: feeds each file's whole-content hash, decides
/// for every chunk whether the repository has it, and places new ones in packs. The
/// bytes themselves are written by the pack writer thread, which on small machines
/// spends more time in the kernel's page cache than this thread spends hashing.
fn write_in_order(
    repo: &Repository,
    index: &mut ChunkIndex,
    rx: Receiver<Hashed>,
    pack_target: u64,
    ops: Sender<PackOp>,
    pool: &BufferPool,
    progress: &dyn Progress,
) -> Result<Outcome> {
    let mut out = Outcome {
        files: HashMap::new(),
        bytes_read: 0,
        new_bytes: 0,
        new_chunks: 0,
        chunks_reused: 0,
        files_healed: 0,
    };
    let mut waiting: BTreeMap<u64, Hashed> = BTreeMap::new();
    let mut next = 0u64;
    let mut open: Option<(usize, OpenFile)> = None;
    let mut packer = Packer::new(pack_target, ops);
    for msg in rx {
        waiting.insert(msg.seq, msg);
        while let Some(m) = waiting.remove(&next) {
            next += 1;
            let block = m.block?;
            let last = block.last;
            let data = Arc::new(block.data);
            let (file_no, of) = open.get_or_insert_with(|| {
                (
                    m.file,
                    OpenFile {
                        hasher: TreeHasher::default(),
                        size: 0,
                        chunks: Vec::new(),
                    },
                )
            });
            debug_assert_eq!(*file_no, m.file);
            let mut off = 0u32;
            let (new_before, reused_before) = (out.new_chunks, out.chunks_reused);
            for (k, (&len, hash)) in block.lens.iter().zip(&m.hashes).enumerate() {
                match m.on_server.get(k).copied().unwrap_or(OnServer::No) {
                    OnServer::No => {}
                    OnServer::Yours => index.add_on_server(*hash, len, None),
                    OnServer::Proven(c, p) => index.add_on_server(*hash, len, Some((c, p))),
                }
                let loc = match index.chunks.get(hash) {
                    Some(loc) => {
                        out.chunks_reused += 1;
                        *loc
                    }
                    None => {
                        let loc = packer.place(repo, index, *hash, &data, off, len)?;
                        index.chunks.insert(*hash, loc);
                        out.new_chunks += 1;
                        out.new_bytes += len as u64;
                        loc
                    }
                };
                of.chunks.push(loc);
                off += len;
            }
            packer.flush(&data)?;
            // Hashing the whole file overlaps with the pack writer copying this block.
            of.hasher.update(&data);
            of.size += data.len() as u64;
            out.bytes_read += data.len() as u64;
            progress.chunks(
                out.new_chunks - new_before,
                out.chunks_reused - reused_before,
            );
            progress.advance(data.len() as u64);
            pool.give_back_shared(data);
            if last && let Some((file_no, of)) = open.take() {
                progress.file_done();
                let (hash, outboard) = of.hasher.finalize();
                out.files.insert(
                    file_no,
                    HashedFile {
                        hash,
                        size: of.size,
                        chunks: of.chunks,
                        outboard,
                    },
                );
            }
        }
    }
    if !waiting.is_empty() || open.is_some() {
        return Err(Error::new(
            ErrorKind::Io,
            "push pipeline stopped early (a reader thread failed)",
        ));
    }
    packer.close(index)?;
    Ok(out)
}
