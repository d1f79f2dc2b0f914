//! Signatures beside a version, `signatures/<ns>/<vol>/<digest>/<hash>`: model-signing
//! bundles (made, read and checked by `sealvol-sign`), several per version (several
//! signers), each named by the BLAKE3 of its bytes. Like profiles they are beside the
//! version, not in it: a signature never changes the digest, and the repository
//! trusts none: whoever reads one verifies it against keys of its own.
//!
//! And `sha256/<ns>/<vol>/<digest>`: the SHA-256 of each file of the version, for
//! signatures made over SHA-256 (model-signing's CLI default), kept after the one read
//! of the bytes that computing them costs.
//!
//! A purge removes a version's signatures with it; gc removes those whose version is
//! gone; a restore finds them where they were.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Hash;
use crate::error::{Error, Result};
use crate::keys::{Key, volume_folder};
use crate::refs::{Digest, VolumeName};
use crate::repo::{Repository, json_error};

/// No version needs more signers than this; more is refused when stored and when read.
pub const MAX_SIGNATURES: usize = 64;
/// A signature lists every file; a version of a million files makes one of ~200 MiB.
pub const MAX_SIGNATURE_BYTES: usize = 512 << 20;
pub const SHA256S_FORMAT: u32 = 1;

/// One stored signature: its name and bytes.
#[derive(Debug, Clone)]
pub struct Stored {
    pub hash: Hash,
    pub key: String,
    pub bytes: Vec<u8>,
}

/// The SHA-256 of each file of a version, by path (hex).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sha256s {
    pub format: u32,
    pub digest: String,
    pub files: BTreeMap<String, String>,
}

fn folder(vol: &VolumeName, digest: &Digest) -> String {
    format!("{}{}/", volume_folder("signatures", vol), digest.hex())
}

impl Repository {
    /// Stores a signature of `vol@digest` (a live version, or one in the trash);
    /// `false` when the same bytes were stored already.
    pub fn put_signature(
        &self,
        vol: &VolumeName,
        digest: &Digest,
        bytes: &[u8],
    ) -> Result<(Stored, bool)> {
        self.manifest(vol, digest)?;
        if bytes.len() > MAX_SIGNATURE_BYTES {
            return Err(
                Error::invalid("the signature is larger than any signature of a version")
                    .hint("give a model-signing signature file"),
            );
        }
        let hash = Hash::of(bytes);
        let have = self.signature_keys(vol, digest)?;
        let key = Key::Signature(vol.clone(), *digest, hash).to_string();
        if !have.contains(&key) && have.len() >= MAX_SIGNATURES {
            return Err(Error::invalid(format!(
                "vol:{vol}@{} has {MAX_SIGNATURES} signatures already",
                digest.short(16)
            ))
            .hint("no version needs more signers"));
        }
        let created = self.store().put_if_absent(&key, bytes)?;
        Ok((
            Stored {
                hash,
                key,
                bytes: bytes.to_vec(),
            },
            created,
        ))
    }

    fn signature_keys(&self, vol: &VolumeName, digest: &Digest) -> Result<Vec<String>> {
        Ok(self
            .store()
            .list(&folder(vol, digest))?
            .into_iter()
            .map(|o| o.key)
            .collect())
    }

    /// The signatures stored beside `vol@digest`, oldest name first; one whose bytes
    /// do not hash to its name, or that cannot be read, is left out (and logged): a
    /// reader checks each against its own keys anyway.
    pub fn signatures(&self, vol: &VolumeName, digest: &Digest) -> Result<Vec<Stored>> {
        self.signatures_within(vol, digest, MAX_SIGNATURE_BYTES)
    }

    /// `signatures`, leaving out (unread) any larger than `most` bytes: a reader that
    /// knows how large a signature of this version can be reads no more than that.
    pub fn signatures_within(
        &self,
        vol: &VolumeName,
        digest: &Digest,
        most: usize,
    ) -> Result<Vec<Stored>> {
        let most = most.min(MAX_SIGNATURE_BYTES);
        let mut out = Vec::new();
        for key in self
            .signature_keys(vol, digest)?
            .into_iter()
            .take(MAX_SIGNATURES)
        {
            let Ok(Key::Signature(_, _, hash)) = Key::parse(&key) else {
                continue;
            };
            match self.store().size(&key)? {
                Some(n) if n as usize <= most => {}
                _ => {
                    tracing::warn!("{key}: larger than any signature of this version; left out");
                    continue;
                }
            }
            let Some(bytes) = self.store().get(&key)? else {
                continue;
            };
            if Hash::of(&bytes) != hash {
                tracing::warn!("{key}: its bytes do not hash to its name; left out");
                continue;
            }
            out.push(Stored { hash, key, bytes });
        }
        Ok(out)
    }

    /// How many signatures are stored beside `vol@digest` (a listing; none is read).
    pub fn signature_count(&self, vol: &VolumeName, digest: &Digest) -> Result<usize> {
        Ok(self.signature_keys(vol, digest)?.len().min(MAX_SIGNATURES))
    }

    pub(crate) fn delete_signatures(&self, vol: &VolumeName, digest: &Digest) -> Result<()> {
        for key in self.signature_keys(vol, digest)? {
            self.store().delete(&key)?;
        }
        self.store()
            .delete(&Key::Sha256s(vol.clone(), *digest).to_string())
    }

    /// The SHA-256s kept for `vol@digest`, if any (and if they are of it).
    pub fn sha256s(&self, vol: &VolumeName, digest: &Digest) -> Result<Option<Sha256s>> {
        let key = Key::Sha256s(vol.clone(), *digest).to_string();
        let Some(bytes) = self.store().get(&key)? else {
            return Ok(None);
        };
        let s: Sha256s = match serde_json::from_slice(&bytes) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("{key} is damaged ({e}); the bytes will be read again");
                return Ok(None);
            }
        };
        Ok((s.format == SHA256S_FORMAT && s.digest == digest.to_string()).then_some(s))
    }

    pub fn put_sha256s(
        &self,
        vol: &VolumeName,
        digest: &Digest,
        files: BTreeMap<String, String>,
    ) -> Result<()> {
        let s = Sha256s {
            format: SHA256S_FORMAT,
            digest: digest.to_string(),
            files,
        };
        let bytes = serde_json::to_vec(&s).map_err(json_error)?;
        self.store()
            .put_if_absent(&Key::Sha256s(vol.clone(), *digest).to_string(), &bytes)
            .map(|_| ())
    }
}
