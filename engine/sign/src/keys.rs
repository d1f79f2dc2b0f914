//! Keys as PEM files, EC P-256 only (what the issue names and model-signing's `sign
//! key` writes with a P-256 key): a private key as SEC1 (`EC PRIVATE KEY`, what
//! `openssl ecparam -genkey` writes) or PKCS#8 (`PRIVATE KEY`), a public key as
//! SubjectPublicKeyInfo (`PUBLIC KEY`). A bundle names its key by a hint: the SHA-256
//! of the public key's PEM text as Python's `cryptography` writes it.

use std::path::{Path, PathBuf};

use aws_lc_rs::digest;
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair, ParsedPublicKey,
};
use base64::Engine;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, SubjectPublicKeyInfoDer};
use sealvol_core::{Error, Result};

/// Key files are small; a larger one is not a key.
const MAX_KEY_FILE: u64 = 64 * 1024;

pub struct SigningKey {
    pair: EcdsaKeyPair,
    public: PublicKey,
}

#[derive(Debug, Clone)]
pub struct PublicKey {
    /// Where it was read from, to name it in messages.
    pub path: PathBuf,
    der: Vec<u8>,
    /// SHA-256 of its PEM text, hex: the bundle's `verificationMaterial.publicKey.hint`.
    pub hint: String,
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    sealvol_core::small_file::read(path, what, MAX_KEY_FILE).map_err(|e| {
        let hint =
            "give the path of a PEM file (openssl ec -in key.pem -pubout makes a public key)";
        e.hint(hint)
    })
}

fn not_p256(path: &Path, what: &str, why: &str) -> Error {
    Error::invalid(format!(
        "{} is not an EC P-256 {what} in PEM: {why}",
        path.display()
    ))
    .hint("make one with `openssl ecparam -name prime256v1 -genkey -noout -out key.pem`")
}

/// What kind of key a PEM block's DER holds, by the algorithm (and curve) its header
/// names, for a refusal that says what the file is rather than what the crypto library
/// could not do. Only the header is looked at (the first 96 bytes), where PKCS#8,
/// SEC1 (after the private key) and SubjectPublicKeyInfo put their algorithm identifiers.
fn kind_of(der: &[u8]) -> Option<&'static str> {
    const KINDS: [(&[u8], &str); 7] = [
        (&[0x06, 0x03, 0x2b, 0x65, 0x70], "an Ed25519 key"),
        (&[0x06, 0x03, 0x2b, 0x65, 0x71], "an Ed448 key"),
        (
            &[
                0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01,
            ],
            "an RSA key",
        ),
        (
            &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x22],
            "an EC P-384 key",
        ),
        (
            &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x23],
            "an EC P-521 key",
        ),
        (
            &[0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a],
            "an EC secp256k1 key",
        ),
        (
            &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07],
            "an EC P-256 key",
        ),
    ];
    let head = &der[..der.len().min(96)];
    KINDS
        .iter()
        .find(|(oid, _)| head.windows(oid.len()).any(|w| w == *oid))
        .map(|(_, kind)| *kind)
}

/// Why a key the crypto library refused is no P-256 key, in words.
fn why_not(der: &[u8], e: impl std::fmt::Display) -> String {
    match kind_of(der) {
        Some(k) if !k.contains("P-256") => {
            format!("it is {k}; model signing here uses ECDSA P-256 keys only")
        }
        _ => format!("the crypto library cannot read it as one ({e})"),
    }
}

/// Never the private key: only whose it is.
impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("public", &self.public.path)
            .finish()
    }
}

impl SigningKey {
    pub fn load(path: &Path) -> Result<SigningKey> {
        let what = "private key";
        let pem = read(path, what)?;
        let der = PrivateKeyDer::from_pem_slice(&pem)
            .map_err(|_| not_p256(path, what, "no private key block in it"))?;
        let pair =
            EcdsaKeyPair::from_private_key_der(&ECDSA_P256_SHA256_ASN1_SIGNING, der.secret_der())
                .map_err(|e| not_p256(path, what, &why_not(der.secret_der(), e)))?;
        let spki = pair
            .public_key()
            .as_der()
            .map_err(|_| not_p256(path, what, "its public key cannot be encoded"))?;
        let public = PublicKey::from_der(path, spki.as_ref().to_vec());
        Ok(SigningKey { pair, public })
    }

    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// An ASN.1 DER ECDSA signature over `message` with SHA-256.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>> {
        let sig = self.pair.sign(&SystemRandom::new(), message).map_err(|_| {
            Error::new(
                sealvol_core::ErrorKind::Io,
                "signing failed in the crypto library",
            )
        })?;
        Ok(sig.as_ref().to_vec())
    }
}

impl PublicKey {
    pub fn load(path: &Path) -> Result<PublicKey> {
        let what = "public key";
        let pem = read(path, what)?;
        let der = SubjectPublicKeyInfoDer::from_pem_slice(&pem)
            .map_err(|_| not_p256(path, what, "no PUBLIC KEY block in it"))?;
        ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, der.as_ref())
            .map_err(|e| not_p256(path, what, &why_not(der.as_ref(), e)))?;
        Ok(PublicKey::from_der(path, der.as_ref().to_vec()))
    }

    fn from_der(path: &Path, der: Vec<u8>) -> PublicKey {
        let hint = hex::encode(digest::digest(&digest::SHA256, pem(&der).as_bytes()));
        PublicKey {
            path: path.to_path_buf(),
            der,
            hint,
        }
    }

    /// The key as a `PUBLIC KEY` PEM file.
    pub fn pem(&self) -> String {
        pem(&self.der)
    }

    /// Whether `sig` (ASN.1 DER ECDSA with SHA-256) signs `message`.
    pub fn verifies(&self, message: &[u8], sig: &[u8]) -> bool {
        ParsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.der)
            .map(|k| k.verify_sig(message, sig).is_ok())
            .unwrap_or(false)
    }
}

/// PEM as `cryptography` writes it: 64 base64 characters a line, a final newline.
fn pem(der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = String::from("-----BEGIN PUBLIC KEY-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END PUBLIC KEY-----\n");
    out
}
