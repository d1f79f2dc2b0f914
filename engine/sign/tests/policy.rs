//! The trust policy against versions in a repository on the in-memory store: what it
//! lets through, what it refuses and the one line it says, for every bad input the
//! issue lists (a wrong key, a damaged signature, another version's, a file list
//! missing or adding a file, a key file that is not P-256, a policy naming a missing key
//! file, a key no longer trusted). The commands that enforce it are tested through the
//! binary (tests/signing.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sealvol_core::progress::Quiet;
use sealvol_core::push::{PushOptions, push};
use sealvol_core::refs::VolumeName;
use sealvol_core::store::MemoryStore;
use sealvol_core::testutil::folder;
use sealvol_core::{Digest, ErrorKind, Repository};
use sealvol_sign::statement::Resource;
use sealvol_sign::{Admitted, Algorithm, Policy, Rules, SigningKey, Statement, version};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn repository() -> Repository {
    let mem = Arc::new(MemoryStore::new().unwrap());
    Repository::open(Box::new(mem), "memory".into(), true).unwrap()
}

fn vol(name: &str) -> VolumeName {
    VolumeName::parse(name).unwrap()
}

fn push_files(
    repo: &Repository,
    root: &Path,
    name: &str,
    volume: &str,
    files: &[(&str, &[u8])],
) -> Digest {
    let files: Vec<(&str, Vec<u8>)> = files.iter().map(|(p, b)| (*p, b.to_vec())).collect();
    let dir = folder(root, name, &files);
    push(repo, &dir, &vol(volume), &[], &PushOptions::new(&Quiet))
        .unwrap()
        .digest
}

/// Signs `volume@digest` in BLAKE3 with the fixture key `key` and stores it.
fn sign(repo: &Repository, volume: &str, digest: &Digest, key: &str) -> Vec<u8> {
    let m = repo.manifest(&vol(volume), digest).unwrap();
    let st = version::statement(&m, Algorithm::Blake3, None).unwrap();
    let k = SigningKey::load(&fixtures().join(key)).unwrap();
    let bytes = sealvol_sign::sign(&st, &k).unwrap();
    repo.put_signature(&vol(volume), digest, &bytes).unwrap();
    bytes
}

/// config.toml-like rules: namespace → fixture key files.
fn rules(origin: &str, entries: &[(&str, &[&str])]) -> sealvol_core::Result<Rules> {
    let map: BTreeMap<String, Vec<PathBuf>> = entries
        .iter()
        .map(|(ns, keys)| (ns.to_string(), keys.iter().map(PathBuf::from).collect()))
        .collect();
    Rules::load(origin, &fixtures(), &map)
}

fn policy(entries: &[(&str, &[&str])]) -> Policy {
    Policy::default().with(rules("config.toml", entries).unwrap())
}

struct Setup {
    repo: Repository,
    signed: Digest,
    unsigned: Digest,
    _tmp: tempfile::TempDir,
}

fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let repo = repository();
    let signed = push_files(
        &repo,
        tmp.path(),
        "a",
        "w/m",
        &[("model.bin", b"one"), ("cfg.json", b"{}")],
    );
    let unsigned = push_files(
        &repo,
        tmp.path(),
        "b",
        "w/m",
        &[("model.bin", b"two"), ("cfg.json", b"{}")],
    );
    sign(&repo, "w/m", &signed, "signer.key.pem");
    Setup {
        repo,
        signed,
        unsigned,
        _tmp: tmp,
    }
}

fn refusal(p: &Policy, repo: &Repository, volume: &str, d: &Digest) -> String {
    let e = p.admit(repo, &vol(volume), d).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Untrusted, "{e}");
    e.message().to_string()
}

#[test]
fn a_version_signed_by_a_trusted_key_passes_and_an_unsigned_one_is_refused_by_name() {
    let s = setup();
    let p = policy(&[("w", &["signer.pub.pem"])]);
    match p.admit(&s.repo, &vol("w/m"), &s.signed).unwrap() {
        Admitted::Signed(by) => assert!(by[0].ends_with("signer.pub.pem"), "{by:?}"),
        other => panic!("{other:?}"),
    }
    let e = refusal(&p, &s.repo, "w/m", &s.unsigned);
    assert!(e.contains(&format!("vol:w/m@{}", s.unsigned)), "{e}");
    assert!(e.contains("config.toml trusts for w"), "{e}");
    assert!(
        e.contains("signer.pub.pem") && e.contains("it has no signature"),
        "{e}"
    );
    assert!(!e.contains('\n'), "one line: {e}");
}

