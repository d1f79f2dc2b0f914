//! The remote engine's operations: what a key holder asks the server to do, instead of
//! writing objects others build on (`sealvol_core::remote` is the client's side).
//! Every write below is the server's own, made after it checked what it was asked:
//!
//! - `POST /v1/ops/have-chunks`: which of the chunks named (32-byte hashes, back to
//!   back) the repository holds, one byte each: 0 not held (upload it), 1 held and the
//!   key reaches it, 2 held where the key does not reach it (prove it holds the bytes
//!   under the challenge in `CHALLENGE_HEADER`, or upload it). Read-write keys only: it
//!   tells whether a chunk exists anywhere, which is what deduplication across
//!   namespaces costs, unless the key's namespace is private (`possession.rs`);
//! - `POST /v1/ops/stored-files`: which files have a usable, proven chunk list;
//! - `PUT /v1/ops/lists/{file}`: store a file's chunk list, sent as its chunks by hash
//!   and length with their evidence (`named.rs`); the server finds each chunk, checks
//!   that the key may name it, reads them in order and hashes them into the file's hash
//!   (the proof) before it writes the list;
//! - `POST /v1/ops/small-files`: small files (`sealvol_core::small`), named as chunks
//!   with their evidence, which need no list: one byte each, 1 where the server holds
//!   the file's one chunk and the key may name it (the file is then as good as sent), 0
//!   where the client must send its list;
//! - `POST /v1/ops/seal`: seal a version in the key's namespace, every file of which
//!   must have such a list, or be a small file the server holds;
//! - `PUT /v1/ops/signatures/{ns}/{vol}/{digest}`: store a signature of a version;
//! - `POST /v1/ops/tag`, `/v1/ops/delete`, `/v1/ops/restore`: tag moves and removals
//!   (compare-and-swap), the trash, in the key's namespaces;
//! - `POST /v1/ops/labels`: a version's labels set and removed, in the key's namespaces;
//! - `POST /v1/ops/damage`: a chunk copy a reader found failing its hash, recorded
//!   only if it fails when the server reads it;
//! - `POST /v1/ops/gc`: a garbage collection, admin keys only.
//!
//! Records are stamped with who asked (`by` in the request, and the key's name), which
//! the server cannot check beyond the key.

// Checks answer a request early with its response; boxing it would buy nothing.
#![allow(clippy::result_large_err)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use sealvol_core::digest::{Entry, Hash};
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::objects::{ChunkRef, FileObject, PackId};
use sealvol_core::refs::{Digest, Name, Ref, VolumeName};
use sealvol_core::registry::VersionStats;
use sealvol_core::repo::Repository;

use crate::keys::Grant;
use crate::known::Known;
use crate::lists::Lists;
use crate::possession::{Copies, Naming, Possession};
use crate::reach::Reach;
use crate::reply::{Reply, denied, failed, json};
use sealvol_core::possession::Named;
use sealvol_core::remote::Held;
use sealvol_wire::ops::{
    CHALLENGE_HEADER, DamageBody, GcBody, LabelBody, MAX_ASK, MAX_OP_BODY, SealBody, SealedBody,
    SignedBody, StoredFiles, TagBody, TagMovedBody, TrashBody,
};

/// The largest body of a small operation (a tag move, a delete).
const SMALL_BODY: usize = 64 << 10;
/// Lists one key may have the server prove at once (more wait their turn): proving
/// reads the file's bytes, and one key's pushes must not take every reader's turn.
const PROOFS_PER_KEY: usize = 4;

/// What the operations share: the repository and what the server knows of it.
pub struct Steward {
    pub repo: Arc<Repository>,
    pub known: Arc<Known>,
    pub reach: Arc<Reach>,
    pub lists: Arc<Lists>,
    /// Turns to prove a list, by key name, and for all keys.
    turns: Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
    all_turns: Arc<tokio::sync::Semaphore>,
    /// Files whose chunk lists a key sent (by key name), and when: a seal by that key
    /// may name them.
    sent: Mutex<std::collections::HashMap<(String, Hash), std::time::Instant>>,
    /// Which chunks a key may name, and its challenges.
    pub naming: Naming,
    /// Pushes past a namespace's quota, refused before their packs are stored.
    pub quotas: Arc<crate::quota::Quotas>,
}

