//! Signatures through a shared server are an operation, not an object write: stored
//! only beside a version that exists, no larger than a signature of it can be, at most
//! 64 per version and one per signer; and however much junk a key sends, the real
//! signature still verifies and a reader trusting its key admits the version.

mod common;

use std::path::{Path, PathBuf};

use common::{Server, server_with};
use sealvol_core::refs::VolumeName;
use sealvol_sign::{Algorithm, PublicKey, SigningKey, version};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sign/tests/fixtures")
}

fn ask(s: &Server, key: &str, method: &str, path: &str, body: Vec<u8>) -> (u16, String) {
    let (status, _, body) = s.ask(key, method, path, body);
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn vol() -> VolumeName {
    VolumeName::parse("t/serve").unwrap()
}

/// The one version of `t/serve`, signed with the fixture key `key`.
fn signed(s: &Server, key: &str) -> (sealvol_core::Digest, Vec<u8>) {
    let d = s.repo.version_digests(&vol()).unwrap()[0];
    let m = s.repo.manifest(&vol(), &d).unwrap();
    let st = version::statement(&m, Algorithm::Blake3, None).unwrap();
    let k = SigningKey::load(&fixtures().join(key)).unwrap();
    (d, sealvol_sign::sign(&st, &k).unwrap())
}

/// A junk "signature" naming key hint `hint`, or none.
fn junk(i: usize, hint: Option<&str>) -> Vec<u8> {
    let material = match hint {
        Some(h) => serde_json::json!({"publicKey": {"hint": h}}),
        None => serde_json::json!({}),
    };
    serde_json::to_vec(&serde_json::json!({
        "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
        "verificationMaterial": material,
        "dsseEnvelope": {"payload": "", "payloadType": "application/vnd.in-toto+json",
                          "signatures": [{"sig": format!("{i:064}")}]},
    }))
    .unwrap()
}

#[test]
fn a_thousand_junk_signatures_never_crowd_out_the_real_one() {
    let s = server_with(false);
    let key = sealvol_serve::keys::create(&s.place(), "t", false, vec!["t".into()]).unwrap();
    let (d, real) = signed(&s, "signer.key.pem");
    let path = format!("/v1/ops/signatures/t/serve/{}", d.hex());
    let (status, body) = ask(&s, &key, "PUT", &path, real.clone());
    assert_eq!(status, 200, "{body}");
    let public = PublicKey::load(&fixtures().join("signer.pub.pem")).unwrap();
    // 1,000 junk writes: named like low hashes, with the real signer's hint, with hints
    // of their own, with none.
    let mut refused = 0;
    for i in 0..1000 {
        let hint = match i % 3 {
            0 => Some(public.hint.clone()),
            1 => Some(format!("{i:064x}")),
            _ => None,
        };
        let (status, _) = ask(&s, &key, "PUT", &path, junk(i, hint.as_deref()));
        if status != 200 {
            refused += 1;
        }
    }
    let stored = s.repo.signatures(&vol(), &d).unwrap();
    assert_eq!(stored.len(), 64, "{refused} refused");
    assert!(
        stored.iter().any(|x| x.bytes == real),
        "the real one is gone"
    );
    // A reader trusting the signer's key finds it valid.
    let m = s.repo.manifest(&vol(), &d).unwrap();
    let checked =
        sealvol_sign::verdict::check_all(&s.repo, &vol(), &d, &m, &[public], &|| Ok(None)).unwrap();
    assert!(checked.iter().any(|c| c.valid), "{checked:?}");
    // And a second signer is told why it cannot add one, in one line.
    let (_, other) = signed(&s, "other.key.pem");
    let (status, body) = ask(&s, &key, "PUT", &path, other);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("64 signatures already"), "{body}");
}

#[test]
fn a_signature_is_an_operation_on_a_version_that_exists_and_no_larger_than_it() {
    let s = server_with(false);
    let key = sealvol_serve::keys::create(&s.place(), "t", false, vec!["t".into()]).unwrap();
    let other = sealvol_serve::keys::create(&s.place(), "o", false, vec!["o".into()]).unwrap();
    let (d, real) = signed(&s, "signer.key.pem");
    let name = blake3::hash(&real).to_hex().to_string();
    // Not as an object, not even for the key's own namespace.
    let object = format!(
        "/v1/objects/signatures/t/serve/{}/{name}?mode=absent",
        d.hex()
    );
    let (status, body) = ask(&s, &key, "PUT", &object, real.clone());
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("/v1/ops/signatures"), "{body}");
    // Not for a version that does not exist, with any body.
    let nowhere = format!("/v1/ops/signatures/t/serve/{}", "ab".repeat(32));
    let (status, body) = ask(&s, &key, "PUT", &nowhere, vec![b'x'; 8 << 20]);
    assert!(status == 404 || status == 409, "{status} {body}");
    assert_eq!(body.lines().count(), 1, "{body}");
    // Not larger than a signature of this version can be (one file: some 65 KiB).
    let path = format!("/v1/ops/signatures/t/serve/{}", d.hex());
    let (status, body) = ask(&s, &key, "PUT", &path, vec![b' '; 2 << 20]);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("larger than any signature"), "{body}");
    // Not in another namespace; nor with a made-up path.
    let (status, _) = ask(&s, &other, "PUT", &path, real.clone());
    assert_eq!(status, 403);
    let (status, _) = ask(
        &s,
        &key,
        "PUT",
        "/v1/ops/signatures/t/serve/b3:zz",
        real.clone(),
    );
    assert_eq!(status, 400);
    assert!(s.repo.signatures(&vol(), &d).unwrap().is_empty());
    assert!(
        s.repo
            .object_store()
            .list("signatures/")
            .unwrap()
            .is_empty()
    );
    // Then as it should be: stored once, a second time not new.
    let (status, body) = ask(&s, &key, "PUT", &path, real.clone());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"new\":true"), "{body}");
    let (status, body) = ask(&s, &key, "PUT", &path, real);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"new\":false"), "{body}");
}
