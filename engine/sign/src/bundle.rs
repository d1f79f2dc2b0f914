//! The Sigstore bundle (v0.3, JSON) model-signing writes for a key signature: a DSSE
//! envelope over the statement, its one signature made over DSSE's pre-authentication
//! encoding, and the key's hint. No transparency log entry: a key signature has none.

use base64::Engine;
use sealvol_core::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::keys::{PublicKey, SigningKey};
use crate::statement::Statement;

pub const MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// A bundle of a version of ten million files is about 2 GiB; anything over this is
/// refused before it is parsed.
pub const MAX_BUNDLE: usize = 512 << 20;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bundle {
    media_type: String,
    verification_material: Material,
    dsse_envelope: Envelope,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Material {
    #[serde(default)]
    public_key: Option<KeyHint>,
    #[serde(default)]
    tlog_entries: Vec<serde_json::Value>,
}

#[derive(Debug, Serialize, Deserialize)]
struct KeyHint {
    #[serde(default)]
    hint: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    payload: String,
    payload_type: String,
    signatures: Vec<DsseSignature>,
}

#[derive(Debug, Serialize, Deserialize)]
struct DsseSignature {
    sig: String,
    #[serde(default)]
    keyid: String,
}

/// DSSE's pre-authentication encoding of a payload.
fn pae(payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {PAYLOAD_TYPE} {} ",
        PAYLOAD_TYPE.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A signature file (`model.sig`) of `statement`, signed with `key`.
pub fn sign(statement: &Statement, key: &SigningKey) -> Result<Vec<u8>> {
    let payload = statement.to_json();
    let sig = key.sign(&pae(&payload))?;
    let b = Bundle {
        media_type: MEDIA_TYPE.into(),
        verification_material: Material {
            public_key: Some(KeyHint {
                hint: key.public().hint.clone(),
            }),
            tlog_entries: Vec::new(),
        },
        dsse_envelope: Envelope {
            payload: B64.encode(&payload),
            payload_type: PAYLOAD_TYPE.into(),
            signatures: vec![DsseSignature {
                sig: B64.encode(sig),
                keyid: String::new(),
            }],
        },
    };
    serde_json::to_vec_pretty(&b)
        .map_err(|e| Error::invalid(format!("cannot write the bundle: {e}")))
}

/// A signature that checked out: its statement, and the key that made it.
#[derive(Debug, Clone)]
pub struct Signed {
    pub statement: Statement,
    pub key: PublicKey,
}

/// What a signature file claims before any key is tried: its statement (parsed, not
/// trusted) and its key hint.
pub struct Claims {
    pub statement: Statement,
    pub hint: Option<String>,
}

fn parse(bytes: &[u8]) -> Result<(Bundle, Vec<u8>, Vec<u8>)> {
    let bad = |what: &str| {
        Error::invalid(format!("the signature file {what}"))
            .hint("give a model-signing signature (a Sigstore bundle, as `model_signing sign key` writes)")
    };
    if bytes.len() > MAX_BUNDLE {
        return Err(bad("is larger than any signature of a version"));
    }
    let b: Bundle = serde_json::from_slice(bytes)
        .map_err(|e| bad(&format!("is not a Sigstore bundle ({e})")))?;
    if b.media_type != MEDIA_TYPE {
        return Err(bad(&format!(
            "is a {} bundle, not {MEDIA_TYPE}",
            b.media_type
        )));
    }
    if b.dsse_envelope.payload_type != PAYLOAD_TYPE {
        return Err(bad(&format!(
            "carries {}, not an in-toto statement",
            b.dsse_envelope.payload_type
        )));
    }
    let [one] = b.dsse_envelope.signatures.as_slice() else {
        return Err(bad("does not hold exactly one signature"));
    };
    let payload = B64
        .decode(&b.dsse_envelope.payload)
        .map_err(|_| bad("has a payload that is not base64"))?;
    let sig = B64
        .decode(&one.sig)
        .map_err(|_| bad("has a signature that is not base64"))?;
    Ok((b, payload, sig))
}

/// The statement and key hint a signature file claims, unverified (for listing).
pub fn claims(bytes: &[u8]) -> Result<Claims> {
    let (b, payload, _) = parse(bytes)?;
    Ok(Claims {
        statement: Statement::parse(&payload)?,
        hint: b
            .verification_material
            .public_key
            .map(|k| k.hint)
            .filter(|h| !h.is_empty()),
    })
}

/// Checks a signature file against `keys`: the first key whose hint it names (or, a
/// bundle without a hint, any) that verifies its signature over the statement.
pub fn verify(bytes: &[u8], keys: &[PublicKey]) -> Result<Signed> {
    let (b, payload, sig) = parse(bytes)?;
    let hint = b
        .verification_material
        .public_key
        .map(|k| k.hint)
        .filter(|h| !h.is_empty());
    let message = pae(&payload);
    let key = keys
        .iter()
        .filter(|k| hint.as_ref().is_none_or(|h| *h == k.hint))
        .find(|k| k.verifies(&message, &sig));
    let Some(key) = key else {
        let tried: Vec<String> = keys.iter().map(|k| k.path.display().to_string()).collect();
        let why = match keys
            .iter()
            .any(|k| hint.as_ref().is_none_or(|h| *h == k.hint))
        {
            true => "the signature does not verify (the statement or signature was altered)",
            false => "it was made by another key",
        };
        return Err(Error::new(
            sealvol_core::ErrorKind::Denied,
            format!(
                "no valid signature by {}: {why}",
                if tried.is_empty() {
                    "any key".into()
                } else {
                    tried.join(", ")
                }
            ),
        )
        .hint("check that the public key is the signer's"));
    };
    Ok(Signed {
        statement: Statement::parse(&payload)?,
        key: key.clone(),
    })
}
