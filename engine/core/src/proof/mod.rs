//! Proofs that bytes belong to a file. Only a version's digest is trusted: it names
//! the manifest, and the manifest names each file's BLAKE3 hash. A chunk list says
//! where the file's bytes lie, but it is a hint like any other object below the
//! digest, so no byte is handed on until it is proven to be the file's own.
//!
//! The proof is the file's own BLAKE3 tree, cut at `2^BLOCK_LOG` bytes (64 KiB):
//! a chunk list carries the chaining value of every block (its *outboard*, as Bao
//! calls it), and the outboard is accepted only if those values merge into the file's
//! hash, the one the manifest names. A block of bytes is then proven by hashing it as
//! the subtree it is in the tree and comparing with its value: one BLAKE3 pass, with
//! no need for the rest of the file. A file of one block needs no outboard: its bytes
//! hash to the file's hash itself. Today's digests and file hashes stay as they are:
//! this is the plain BLAKE3 of the file, seen in blocks (docs/SEMANTICS.md, "Nothing
//! below the digest is trusted", says why this form and not another).
//!
//! Chunks are cut by content, so a chunk's first and last block usually reach into
//! its neighbours; proving them needs those neighbours' bytes too (`prove`).

pub use crate::proof_tree::{BLOCK_LOG, Cv, Outboard, Proven, TreeHasher, is_unproven, unproven};

use crate::chunk_bytes::ChunkBytes;
use crate::error::{Error, Result};
use crate::objects::FileObject;

/// How the bytes a block reaches into beyond the chunks at hand are asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edge {
    /// As cheaply as the reader can: bytes of a chunk not held may come as a part of
    /// it, unchecked (the block's hash checks them).
    Cheap,
    /// Whole chunks, each checked against its hash: asked again when a block fails with
    /// cheap bytes, so that a damaged copy is not taken for a list that lies.
    Checked,
}

/// Bytes `[x, y)` of a file, as pieces in order: what `prove` asks of its caller for
/// the parts of blocks outside the chunks at hand.
pub type More<'a> = dyn FnMut(u64, u64, Edge) -> Result<Vec<ChunkBytes>> + 'a;

/// Proves bytes `[start, end)` of a file, whose chunks from `first` are `have` (chunk
/// hashes already checked): every block they overlap must hash to its value in the
/// outboard. The bytes a block reaches into beyond `have` come from `more`. Each block
/// is proven once for the life of the list.
pub fn prove(
    obj: &FileObject,
    start: u64,
    end: u64,
    first: usize,
    have: &[impl AsRef<[u8]>],
    more: &mut More,
) -> Result<()> {
    let size = obj.size;
    let end = end.min(size);
    let proven = &obj.proof;
    if start >= end || proven.all() {
        return Ok(());
    }
    let Some(ob) = proven.outboard() else {
        return Err(Error::corrupt(format!(
            "{} has no proof loaded yet",
            obj.list_name()
        )));
    };
    let log = ob.log();
    let (b0, b1) = (start >> log, (end - 1) >> log);
    let todo: Vec<u64> = (b0..=b1).filter(|&b| !proven.is_proven(b)).collect();
    let (Some(&lo), Some(&hi)) = (todo.first(), todo.last()) else {
        return Ok(());
    };
    // The bytes those blocks span: what `have` holds of them, and the edges beyond.
    let need = (lo << log, ((hi + 1) << log).min(size));
    let held = (obj.start_of(first), obj.start_of(first + have.len()));
    let left = match need.0 < held.0 {
        true => Some((need.0, held.0.min(need.1))),
        false => None,
    };
    let right = match need.1 > held.1 {
        true => Some((held.1.max(need.0), need.1)),
        false => None,
    };
    let mut edges: Vec<(u64, Vec<ChunkBytes>)> = Vec::new();
    for (x, y) in [left, right].into_iter().flatten() {
        edges.push((x, more(x, y, Edge::Cheap)?));
    }
    let file = obj.hash;
    for b in todo {
        let (bs, be) = (b << log, ((b + 1) << log).min(size));
        let ok = ob.block_is(&file, b, &block_pieces(bs, be, held.0, have, &edges));
        let reaches_edge = bs < held.0 || be > held.1;
        if !ok && reaches_edge {
            // Cheap edge bytes may be a damaged copy's: ask for checked ones, once.
            for (x, pieces) in edges.iter_mut() {
                let y = *x + pieces.iter().map(|p| p.len() as u64).sum::<u64>();
                *pieces = more(*x, y, Edge::Checked)?;
            }
            if ob.block_is(&file, b, &block_pieces(bs, be, held.0, have, &edges)) {
                proven.mark(b);
                continue;
            }
        }
        if !ok {
            return Err(unproven(
                &obj.list_name(),
                &format!("bytes {bs}..{be} are not the file's"),
            ));
        }
        proven.mark(b);
    }
    Ok(())
}

