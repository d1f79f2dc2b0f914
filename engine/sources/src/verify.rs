//! Every byte of a synced file checked against every hash its source gives for it
//! (`sealvol_source::checks`), hashed in order as the pipeline reads it, across every
//! resumed ranged read: one flipped byte with the right length fails the file, naming
//! both hashes, and is never sealed.

use md5::Md5;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_source::checks::Expected;

/// The hashes one file is being checked with.
pub struct Checker {
    expect: Vec<Expected>,
    sha256: Option<Sha256>,
    git: Option<Sha1>,
    md5: Option<Md5>,
    crc32c: Option<crc_fast::Digest>,
}

impl Checker {
    /// For a file of `size` bytes that should hash to each of `expect`.
    pub fn new(expect: &[Expected], size: u64) -> Checker {
        let has = |f: fn(&Expected) -> bool| expect.iter().any(f);
        let git = has(|e| matches!(e, Expected::GitBlob(_))).then(|| {
            let mut h = Sha1::new();
            h.update(format!("blob {size}\0").as_bytes());
            h
        });
        Checker {
            expect: expect.to_vec(),
            sha256: has(|e| matches!(e, Expected::Sha256(_))).then(Sha256::new),
            git,
            md5: has(|e| matches!(e, Expected::Md5(_))).then(Md5::new),
            crc32c: has(|e| matches!(e, Expected::Crc32c(_)))
                .then(|| crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi)),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        if let Some(h) = &mut self.sha256 {
            h.update(bytes);
        }
        if let Some(h) = &mut self.git {
            h.update(bytes);
        }
        if let Some(h) = &mut self.md5 {
            h.update(bytes);
        }
        if let Some(h) = &mut self.crc32c {
            h.update(bytes);
        }
    }

    /// Drops the expectations of `kind`: the source said, as it sent the bytes, that
    /// they do not hold for this object (an S3 ETag of an object encrypted with KMS).
    pub fn void(&mut self, kind: &str) {
        self.expect.retain(|e| e.kind() != kind);
    }

    /// The checks the whole file passed; an error naming `name` and both hashes when
    /// one disagrees.
    pub fn finish(self, name: &str) -> Result<Vec<&'static str>> {
        let sha256 = self.sha256.map(|h| <[u8; 32]>::from(h.finalize()));
        let git = self.git.map(|h| <[u8; 20]>::from(h.finalize()));
        let md5 = self.md5.map(|h| <[u8; 16]>::from(h.finalize()));
        let crc32c = self.crc32c.map(|h| h.finalize() as u32);
        let mut passed = Vec::new();
        for e in &self.expect {
            let got = match e {
                Expected::Sha256(_) => sha256.map(Expected::Sha256),
                Expected::GitBlob(_) => git.map(Expected::GitBlob),
                Expected::Md5(_) => md5.map(Expected::Md5),
                Expected::Crc32c(_) => crc32c.map(Expected::Crc32c),
            };
            match got {
                Some(g) if g == *e => passed.push(e.kind()),
                Some(g) => {
                    return Err(Error::new(
                        ErrorKind::Corrupt,
                        format!(
                            "{name}: the bytes read do not match the source's own {}: it says {}, they hash to {}",
                            e.kind(),
                            e.hex(),
                            g.hex()
                        ),
                    )
                    .hint("the source or the network changed bytes on the way; nothing of this file was sealed: run the sync again, and if it fails again the source itself is damaged"));
                }
                None => {}
            }
        }
        passed.dedup();
        Ok(passed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_of(data: &[u8]) -> Vec<Expected> {
        let sha: [u8; 32] = Sha256::digest(data).into();
        let mut git = Sha1::new();
        git.update(format!("blob {}\0", data.len()).as_bytes());
        git.update(data);
        vec![
            Expected::Sha256(sha),
            Expected::GitBlob(git.finalize().into()),
            Expected::Md5(Md5::digest(data).into()),
            Expected::Crc32c(crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, data) as u32),
        ]
    }

    #[test]
    fn the_right_bytes_in_any_pieces_pass_every_check_and_one_flipped_byte_fails_each() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let expect = all_of(&data);
        let mut c = Checker::new(&expect, data.len() as u64);
        for piece in data.chunks(977) {
            c.update(piece);
        }
        assert_eq!(
            c.finish("f").unwrap(),
            ["sha256", "git-blob-sha1", "md5", "crc32c"]
        );
        let mut bad = data.clone();
        bad[50_000] ^= 1;
        for e in &expect {
            let mut c = Checker::new(std::slice::from_ref(e), data.len() as u64);
            c.update(&bad);
            let err = c.finish("hf://o/m/w.bin").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::Corrupt);
            let msg = err.to_string();
            assert!(
                msg.contains("hf://o/m/w.bin") && msg.contains(&e.hex()),
                "{msg}"
            );
        }
    }

    #[test]
    fn known_values_and_a_voided_check() {
        // git hash-object of "hello\n"; CRC32C of "123456789" is e3069283.
        let mut c = Checker::new(
            &[
                Expected::parse_hex("git-blob-sha1", "ce013625030ba8dba906f756967f9e9ca394464a")
                    .unwrap(),
            ],
            6,
        );
        c.update(b"hello\n");
        assert_eq!(c.finish("f").unwrap(), ["git-blob-sha1"]);
        let mut c = Checker::new(&[Expected::Crc32c(0xe306_9283)], 9);
        c.update(b"123456789");
        assert_eq!(c.finish("f").unwrap(), ["crc32c"]);
        let mut c = Checker::new(&[Expected::Md5([0; 16])], 1);
        c.update(b"x");
        c.void("md5");
        assert_eq!(c.finish("f").unwrap(), Vec::<&str>::new());
    }
}
