//! Binary encodings of the repository's data objects (docs/FORMAT.md): pack trailers,
//! index objects and file chunk lists. All integers are little-endian.

use crate::digest::Hash;
use crate::error::{Error, Result};

pub const PACK_MAGIC: &[u8; 8] = b"SVPACK01";
pub const PACK_FOOTER_MAGIC: &[u8; 8] = b"SVPKEND1";
pub const INDEX_MAGIC: &[u8; 8] = b"SVINDX01";
pub const FILE_MAGIC: &[u8; 8] = b"SVFILE01";

/// Per-chunk storage flag: bytes stored as they are.
pub const FLAG_RAW: u32 = 0;

/// Bytes of one entry in a pack trailer or an index object.
pub const ENTRY_LEN: usize = 32 + 8 + 4 + 4 + 4;
/// Bytes of a pack footer: entry count and magic.
pub const FOOTER_LEN: usize = 8 + 8;

/// Identifies a pack: BLAKE3 of its entry table, so identical packs share one name.
pub type PackId = Hash;

/// Where a chunk lives inside a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PackEntry {
    pub hash: Hash,
    pub offset: u64,
    pub stored_len: u32,
    pub raw_len: u32,
    pub flags: u32,
}

impl PackEntry {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.hash.0);
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.stored_len.to_le_bytes());
        out.extend_from_slice(&self.raw_len.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
    }

    fn get(r: &mut Reader) -> Result<PackEntry> {
        Ok(PackEntry {
            hash: Hash(r.array()?),
            offset: r.u64()?,
            stored_len: r.u32()?,
            raw_len: r.u32()?,
            flags: r.u32()?,
        })
    }
}

pub fn encode_entries(entries: &[PackEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(entries.len() * ENTRY_LEN);
    for e in entries {
        e.put(&mut out);
    }
    out
}

pub fn pack_id(entries: &[PackEntry]) -> PackId {
    Hash::of(&encode_entries(entries))
}

/// The trailer appended after a pack's chunk bytes: entries, then the footer.
pub fn encode_trailer(entries: &[PackEntry]) -> Vec<u8> {
    let mut out = encode_entries(entries);
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    out.extend_from_slice(PACK_FOOTER_MAGIC);
    out
}

/// Reads the entry count from a pack's last `FOOTER_LEN` bytes.
pub fn decode_footer(what: &str, footer: &[u8]) -> Result<u64> {
    let mut r = Reader::new(what, footer);
    let count = r.u64()?;
    if r.array::<8>()? != *PACK_FOOTER_MAGIC {
        return Err(Error::corrupt(format!("{what}: pack footer is damaged")));
    }
    Ok(count)
}

pub fn decode_entries(what: &str, bytes: &[u8], count: u64) -> Result<Vec<PackEntry>> {
    if bytes.len() as u64 != count.saturating_mul(ENTRY_LEN as u64) {
        return Err(Error::corrupt(format!(
            "{what}: entry table has the wrong length"
        )));
    }
    let mut r = Reader::new(what, bytes);
    (0..count).map(|_| PackEntry::get(&mut r)).collect()
}

/// An index object: the magic, then the pack's entries (same encoding as its trailer).
/// Checks a whole pack as it arrives from a client that is not trusted (a remote push):
/// it starts with the magic, its trailer parses, names it `id`, and lays its chunks
/// back to back in order with every one passing its hash.
pub fn check_pack(what: &str, id: &PackId, bytes: &[u8]) -> Result<()> {
    check_pack_with(what, id, bytes.len() as u64, &mut |offset, buf| {
        let at = offset as usize;
        buf.copy_from_slice(&bytes[at..at + buf.len()]);
        Ok(())
    })
}

/// `check_pack` of a pack in a file, read a chunk at a time (memory: one chunk).
pub fn check_pack_file(what: &str, id: &PackId, path: &std::path::Path) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(path).map_err(|e| Error::io("cannot open", path, e))?;
    let len = f
        .metadata()
        .map_err(|e| Error::io("cannot read", path, e))?
        .len();
    check_pack_with(what, id, len, &mut |offset, buf| {
        f.read_exact_at(buf, offset)
            .map_err(|e| Error::io("cannot read", path, e))
    })
}

/// `check_pack` over `read(offset, buf)`, which fills `buf` from the pack's `len`
/// bytes.
fn check_pack_with(
    what: &str,
    id: &PackId,
    len: u64,
    read: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let bad = |why: &str| Error::corrupt(format!("{what}: {why}"));
    let head = (PACK_MAGIC.len() + FOOTER_LEN) as u64;
    if len < head {
        return Err(bad("not a pack"));
    }
    let mut magic = [0u8; 8];
    read(0, &mut magic)?;
    if magic != *PACK_MAGIC {
        return Err(bad("not a pack"));
    }
    let mut footer = [0u8; FOOTER_LEN];
    read(len - FOOTER_LEN as u64, &mut footer)?;
    let count = decode_footer(what, &footer)?;
    let table = count
        .checked_mul(ENTRY_LEN as u64)
        .filter(|t| *t <= len - head)
        .ok_or_else(|| bad("its entry count does not fit the pack"))?;
    let data_end = len - FOOTER_LEN as u64 - table;
    let mut raw = vec![0u8; table as usize];
    read(data_end, &mut raw)?;
    let entries = decode_entries(what, &raw, count)?;
    if pack_id(&entries) != *id {
        return Err(bad("its entry table does not hash to its name"));
    }
    let mut at = PACK_MAGIC.len() as u64;
    let mut chunk = Vec::new();
    for e in &entries {
        let end = e.offset + e.stored_len as u64;
        if e.offset != at || end > data_end {
            return Err(bad("its chunks are not laid back to back"));
        }
        chunk.resize(e.stored_len as usize, 0);
        read(e.offset, &mut chunk)?;
        if Hash::of(&chunk) != e.hash {
            return Err(bad(&format!("chunk {} fails its hash check", e.hash.hex())));
        }
        at = end;
    }
    if at != data_end {
        return Err(bad("it holds bytes no entry names"));
    }
    Ok(())
}