/// How long a chunk list a key sent lets its seals name the file.
const SENT_FOR: std::time::Duration = std::time::Duration::from_secs(3600);
/// The most sent lists remembered; older ones go first.
const MAX_SENT: usize = 1 << 20;

impl Steward {
    pub fn new(
        repo: Arc<Repository>,
        known: Arc<Known>,
        quotas: Arc<crate::quota::Quotas>,
        policy: &crate::policy::Policy,
    ) -> Steward {
        let reach = Arc::new(Reach::new(Arc::clone(&repo)));
        Steward {
            naming: Naming::new(
                Possession::new(policy.private_dedup.iter().cloned()),
                Arc::clone(&known),
                Arc::clone(&reach),
                Arc::clone(&repo),
            ),
            known: Arc::clone(&known),
            reach,
            lists: Arc::new(Lists::new(Arc::clone(&repo), Arc::clone(&known))),
            quotas,
            repo,
            turns: Mutex::default(),
            all_turns: Arc::new(tokio::sync::Semaphore::new(
                2 * std::thread::available_parallelism().map_or(2, |n| n.get()),
            )),
            sent: Mutex::default(),
        }
    }

    /// Notes that key `key` sent file `hash`'s chunk list.
    fn note_sent(&self, key: &str, hash: &Hash) {
        let mut sent = sealvol_core::lock(&self.sent);
        if sent.len() >= MAX_SENT {
            sent.retain(|_, at| at.elapsed() < SENT_FOR);
        }
        if sent.len() < MAX_SENT {
            sent.insert((key.to_string(), *hash), std::time::Instant::now());
        }
    }

    fn shown(&self, key: &str, hash: &Hash) -> bool {
        sealvol_core::lock(&self.sent)
            .get(&(key.to_string(), *hash))
            .is_some_and(|at| at.elapsed() < SENT_FOR)
    }

    /// Waits for a turn of `key` to prove a list, and one of all keys'.
    async fn proof_turn(&self, key: &str) -> Option<ProofTurn> {
        let mine = {
            let mut t = sealvol_core::lock(&self.turns);
            // Keys that hold no turn now need no entry.
            t.retain(|_, s| s.available_permits() < PROOFS_PER_KEY);
            Arc::clone(
                t.entry(key.to_string())
                    .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(PROOFS_PER_KEY))),
            )
        };
        let key_turn = mine.acquire_owned().await.ok()?;
        let all = Arc::clone(&self.all_turns).acquire_owned().await.ok()?;
        Some(ProofTurn(key_turn, all))
    }
}

/// A turn to prove a list, given back when dropped.
struct ProofTurn(
    #[allow(dead_code)] tokio::sync::OwnedSemaphorePermit,
    #[allow(dead_code)] tokio::sync::OwnedSemaphorePermit,
);

/// Runs `f` on a blocking thread, stamping records as made for `grant` (and `by`).
async fn blocking<T: Send + 'static>(
    grant: &Grant,
    by: Option<&str>,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> std::result::Result<T, Response> {
    let who = acting_for(grant, by);
    tokio::task::spawn_blocking(move || sealvol_core::stamp::on_behalf(&who, f))
        .await
        .map_err(|_| {
            failed(Error::new(
                ErrorKind::Io,
                "the operation failed on the server",
            ))
        })?
        .map_err(failed)
}

/// `ana@laptop (key ci)`: who asked, as the request says, printable and short, and the
/// key it came with.
fn acting_for(grant: &Grant, by: Option<&str>) -> String {
    let said: String = by
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(80)
        .collect();
    match said.trim() {
        "" => format!("key {}", grant.name),
        s => format!("{s} (key {})", grant.name),
    }
}

fn writes(grant: &Grant, what: &str) -> std::result::Result<(), Response> {
    match grant.read_only {
        true => Err(denied(format!(
            "key {} (read-only) may not write ({what})",
            grant.name
        ))),
        false => Ok(()),
    }
}

fn writes_in(grant: &Grant, vol: &VolumeName, what: &str) -> std::result::Result<(), Response> {
    match grant.writes(vol.namespace.as_str()) {
        true => Ok(()),
        false => Err(denied(format!(
            "key {} ({}) may not write in {} ({what})",
            grant.name,
            grant.scope(),
            vol.namespace
        ))),
    }
}

