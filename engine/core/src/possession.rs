//! Proof of possession: on a server shared by tenants, a chunk's hash is not a key to
//! its bytes (docs/SEMANTICS.md, "A hash is not a key"). A push that finds a chunk
//! stored in a namespace it does not reach proves it holds the bytes by answering the
//! server's challenge: a BLAKE3 keyed hash, under a key derived from a nonce the server
//! made for this caller, over the chunk's bytes. Only a holder of the bytes can compute
//! it, at the cost of hashing what it already has in memory; a captured answer is of no
//! use to another key, whose nonce differs.
//!
//! Both sides use this module: the client (`push`) to answer, the server (`serve`'s
//! `possession`) to check.

use crate::digest::Hash;

/// A challenge as it travels: 8 bytes of the hour it was made (little-endian hours
/// since the Unix epoch), then 32 bytes the server derived for the caller's key and
/// that hour. Opaque to the client.
pub const NONCE_LEN: usize = 40;

/// What a challenge's proofs are keyed by: derived from the nonce, never the nonce
/// itself, so that a proof is bound to this protocol.
const CONTEXT: &str = "sealvol 2026-12-06 proof of possession of a chunk v1";

#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Challenge(pub [u8; NONCE_LEN]);

impl std::fmt::Debug for Challenge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Challenge({})", &hex::encode(self.0)[..16])
    }
}

impl Challenge {
    pub fn parse_hex(s: &str) -> Option<Challenge> {
        let mut b = [0u8; NONCE_LEN];
        hex::decode_to_slice(s.trim(), &mut b).ok()?;
        Some(Challenge(b))
    }

    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The hour it was made (hours since the Unix epoch).
    pub fn hour(&self) -> u64 {
        let mut h = [0u8; 8];
        h.copy_from_slice(&self.0[..8]);
        u64::from_le_bytes(h)
    }

    /// The proof that the caller holds `bytes` (a chunk's whole content).
    pub fn prove(&self, bytes: &[u8]) -> Proof {
        let key = blake3::derive_key(CONTEXT, &self.0);
        Proof(*blake3::keyed_hash(&key, bytes).as_bytes())
    }
}

/// A chunk's proof under a challenge.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Proof(pub [u8; 32]);

impl std::fmt::Debug for Proof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Proof({})", &hex::encode(self.0)[..16])
    }
}

impl Proof {
    /// Compared in constant time.
    pub fn matches(&self, other: &Proof) -> bool {
        blake3::Hash::from_bytes(self.0) == blake3::Hash::from_bytes(other.0)
    }
}

/// What a push knows of a chunk it names in a chunk list it sends, so that the server
/// lets its key name the chunk (`Remote::put_list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    /// Nothing: the server said the key reaches it (its namespaces hold it, or the key
    /// uploaded the copy the server found).
    None,
    /// This push uploaded a copy: in pack `pack` at `offset`.
    Copy { pack: Hash, offset: u64 },
    /// The answer to a challenge.
    Proof(Challenge, Proof),
}

/// A chunk of a file as a push names it to its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Named {
    pub hash: Hash,
    pub len: u32,
    pub evidence: Evidence,
}

impl Named {
    pub fn plain(hash: Hash, len: u32) -> Named {
        Named {
            hash,
            len,
            evidence: Evidence::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_needs_the_bytes_and_the_callers_own_challenge() {
        let a = Challenge([1; NONCE_LEN]);
        let b = Challenge([2; NONCE_LEN]);
        let bytes = b"the chunk's bytes";
        assert!(a.prove(bytes).matches(&a.prove(bytes)));
        assert!(!a.prove(bytes).matches(&b.prove(bytes)));
        assert!(!a.prove(bytes).matches(&a.prove(b"other bytes")));
        // Not the chunk's name: a proof is no function of the hash alone.
        assert_ne!(a.prove(bytes).0, Hash::of(bytes).0);
        assert_eq!(Challenge::parse_hex(&a.hex()), Some(a));
        assert_eq!(Challenge::parse_hex("zz"), None);
    }
}
