//! sealvol against what the OpenSSF model-signing tool (1.1.1) writes: its signatures
//! verify here, sealvol's own carry the same key hint, and every bad input the issue
//! lists is refused. The fixtures and how they were made: tests/fixtures/README.md.

use std::path::{Path, PathBuf};

use aws_lc_rs::digest;
use sealvol_sign::check::{compare, matches};
use sealvol_sign::{Algorithm, PublicKey, Resource, SigningKey, Statement, bundle, sign, verify};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// The fixture model's files with their digests in `algorithm`.
fn files(algorithm: Algorithm) -> Vec<(String, [u8; 32])> {
    let root = fixture("model");
    let mut out = Vec::new();
    for rel in ["a.txt", "empty", "sub/b.bin"] {
        let bytes = std::fs::read(root.join(rel)).unwrap();
        let d: [u8; 32] = match algorithm {
            Algorithm::Blake3 => *blake3::hash(&bytes).as_bytes(),
            Algorithm::Sha256 => digest::digest(&digest::SHA256, &bytes)
                .as_ref()
                .try_into()
                .unwrap(),
        };
        out.push((rel.to_string(), d));
    }
    out
}

fn statement(algorithm: Algorithm, files: &[(String, [u8; 32])]) -> Statement {
    let resources = files
        .iter()
        .map(|(name, digest)| Resource {
            name: name.clone(),
            digest: *digest,
        })
        .collect();
    Statement::new("model", algorithm, false, resources)
}

fn signer() -> PublicKey {
    PublicKey::load(&fixture("signer.pub.pem")).unwrap()
}

#[test]
fn the_tools_signatures_verify_in_blake3_and_sha256() {
    for (file, algorithm) in [
        ("model.blake3.sig", Algorithm::Blake3),
        ("model.sha256.sig", Algorithm::Sha256),
    ] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        let signed = verify(
            &bytes,
            &[
                PublicKey::load(&fixture("other.pub.pem")).unwrap(),
                signer(),
            ],
        )
        .unwrap();
        assert_eq!(signed.key.path, fixture("signer.pub.pem"), "{file}");
        assert_eq!(signed.statement.algorithm, algorithm);
        assert!(
            compare(&signed.statement, &files(algorithm)).is_empty(),
            "{file}"
        );
    }
}

#[test]
fn sealvols_signature_carries_the_tools_key_hint_and_verifies() {
    // The hint is the SHA-256 of the public key's PEM as Python's cryptography writes it.
    let theirs = bundle::claims(&std::fs::read(fixture("model.blake3.sig")).unwrap()).unwrap();
    for key in ["signer.key.pem", "signer.pkcs8.pem"] {
        let k = SigningKey::load(&fixture(key)).unwrap();
        assert_eq!(Some(k.public().hint.clone()), theirs.hint, "{key}");
        assert_eq!(k.public().hint, signer().hint);
        let st = statement(Algorithm::Blake3, &files(Algorithm::Blake3));
        // The same statement as the tool's, to the root digest.
        assert_eq!(st.root(), theirs.statement.root());
        let sig = sign(&st, &k).unwrap();
        let signed = verify(&sig, &[signer()]).unwrap();
        assert_eq!(signed.statement, st);
        matches(
            &signed.statement,
            &files(Algorithm::Blake3),
            "vol:t/m@b3:00",
        )
        .unwrap();
    }
}

#[test]
fn a_wrong_key_a_corrupt_or_cut_file_and_another_versions_signature_never_pass() {
    let good = std::fs::read(fixture("model.blake3.sig")).unwrap();
    // Another key: said to be another key's signature.
    let other = PublicKey::load(&fixture("other.pub.pem")).unwrap();
    let e = verify(&good, std::slice::from_ref(&other))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("another key") && e.contains("other.pub.pem"),
        "{e}"
    );
    // A flipped byte in the signature, or in the payload.
    let mut v: serde_json::Value = serde_json::from_slice(&good).unwrap();
    let sig = v["dsseEnvelope"]["signatures"][0]["sig"]
        .as_str()
        .unwrap()
        .to_string();
    let flipped = format!(
        "{}{}",
        if sig.starts_with('M') { "N" } else { "M" },
        &sig[1..]
    );
    v["dsseEnvelope"]["signatures"][0]["sig"] = flipped.into();
    let e = verify(&serde_json::to_vec(&v).unwrap(), &[signer()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not verify"), "{e}");
    // A statement re-encoded with one file changed: the signature no longer covers it.
    let k = SigningKey::load(&fixture("signer.key.pem")).unwrap();
    let mut fs = files(Algorithm::Blake3);
    let mine = sign(&statement(Algorithm::Blake3, &fs), &k).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&mine).unwrap();
    let forged = statement(Algorithm::Blake3, &files(Algorithm::Blake3)[..2]).to_json();
    use base64::Engine;
    v["dsseEnvelope"]["payload"] = base64::engine::general_purpose::STANDARD
        .encode(forged)
        .into();
    let e = verify(&serde_json::to_vec(&v).unwrap(), &[signer()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("does not verify"), "{e}");
    // Cut short, or not a bundle at all.
    for bytes in [
        &good[..good.len() / 2],
        b"not json".as_slice(),
        b"{}".as_slice(),
    ] {
        let e = verify(bytes, &[signer()]).unwrap_err().to_string();
        assert!(e.contains("signature file"), "{e}");
    }
    // A signature of another version: a file with other bytes, one missing, one extra.
    let signed = verify(&mine, &[signer()]).unwrap();
    fs[0].1[0] ^= 1;
    let e = matches(&signed.statement, &fs, "vol:t/m@b3:11")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("other bytes in a.txt") && e.contains("vol:t/m@b3:11"),
        "{e}"
    );
    let e = matches(&signed.statement, &files(Algorithm::Blake3)[..2], "v")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("signed but not in the version: sub/b.bin"),
        "{e}"
    );
    let mut extra = files(Algorithm::Blake3);
    extra.push(("new.bin".into(), [0; 32]));
    let e = matches(&signed.statement, &extra, "v")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not signed: new.bin"), "{e}");
}

#[test]
fn a_key_file_that_is_not_a_p256_pem_is_refused_with_how_to_make_one() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(
        &junk,
        b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
    )
    .unwrap();
    // A P-384 key, a private key where a public one is asked, junk, no file.
    for path in [
        fixture("p384.pub.pem"),
        fixture("signer.key.pem"),
        junk,
        dir.path().join("missing.pem"),
    ] {
        let e = PublicKey::load(&path).unwrap_err().to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
    }
    for path in [fixture("p384.key.pem"), fixture("signer.pub.pem")] {
        let e = SigningKey::load(&path).unwrap_err().to_string();
        assert!(e.contains("not an EC P-256 private key"), "{path:?}: {e}");
    }
    // Another kind of key is named as what it is, not as the crypto library's code.
    for (path, kind) in [
        (fixture("ed25519.key.pem"), "an Ed25519 key"),
        (fixture("p384.key.pem"), "an EC P-384 key"),
    ] {
        let e = SigningKey::load(&path).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "it is {kind}; model signing here uses ECDSA P-256 keys only"
            )),
            "{e}"
        );
        assert!(!e.contains("UnexpectedError"), "{e}");
    }
    for (path, kind) in [
        (fixture("ed25519.pub.pem"), "an Ed25519 key"),
        (fixture("p384.pub.pem"), "an EC P-384 key"),
    ] {
        let e = PublicKey::load(&path).unwrap_err().to_string();
        assert!(e.contains(&format!("it is {kind}")), "{e}");
    }
}