fn hashes(body: &[u8]) -> std::result::Result<Vec<Hash>, Response> {
    if !body.len().is_multiple_of(32) || body.len() / 32 > MAX_ASK {
        return Err(failed(Error::invalid(format!(
            "a question names 32-byte hashes back to back, at most {MAX_ASK} of them"
        ))));
    }
    Ok(body
        .chunks_exact(32)
        .map(|c| {
            let mut h = [0u8; 32];
            h.copy_from_slice(c);
            Hash(h)
        })
        .collect())
}

/// The body of an operation a push asks for, read within its bound, once the key is
/// known to write.
async fn push_body(
    body: Body,
    grant: &Grant,
) -> std::result::Result<crate::reply::Whole, Response> {
    let body = crate::reply::read_body(body, MAX_OP_BODY).await?;
    writes(grant, "push")?;
    Ok(body)
}

pub async fn have_chunks(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = push_body(body, &grant).await?;
    let asked = hashes(&body)?;
    let g = Arc::clone(&grant);
    let s2 = Arc::clone(&s);
    let answer = blocking(&grant, None, move || {
        let have = s2.known.have(&asked)?;
        let private = s2.naming.possession.is_private(&g);
        let mut out = Vec::with_capacity(asked.len());
        for (h, have) in asked.iter().zip(have) {
            let held = match have {
                false => Held::No,
                true if s2.naming.reaches_chunk(&g, h)? => Held::Yours,
                true if private => Held::No,
                true => Held::Prove,
            };
            out.push(match held {
                Held::No => 0u8,
                Held::Yours => 1,
                Held::Prove => 2,
            });
        }
        Ok(out)
    })
    .await;
    let bytes = answer?;
    let mut resp = ([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response();
    let challenge = s.naming.possession.challenge(&grant.name).hex();
    if let Ok(v) = axum::http::HeaderValue::from_str(&challenge) {
        resp.headers_mut().insert(CHALLENGE_HEADER, v);
    }
    Ok(resp)
}

pub async fn small_files(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = push_body(body, &grant).await?;
    let files = sealvol_wire::named::decode_small(&body, MAX_ASK)
        .map_err(|why| failed(Error::invalid(why)))?;
    let g = Arc::clone(&grant);
    let answer = blocking(&grant, None, move || {
        let mut out = Vec::with_capacity(files.len());
        let mut copies = Copies::default();
        for f in &files {
            let size = f.len as u64;
            // Whether the server holds it is said only once the key may name it.
            let held = sealvol_core::small::needs_no_list(&s.repo, size, 1)
                && small_list(&s, &f.hash)?.is_some_and(|o| o.size == size)
                && s.naming.may_name(&g, f, &mut copies)?;
            if held {
                s.note_sent(&g.name, &f.hash);
            }
            out.push(u8::from(held));
        }
        Ok(out)
    })
    .await;
    let bytes = answer?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

pub async fn stored_files(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = push_body(body, &grant).await?;
    let asked = hashes(&body)?;
    let g = Arc::clone(&grant);
    let answer = blocking(&grant, None, move || {
        let mut out = Vec::with_capacity(asked.len());
        for h in &asked {
            let obj = match s.repo.file_object_if_stored(h) {
                Ok(Some(obj)) if s.known.usable(&obj)? => obj,
                Ok(None) if let Some(obj) = small_list(&s, h)? => obj,
                Ok(_) => {
                    out.push(None);
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    out.push(None);
                    continue;
                }
                Err(e) => return Err(e),
            };
            out.push(s.reach.reaches(&g, h)?.then_some(obj.chunks.len() as u64));
        }
        Ok(StoredFiles { chunks: out })
    })
    .await;
    Ok(json(&answer?))
}

pub async fn put_list(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path(file): Path<String>,
    body: Body,
) -> Reply {
    let body = push_body(body, &grant).await?;
    let Some(hash) = Hash::parse_hex(&file) else {
        return Err(failed(Error::invalid(format!(
            "{file:.80} is not a file hash (64 hex digits)"
        ))));
    };
    let (size, chunks) = sealvol_wire::named::decode_list(&body, crate::chunks::MAX_CHUNK)
        .map_err(|why| failed(Error::invalid(why)))?;
    let Some(slot) = s.proof_turn(&grant.name).await else {
        return Err(failed(Error::new(
            ErrorKind::Unavailable,
            "the server is stopping",
        )));
    };
    let g = Arc::clone(&grant);
    let written = blocking(&grant, None, move || {
        let _slot = slot;
        let written = store_list(&s, &g, &hash, size, &chunks)?;
        s.note_sent(&g.name, &hash);
        Ok(written)
    })
    .await;
    Ok(match written? {
        true => StatusCode::CREATED.into_response(),
        false => StatusCode::OK.into_response(),
    })
}

/// Finds the chunks, checks that `grant` may name each, proves them into `hash` by
/// reading them, and writes the list (replacing one that names other chunks or unusable
/// copies). False when a usable list naming the same chunks was there.
fn store_list(
    s: &Steward,
    grant: &Grant,
    hash: &Hash,
    size: u64,
    chunks: &[Named],
) -> Result<bool> {
    // Before anything is said of the chunks (their lengths, whether a list is there),
    // the key shows that it may name each: a chunk it may not name is answered as one
    // not stored, whether it is or not.
    let mut located = Vec::with_capacity(chunks.len());
    let mut copies = Copies::default();
    for n in chunks {
        let found = s.known.locate(&n.hash)?;
        match found {
            Some(at) if s.naming.may_name_at(grant, n, &at, &mut copies)? => located.push(at),
            _ => {
                return Err(Error::new(
                    ErrorKind::Collected,
                    format!(
                        "chunk {} of file {} is not stored here, or this key has not shown that it holds its bytes",
                        n.hash.hex(),
                        hash.hex()
                    ),
                )
                .hint("push again: the chunks the server lacks are uploaded first, and the others proven"));
            }
        }
    }
    let existing = match s.repo.file_object_if_stored(hash) {
        Ok(found) => found,
        Err(e) if e.kind() == ErrorKind::Corrupt => None,
        Err(e) => return Err(e),
    };
    // A small file is its one chunk, checked against its hash when its pack came in:
    // no list is written, and the seal names its pack (`sealvol_core::small`).
    if existing.is_none()
        && chunks.len() == 1
        && chunks[0].hash == *hash
        && chunks[0].len as u64 == size
        && sealvol_core::small::needs_no_list(&s.repo, size, 1)
        && small_list(s, hash)?.is_some_and(|o| o.size == size)
    {
        return Ok(false);
    }
    if let Some(old) = &existing
        && old.size == size
        && old.chunks.len() == chunks.len()
        && old
            .chunks
            .iter()
            .zip(chunks)
            .all(|(c, n)| c.entry.hash == n.hash && c.entry.raw_len == n.len)
        && s.known.usable(old)?
    {
        return Ok(false);
    }
    let mut packs: Vec<PackId> = Vec::new();
    let mut refs = Vec::with_capacity(chunks.len());
    for (n, (pack, entry)) in chunks.iter().zip(located) {
        if entry.raw_len != n.len {
            return Err(Error::invalid(format!(
                "chunk {} is {} bytes, not {}",
                n.hash.hex(),
                entry.raw_len,
                n.len
            )));
        }
        let slot = match packs.iter().position(|p| *p == pack) {
            Some(i) => i,
            None => {
                packs.push(pack);
                packs.len() - 1
            }
        };
        refs.push(ChunkRef {
            pack: slot as u32,
            entry,
        });
    }
    let unproven = FileObject::new(*hash, size, packs, refs, None);
    // Each byte hashed once, into the file's tree: the chunks' own names were checked
    // when their packs came in.
    let outboard = sealvol_core::read::Origin(&s.repo)
        .prove_by_reading_once(&unproven)
        .map_err(|e| match sealvol_core::proof::is_unproven(&e) {
            true => Error::invalid(format!(
                "the chunks named for file {} do not hash to it",
                hash.hex()
            ))
            .hint("push the file again: its chunk list is computed from its bytes"),
            false => e,
        })?;
    let obj = FileObject::new(
        *hash,
        size,
        unproven.packs.clone(),
        unproven.chunks.clone(),
        Some(outboard),
    );
    let _writing = s.repo.writers_lock(false)?;
    match existing {
        Some(_) => sealvol_core::gc::replace_chunk_list(&s.repo, hash, &obj)?,
        None if !s.repo.put_file_object(hash, &obj)? => {
            // Another writer stored one meanwhile; it was proven as this one was.
        }
        None => {}
    }
    s.repo.clear_list_damage(hash)?;
    s.lists.forget(hash);
    Ok(true)
}

/// The list of small file `hash` made from a usable copy of its one chunk the server
/// holds, if it holds one.
fn small_list(s: &Steward, hash: &Hash) -> Result<Option<FileObject>> {
    let Some((pack, entry)) = s.known.locate(hash)? else {
        return Ok(None);
    };
    match sealvol_core::small::list_of_chunk(hash, pack, entry) {
        Some(obj) if s.known.usable(&obj)? => Ok(Some(obj)),
        _ => Ok(None),
    }
}

pub async fn seal(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = crate::reply::read_body(body, MAX_OP_BODY).await?;
    let req: SealBody = serde_json::from_slice(&body)
        .map_err(|e| failed(Error::invalid(format!("not a seal request: {e:.200}"))))?;
    let vol = VolumeName::parse(&req.volume).map_err(failed)?;
    writes_in(&grant, &vol, "seal versions")?;
    let tags = req
        .tags
        .iter()
        .map(|t| Name::parse("tag", t))
        .collect::<Result<Vec<_>>>()
        .map_err(failed)?;
    let by = req.provenance.pushed_by.clone();
    let g = Arc::clone(&grant);
    let sealed = blocking(&grant, Some(&by), move || {
        let (stats, small_packs) = check_seal(&s, &g, &req.entries, req.stats)?;
        let mut provenance = req.provenance;
        provenance.pushed_by = acting_for(&g, Some(&provenance.pushed_by));
        let _writing = s.repo.writers_lock(false)?;
        // The server builds on nothing it did not check: `since: None` makes the
        // seal's protection against garbage collection check every round and pack.
        let sealed = s.repo.seal_small(
            &vol,
            &tags,
            req.entries.clone(),
            stats,
            provenance,
            None,
            &small_packs,
        )?;
        s.reach.sealed(&vol, sealed.digest, &req.entries);
        s.quotas.sealed(&vol.namespace.to_string());
        Ok(sealed)
    })
    .await;
    let sealed = sealed?;
    Ok(json(&SealedBody {
        digest: sealed.digest.to_string(),
        new: sealed.new,
        restored: sealed.restored,
        tags: sealed.tags,
    }))
}

/// `PUT /v1/ops/signatures/{ns}/{vol}/{digest}`: a signature of a version of the key's
/// namespace, checked as `Repository::put_signature` checks it (the version exists; no
/// larger than a signature of it can be, refused before its body is read when its
/// length says so; at most 64, one per signer).
pub async fn put_signature(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    Path((ns, name, digest)): Path<(String, String, String)>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Reply {
    let checked = signature_bound(&s, &grant, &ns, &name, &digest, &headers).await;
    let (vol, digest, most) = match checked {
        Ok(c) => c,
        Err(r) => {
            // A refusal still reads what the client sends (discarding it, up to the
            // largest object), or a client still sending would never see the answer.
            crate::reply::drain(body, crate::reply::MAX_DRAIN).await;
            return Err(r);
        }
    };
    let body = crate::reply::read_body(body, most).await?;
    let stored = blocking(&grant, None, move || {
        s.repo.put_signature(&vol, &digest, &body.bytes)
    })
    .await;
    let (stored, new) = stored?;
    Ok(json(&SignedBody {
        key: stored.key,
        new,
    }))
}

/// The version a signature is sent for, if the key may sign it, and the most a
/// signature of it can weigh; refused when the body announced is larger.
async fn signature_bound(
    s: &Arc<Steward>,
    grant: &Arc<Grant>,
    ns: &str,
    name: &str,
    digest: &str,
    headers: &axum::http::HeaderMap,
) -> std::result::Result<(VolumeName, Digest, usize), Response> {
    let vol = VolumeName::parse(&format!("{ns}/{name}")).map_err(failed)?;
    let digest = Digest::parse(digest).map_err(failed)?;
    writes_in(grant, &vol, "sign versions")?;
    let (s2, v2) = (Arc::clone(s), vol.clone());
    let most = blocking(grant, None, move || {
        Ok(sealvol_core::signatures::max_bytes(
            &s2.repo.manifest(&v2, &digest)?,
        ))
    })
    .await?;
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > most as u64) {
        return Err(failed(Error::invalid(format!(
            "the signature is larger than any signature of vol:{vol}@{} can be ({most} bytes)",
            digest.short(16)
        ))));
    }
    Ok((vol, digest, most))
}

/// Checks a version the way a push builds it: clean paths once each, links inside it,
/// and every file's chunk list stored, proven, of the entry's size and usable. Returns
/// its figures, counted here (the new-bytes figures are the client's, at most these).
/// Returns the version's stats as the server counts them, and the packs of its small
/// files that have no chunk lists.
fn check_seal(
    s: &Steward,
    grant: &Grant,
    entries: &[Entry],
    said: VersionStats,
) -> Result<(VersionStats, Vec<PackId>)> {
    sealvol_core::listing::Listing::from_entries(entries).map_err(|e| {
        Error::invalid(
            e.message()
                .replace("refusing to mount it", "refusing to seal it"),
        )
    })?;
    let mut paths = HashSet::new();
    let mut stats = VersionStats::default();
    let mut small_packs = Vec::new();
    for e in entries {
        if !paths.insert(e.path()) {
            return Err(Error::invalid(format!("{} is listed twice", e.path())));
        }
        if let Entry::File {
            path, size, hash, ..
        } = e
        {
            let stored = s.repo.file_object_if_stored(hash).ok().flatten();
            let small = match &stored {
                None if sealvol_core::small::needs_no_list(&s.repo, *size, 1) => {
                    small_list(s, hash)?
                }
                _ => None,
            };
            if let Some(obj) = small.as_ref().filter(|o| o.size == *size) {
                small_packs.push(obj.packs[0]);
            }
            let obj = stored
                .or(small)
                .filter(|o| o.size == *size)
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Collected,
                        format!("{path} ({}) has no chunk list here", hash.hex()),
                    )
                    .hint("push again: the server stores a file's list once it has its chunks")
                })?;
            if !s.known.usable(&obj)? {
                return Err(Error::new(
                    ErrorKind::Collected,
                    format!("the chunk list of {path} names a copy that cannot be used"),
                )
                .hint("push again: the file is read and stored anew"));
            }
            // A file's hash alone is no capability: a version of the key's namespace
            // names a file only if the key reaches it already, or sent its chunk list
            // (all its chunk hashes and lengths, which only the file's bytes give).
            if !s.shown(&grant.name, hash) && !s.reach.reaches(grant, hash)? {
                return Err(Error::new(
                    ErrorKind::Collected,
                    format!(
                        "{path} ({}): its chunk list was not sent with this push",
                        hash.hex()
                    ),
                )
                .hint(
                    "push again: the files a version names are sent, or already the namespace's",
                ));
            }
            stats.bytes += size;
            stats.files += 1;
            stats.chunks += obj.chunks.len() as u64;
        }
    }
    stats.new_bytes = said.new_bytes.min(stats.bytes);
    stats.new_chunks = said.new_chunks.min(stats.chunks);
    Ok((stats, small_packs))
}

