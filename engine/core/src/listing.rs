//! Version listings, `listings/<ns>/<vol>/<digest>`: a version's entries in the binary
//! form its digest is the hash of (docs/FORMAT.md, "The version digest"; the encoding
//! is `digest::encode`), stored beside
//! its manifest. BLAKE3 of the listing *is* the digest, so a listing checks itself and
//! is trusted exactly as far as the manifest: a mount reads it instead of parsing the
//! JSON manifest (12 MB for 100,000 files) and finds entries by binary search, since
//! they are sorted by path.
//!
//! Derived, like summaries, with the same life: written after the manifest at seal,
//! deleted before it at purge, removed by gc when its manifest is gone, written by
//! `repair` where missing. A missing or damaged listing makes the reader use the
//! manifest instead; it never changes the digest.

use std::ops::Range;

use crate::digest::{DIR, Entry, FILE, Hash, LISTING_MAGIC, SYMLINK, encode};
use crate::error::{Error, Result};
use crate::paths::{is_clean_relative, link_stays_inside};
use crate::refs::Digest;
use crate::refs::VolumeName;
use crate::repo::Repository;

/// One entry of a listing, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryRef<'a> {
    File { size: u64, hash: Hash, exec: bool },
    Symlink { target: &'a str },
    Dir,
}

/// A decoded listing: its bytes, and where each entry's path lies in them, in path
/// order. Nothing is copied out per entry, so a million entries cost one pass.
pub struct Listing {
    bytes: Vec<u8>,
    /// Per entry: (path start, path end, the byte after the path).
    at: Vec<(u32, u32, u32)>,
    files: u64,
    file_bytes: u64,
}

fn damaged(what: &str) -> Error {
    Error::corrupt(format!("the version's listing is damaged: {what}"))
}

impl Listing {
    /// Decodes a listing whose BLAKE3 is `digest`, refusing one that is not (damaged, or
    /// about another version), and one whose paths are not clean relative paths or
    /// whose links climb out: a mount must never show what a pull would refuse to write.
    pub fn open(bytes: Vec<u8>, digest: &Digest) -> Result<Listing> {
        if Digest(*blake3::hash(&bytes).as_bytes()) != *digest {
            return Err(damaged(&format!("it does not hash to {digest}")));
        }
        Listing::decode(bytes)
    }

    /// Decodes the listing of entries already checked against their digest.
    pub fn from_entries(entries: &[Entry]) -> Result<Listing> {
        Listing::decode(encode(entries))
    }

    fn decode(bytes: Vec<u8>) -> Result<Listing> {
        if bytes.len() > u32::MAX as usize {
            return Err(Error::corrupt(
                "the version's listing is over 4 GiB; mount it from its manifest",
            ));
        }
        if !bytes.starts_with(LISTING_MAGIC) {
            return Err(damaged("it does not start with the listing magic"));
        }
        let mut at = Vec::new();
        let (mut files, mut file_bytes) = (0, 0u64);
        let mut i = LISTING_MAGIC.len();
        let u32_at = |i: usize| -> Result<usize> {
            let b = bytes
                .get(i..i + 4)
                .ok_or_else(|| damaged("it is cut short"))?;
            Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        };
        let str_at = |i: usize| -> Result<(usize, usize)> {
            let n = u32_at(i)?;
            let s = i + 4;
            let text = bytes
                .get(s..s + n)
                .ok_or_else(|| damaged("it is cut short"))?;
            std::str::from_utf8(text).map_err(|_| damaged("a path is not UTF-8"))?;
            Ok((s, s + n))
        };
        while i < bytes.len() {
            let kind = bytes[i];
            let (ps, pe) = str_at(i + 1)?;
            let path = std::str::from_utf8(&bytes[ps..pe]).unwrap_or_default();
            let mut safe = is_clean_relative(path);
            let next = match kind {
                FILE => {
                    let size = bytes
                        .get(pe + 1..pe + 9)
                        .ok_or_else(|| damaged("it is cut short"))?;
                    files += 1;
                    file_bytes += u64::from_le_bytes(size.try_into().unwrap_or_default());
                    pe + 1 + 8 + 32
                }
                SYMLINK => {
                    let (ts, te) = str_at(pe)?;
                    let target = std::str::from_utf8(&bytes[ts..te]).unwrap_or_default();
                    safe &= link_stays_inside(path, target);
                    te
                }
                DIR => pe,
                k => return Err(damaged(&format!("unknown entry kind {k}"))),
            };
            if next > bytes.len() {
                return Err(damaged("it is cut short"));
            }
            if !safe {
                return Err(Error::corrupt(format!(
                    "the version holds an unsafe path {path:?}; refusing to mount it"
                )));
            }
            at.push((ps as u32, pe as u32, pe as u32));
            i = next;
        }
        // Sealed listings are sorted; finding by prefix needs it, so make sure.
        let key = |a: &(u32, u32, u32)| &bytes[a.0 as usize..a.1 as usize];
        if !at.windows(2).all(|w| key(&w[0]) < key(&w[1])) {
            at.sort_by(|a, b| key(a).cmp(key(b)));
        }
        Ok(Listing {
            bytes,
            at,
            files,
            file_bytes,
        })
    }

    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// Regular files, and their bytes.
    pub fn files(&self) -> (u64, u64) {
        (self.files, self.file_bytes)
    }

