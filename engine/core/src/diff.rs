//! What changed between two versions: files added, removed, modified and unchanged;
//! for each modified file which of its chunks are new and where they lie (the console
//! draws them as a heat strip); for `.safetensors` files which tensors changed, were
//! added or were removed.
//!
//! Tensors are compared by the chunks that cover their byte range: a tensor whose
//! covering chunks all exist in the old file is unchanged without reading a byte. When
//! a covering chunk is new, the chunk may only straddle the tensor's edge (a neighbour
//! changed, or the header grew), so the tensor's bytes are hashed in both versions to
//! decide exactly. A diff never reports a tensor as changed when its bytes are equal.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::digest::{Entry, Hash};
use crate::error::{Error, Result};
use crate::objects::FileObject;
use crate::read::{Chunks, Origin};
use crate::refs::{Digest, VolumeName};
use crate::repo::Repository;
use crate::safetensors;

/// The most tensors a diff lists for one file: each row costs memory here and in every
/// view of it, and a header can name a million one-byte tensors.
const MAX_TENSORS: usize = 200_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Added,
    Removed,
    Modified,
    Unchanged,
}

/// One chunk of the newer file: where it lies and whether the older file lacks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Span {
    pub offset: u64,
    pub len: u32,
    pub changed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TensorDiff {
    pub name: String,
    pub status: Status,
    pub dtype: String,
    pub shape: Vec<u64>,
    pub bytes: u64,
    /// Bytes of new chunks inside this tensor (for a modified one).
    pub changed_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileDiff {
    pub path: String,
    pub status: Status,
    pub size_from: Option<u64>,
    pub size_to: Option<u64>,
    pub chunks: u64,
    pub changed_chunks: u64,
    pub changed_bytes: u64,
    /// For a modified file: every chunk of the newer file, in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub spans: Vec<Span>,
    /// For a modified `.safetensors` file whose headers parse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensors: Option<Vec<TensorDiff>>,
    /// Why `tensors` is missing for a `.safetensors` file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tensor_note: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub added: u64,
    pub removed: u64,
    pub modified: u64,
    pub unchanged: u64,
    /// Bytes and chunks of the newer version that the older one does not have.
    pub changed_bytes: u64,
    pub changed_chunks: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct VersionDiff {
    pub from: String,
    pub to: String,
    pub totals: Totals,
    pub files: Vec<FileDiff>,
}

/// Diffs two versions (of the same volume or not).
pub fn diff(
    repo: &Repository,
    from: (&VolumeName, &Digest),
    to: (&VolumeName, &Digest),
) -> Result<VersionDiff> {
    let a = repo.manifest(from.0, from.1)?;
    let b = repo.manifest(to.0, to.1)?;
    let files = |entries: &[Entry]| -> BTreeMap<String, (u64, Hash)> {
        entries
            .iter()
            .filter_map(|e| match e {
                Entry::File {
                    path, size, hash, ..
                } => Some((path.clone(), (*size, *hash))),
                _ => None,
            })
            .collect()
    };
    let (fa, fb) = (files(&a.entries), files(&b.entries));
    let (xa, xb) = (a.small_files(), b.small_files());
    let mut paths: Vec<&String> = fa.keys().chain(fb.keys()).collect();
    paths.sort();
    paths.dedup();
    let mut totals = Totals::default();
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        let d = match (fa.get(path), fb.get(path)) {
            (Some(&(sa, ha)), Some(&(sb, hb))) if ha == hb => FileDiff {
                chunks: repo.file_list(&hb, sb, &xb)?.chunks.len() as u64,
                ..file(path, Status::Unchanged, Some(sa), Some(sb))
            },
            (Some(&(sa, ha)), Some(&(sb, hb))) => {
                modified(repo, path, (sa, ha, &xa), (sb, hb, &xb))?
            }
            (None, Some(&(sb, hb))) => {
                let obj = repo.file_list(&hb, sb, &xb)?;
                let mut d = FileDiff {
                    chunks: obj.chunks.len() as u64,
                    changed_chunks: obj.chunks.len() as u64,
                    changed_bytes: sb,
                    ..file(path, Status::Added, None, Some(sb))
                };
                whole_tensors(repo, &mut d, &obj);
                d
            }
            (Some(&(sa, ha)), None) => {
                let mut d = file(path, Status::Removed, Some(sa), None);
                whole_tensors(repo, &mut d, &repo.file_list(&ha, sa, &xa)?);
                d
            }
            (None, None) => continue,
        };
        match d.status {
            Status::Added => totals.added += 1,
            Status::Removed => totals.removed += 1,
            Status::Modified => totals.modified += 1,
            Status::Unchanged => totals.unchanged += 1,
        }
        totals.changed_bytes += d.changed_bytes;
        totals.changed_chunks += d.changed_chunks;
        out.push(d);
    }
    Ok(VersionDiff {
        from: format!("vol:{}@{}", from.0, from.1),
        to: format!("vol:{}@{}", to.0, to.1),
        totals,
        files: out,
    })
}

fn file(path: &str, status: Status, size_from: Option<u64>, size_to: Option<u64>) -> FileDiff {
    FileDiff {
        path: path.to_string(),
        status,
        size_from,
        size_to,
        chunks: 0,
        changed_chunks: 0,
        changed_bytes: 0,
        spans: Vec::new(),
        tensors: None,
        tensor_note: None,
    }
}

/// A file's size, hash, and where its version's small files are.
type Side<'a> = (u64, Hash, &'a crate::small::SmallFiles);

