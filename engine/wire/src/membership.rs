//! How a server proves it is a server of the ring: the ring's keys as the repository
//! keeps them (`access/ring.json` whole for servers, `access/ring-public.json` the
//! public halves for nodes), the challenge a node or a fellow sends
//! (`GET /v1/ring/id?challenge=HEX`), and the signed answer, checked by the public
//! halves alone. The server's side (making and rotating keys, signing, passes) is
//! serve's `credential.rs`; this is what a client needs to check it.

use aws_lc_rs::signature::{ED25519, UnparsedPublicKey};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use sealvol_core::error::{Error, Result};
use sealvol_core::keys::Key;
use sealvol_core::repo::Repository;
use serde::{Deserialize, Serialize};

/// The header a server sends a pass in (a fellow's run asked with the caller's scope).
pub const PASS_HEADER: &str = "x-sealvol-ring-pass";
/// What a proof of membership signs: this, the challenge, then the instance id.
const PROOF_CONTEXT: &[u8] = b"sealvol ring membership v1\0";

/// `N` bytes from the system's randomness. Without it, a clock-made value at least
/// differs; what needs secrecy fails closed elsewhere (a proof of a guessed challenge
/// still needs a ring key, and a pass's nonce is taken once).
pub fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    if getrandom::fill(&mut b).is_err() {
        let t = sealvol_core::read::now_ms();
        b[..8.min(N)].copy_from_slice(&t.to_le_bytes()[..8.min(N)]);
    }
    b
}

/// A fresh challenge for a server to prove itself with.
pub fn challenge() -> [u8; 32] {
    random::<32>()
}

/// One ring key as the repository keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredKey {
    pub id: String,
    /// The public half, base64.
    pub public: String,
    /// The PKCS#8 key pair, base64: only in the servers' list (`access/ring.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private: Option<String>,
    pub created: String,
}

/// The ring's keys as the repository keeps them, oldest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KeyList {
    pub format: u32,
    pub keys: Vec<StoredKey>,
}

/// The public halves of the ring's keys: what checks a proof or a pass.
#[derive(Debug, Clone, Default)]
pub struct RingPublic {
    keys: Vec<(String, Vec<u8>)>,
}

impl RingPublic {
    pub fn from_list(list: &KeyList) -> RingPublic {
        RingPublic {
            keys: list
                .keys
                .iter()
                .filter_map(|k| Some((k.id.clone(), B64.decode(&k.public).ok()?)))
                .collect(),
        }
    }

    /// The ring's public keys as the repository keeps them for nodes, if it does.
    pub fn read(repo: &Repository) -> Result<Option<RingPublic>> {
        let Some(bytes) = repo.object_store().get(&Key::RingPublic.to_string())? else {
            return Ok(None);
        };
        Ok(Some(RingPublic::parse(&bytes).map_err(|why| {
            Error::corrupt(format!("{} is damaged: {why}", Key::RingPublic))
        })?))
    }

    /// From a file a node was given (`ring_key` in config.toml): the repository's
    /// `access/ring-public.json`, copied.
    pub fn parse(bytes: &[u8]) -> std::result::Result<RingPublic, String> {
        if bytes.len() > 64 << 10 {
            return Err("larger than any list of ring keys".into());
        }
        let list: KeyList = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        let p = RingPublic::from_list(&list);
        match p.keys.is_empty() {
            true => Err("it names no key".into()),
            false => Ok(p),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Whether `signature` is ring key `key_id`'s over `message`.
    pub fn verify(&self, key_id: &str, message: &[u8], signature: &[u8]) -> bool {
        self.keys
            .iter()
            .filter(|(id, _)| id == key_id)
            .any(|(_, public)| {
                UnparsedPublicKey::new(&ED25519, public)
                    .verify(message, signature)
                    .is_ok()
            })
    }

    /// Whether `proof` is a ring member's answer to `challenge`.
    pub fn proves(&self, challenge: &[u8; 32], proof: &Proof) -> bool {
        let Ok(sig) = B64.decode(&proof.signature) else {
            return false;
        };
        self.verify(&proof.key, &proof_message(challenge, &proof.id), &sig)
    }
}

/// A server's answer to a challenge (the body of `GET /v1/ring/id?challenge=HEX`): its
/// instance id, signed with a ring key.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proof {
    pub id: String,
    pub key: String,
    pub signature: String,
}

/// What a server signs to answer `challenge` as instance `id`.
pub fn proof_message(challenge: &[u8; 32], id: &str) -> Vec<u8> {
    let mut m = PROOF_CONTEXT.to_vec();
    m.extend_from_slice(challenge);
    m.extend_from_slice(id.as_bytes());
    m
}
