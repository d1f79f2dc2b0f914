//! What a source itself says a file's bytes hash to, as its listing gives it: the
//! sync checks every byte it reads against each of these (`sealvol-sources`'
//! `verify.rs`) and records which check each file passed. A source that sends bytes
//! its own listing disagrees with fails the file, never seals it.

use serde::Serialize;

/// One hash a source gives for a file's whole content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// SHA-256 of the content: a Hugging Face LFS file's `lfs.oid` / `X-Linked-Etag`.
    Sha256([u8; 32]),
    /// The git blob id of the content, SHA-1 of `blob LEN\0` and the bytes: a Hugging
    /// Face file kept in git (not LFS), its `oid` and `ETag`.
    GitBlob([u8; 20]),
    /// MD5 of the content: an S3 object's ETag when it was written in one part and not
    /// encrypted with KMS or a customer key; a GCS object's `md5Hash`.
    Md5([u8; 16]),
    /// CRC32C (Castagnoli) of the content: a GCS object's `crc32c`.
    Crc32c(u32),
}

impl Expected {
    /// The check's name, as a job's record and `volume describe` give it.
    pub fn kind(&self) -> &'static str {
        match self {
            Expected::Sha256(_) => "sha256",
            Expected::GitBlob(_) => "git-blob-sha1",
            Expected::Md5(_) => "md5",
            Expected::Crc32c(_) => "crc32c",
        }
    }

    /// The value in hex, as messages give it.
    pub fn hex(&self) -> String {
        match self {
            Expected::Sha256(b) => hex(b),
            Expected::GitBlob(b) => hex(b),
            Expected::Md5(b) => hex(b),
            Expected::Crc32c(v) => format!("{v:08x}"),
        }
    }

    /// From `hex` digits of the right length for `kind`'s value (either case), or none.
    pub fn parse_hex(kind: &str, text: &str) -> Option<Expected> {
        let text = text.trim().trim_matches('"');
        let bytes = unhex(text)?;
        match (kind, bytes.len()) {
            ("sha256", 32) => bytes.try_into().ok().map(Expected::Sha256),
            ("git-blob-sha1", 20) => bytes.try_into().ok().map(Expected::GitBlob),
            ("md5", 16) => bytes.try_into().ok().map(Expected::Md5),
            ("crc32c", 4) => Some(Expected::Crc32c(u32::from_be_bytes(bytes.try_into().ok()?))),
            _ => None,
        }
    }
}

/// `KIND:HEX`, as a job's listing shows it.
impl Serialize for Expected {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{}:{}", self.kind(), self.hex()))
    }
}

/// What a file's bytes were checked with, for the job's record and the version's
/// provenance: the names of the checks it passed (none: the source gave nothing to
/// check it with).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Checked(pub Vec<&'static str>);

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_values_of_the_wrong_length_or_digits_are_no_check() {
        let sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let e = Expected::parse_hex("sha256", sha).unwrap();
        assert_eq!(e.hex(), sha);
        assert_eq!(e.kind(), "sha256");
        assert_eq!(
            Expected::parse_hex("md5", "\"d41d8cd98f00b204e9800998ecf8427e\"")
                .unwrap()
                .hex(),
            "d41d8cd98f00b204e9800998ecf8427e"
        );
        for (kind, bad) in [
            ("sha256", &sha[..62]),
            ("md5", "d41d8cd98f00b204e9800998ecf8427e-2"),
            ("md5", "zz1d8cd98f00b204e9800998ecf8427e"),
            ("git-blob-sha1", sha),
            ("sha512", sha),
        ] {
            assert_eq!(Expected::parse_hex(kind, bad), None, "{kind} {bad}");
        }
    }
}