pub async fn tag(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = crate::reply::read_body(body, SMALL_BODY).await?;
    let req: TagBody = serde_json::from_slice(&body)
        .map_err(|e| failed(Error::invalid(format!("not a tag request: {e:.200}"))))?;
    let parsed = (|| -> Result<_> {
        let vol = VolumeName::parse(&req.volume)?;
        let tag = Name::parse("tag", &req.tag)?;
        let to = req.to.as_deref().map(Digest::parse).transpose()?;
        let expected = match &req.expected {
            None => None,
            Some(None) => Some(None),
            Some(Some(d)) => Some(Some(Digest::parse(d)?)),
        };
        Ok((vol, tag, to, expected))
    })();
    let (vol, tag, to, expected) = parsed.map_err(failed)?;
    writes_in(&grant, &vol, "move tags")?;
    let expires = req.expires.clone();
    let moved = blocking(&grant, req.by.as_deref(), move || match to {
        Some(d) => s.repo.move_tag_until(&vol, &tag, &d, expected, expires),
        None => s.repo.remove_tag(&vol, &tag, expected.flatten()),
    })
    .await;
    let m = moved?;
    Ok(json(&TagMovedBody {
        file: m.file,
        from: m.from,
        moved: m.moved,
        kept_damaged: m.kept_damaged,
    }))
}