pub fn encode_index(entries: &[PackEntry]) -> Vec<u8> {
    let mut out = INDEX_MAGIC.to_vec();
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    out.extend_from_slice(&encode_entries(entries));
    out
}

pub fn decode_index(what: &str, bytes: &[u8]) -> Result<Vec<PackEntry>> {
    let mut r = Reader::new(what, bytes);
    if r.array::<8>()? != *INDEX_MAGIC {
        return Err(Error::corrupt(format!("{what}: not an index object")));
    }
    let count = r.u64()?;
    decode_entries(what, r.rest(), count)
}

/// One chunk of a file, with where to find it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRef {
    pub pack: u32,
    pub entry: PackEntry,
}

/// A file's chunk list: `files/<aa>/<file hash>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileObject {
    pub size: u64,
    pub packs: Vec<PackId>,
    pub chunks: Vec<ChunkRef>,
}

impl FileObject {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = FILE_MAGIC.to_vec();
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&(self.packs.len() as u32).to_le_bytes());
        for p in &self.packs {
            out.extend_from_slice(&p.0);
        }
        out.extend_from_slice(&(self.chunks.len() as u64).to_le_bytes());
        for c in &self.chunks {
            out.extend_from_slice(&c.pack.to_le_bytes());
            c.entry.put(&mut out);
        }
        out
    }

    pub fn decode(what: &str, bytes: &[u8]) -> Result<FileObject> {
        let mut r = Reader::new(what, bytes);
        if r.array::<8>()? != *FILE_MAGIC {
            return Err(Error::corrupt(format!("{what}: not a file object")));
        }
        let size = r.u64()?;
        let npacks = r.u32()?;
        let packs = (0..npacks)
            .map(|_| r.array().map(Hash))
            .collect::<Result<Vec<_>>>()?;
        let nchunks = r.u64()?;
        let mut chunks = Vec::with_capacity(nchunks.min(1 << 20) as usize);
        for _ in 0..nchunks {
            let pack = r.u32()?;
            if pack >= npacks {
                return Err(Error::corrupt(format!(
                    "{what}: chunk names pack {pack} of {npacks}"
                )));
            }
            chunks.push(ChunkRef {
                pack,
                entry: PackEntry::get(&mut r)?,
            });
        }
        if !r.rest().is_empty() {
            return Err(Error::corrupt(format!("{what}: trailing bytes")));
        }
        let total: u64 = chunks.iter().map(|c| c.entry.raw_len as u64).sum();
        if total != size {
            return Err(Error::corrupt(format!(
                "{what}: chunks add up to {total} bytes, the file has {size}"
            )));
        }
        Ok(FileObject {
            size,
            packs,
            chunks,
        })
    }
}

/// Bounds-checked little-endian reader that reports truncation as corruption.
struct Reader<'a> {
    what: &'a str,
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(what: &'a str, bytes: &'a [u8]) -> Self {
        Reader { what, bytes }
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        if self.bytes.len() < N {
            return Err(Error::corrupt(format!("{}: truncated", self.what)));
        }
        let (head, tail) = self.bytes.split_at(N);
        self.bytes = tail;
        let mut a = [0u8; N];
        a.copy_from_slice(head);
        Ok(a)
    }

    fn u32(&mut self) -> Result<u32> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64> {
        self.array().map(u64::from_le_bytes)
    }

    fn rest(&self) -> &'a [u8] {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u8) -> PackEntry {
        PackEntry {
            hash: Hash([n; 32]),
            offset: 8 + n as u64 * 10,
            stored_len: 10,
            raw_len: 10,
            flags: FLAG_RAW,
        }
    }

    #[test]
    fn round_trips_and_rejects_truncation() {
        let entries = vec![entry(1), entry(2)];
        let idx = encode_index(&entries);
        assert_eq!(decode_index("i", &idx).unwrap(), entries);
        assert!(decode_index("i", &idx[..idx.len() - 1]).is_err());

        let trailer = encode_trailer(&entries);
        let count = decode_footer("p", &trailer[trailer.len() - FOOTER_LEN..]).unwrap();
        assert_eq!(count, 2);

        let f = FileObject {
            size: 20,
            packs: vec![pack_id(&entries)],
            chunks: entries
                .iter()
                .map(|&entry| ChunkRef { pack: 0, entry })
                .collect(),
        };
        let bytes = f.encode();
        assert_eq!(FileObject::decode("f", &bytes).unwrap(), f);
        assert!(FileObject::decode("f", &bytes[..bytes.len() - 3]).is_err());
        let mut bad = f.clone();
        bad.size = 21;
        assert!(FileObject::decode("f", &bad.encode()).is_err());
    }
}