    /// Entry `i`'s path.
    pub fn path(&self, i: usize) -> &str {
        let (s, e, _) = self.at[i];
        std::str::from_utf8(&self.bytes[s as usize..e as usize]).unwrap_or_default()
    }

    /// Entry `i`, borrowed.
    pub fn entry(&self, i: usize) -> EntryRef<'_> {
        let (s, _, after) = self.at[i];
        let after = after as usize;
        match self.bytes[s as usize - 5] {
            FILE => {
                let b = &self.bytes[after..after + 41];
                let mut hash = [0u8; 32];
                hash.copy_from_slice(&b[9..41]);
                EntryRef::File {
                    exec: b[0] != 0,
                    size: u64::from_le_bytes(b[1..9].try_into().unwrap_or_default()),
                    hash: Hash(hash),
                }
            }
            SYMLINK => {
                let n =
                    u32::from_le_bytes(self.bytes[after..after + 4].try_into().unwrap_or_default())
                        as usize;
                let t = &self.bytes[after + 4..after + 4 + n];
                EntryRef::Symlink {
                    target: std::str::from_utf8(t).unwrap_or_default(),
                }
            }
            _ => EntryRef::Dir,
        }
    }

    /// The entries in `within` whose paths start with `prefix`: a directory's subtree
    /// when `prefix` ends in `/`. Contiguous, since entries are sorted by path.
    pub fn with_prefix(&self, prefix: &str, within: Range<usize>) -> Range<usize> {
        let slice = &self.at[within.clone()];
        let p = prefix.as_bytes();
        let key = |a: &(u32, u32, u32)| &self.bytes[a.0 as usize..a.1 as usize];
        let lo = slice.partition_point(|a| key(a) < p);
        let hi = lo + slice[lo..].partition_point(|a| key(a).starts_with(p));
        within.start + lo..within.start + hi
    }

    /// The entry whose path is exactly `path`, in `within`.
    pub fn find(&self, path: &str, within: Range<usize>) -> Option<usize> {
        let slice = &self.at[within.clone()];
        let key = |a: &(u32, u32, u32)| &self.bytes[a.0 as usize..a.1 as usize];
        slice
            .binary_search_by(|a| key(a).cmp(path.as_bytes()))
            .ok()
            .map(|k| within.start + k)
    }
}

pub(crate) fn listing_key(vol: &VolumeName, digest: &Digest) -> String {
    crate::keys::Key::Listing(vol.clone(), *digest).to_string()
}

impl Repository {
    /// The stored listing of a version, checked against its digest; `None` if there is
    /// none or it is damaged (logged): the caller reads the manifest instead.
    pub fn listing(&self, vol: &VolumeName, digest: &Digest) -> Result<Option<Listing>> {
        let key = listing_key(vol, digest);
        let Some(bytes) = self.store().get(&key)? else {
            return Ok(None);
        };
        match Listing::open(bytes, digest) {
            Ok(l) => Ok(Some(l)),
            Err(e) => {
                tracing::warn!("{key}: {}; reading the manifest instead", e.message());
                Ok(None)
            }
        }
    }

