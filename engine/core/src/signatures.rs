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
//!
//! What a writer may store (docs/SEMANTICS.md, "Signatures"), here and through a
//! server alike (which takes signatures only as an operation, `ops::Registry::put_signature`):
//! only beside a version that exists, no larger than a signature of that version can be
//! (`max_bytes`, from its files), at most `MAX_SIGNATURES` per version, counted when
//! written, and at most `MAX_PER_SIGNER` per signer (by the key hint a signature
//! names), so one signer cannot fill the list. A reader reads
//! up to `MAX_READ` of them and tries first those that name a key it trusts
//! (`sealvol-sign`), so a count of junk never stands in front of a valid one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::digest::Hash;
use crate::error::{Error, ErrorKind, Result};
use crate::keys::{Key, volume_folder};
use crate::refs::{Digest, VolumeName};
use crate::repo::{Repository, json_error};

/// No version needs more signers than this; more is refused when stored.
pub const MAX_SIGNATURES: usize = 64;
/// Signatures one key hint may name per version.
pub const MAX_PER_SIGNER: usize = 4;
/// The most a reader reads (only a repository written around these rules, by hand,
/// holds more than `MAX_SIGNATURES`).
pub const MAX_READ: usize = 4 * MAX_SIGNATURES;
/// A signature lists every file; a version of a million files makes one of ~200 MiB.
pub const MAX_SIGNATURE_BYTES: usize = 512 << 20;

/// The most a signature of `manifest`'s version can weigh: the bundle's frame, and per
/// file its name (JSON-escaped at worst six bytes a byte), digest and keys, all in
/// base64. A larger object is no signature of it: it is neither stored nor read, so a
/// crafted 512 MiB object costs nobody anything.
pub fn max_bytes(manifest: &crate::manifest::Manifest) -> usize {
    let per_file: usize = manifest
        .entries
        .iter()
        .map(|e| e.path().len() * 6 + 256)
        .sum();
    (64 * 1024 + (per_file + 1024) * 4 / 3).min(MAX_SIGNATURE_BYTES)
}

/// The key hint a signature file names (a model-signing bundle's
/// `verificationMaterial.publicKey.hint`), unverified: what tells one signer's
/// signatures from another's.
pub fn signer_hint(bytes: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Bundle {
        #[serde(rename = "verificationMaterial")]
        material: Material,
    }
    #[derive(Deserialize)]
    struct Material {
        #[serde(rename = "publicKey")]
        public_key: Option<Key>,
    }
    #[derive(Deserialize)]
    struct Key {
        hint: String,
    }
    let b: Bundle = serde_json::from_slice(bytes).ok()?;
    b.material
        .public_key
        .map(|k| k.hint)
        .filter(|h| !h.is_empty() && h.len() <= 256)
}
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
    /// Stores a signature of `vol@digest` here (a live version, or one in the trash):
    /// its key, and `false` when the same bytes were stored already
    /// (`Registry::put_signature` as `Here` makes it).
    pub(crate) fn put_signature_here(
        &self,
        vol: &VolumeName,
        digest: &Digest,
        bytes: &[u8],
    ) -> Result<(String, bool)> {
        let manifest = self.manifest(vol, digest)?;
        let most = max_bytes(&manifest);
        if bytes.len() > most {
            return Err(Error::invalid(format!(
                "the signature is {} bytes, larger than any signature of vol:{vol}@{} ({most} bytes at most for its {} files)",
                bytes.len(),
                digest.short(16),
                manifest.entries.len()
            ))
            .hint("give a model-signing signature file of this version"));
        }
        let hash = Hash::of(bytes);
        let key = Key::Signature(vol.clone(), *digest, hash).to_string();
        let have = self.signature_keys(vol, digest)?;
        if have.contains(&key) {
            return Ok((key, false));
        }
        // A few signatures per signer (a BLAKE3 one and a SHA-256 one, a re-signing),
        // never the list: one naming a key hint `MAX_PER_SIGNER` stored ones name is
        // refused. None is ever replaced: anyone can name any hint.
        if let Some(h) = signer_hint(bytes) {
            let mut same = 0;
            for k in &have {
                if let Some(old) = self.store().get(k)?
                    && signer_hint(&old).as_deref() == Some(h.as_str())
                {
                    same += 1;
                }
            }
            if same >= MAX_PER_SIGNER {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!(
                        "vol:{vol}@{} has {MAX_PER_SIGNER} signatures by key {:.16}… already",
                        digest.short(16),
                        h
                    ),
                )
                .hint(
                    "`sealvol volume signatures REF` lists what is stored; no signer needs more",
                ));
            }
        }
        if have.len() >= MAX_SIGNATURES {
            return Err(Error::invalid(format!(
                "vol:{vol}@{} has {MAX_SIGNATURES} signatures already",
                digest.short(16)
            ))
            .hint("no version needs more signers"));
        }
        let _quota = self.keep_quota_adding(vol, bytes.len() as u64)?;
        let created = self.store().put_if_absent(&key, bytes)?;
        Ok((key, created))
    }

    fn signature_keys(&self, vol: &VolumeName, digest: &Digest) -> Result<Vec<String>> {
        Ok(self
            .signature_objects(vol, digest)?
            .into_iter()
            .map(|o| o.key)
            .collect())
    }

    fn signature_objects(
        &self,
        vol: &VolumeName,
        digest: &Digest,
    ) -> Result<Vec<crate::store::ObjectInfo>> {
        self.store().list(&folder(vol, digest))
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
        let keys = self.signature_keys(vol, digest)?;
        if keys.len() > MAX_READ {
            tracing::warn!(
                "vol:{vol}@{}: {} signatures stored, {MAX_READ} read",
                digest.short(16),
                keys.len()
            );
        }
        for key in keys.into_iter().take(MAX_READ) {
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

    /// The bytes of the signatures stored beside `vol@digest` (a listing).
    pub fn signature_bytes(&self, vol: &VolumeName, digest: &Digest) -> Result<u64> {
        Ok(self
            .signature_objects(vol, digest)?
            .iter()
            .map(|o| o.size)
            .sum())
    }

    /// How many signatures are stored beside `vol@digest` (a listing; none is read).
    pub fn signature_count(&self, vol: &VolumeName, digest: &Digest) -> Result<usize> {
        Ok(self.signature_keys(vol, digest)?.len())
    }

    pub(crate) fn delete_signatures(&self, vol: &VolumeName, digest: &Digest) -> Result<()> {
        for key in self.signature_keys(vol, digest)? {
            self.store().delete(&key)?;
        }
        self.store()
            .delete(&Key::Sha256s(vol.clone(), *digest).to_string())?;
        // The Hub's ids of it (`sealvol-serve`'s `hub/`) go with the other hashes.
        self.store()
            .delete(&Key::HubIds(vol.clone(), *digest).to_string())
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
