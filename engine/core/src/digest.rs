//! The version digest: BLAKE3 over a canonical listing of the entries (docs/FORMAT.md).
//!
//! It depends only on paths, kinds, executable bits, sizes and content hashes, never on
//! chunking, packs, time or who pushed, so `sealvol digest DIR` agrees with the digest a
//! push seals on any machine.

use serde::{Deserialize, Serialize};

use crate::refs::Digest;

/// First bytes of every canonical listing; bumping it would change every digest.
pub const LISTING_MAGIC: &[u8] = b"sealvol/version/v1\n";

/// The BLAKE3 hash of one file's whole content.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    pub fn of(bytes: &[u8]) -> Hash {
        Hash(*blake3::hash(bytes).as_bytes())
    }

    /// The hash of a whole file's content, read on every core.
    pub fn of_file(path: &std::path::Path) -> crate::error::Result<Hash> {
        let mut h = blake3::Hasher::new();
        h.update_mmap_rayon(path)
            .map_err(|e| crate::error::Error::io("cannot read", path, e))?;
        Ok(Hash(*h.finalize().as_bytes()))
    }

    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn parse_hex(s: &str) -> Option<Hash> {
        let mut b = [0u8; 32];
        hex::decode_to_slice(s, &mut b).ok()?;
        Some(Hash(b))
    }
}

impl std::fmt::Debug for Hash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", &self.hex()[..16])
    }
}

impl Serialize for Hash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> Deserialize<'de> for Hash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Hash, D::Error> {
        let s = String::deserialize(d)?;
        Hash::parse_hex(&s).ok_or_else(|| serde::de::Error::custom("expected 64 hex digits"))
    }
}

/// One entry of a version, as it enters the digest and the manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Entry {
    File {
        path: String,
        size: u64,
        hash: Hash,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        exec: bool,
    },
    Symlink {
        path: String,
        target: String,
    },
    /// A directory with nothing in it; directories with entries are implied by paths.
    Dir {
        path: String,
    },
}

impl Entry {
    pub fn path(&self) -> &str {
        match self {
            Entry::File { path, .. } | Entry::Symlink { path, .. } | Entry::Dir { path } => path,
        }
    }

    pub fn size(&self) -> u64 {
        match self {
            Entry::File { size, .. } => *size,
            _ => 0,
        }
    }
}

pub(crate) const FILE: u8 = 1;
pub(crate) const SYMLINK: u8 = 2;
pub(crate) const DIR: u8 = 3;

/// Appends one entry's bytes, as the digest hashes them.
pub fn encode_entry(out: &mut Vec<u8>, e: &Entry) {
    let put_str = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    match e {
        Entry::File {
            path,
            size,
            hash,
            exec,
        } => {
            out.push(FILE);
            put_str(out, path);
            out.push(*exec as u8);
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&hash.0);
        }
        Entry::Symlink { path, target } => {
            out.push(SYMLINK);
            put_str(out, path);
            put_str(out, target);
        }
        Entry::Dir { path } => {
            out.push(DIR);
            put_str(out, path);
        }
    }
}

/// The listing of `entries` (sorted by path): its BLAKE3 is their digest.
pub fn encode(entries: &[Entry]) -> Vec<u8> {
    let mut out = LISTING_MAGIC.to_vec();
    for e in entries {
        encode_entry(&mut out, e);
    }
    out
}

/// Computes the digest of entries that are already sorted bytewise by path.
pub fn version_digest(entries: &[Entry]) -> Digest {
    // The listing, hashed as it is made rather than held whole.
    let mut h = blake3::Hasher::new();
    h.update(LISTING_MAGIC);
    let mut buf = Vec::with_capacity(256);
    for e in entries {
        buf.clear();
        encode_entry(&mut buf, e);
        h.update(&buf);
    }
    Digest(*h.finalize().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector written down in docs/FORMAT.md. If this test fails, every digest
    /// ever sealed has changed meaning: fix the code, not the vector.
    #[test]
    fn format_md_test_vector() {
        let entries = vec![
            Entry::File {
                path: "a.txt".into(),
                size: 6,
                hash: Hash::of(b"hello\n"),
                exec: false,
            },
            Entry::Dir {
                path: "empty".into(),
            },
            Entry::Symlink {
                path: "link".into(),
                target: "a.txt".into(),
            },
            Entry::File {
                path: "run.sh".into(),
                size: 0,
                hash: Hash::of(b""),
                exec: true,
            },
        ];
        assert_eq!(
            Hash::of(b"hello\n").hex(),
            "8e4c7c1b99dbfd50e7a95185fead5ee1448fa904a2fdd778eaf5f2dbfd629a99",
        );
        assert_eq!(
            version_digest(&entries).to_string(),
            "b3:c221afc5a03045062bebd5c0c00fd9f7ebdacf3a1dc02670201d702798bab2b5"
        );
    }

    #[test]
    fn digest_sees_every_field() {
        let base = Entry::File {
            path: "a".into(),
            size: 1,
            hash: Hash::of(b"x"),
            exec: false,
        };
        let d = version_digest(std::slice::from_ref(&base));
        let variants = [
            Entry::File {
                path: "b".into(),
                size: 1,
                hash: Hash::of(b"x"),
                exec: false,
            },
            Entry::File {
                path: "a".into(),
                size: 2,
                hash: Hash::of(b"x"),
                exec: false,
            },
            Entry::File {
                path: "a".into(),
                size: 1,
                hash: Hash::of(b"y"),
                exec: false,
            },
            Entry::File {
                path: "a".into(),
                size: 1,
                hash: Hash::of(b"x"),
                exec: true,
            },
            Entry::Symlink {
                path: "a".into(),
                target: "x".into(),
            },
            Entry::Dir { path: "a".into() },
        ];
        for v in variants {
            assert_ne!(version_digest(std::slice::from_ref(&v)), d, "{v:?}");
        }
        assert_ne!(version_digest(&[]), d);
    }
}
