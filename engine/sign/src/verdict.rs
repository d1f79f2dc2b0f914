//! A version's stored signatures against a set of public keys: which verify, over
//! exactly the version's files, and why each other one does not. One answer for
//! `volume verify-signature`, the trust policy (mount, pull, deploy mount, CSI, cache
//! restore) and the console's signer column.

use std::collections::BTreeMap;

use serde::Serialize;

use sealvol_core::manifest::Manifest;
use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::{Error, ErrorKind, Repository, Result};

use crate::keys::PublicKey;
use crate::statement::Algorithm;
use crate::{bundle, check, version};

/// Where the SHA-256 of each file comes from when a signature is over SHA-256: kept
/// beside the version, or computed by one proven read (the caller's choice: a mount
/// never reads a whole version to decide whether it may start).
pub type Sha256Source<'a> = &'a dyn Fn() -> Result<Option<BTreeMap<String, [u8; 32]>>>;

/// One stored signature, checked.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    /// The signature's object name in the repository.
    pub key: String,
    pub valid: bool,
    /// The public key file that verified it.
    pub signer: Option<String>,
    pub hash: Option<&'static str>,
    /// Why it does not count, in a few words.
    pub reason: Option<String>,
}

/// Every stored signature of `volume@digest` checked against `keys`.
pub fn check_all(
    repo: &Repository,
    volume: &VolumeName,
    digest: &Digest,
    manifest: &Manifest,
    keys: &[PublicKey],
    sha256: Sha256Source,
) -> Result<Vec<Checked>> {
    let pinned = sealvol_core::Ref::pinned(volume.clone(), *digest).to_string();
    let mut out = Vec::new();
    let mut stored = repo.signatures_within(volume, digest, max_bytes(manifest))?;
    // Those that name a key tried here first: a count of others never stands in front.
    stored.sort_by_key(|s| {
        let named = sealvol_core::signatures::signer_hint(&s.bytes)
            .is_some_and(|h| keys.iter().any(|k| k.hint == h));
        !named
    });
    for s in stored {
        let r = crate::bundle::verify(&s.bytes, keys).and_then(|signed| {
            let kept = match signed.statement.algorithm {
                Algorithm::Blake3 => None,
                Algorithm::Sha256 => Some(sha256()?.ok_or_else(|| {
                    Error::new(
                        ErrorKind::Denied,
                        "it is over SHA-256 and no SHA-256s are kept beside the version",
                    )
                    .hint(format!(
                        "`sealvol volume verify-signature {pinned} --public-key KEY` reads the files once and keeps them"
                    ))
                })?),
            };
            let digests = version::digests(manifest, signed.statement.algorithm, kept.as_ref())?;
            check::matches(&signed.statement, &digests, &pinned)?;
            Ok(signed)
        });
        out.push(match r {
            Ok(signed) => Checked {
                key: s.key,
                valid: true,
                signer: Some(signed.key.path.display().to_string()),
                hash: Some(signed.statement.algorithm.name()),
                reason: None,
            },
            Err(e) => Checked {
                key: s.key,
                valid: false,
                signer: None,
                hash: bundle::claims(&s.bytes)
                    .ok()
                    .map(|c| c.statement.algorithm.name()),
                reason: Some(e.message().to_string()),
            },
        });
    }
    Ok(out)
}

/// The most a signature of `manifest`'s version can weigh (core's
/// `signatures::max_bytes`).
pub fn max_bytes(manifest: &Manifest) -> usize {
    sealvol_core::signatures::max_bytes(manifest)
}

/// Why no signature of `pinned` counts, in one line: the keys tried, then each reason
/// once (with how many signatures it holds for).
pub fn why_none(keys: &[PublicKey], checked: &[Checked]) -> String {
    let mut reasons: Vec<(String, usize)> = Vec::new();
    for r in checked.iter().filter_map(|c| c.reason.as_deref()) {
        // The keys are named once, by the caller: not again in every reason.
        let r = match r.strip_prefix("no valid signature by ") {
            Some(rest) => rest.split_once(": ").map_or(rest, |(_, why)| why),
            None => r,
        };
        match reasons.iter_mut().find(|(seen, _)| seen == r) {
            Some((_, n)) => *n += 1,
            None => reasons.push((r.to_string(), 1)),
        }
    }
    let why = match checked.len() {
        0 => "it has no signature".to_string(),
        n => format!(
            "{n} signature(s), none valid: {}",
            reasons
                .iter()
                .map(|(r, k)| match k {
                    1 => r.clone(),
                    k => format!("{r} ({k})"),
                })
                .collect::<Vec<_>>()
                .join("; ")
        ),
    };
    format!("tried {}: {why}", names(keys))
}

/// The key files, as the user named them.
pub fn names(keys: &[PublicKey]) -> String {
    keys.iter()
        .map(|k| k.path.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