pub async fn labels(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = crate::reply::read_body(body, SMALL_BODY).await?;
    let req: LabelBody = serde_json::from_slice(&body)
        .map_err(|e| failed(Error::invalid(format!("not a label request: {e:.200}"))))?;
    let parsed = (|| -> Result<_> {
        Ok(sealvol_core::labels::LabelRequest {
            volume: VolumeName::parse(&req.volume)?,
            digest: Digest::parse(&req.digest)?,
            set: req.set,
            remove: req.remove,
        })
    })();
    let change = parsed.map_err(failed)?;
    writes_in(&grant, &change.volume, "change labels")?;
    let done = blocking(&grant, req.by.as_deref(), move || {
        s.repo.change_labels(&change)
    })
    .await?;
    Ok(json(&done))
}

async fn trash_op(s: Arc<Steward>, grant: Arc<Grant>, body: Bytes, restore: bool) -> Reply {
    let req: TrashBody = serde_json::from_slice(&body)
        .map_err(|e| failed(Error::invalid(format!("not a trash request: {e:.200}"))))?;
    let r = Ref::parse(&req.r).map_err(failed)?;
    let what = if restore {
        "restore versions"
    } else {
        "delete versions"
    };
    writes_in(&grant, &r.volume, what)?;
    let untag = req.untag;
    Ok(match restore {
        true => json(
            &blocking(&grant, req.by.as_deref(), move || {
                s.repo.restore_version(&r)
            })
            .await?,
        ),
        false => json(
            &blocking(&grant, req.by.as_deref(), move || {
                s.repo.delete_version(&r, untag)
            })
            .await?,
        ),
    })
}