#[test]
fn a_namespace_no_rule_names_is_not_policed_and_a_star_names_every_other() {
    let s = setup();
    let other = policy(&[("x", &["signer.pub.pem"])]);
    assert_eq!(
        other.admit(&s.repo, &vol("w/m"), &s.unsigned).unwrap(),
        Admitted::Unpoliced
    );
    assert!(!other.governs(&vol("w/m")));
    let star = policy(&[("*", &["signer.pub.pem"])]);
    assert!(star.governs(&vol("w/m")));
    refusal(&star, &s.repo, "w/m", &s.unsigned);
    // A namespace named explicitly takes its own keys, not the star's.
    let both = policy(&[("*", &["signer.pub.pem"]), ("w", &["other.pub.pem"])]);
    let e = refusal(&both, &s.repo, "w/m", &s.signed);
    assert!(
        e.contains("other.pub.pem") && e.contains("another key"),
        "{e}"
    );
}

#[test]
fn a_wrong_key_and_a_key_no_longer_trusted_are_refused() {
    let s = setup();
    // Signed by signer; the policy trusts only other: as when signer's key is dropped.
    let p = policy(&[("w", &["other.pub.pem"])]);
    let e = refusal(&p, &s.repo, "w/m", &s.signed);
    assert!(e.contains("made by another key"), "{e}");
    // Trusted again alongside: it passes.
    let p = policy(&[("w", &["other.pub.pem", "signer.pub.pem"])]);
    assert!(matches!(
        p.admit(&s.repo, &vol("w/m"), &s.signed).unwrap(),
        Admitted::Signed(_)
    ));
}

#[test]
fn a_damaged_signature_another_versions_and_lists_missing_or_adding_a_file_never_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup();
    let p = policy(&[("w", &["signer.pub.pem"])]);
    let v = vol("w/m");

    // Damaged: one byte of the signature's payload flipped, stored (under its own name).
    let good = sign(&s.repo, "w/m", &s.signed, "signer.key.pem");
    let target = push_files(&s.repo, tmp.path(), "c", "w/m", &[("model.bin", b"three")]);
    // One character of the base64 signature changed: still a bundle, no longer valid.
    let text = String::from_utf8(good.clone()).unwrap();
    let at = text.find("\"sig\": \"").unwrap() + 12;
    let mut bad = good.clone();
    bad[at] = if bad[at] == b'A' { b'B' } else { b'A' };
    s.repo.put_signature(&v, &target, &bad).unwrap();
    s.repo.put_signature(&v, &target, b"{not a bundle").unwrap();
    s.repo
        .put_signature(&v, &target, &good[..good.len() / 2])
        .unwrap();
    // Another version's signature, valid by the trusted key.
    s.repo.put_signature(&v, &target, &good).unwrap();
    let e = refusal(&p, &s.repo, "w/m", &target);
    assert!(e.contains("4 signature(s), none valid"), "{e}");
    assert!(e.contains("not of"), "another version's: {e}");
    assert!(e.contains("signature file"), "damaged: {e}");
    assert!(e.contains("does not verify"), "altered: {e}");

    // Signed lists missing one file and adding one, by the trusted key, each over a
    // version of its own.
    let key = SigningKey::load(&fixtures().join("signer.key.pem")).unwrap();
    for (n, says) in [
        (0u8, "not signed: model.bin"),
        (1, "signed but not in the version: zzz.bin"),
    ] {
        let name = format!("list{n}");
        let d = push_files(
            &s.repo,
            tmp.path(),
            &name,
            "w/m",
            &[("model.bin", &[n; 9]), ("cfg.json", b"{}")],
        );
        let m = s.repo.manifest(&v, &d).unwrap();
        let mut list = version::statement(&m, Algorithm::Blake3, None)
            .unwrap()
            .resources;
        match n {
            0 => list.retain(|r| r.name != "model.bin"),
            _ => list.push(Resource {
                name: "zzz.bin".into(),
                digest: [7; 32],
            }),
        }
        let bytes =
            sealvol_sign::sign(&Statement::new("m", Algorithm::Blake3, false, list), &key).unwrap();
        s.repo.put_signature(&v, &d, &bytes).unwrap();
        let e = refusal(&p, &s.repo, "w/m", &d);
        assert!(e.contains(says), "{e}");
    }
}

