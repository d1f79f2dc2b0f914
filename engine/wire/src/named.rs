//! How a push names chunks to its server (docs/FORMAT.md, "Operations"): a chunk list
//! (`PUT /v1/ops/lists/{file}`) and small files (`POST /v1/ops/small-files`), each chunk
//! by hash and length with what lets the key name it (`possession.rs`).
//!
//! - a list: `LIST_MAGIC` · u64 file size · u64 chunk count · record*;
//! - small files: `SMALL_MAGIC` · record* (a small file is its one chunk: the record's
//!   hash and length are the file's);
//! - a record: 32-byte hash · u32 length · u8 evidence, then for evidence 1 (a copy this
//!   push uploaded) the 32-byte pack id and u64 offset, for evidence 2 (a proof of
//!   possession) the 40-byte challenge and the 32-byte proof; 0 is none.
//!
//! All numbers little-endian. Lists of the format before (`SVLIST01`, records of hash and
//! length) and small files as hash and u32 size (36 bytes each) are still read, with no
//! evidence.

use sealvol_core::digest::Hash;
use sealvol_core::possession::{Challenge, Evidence, NONCE_LEN, Named, Proof};

pub const LIST_MAGIC: &[u8; 8] = b"SVLIST02";
const LIST_MAGIC_1: &[u8; 8] = b"SVLIST01";
pub const SMALL_MAGIC: &[u8; 8] = b"SVSMAL02";
/// The shortest record (no evidence), and the longest.
const MIN_RECORD: usize = 37;
const MAX_RECORD: usize = MIN_RECORD + NONCE_LEN + 32;

fn put_record(out: &mut Vec<u8>, n: &Named) {
    out.extend_from_slice(&n.hash.0);
    out.extend_from_slice(&n.len.to_le_bytes());
    match &n.evidence {
        Evidence::None => out.push(0),
        Evidence::Copy { pack, offset } => {
            out.push(1);
            out.extend_from_slice(&pack.0);
            out.extend_from_slice(&offset.to_le_bytes());
        }
        Evidence::Proof(c, p) => {
            out.push(2);
            out.extend_from_slice(&c.0);
            out.extend_from_slice(&p.0);
        }
    }
}

/// A chunk list as it travels.
pub fn encode_list(size: u64, chunks: &[Named]) -> Vec<u8> {
    let mut out = Vec::with_capacity(24 + chunks.len() * MIN_RECORD);
    out.extend_from_slice(LIST_MAGIC);
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&(chunks.len() as u64).to_le_bytes());
    for n in chunks {
        put_record(&mut out, n);
    }
    out
}

/// Small files as they travel.
pub fn encode_small(files: &[Named]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + files.len() * MIN_RECORD);
    out.extend_from_slice(SMALL_MAGIC);
    for n in files {
        put_record(&mut out, n);
    }
    out
}

/// Reads records from the front of a body.
struct Records<'a> {
    rest: &'a [u8],
}

impl Records<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (a, b) = self.rest.split_first_chunk::<N>()?;
        self.rest = b;
        Some(*a)
    }

    fn record(&mut self) -> Result<Named, &'static str> {
        let hash = Hash(self.take::<32>().ok_or("a record cut short")?);
        let len = u32::from_le_bytes(self.take::<4>().ok_or("a record cut short")?);
        let evidence = match self.take::<1>().ok_or("a record cut short")?[0] {
            0 => Evidence::None,
            1 => Evidence::Copy {
                pack: Hash(self.take::<32>().ok_or("a record cut short")?),
                offset: u64::from_le_bytes(self.take::<8>().ok_or("a record cut short")?),
            },
            2 => Evidence::Proof(
                Challenge(self.take::<NONCE_LEN>().ok_or("a record cut short")?),
                Proof(self.take::<32>().ok_or("a record cut short")?),
            ),
            _ => return Err("evidence of a kind there is none of"),
        };
        Ok(Named {
            hash,
            len,
            evidence,
        })
    }
}

/// A chunk list: the file's size and its chunks, each of 1 to `max_chunk` bytes, adding
/// up to the size.
pub fn decode_list(body: &[u8], max_chunk: u32) -> Result<(u64, Vec<Named>), String> {
    let bad = |why: &str| {
        format!(
            "not a chunk list ({why}): send SVLIST02, the size, the count, then a record per chunk (docs/FORMAT.md)"
        )
    };
    let mut r = Records { rest: body };
    let magic = r.take::<8>().ok_or_else(|| bad("no magic"))?;
    let v1 = &magic == LIST_MAGIC_1;
    if !v1 && &magic != LIST_MAGIC {
        return Err(bad("no magic"));
    }
    let size = u64::from_le_bytes(r.take::<8>().ok_or_else(|| bad("no size"))?);
    let n = u64::from_le_bytes(r.take::<8>().ok_or_else(|| bad("no count"))?);
    let fits = match v1 {
        true => n.checked_mul(36) == Some(r.rest.len() as u64),
        false => {
            n.checked_mul(MIN_RECORD as u64)
                .is_some_and(|least| least <= r.rest.len() as u64)
                && n.checked_mul(MAX_RECORD as u64)
                    .is_none_or(|most| r.rest.len() as u64 <= most)
        }
    };
    if !fits {
        return Err(bad("its count does not match its length"));
    }
    let mut chunks = Vec::with_capacity(n as usize);
    let mut total = 0u64;
    for _ in 0..n {
        let named = match v1 {
            true => {
                let hash = Hash(r.take::<32>().ok_or_else(|| bad("cut short"))?);
                let len = u32::from_le_bytes(r.take::<4>().ok_or_else(|| bad("cut short"))?);
                Named::plain(hash, len)
            }
            false => r.record().map_err(bad)?,
        };
        if named.len == 0 || named.len > max_chunk {
            return Err(bad(&format!("a chunk of {} bytes", named.len)));
        }
        total += named.len as u64;
        chunks.push(named);
    }
    if !r.rest.is_empty() {
        return Err(bad("bytes after its last record"));
    }
    if total != size {
        return Err(bad(&format!(
            "its chunks add up to {total} bytes, not {size}"
        )));
    }
    Ok((size, chunks))
}