/// The slices of bytes `[bs, be)` among `have` (starting at byte `at`) and the edges.
fn block_pieces<'a>(
    bs: u64,
    be: u64,
    mut at: u64,
    have: &'a [impl AsRef<[u8]>],
    edges: &'a [(u64, Vec<ChunkBytes>)],
) -> Vec<&'a [u8]> {
    let mut spans: Vec<(u64, &[u8])> = Vec::new();
    for (x, pieces) in edges {
        let mut p_at = *x;
        for p in pieces {
            spans.push((p_at, &p[..]));
            p_at += p.len() as u64;
        }
    }
    for c in have {
        spans.push((at, c.as_ref()));
        at += c.as_ref().len() as u64;
    }
    spans.sort_by_key(|(s, _)| *s);
    spans
        .into_iter()
        .filter_map(|(s, bytes)| {
            let e = s + bytes.len() as u64;
            (e > bs && s < be).then(|| {
                let from = bs.saturating_sub(s) as usize;
                let to = (be.min(e) - s) as usize;
                &bytes[from..to]
            })
        })
        .collect()
}

/// The bytes of the blocks that lie wholly inside chunks `first..first + n` of a file,
/// as `[start, end)`; `None` when there are none or nothing is left to prove (no
/// outboard yet, or every byte proven already).
pub fn inner_span(obj: &FileObject, first: usize, n: usize) -> Option<(u64, u64)> {
    let ob = obj.proof.outboard()?;
    if obj.proof.all() || n == 0 {
        return None;
    }
    let log = ob.log();
    let (a, b) = (obj.start_of(first), obj.start_of(first + n));
    let inner_start = a.div_ceil(1 << log) << log;
    let inner_end = if b >= obj.size {
        obj.size
    } else {
        (b >> log) << log
    };
    (inner_start < inner_end).then_some((inner_start, inner_end))
}

/// Hashes every block of `[start, end)` (wholly inside chunks `first..`, `have`) against
/// the outboard, those proven before too, and marks them: for bytes whose chunks were not
/// checked against their names, their blocks are their only check, and a block proven
/// earlier was proven with other bytes than these. False if any block fails (nothing is
/// marked then: the caller reads the chunks again, checked).
pub fn prove_again(
    obj: &FileObject,
    start: u64,
    end: u64,
    first: usize,
    have: &[impl AsRef<[u8]>],
) -> bool {
    let Some(ob) = obj.proof.outboard() else {
        return false;
    };
    let (log, at) = (ob.log(), obj.start_of(first));
    let blocks = (start >> log)..=((end - 1) >> log);
    let all_good = blocks.clone().all(|b| {
        let (bs, be) = (b << log, ((b + 1) << log).min(obj.size));
        ob.block_is(&obj.hash, b, &block_pieces(bs, be, at, have, &[]))
    });
    if all_good {
        blocks.for_each(|b| obj.proof.mark(b));
    }
    all_good
}

/// Proves the blocks that lie wholly inside chunks `first..` (`have`), fetching nothing:
/// work a fetching thread can do before any reader asks. A list without a proof yet
/// (written before proofs) is left to `Chunks::prove_whole`.
pub fn prove_within(obj: &FileObject, first: usize, have: &[impl AsRef<[u8]>]) -> Result<()> {
    let Some((inner_start, inner_end)) = inner_span(obj, first, have.len()) else {
        return Ok(());
    };
    prove(obj, inner_start, inner_end, first, have, &mut |x, y, _| {
        Err(Error::corrupt(format!(
            "{}: bytes {x}..{y} are outside the chunks at hand",
            obj.list_name()
        )))
    })
}