#[test]
fn a_policy_naming_a_missing_or_non_p256_key_file_is_an_error_when_loaded() {
    let e = rules("config.toml", &[("w", &["nowhere.pub.pem"])]).unwrap_err();
    assert!(e.message().contains("config.toml: trust for w"), "{e}");
    assert!(e.message().contains("nowhere.pub.pem"), "{e}");
    let e = rules("config.toml", &[("w", &["p384.pub.pem"])]).unwrap_err();
    assert!(e.message().contains("not an EC P-256 public key"), "{e}");
    let e = rules("config.toml", &[("w", &["signer.key.pem"])]).unwrap_err();
    assert!(
        e.message().contains("no PUBLIC KEY block"),
        "a private key: {e}"
    );
    let e = rules("config.toml", &[("W!", &["signer.pub.pem"])]).unwrap_err();
    assert!(e.message().contains("invalid namespace"), "{e}");
    let e = rules("config.toml", &[("w", &[])]).unwrap_err();
    assert!(e.message().contains("lists no key"), "{e}");
}

#[test]
fn every_rule_set_that_names_the_namespace_must_be_met() {
    let s = setup();
    // config.toml trusts signer; the deployment file wants other too.
    let p = policy(&[("w", &["signer.pub.pem"])])
        .with(rules("deploy/prod.yaml", &[("w", &["other.pub.pem"])]).unwrap());
    let e = refusal(&p, &s.repo, "w/m", &s.signed);
    assert!(e.contains("deploy/prod.yaml trusts for w"), "{e}");
    sign(&s.repo, "w/m", &s.signed, "other.key.pem");
    match p.admit(&s.repo, &vol("w/m"), &s.signed).unwrap() {
        Admitted::Signed(by) => assert_eq!(by.len(), 2, "{by:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_sha256_signature_passes_only_with_the_sha256s_kept_beside_the_version() {
    // The tool's own SHA-256 signature over the fixture model, attached to the version
    // pushed from that folder.
    let repo = repository();
    let d = push(
        &repo,
        &fixtures().join("model"),
        &vol("w/model"),
        &[],
        &PushOptions::new(&Quiet),
    )
    .unwrap()
    .digest;
    let sig = std::fs::read(fixtures().join("model.sha256.sig")).unwrap();
    repo.put_signature(&vol("w/model"), &d, &sig).unwrap();
    let p = policy(&[("w", &["signer.pub.pem"])]);
    let e = refusal(&p, &repo, "w/model", &d);
    assert!(e.contains("no SHA-256s are kept"), "{e}");

    let tiers = sealvol_core::read::Tiers::new(Arc::new(repo), None);
    let m = tiers.repo().manifest(&vol("w/model"), &d).unwrap();
    let sums = version::sha256s(&tiers, &m).unwrap();
    tiers
        .repo()
        .put_sha256s(&vol("w/model"), &d, version::to_hex(&sums))
        .unwrap();
    assert!(matches!(
        p.admit(tiers.repo(), &vol("w/model"), &d).unwrap(),
        Admitted::Signed(_)
    ));
}

#[test]
fn a_stored_object_larger_than_any_signature_of_the_version_is_not_read() {
    let s = setup();
    let p = policy(&[("w", &["signer.pub.pem"])]);
    let m = s.repo.manifest(&vol("w/m"), &s.unsigned).unwrap();
    let most = sealvol_sign::verdict::max_bytes(&m);
    assert!(most < 1 << 20, "two files: {most}");
    // A crafted object of 2 MiB beside a version of two files: left out unread.
    // (Planted in the store itself: no writer may store it.)
    let crafted = vec![b' '; 2 << 20];
    assert!(
        s.repo
            .put_signature(&vol("w/m"), &s.unsigned, &crafted)
            .is_err()
    );
    let key = sealvol_core::keys::Key::Signature(
        vol("w/m"),
        s.unsigned,
        sealvol_core::digest::Hash::of(&crafted),
    );
    s.repo
        .object_store()
        .put(&key.to_string(), &crafted)
        .unwrap();
    let e = refusal(&p, &s.repo, "w/m", &s.unsigned);
    assert!(e.contains("it has no signature"), "{e}");
    // A real signature of it is well within the bound.
    let good = sign(&s.repo, "w/m", &s.unsigned, "signer.key.pem");
    assert!(good.len() < most);
    assert!(matches!(
        p.admit(&s.repo, &vol("w/m"), &s.unsigned).unwrap(),
        Admitted::Signed(_)
    ));
}