fn modified(repo: &Repository, path: &str, a: Side, b: Side) -> Result<FileDiff> {
    let oa = repo.file_list(&a.1, a.0, a.2)?;
    let ob = repo.file_list(&b.1, b.0, b.2)?;
    let old: HashSet<Hash> = oa.chunks.iter().map(|c| c.entry.hash).collect();
    let mut spans = Vec::with_capacity(ob.chunks.len());
    let mut offset = 0u64;
    let (mut changed_chunks, mut changed_bytes) = (0u64, 0u64);
    for c in &ob.chunks {
        let changed = !old.contains(&c.entry.hash);
        if changed {
            changed_chunks += 1;
            changed_bytes += c.entry.raw_len as u64;
        }
        spans.push(Span {
            offset,
            len: c.entry.raw_len,
            changed,
        });
        offset += c.entry.raw_len as u64;
    }
    let mut d = FileDiff {
        chunks: ob.chunks.len() as u64,
        changed_chunks,
        changed_bytes,
        ..file(path, Status::Modified, Some(a.0), Some(b.0))
    };
    if path.ends_with(".safetensors") {
        match tensor_diff(repo, &oa, &ob, &spans) {
            Ok(t) => d.tensors = Some(t),
            Err(e) => d.tensor_note = Some(e.message().to_string()),
        }
    }
    d.spans = spans;
    Ok(d)
}

/// The tensors of a `.safetensors` file added or removed whole: each is added (or
/// removed) with it, so that the diff lists them as it does for a modified file.
fn whole_tensors(repo: &Repository, d: &mut FileDiff, obj: &FileObject) {
    if !d.path.ends_with(".safetensors") {
        return;
    }
    match read_header(repo, obj) {
        Ok(tensors) => {
            let mut list: Vec<(u64, TensorDiff)> = tensors
                .into_iter()
                .map(|(name, t)| {
                    (
                        t.start,
                        TensorDiff {
                            name,
                            status: d.status,
                            bytes: t.end - t.start,
                            changed_bytes: if d.status == Status::Added {
                                t.end - t.start
                            } else {
                                0
                            },
                            dtype: t.dtype,
                            shape: t.shape,
                        },
                    )
                })
                .collect();
            // File order, as for a modified file.
            list.sort_by_key(|(start, _)| *start);
            d.tensors = Some(list.into_iter().map(|(_, t)| t).collect());
        }
        Err(e) => d.tensor_note = Some(e.message().to_string()),
    }
}