pub async fn delete(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = crate::reply::read_body(body, SMALL_BODY).await?;
    trash_op(s, grant, body.bytes, false).await
}

pub async fn restore(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = crate::reply::read_body(body, SMALL_BODY).await?;
    trash_op(s, grant, body.bytes, true).await
}

pub async fn damage(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = crate::reply::read_body(body, SMALL_BODY).await?;
    let req: DamageBody = serde_json::from_slice(&body)
        .map_err(|e| failed(Error::invalid(format!("not a damage report: {e:.200}"))))?;
    let (Some(pack), Some(chunk)) = (Hash::parse_hex(&req.pack), Hash::parse_hex(&req.chunk))
    else {
        return Err(failed(Error::invalid(
            "a damage report names a pack and a chunk by their hashes",
        )));
    };
    let checked = blocking(&grant, None, move || {
        // Only a copy its pack's own table names, read here and failing here.
        let Some(entry) = s.repo.index(&pack)?.and_then(|e| {
            e.into_iter()
                .find(|e| e.hash == chunk && e.offset == req.offset)
        }) else {
            return Ok(false);
        };
        if entry.stored_len != req.len {
            return Ok(false);
        }
        let bad = match s
            .repo
            .pack_range(&pack, entry.offset, entry.stored_len as u64)
        {
            Ok(bytes) => Hash::of(&bytes) != entry.hash,
            Err(e) => e.kind() == ErrorKind::Corrupt,
        };
        if bad {
            s.repo.record_damage(&pack, &entry, "read");
        }
        Ok(bad)
    })
    .await;
    Ok(match checked? {
        true => StatusCode::CREATED.into_response(),
        false => StatusCode::OK.into_response(),
    })
}

pub async fn gc(
    State(s): State<Arc<Steward>>,
    Extension(grant): Extension<Arc<Grant>>,
    body: Body,
) -> Reply {
    let body = crate::reply::read_body(body, SMALL_BODY).await?;
    if !grant.admin {
        return Err(denied(format!(
            "key {} ({}) may not collect garbage: the server's admin key may",
            grant.name,
            grant.scope()
        )));
    }
    let req: GcBody = serde_json::from_slice(&body).unwrap_or(GcBody { dry_run: false });
    let report = blocking(&grant, None, move || {
        s.repo.collect(
            &sealvol_core::ops::GcOptions {
                dry_run: req.dry_run,
                wait: false,
                progress: &sealvol_core::progress::Quiet,
            },
            &sealvol_gc::Here,
        )
    })
    .await;
    Ok(json(&report?))
}
