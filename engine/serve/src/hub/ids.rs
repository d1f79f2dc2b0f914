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
    fn a_commit_id_is_the_digests_first_40_hex_digits() {
        let d = Digest([0xab; 32]);
        assert_eq!(commit_id(&d), "ab".repeat(20));
        assert!(d.hex().starts_with(&commit_id(&d)));
    }
}
