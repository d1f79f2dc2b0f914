//! Binary encodings of the repository's data objects (docs/FORMAT.md): pack trailers,
//! index objects and file chunk lists. All integers are little-endian.

use std::sync::{Arc, OnceLock};

use crate::digest::Hash;
use crate::error::{Error, Result};
use crate::proof_tree::{Outboard, Proven, unproven};

pub const PACK_MAGIC: &[u8; 8] = b"SVPACK01";
pub const PACK_FOOTER_MAGIC: &[u8; 8] = b"SVPKEND1";
pub const INDEX_MAGIC: &[u8; 8] = b"SVINDX01";
/// A chunk list with its proof (the file's block hashes).
pub const FILE_MAGIC: &[u8; 8] = b"SVFILE02";
/// A chunk list written before proofs: read, proven by hashing the whole file.
pub const FILE_MAGIC_V1: &[u8; 8] = b"SVFILE01";

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

    /// One entry as written; one whose bytes would end past the largest offset (a
    /// crafted trailer, index or chunk list) is damage, so that no reader's
    /// `offset + stored_len` can wrap.
    fn get(r: &mut Reader) -> Result<PackEntry> {
        let e = PackEntry {
            hash: Hash(r.array()?),
            offset: r.u64()?,
            stored_len: r.u32()?,
            raw_len: r.u32()?,
            flags: r.u32()?,
        };
        if e.offset.checked_add(e.stored_len as u64).is_none() {
            return Err(Error::corrupt(format!(
                "{}: a chunk at offset {} of {} bytes ends past the largest offset",
                r.what, e.offset, e.stored_len
            )));
        }
        Ok(e)
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
pub fn check_pack(what: &str, id: &PackId, bytes: &[u8]) -> Result<Vec<PackEntry>> {
    check_pack_with(what, id, bytes.len() as u64, &mut |offset, buf| {
        let at = offset as usize;
        buf.copy_from_slice(&bytes[at..at + buf.len()]);
        Ok(())
    })
}

/// `check_pack` of a pack in a file, read a chunk at a time (memory: one chunk);
/// returns its entries.
pub fn check_pack_file(what: &str, id: &PackId, path: &std::path::Path) -> Result<Vec<PackEntry>> {
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
) -> Result<Vec<PackEntry>> {
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
    Ok(entries)
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

/// A file's chunk list: `files/<aa>/<file hash>`. It says where the file's bytes lie,
/// and carries their proof (`proof/`): a list is a hint, and what it leads to is
/// served only once proven to be the file's.
#[derive(Debug, Clone)]
pub struct FileObject {
    /// The file's hash: the list's name, what its proof is checked against.
    pub hash: Hash,
    pub size: u64,
    pub packs: Vec<PackId>,
    pub chunks: Vec<ChunkRef>,
    /// The proof and which blocks it proved, shared by every clone (so every reader of
    /// one list proves a block once).
    pub proof: Arc<Proven>,
    starts: OnceLock<Vec<u64>>,
}

impl PartialEq for FileObject {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash
            && self.size == other.size
            && self.packs == other.packs
            && self.chunks == other.chunks
            && self.proof.outboard() == other.proof.outboard()
    }
}

impl Eq for FileObject {}

impl FileObject {
    /// A list of file `hash`, proven by `outboard` (already checked against it, or
    /// computed from the bytes), or by nothing yet (`None`: a list written before
    /// proofs, re-encoded as it was).
    pub fn new(
        hash: Hash,
        size: u64,
        packs: Vec<PackId>,
        chunks: Vec<ChunkRef>,
        outboard: Option<Outboard>,
    ) -> FileObject {
        let proof = match outboard {
            Some(ob) => Proven::with(ob),
            None => Proven::default(),
        };
        // A file of one chunk is proven by that chunk's own hash check.
        if chunks.len() == 1 && chunks[0].entry.hash == hash {
            proof.mark_all();
        }
        FileObject {
            hash,
            size,
            packs,
            chunks,
            proof: Arc::new(proof),
            starts: OnceLock::new(),
        }
    }

    /// The same list, naming other copies of its chunks (a relink, a repack, another
    /// repository's packs): the proof carries over, since the bytes are the same.
    pub fn relocated(&self, packs: Vec<PackId>, chunks: Vec<ChunkRef>) -> FileObject {
        FileObject::new(
            self.hash,
            self.size,
            packs,
            chunks,
            self.proof.outboard().cloned(),
        )
    }

    /// The same list with each chunk's copy chosen by `copy` (given the copy it names
    /// now), its packs numbered in the order they are first named: a repack's relink, a
    /// repair's.
    pub fn with_copies(
        &self,
        mut copy: impl FnMut(PackId, &PackEntry) -> (PackId, PackEntry),
    ) -> FileObject {
        let mut packs: Vec<PackId> = Vec::new();
        let mut chunks = Vec::with_capacity(self.chunks.len());
        for c in &self.chunks {
            let (pack, entry) = copy(self.packs[c.pack as usize], &c.entry);
            let slot = match packs.iter().position(|p| *p == pack) {
                Some(i) => i,
                None => {
                    packs.push(pack);
                    packs.len() - 1
                }
            };
            chunks.push(ChunkRef {
                pack: slot as u32,
                entry,
            });
        }
        self.relocated(packs, chunks)
    }

    /// Where each chunk starts in the file, and the file's size last.
    fn starts(&self) -> &[u64] {
        self.starts.get_or_init(|| {
            let mut at = 0u64;
            let mut v = Vec::with_capacity(self.chunks.len() + 1);
            for c in &self.chunks {
                v.push(at);
                at += c.entry.raw_len as u64;
            }
            v.push(at);
            v
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let ob = self.proof.outboard();
        let magic = if ob.is_some() {
            FILE_MAGIC
        } else {
            FILE_MAGIC_V1
        };
        let mut out = magic.to_vec();
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
        if let Some(ob) = ob {
            out.push(ob.log());
            out.extend_from_slice(&(ob.cvs().len() as u64).to_le_bytes());
            for cv in ob.cvs() {
                out.extend_from_slice(cv);
            }
        }
        out
    }

    /// Decodes the chunk list of file `hash`, refusing one whose proof does not merge
    /// into that hash (another file's list, a damaged one).
    pub fn decode(what: &str, bytes: &[u8], hash: &Hash) -> Result<FileObject> {
        FileObject::decode_with(what, bytes, hash, true)
    }

    /// Decodes a list whose proof failed, without it: what repair reads to see whether
    /// the chunks it names are the file's after all (then only its proof was damaged).
    pub fn decode_without_proof(what: &str, bytes: &[u8], hash: &Hash) -> Result<FileObject> {
        FileObject::decode_with(what, bytes, hash, false)
    }

    fn decode_with(what: &str, bytes: &[u8], hash: &Hash, check: bool) -> Result<FileObject> {
        let mut r = Reader::new(what, bytes);
        let magic = r.array::<8>()?;
        let proved = match &magic {
            m if m == FILE_MAGIC => true,
            m if m == FILE_MAGIC_V1 => false,
            _ => return Err(Error::corrupt(format!("{what}: not a file object"))),
        };
        let size = r.u64()?;
        let npacks = r.u32()?;
        if npacks as usize > r.rest().len() / 32 {
            return Err(Error::corrupt(format!("{what}: truncated")));
        }
        let packs = (0..npacks)
            .map(|_| r.array().map(Hash))
            .collect::<Result<Vec<_>>>()?;
        let nchunks = r.u64()?;
        if nchunks > (r.rest().len() / (4 + ENTRY_LEN)) as u64 {
            return Err(Error::corrupt(format!("{what}: truncated")));
        }
        let mut chunks = Vec::with_capacity(nchunks as usize);
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
        let outboard = if proved {
            let log = r.array::<1>()?[0];
            let n = r.u64()?;
            if n > (r.rest().len() / 32) as u64 {
                return Err(Error::corrupt(format!("{what}: truncated")));
            }
            let cvs = (0..n).map(|_| r.array()).collect::<Result<Vec<_>>>()?;
            let ob = Outboard::new(log, size, cvs);
            match (ob, check) {
                (Err(e), true) => {
                    return Err(unproven(what, e.message()));
                }
                (Ok(ob), true) if !ob.proves(hash) => {
                    return Err(unproven(what, "its block hashes merge into another hash"));
                }
                (Ok(ob), true) => Some(ob),
                (_, false) => None,
            }
        } else {
            None
        };
        if !r.rest().is_empty() {
            return Err(Error::corrupt(format!("{what}: trailing bytes")));
        }
        let total: u64 = chunks.iter().map(|c| c.entry.raw_len as u64).sum();
        if total != size {
            return Err(Error::corrupt(format!(
                "{what}: chunks add up to {total} bytes, the file has {size}"
            )));
        }
        Ok(FileObject::new(*hash, size, packs, chunks, outboard))
    }

    /// Whether bytes `[start, end)` are proven already.
    pub fn is_proven(&self, start: u64, end: u64) -> bool {
        let end = end.min(self.size);
        if start >= end || self.proof.all() {
            return true;
        }
        let Some(ob) = self.proof.outboard() else {
            return false;
        };
        let log = ob.log();
        ((start >> log)..=((end - 1) >> log)).all(|b| self.proof.is_proven(b))
    }

    /// Whether every byte of the file is proven (or it has none).
    pub fn all_proven(&self) -> bool {
        self.size == 0 || self.proof.all()
    }
}

impl FileObject {
    /// The chunk holding byte `offset`; the last one for an offset at or past the end.
    pub fn chunk_at(&self, offset: u64) -> usize {
        let starts = self.starts();
        starts[..starts.len() - 1]
            .partition_point(|&s| s <= offset)
            .saturating_sub(1)
    }

    /// The chunks that hold bytes `[start, end)` (`start < end <= size`).
    pub fn chunks_of(&self, start: u64, end: u64) -> std::ops::Range<usize> {
        self.chunk_at(start)..self.chunk_at(end.max(start + 1) - 1) + 1
    }

    /// Where chunk `i` starts in the file (the chunk count gives the size).
    pub fn start_of(&self, i: usize) -> u64 {
        let starts = self.starts();
        starts[i.min(starts.len() - 1)]
    }

    /// The list's name, for messages (`chunk list files/ab/ab12…`).
    pub fn list_name(&self) -> String {
        let h = self.hash.hex();
        format!("chunk list files/{}/{h}", &h[..2])
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

    #[test]
    fn offsets_that_would_wrap_are_damage_in_every_decoder() {
        let e = PackEntry {
            hash: Hash([7; 32]),
            offset: u64::MAX - 10,
            stored_len: 100,
            raw_len: 100,
            flags: FLAG_RAW,
        };
        let entries = encode_entries(&[e]);
        let err = decode_entries("trailer", &entries, 1).unwrap_err();
        assert!(
            err.to_string().contains("ends past the largest offset"),
            "{err}"
        );
        let err = decode_index("index", &encode_index(&[e])).unwrap_err();
        assert!(
            err.to_string().contains("ends past the largest offset"),
            "{err}"
        );
        // A chunk list naming it.
        let obj = FileObject::new(
            Hash([1; 32]),
            100,
            vec![Hash([2; 32])],
            vec![ChunkRef { pack: 0, entry: e }],
            None,
        );
        let err =
            FileObject::decode_without_proof("list", &obj.encode(), &Hash([1; 32])).unwrap_err();
        assert!(
            err.to_string().contains("ends past the largest offset"),
            "{err}"
        );
        // At the edge it is fine.
        let edge = PackEntry {
            offset: u64::MAX - 100,
            ..e
        };
        assert!(decode_entries("trailer", &encode_entries(&[edge]), 1).is_ok());
    }

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

        let h = Hash([7; 32]);
        let chunks: Vec<ChunkRef> = entries
            .iter()
            .map(|&entry| ChunkRef { pack: 0, entry })
            .collect();
        // A list written before proofs.
        let f = FileObject::new(h, 20, vec![pack_id(&entries)], chunks.clone(), None);
        let bytes = f.encode();
        assert_eq!(&bytes[..8], FILE_MAGIC_V1);
        assert_eq!(FileObject::decode("f", &bytes, &h).unwrap(), f);
        assert!(FileObject::decode("f", &bytes[..bytes.len() - 3], &h).is_err());
        let bad = FileObject::new(h, 21, vec![pack_id(&entries)], chunks.clone(), None);
        assert!(FileObject::decode("f", &bad.encode(), &h).is_err());
        // With a proof: decodes only as the file it proves.
        let mut t = crate::proof_tree::TreeHasher::default();
        t.update(&[9u8; 20]);
        let (file, ob) = t.finalize();
        let f = FileObject::new(file, 20, vec![pack_id(&entries)], chunks, Some(ob));
        let bytes = f.encode();
        assert_eq!(&bytes[..8], FILE_MAGIC);
        assert_eq!(FileObject::decode("f", &bytes, &file).unwrap(), f);
        assert!(
            FileObject::decode("f", &bytes, &h).is_ok(),
            "one block: proven by reading"
        );
        assert!(FileObject::decode("f", &bytes[..bytes.len() - 1], &file).is_err());
        // A huge count in a short object is damage, not an allocation.
        let mut huge = FILE_MAGIC_V1.to_vec();
        huge.extend_from_slice(&20u64.to_le_bytes());
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(FileObject::decode("f", &huge, &h).is_err());
    }
}
