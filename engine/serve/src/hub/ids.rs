//! The ids the Hub's clients understand. `huggingface_hub` takes a 40-hex revision for
//! a commit (and skips its per-file `HEAD` for one it has), a 64-hex `ETag` for a
//! file's SHA-256 (`hf cache verify` checks it), and any other `ETag` for a git blob
//! id. A version's commit id is its digest's first 40 hex digits, accepted back as a
//! revision (`revision.rs`); ids are computed by the server from bytes it proved,
//! never taken from a client.

use aws_lc_rs::digest;
use sealvol_core::refs::Digest;

/// Files at least this large are LFS files on the Hub (its documented 10 MiB limit for
/// plain git files): their `ETag` is their SHA-256 (`X-Linked-Etag`, `lfs.sha256`).
/// Smaller files are plain git blobs, named by their git blob id.
pub const LFS_MIN: u64 = 10 << 20;

/// The 40-hex commit id that stands for version `d` (`sha`, `X-Repo-Commit`).
pub fn commit_id(d: &Digest) -> String {
    d.hex()[..40].to_string()
}

/// A file's git blob id, as git and the Hub compute it: the SHA-1 of `blob SIZE\0`
/// and the bytes. SHA-1 only names small files here, as git does; nothing is trusted
/// on it (every byte sent is proven against the file's BLAKE3 hash first).
pub struct GitBlob {
    ctx: digest::Context,
    size: u64,
    seen: u64,
}

impl GitBlob {
    pub fn new(size: u64) -> GitBlob {
        let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
        ctx.update(format!("blob {size}\0").as_bytes());
        GitBlob { ctx, size, seen: 0 }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.seen += bytes.len() as u64;
        self.ctx.update(bytes);
    }

    /// The id, or `None` when the bytes given were not the size promised.
    pub fn finish(self) -> Option<String> {
        (self.seen == self.size).then(|| hex::encode(self.ctx.finish().as_ref()))
    }
}

/// The text git keeps for an LFS file in its place: what the Hub names an LFS file's
/// git blob by (`oid` in a tree listing, beside `lfs.oid`, the SHA-256 of the bytes).
pub fn lfs_pointer(sha256_hex: &str, size: u64) -> String {
    format!("version https://git-lfs.github.com/spec/v1\noid sha256:{sha256_hex}\nsize {size}\n")
}

/// The git blob id of `bytes` held whole.
pub fn blob_id(bytes: &[u8]) -> String {
    let mut b = GitBlob::new(bytes.len() as u64);
    b.update(bytes);
    // The size promised is the size given.
    b.finish().unwrap_or_default()
}

/// One entry of a git tree: a file (its blob id) or a folder (its tree id).
pub struct TreeEntry<'a> {
    pub name: &'a str,
    pub folder: bool,
    /// 40 hex digits.
    pub id: &'a str,
}

/// A folder's git tree id: the SHA-1 of `tree SIZE\0` and its entries in git's order
/// (by name, a folder's name compared as if it ended in `/`), each `MODE NAME\0` and
/// the 20 bytes of its id. `None` if an id is not 40 hex digits.
pub fn tree_id(entries: &mut [TreeEntry<'_>]) -> Option<String> {
    let key = |e: &TreeEntry<'_>| {
        let mut k = e.name.as_bytes().to_vec();
        if e.folder {
            k.push(b'/');
        }
        k
    };
    entries.sort_by_key(key);
    let mut body = Vec::new();
    for e in entries.iter() {
        let id = hex::decode(e.id).ok().filter(|b| b.len() == 20)?;
        body.extend_from_slice(if e.folder { b"40000 " } else { b"100644 " });
        body.extend_from_slice(e.name.as_bytes());
        body.push(0);
        body.extend_from_slice(&id);
    }
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(format!("tree {}\0", body.len()).as_bytes());
    ctx.update(&body);
    Some(hex::encode(ctx.finish().as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(bytes: &[u8]) -> Option<String> {
        let mut b = GitBlob::new(bytes.len() as u64);
        for part in bytes.chunks(3) {
            b.update(part);
        }
        b.finish()
    }

    #[test]
    fn git_blob_ids_are_gits_own() {
        // `git hash-object` of an empty file and of "hello\n".
        assert_eq!(
            blob(b"").as_deref(),
            Some("e69de29bb2d1d6434b8b29ae775ad8c2e48c5391")
        );
        assert_eq!(
            blob(b"hello\n").as_deref(),
            Some("ce013625030ba8dba906f756967f9e9ca394464a")
        );
        let mut short = GitBlob::new(10);
        short.update(b"hello\n");
        assert_eq!(
            short.finish(),
            None,
            "fewer bytes than promised name nothing"
        );
    }

    #[test]
    fn tree_ids_and_lfs_pointers_are_gits_own() {
        // `git mktree` of nothing, and of `hello` (holding "hello\n") beside `d/`
        // holding the same file: `git write-tree` gives these.
        assert_eq!(
            tree_id(&mut []).as_deref(),
            Some("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
        );
        let hello = blob_id(b"hello\n");
        let d = tree_id(&mut [TreeEntry {
            name: "hello",
            folder: false,
            id: &hello,
        }])
        .unwrap();
        assert_eq!(d, "b4d01e9b0c4a9356736dfddf8830ba9a54f5271c");
        let root = tree_id(&mut [
            TreeEntry {
                name: "hello",
                folder: false,
                id: &hello,
            },
            TreeEntry {
                name: "d",
                folder: true,
                id: &d,
            },
        ])
        .unwrap();
        assert_eq!(root, "dc64f223252b0d052d5a93e13dc8a0b8081c051e");
        // `git lfs pointer` of a file of 12 bytes.
        let p = lfs_pointer(&"ab".repeat(32), 12);
        assert_eq!(
            p,
            format!(
                "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 12\n",
                "ab".repeat(32)
            )
        );
        assert!(
            tree_id(&mut [TreeEntry {
                name: "x",
                folder: false,
                id: "zz"
            }])
            .is_none()
        );
    }

    #[test]
    fn a_commit_id_is_the_digests_first_40_hex_digits() {
        let d = Digest([0xab; 32]);
        assert_eq!(commit_id(&d), "ab".repeat(20));
        assert!(d.hex().starts_with(&commit_id(&d)));
    }
}