/// A tensor as its safetensors header describes it, with absolute file offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tensor {
    dtype: String,
    shape: Vec<u64>,
    start: u64,
    end: u64,
}

fn tensor_diff(
    repo: &Repository,
    oa: &FileObject,
    ob: &FileObject,
    spans_b: &[Span],
) -> Result<Vec<TensorDiff>> {
    let ta = read_header(repo, oa)?;
    let tb = read_header(repo, ob)?;
    let mut names: Vec<&String> = ta.keys().chain(tb.keys()).collect();
    names.sort();
    names.dedup();
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let (status, t, changed_bytes) = match (ta.get(name), tb.get(name)) {
            (None, Some(t)) => (Status::Added, t, t.end - t.start),
            (Some(t), None) => (Status::Removed, t, 0),
            (Some(x), Some(y)) if x.dtype != y.dtype || x.shape != y.shape => {
                (Status::Modified, y, y.end - y.start)
            }
            (Some(x), Some(y)) => {
                let changed: u64 = spans_b
                    .iter()
                    .filter(|s| s.changed)
                    .map(|s| overlap(s.offset, s.offset + s.len as u64, y.start, y.end))
                    .sum();
                if changed == 0 {
                    (Status::Unchanged, y, 0)
                } else if hash_range(repo, oa, x.start, x.end)?
                    == hash_range(repo, ob, y.start, y.end)?
                {
                    // Only a straddling chunk was new: the tensor's bytes are equal.
                    (Status::Unchanged, y, 0)
                } else {
                    (Status::Modified, y, changed)
                }
            }
            (None, None) => continue,
        };
        out.push(TensorDiff {
            name: name.clone(),
            status,
            dtype: t.dtype.clone(),
            shape: t.shape.clone(),
            bytes: t.end - t.start,
            changed_bytes,
        });
    }
    // File order reads best: the heat strip and the list line up.
    out.sort_by_key(|t| {
        tb.get(&t.name)
            .or_else(|| ta.get(&t.name))
            .map_or(0, |x| x.start)
    });
    Ok(out)
}

fn overlap(a0: u64, a1: u64, b0: u64, b1: u64) -> u64 {
    a1.min(b1).saturating_sub(a0.max(b0))
}

fn read_header(repo: &Repository, obj: &FileObject) -> Result<BTreeMap<String, Tensor>> {
    if obj.size < 8 {
        return Err(Error::invalid("too short to be a safetensors file"));
    }
    let len_bytes = read_range(repo, obj, 0, 8)?;
    let Some(n) = safetensors::header_len(&len_bytes, obj.size) else {
        let n = u64::from_le_bytes(len_bytes.try_into().unwrap_or([0; 8]));
        return Err(Error::invalid(format!(
            "safetensors header claims {n} bytes; not a safetensors file, or a damaged one"
        )));
    };
    let raw = read_range(repo, obj, 8, 8 + n)?;
    let tensors = safetensors::parse(&raw, obj.size, safetensors::Want::Details, MAX_TENSORS)
        .map_err(|e| match e {
            safetensors::HeaderError::TooMany { limit } => Error::invalid(format!(
                "its header names more than {limit} tensors; the diff lists its chunks only"
            )),
            e => Error::invalid(e.to_string()),
        })?;
    Ok(tensors
        .into_iter()
        .map(|t| {
            let tensor = Tensor {
                dtype: t.dtype,
                shape: t.shape,
                start: t.range.start,
                end: t.range.end,
            };
            (t.name, tensor)
        })
        .collect())
}

fn read_range(repo: &Repository, obj: &FileObject, start: u64, end: u64) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity((end - start) as usize);
    Origin(repo).for_bytes(obj, start, end, &mut |b| out.extend_from_slice(b))?;
    Ok(out)
}

fn hash_range(repo: &Repository, obj: &FileObject, start: u64, end: u64) -> Result<Hash> {
    let mut h = blake3::Hasher::new();
    Origin(repo).for_bytes(obj, start, end, &mut |b| {
        h.update(b);
    })?;
    Ok(Hash(*h.finalize().as_bytes()))
}