/// Small files: at most `max` of them.
pub fn decode_small(body: &[u8], max: usize) -> Result<Vec<Named>, String> {
    let bad = |why: &str| {
        format!(
            "small files are named by hash and size (36 bytes each) back to back, or by records after SVSMAL02 (docs/FORMAT.md), at most {max} of them: {why}"
        )
    };
    let Some(rest) = body.strip_prefix(SMALL_MAGIC.as_slice()) else {
        // The format before: hash and u32 size, back to back.
        if !body.len().is_multiple_of(36) || body.len() / 36 > max {
            return Err(bad("not a multiple of 36 bytes, or too many"));
        }
        return Ok(body
            .chunks_exact(36)
            .map(|rec| {
                let mut h = [0u8; 32];
                h.copy_from_slice(&rec[..32]);
                let mut n = [0u8; 4];
                n.copy_from_slice(&rec[32..]);
                Named::plain(Hash(h), u32::from_le_bytes(n))
            })
            .collect());
    };
    if rest.len() / MIN_RECORD > max {
        return Err(bad("too many"));
    }
    let mut r = Records { rest };
    let mut out = Vec::new();
    while !r.rest.is_empty() {
        out.push(r.record().map_err(bad)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some() -> Vec<Named> {
        vec![
            Named::plain(Hash([1; 32]), 10),
            Named {
                hash: Hash([2; 32]),
                len: 20,
                evidence: Evidence::Copy {
                    pack: Hash([3; 32]),
                    offset: 77,
                },
            },
            Named {
                hash: Hash([4; 32]),
                len: 30,
                evidence: Evidence::Proof(Challenge([5; NONCE_LEN]), Proof([6; 32])),
            },
        ]
    }

    #[test]
    fn lists_and_small_files_come_back_as_sent() {
        let l = encode_list(60, &some());
        assert_eq!(decode_list(&l, 100), Ok((60, some())));
        assert_eq!(decode_small(&encode_small(&some()), 10), Ok(some()));
    }

    #[test]
    fn every_cut_and_every_extra_byte_is_refused() {
        let l = encode_list(60, &some());
        for cut in 0..l.len() {
            assert!(decode_list(&l[..cut], 100).is_err(), "cut at {cut}");
        }
        let mut longer = l.clone();
        longer.push(0);
        assert!(decode_list(&longer, 100).is_err());
        let s = encode_small(&some());
        for cut in 9..s.len() {
            // A cut that ends on a record's end is a shorter request, not a bad one.
            if decode_small(&s[..cut], 10).is_ok() {
                assert!(
                    cut == 8 + MIN_RECORD || cut == 8 + 2 * MIN_RECORD + 40,
                    "{cut}"
                );
            }
        }
        let mut bad_kind = encode_list(10, &some()[..1]);
        *bad_kind.last_mut().unwrap() = 9;
        assert!(decode_list(&bad_kind, 100).unwrap_err().contains("kind"));
        // A count far past the body is refused before anything is reserved.
        let mut huge = LIST_MAGIC.to_vec();
        huge.extend_from_slice(&1u64.to_le_bytes());
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_list(&huge, 100).is_err());
        assert!(decode_list(&encode_list(60, &some()), 15).is_err());
        assert!(decode_list(&encode_list(61, &some()), 100).is_err());
    }

    #[test]
    fn the_format_before_is_still_read() {
        let mut v1 = LIST_MAGIC_1.to_vec();
        v1.extend_from_slice(&10u64.to_le_bytes());
        v1.extend_from_slice(&1u64.to_le_bytes());
        v1.extend_from_slice(&[1; 32]);
        v1.extend_from_slice(&10u32.to_le_bytes());
        assert_eq!(
            decode_list(&v1, 100),
            Ok((10, vec![Named::plain(Hash([1; 32]), 10)]))
        );
        let mut small = [9u8; 32].to_vec();
        small.extend_from_slice(&5u32.to_le_bytes());
        assert_eq!(
            decode_small(&small, 1),
            Ok(vec![Named::plain(Hash([9; 32]), 5)])
        );
    }
}