    /// The size of a version's manifest, if it is there (one stat or HEAD).
    pub fn manifest_size(&self, vol: &VolumeName, digest: &Digest) -> Result<Option<u64>> {
        self.store().size(&crate::repo::manifest_key(vol, digest))
    }

    /// Stores a version's listing unless one is there (a seal, or `repair`).
    pub(crate) fn put_listing(
        &self,
        vol: &VolumeName,
        digest: &Digest,
        bytes: &[u8],
    ) -> Result<bool> {
        self.store().put_if_absent(&listing_key(vol, digest), bytes)
    }

    pub(crate) fn delete_listing(&self, vol: &VolumeName, digest: &Digest) -> Result<()> {
        self.store().delete(&listing_key(vol, digest))
    }

    /// Writes the listing of every version that lacks a good one (`repair`). Returns
    /// the keys written (or, in a dry run, that would be).
    pub fn rebuild_listings(&self, dry_run: bool) -> Result<Vec<String>> {
        let mut written = Vec::new();
        for vol in self.volumes(None)? {
            for digest in self.version_digests(&vol)? {
                let Ok(m) = self.manifest(&vol, &digest) else {
                    continue; // damaged: repair's own steps deal with it
                };
                let key = listing_key(&vol, &digest);
                let good = match self.store().get(&key)? {
                    Some(b) => Digest(*blake3::hash(&b).as_bytes()) == digest,
                    None => false,
                };
                if good {
                    continue;
                }
                if !dry_run {
                    self.store().put(&key, &encode(&m.entries))?;
                }
                written.push(key);
            }
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::version_digest;

    fn file(path: &str, size: u64) -> Entry {
        Entry::File {
            path: path.into(),
            size,
            hash: Hash::of(path.as_bytes()),
            exec: size == 7,
        }
    }

    #[test]
    fn a_listing_hashes_to_the_digest_and_decodes_back() {
        let entries = vec![
            file("a.txt", 1),
            file("a/b/c", 7),
            Entry::Dir {
                path: "empty".into(),
            },
            Entry::Symlink {
                path: "link".into(),
                target: "a.txt".into(),
            },
        ];
        let bytes = encode(&entries);
        let digest = version_digest(&entries);
        assert_eq!(Digest(*blake3::hash(&bytes).as_bytes()), digest);
        let l = Listing::open(bytes.clone(), &digest).unwrap();
        assert_eq!(l.len(), 4);
        assert_eq!(l.files(), (2, 8));
        assert_eq!(l.path(1), "a/b/c");
        assert_eq!(
            l.entry(1),
            EntryRef::File {
                size: 7,
                hash: Hash::of(b"a/b/c"),
                exec: true
            }
        );
        assert_eq!(l.entry(2), EntryRef::Dir);
        assert_eq!(l.entry(3), EntryRef::Symlink { target: "a.txt" });
        assert_eq!(l.with_prefix("a/", 0..4), 1..2);
        assert_eq!(l.with_prefix("zzz/", 0..4), 4..4);
        assert_eq!(l.find("link", 0..4), Some(3));
        assert_eq!(l.find("a", 0..4), None);

        // Damaged, or about another version: refused.
        let mut bad = bytes.clone();
        bad[30] ^= 1;
        assert!(Listing::open(bad, &digest).is_err());
        assert!(Listing::open(bytes, &version_digest(&entries[..1])).is_err());
    }

    #[test]
    fn unsafe_or_cut_listings_are_refused() {
        for bad in [
            vec![file("../x", 1)],
            vec![file("/etc/passwd", 1)],
            vec![Entry::Symlink {
                path: "l".into(),
                target: "../../etc".into(),
            }],
        ] {
            assert!(Listing::from_entries(&bad).is_err(), "{bad:?}");
        }
        let mut cut = encode(&[file("a", 1)]);
        cut.truncate(cut.len() - 3);
        assert!(Listing::decode(cut).is_err());
    }
}
