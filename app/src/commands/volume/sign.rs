//! `volume sign`, `volume verify-signature`, `volume signatures`: OpenSSF model-signing
//! signatures of a version (sealvol-sign), stored beside it in the repository.
//! Signing in BLAKE3 reads no file bytes (the manifest holds each file's hash); a
//! SHA-256 signature (model-signing's CLI default) reads each file once and keeps the
//! SHA-256s beside the version for the next time.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::manifest::Manifest;
use sealvol_core::refs::Digest;
use sealvol_core::signatures::MAX_SIGNATURE_BYTES;
use sealvol_core::{Error, Ref, Repository, Result, VolumeName};
use sealvol_sign::verdict::{self, Checked};
use sealvol_sign::{Algorithm, PublicKey, SigningKey, bundle, check, version};
use serde::Serialize;

use crate::args::{JSON_HELP, REF_HELP};
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::json;

/// Sign a version in the OpenSSF model-signing format, stored beside it (several signers may sign one version).
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume sign weights/qwen3-8b:prod --key release.key.pem\n  sealvol volume sign weights/qwen3-8b:prod --key release.key.pem --sha256\n  sealvol volume sign weights/qwen3-8b@b3:9f3c… --import model.sig\n\nThe key is an EC P-256 private key in PEM (openssl ecparam -name prime256v1 -genkey -noout -out key.pem).\nBLAKE3 (the default) reads no file bytes: the manifest holds each file's hash; model-signing's Python\nAPI verifies it. --sha256 reads every file once (kept beside the version), as `model_signing verify key`\nre-hashes with SHA-256. --import stores a signature model-signing made over the pushed folder, once its\nfile list is exactly this version's."
)]
pub struct Sign {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    /// The signer's EC P-256 private key (PEM: SEC1 or PKCS#8).
    #[arg(long, value_name = "KEY.pem", conflicts_with = "import")]
    key: Option<PathBuf>,
    /// Digest every file with SHA-256 (one read of the bytes) instead of BLAKE3.
    #[arg(long, requires = "key")]
    sha256: bool,
    /// Attach a signature made elsewhere (model_signing sign key … over the folder).
    #[arg(long, value_name = "FILE")]
    import: Option<PathBuf>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Sign {
    fn run(self, ctx: &Ctx) -> Result<()> {
        sign(
            ctx,
            &self.reference,
            self.key.as_deref(),
            self.sha256,
            self.import.as_deref(),
            self.json,
        )
    }
}

/// Check a version's signatures against public keys: exit 0 when one of them signed every file.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  sealvol volume verify-signature weights/qwen3-8b:prod --public-key release.pub.pem"
)]
pub struct VerifySignature {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    /// A trusted EC P-256 public key (PEM); repeat for several.
    #[arg(long = "public-key", value_name = "PUB.pem", required = true)]
    public_keys: Vec<PathBuf>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for VerifySignature {
    fn run(self, ctx: &Ctx) -> Result<()> {
        verify_signature(ctx, &self.reference, &self.public_keys, self.json)
    }
}

/// List a version's signatures; with --out, write each as a file model-signing reads.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  sealvol volume signatures weights/qwen3-8b:prod --out sigs/\n  model_signing verify key --public_key release.pub.pem --signature sigs/<NAME>.sig ./pulled"
)]
pub struct Signatures {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    /// Write each signature into DIR as <name>.sig.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Signatures {
    fn run(self, ctx: &Ctx) -> Result<()> {
        signatures(ctx, &self.reference, self.out.as_deref(), self.json)
    }
}

/// A version, resolved: what signing and checking work on.
struct Version {
    repo: Arc<Repository>,
    volume: VolumeName,
    digest: Digest,
    manifest: Manifest,
    pinned: String,
}

fn open(ctx: &Ctx, reference: &str) -> Result<Version> {
    let r = Ref::parse(reference)?;
    let repo = Arc::new(ctx.open_repo(false)?);
    let digest = repo.resolve(&r)?;
    let manifest = repo.manifest(&r.volume, &digest)?;
    Ok(Version {
        pinned: Ref::pinned(r.volume.clone(), digest).to_string(),
        repo,
        volume: r.volume,
        digest,
        manifest,
    })
}

impl Version {
    /// The version's files in `algorithm`: BLAKE3 from the manifest; SHA-256 kept
    /// beside the version, or read once now and kept.
    fn digests(&self, algorithm: Algorithm) -> Result<Vec<(String, [u8; 32])>> {
        let sha = match algorithm {
            Algorithm::Blake3 => None,
            Algorithm::Sha256 => Some(self.sha256s()?),
        };
        version::digests(&self.manifest, algorithm, sha.as_ref())
    }

    fn sha256s(&self) -> Result<BTreeMap<String, [u8; 32]>> {
        version::sha256s_kept_or_read(&self.repo, &self.volume, &self.digest, &self.manifest)
    }
}

#[derive(Serialize)]
struct SignedOut {
    #[serde(rename = "ref")]
    pinned: String,
    key: String,
    hash: &'static str,
    files: usize,
    signer: Option<String>,
    new: bool,
}

pub fn sign(
    ctx: &Ctx,
    reference: &str,
    key: Option<&Path>,
    sha256: bool,
    import: Option<&Path>,
    as_json: bool,
) -> Result<()> {
    let v = open(ctx, reference)?;
    let (bytes, statement, signer) = match (key, import) {
        (_, Some(file)) => {
            let bytes = read_bounded(file)?;
            let claims = bundle::claims(&bytes)?;
            // Stored only if it is a signature of exactly this version's files; who made
            // it is checked by each reader against keys of its own.
            let digests = v.digests(claims.statement.algorithm)?;
            check::matches(&claims.statement, &digests, &v.pinned)?;
            (bytes, claims.statement, None)
        }
        (Some(key), None) => {
            let k = SigningKey::load(key)?;
            let algorithm = if sha256 {
                Algorithm::Sha256
            } else {
                Algorithm::Blake3
            };
            let sha = match algorithm {
                Algorithm::Sha256 => Some(v.sha256s()?),
                Algorithm::Blake3 => None,
            };
            let st = version::statement(&v.manifest, algorithm, sha.as_ref())?;
            let bytes = bundle::sign(&st, &k)?;
            (bytes, st, Some(k.public().hint.clone()))
        }
        (None, None) => {
            return Err(Error::usage("give --key KEY.pem, or --import FILE")
                .hint("sealvol volume sign REF --key key.pem"));
        }
    };
    let (stored, new) = v.repo.put_signature(&v.volume, &v.digest, &bytes)?;
    let out = SignedOut {
        pinned: v.pinned.clone(),
        key: stored.key.clone(),
        hash: statement.algorithm.name(),
        files: statement.resources.len(),
        signer,
        new,
    };
    if as_json {
        return json(&out);
    }
    let how = match (key, import) {
        (_, Some(f)) => format!("imported {}", f.display()),
        (Some(k), None) => format!("signed with {}", k.display()),
        _ => String::new(),
    };
    println!(
        "{} {how}: {} files in {}{}",
        v.pinned,
        out.files,
        out.hash,
        if new { "" } else { " (already stored)" }
    );
    Ok(())
}

fn read_bounded(file: &Path) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(file).map_err(|e| {
        Error::io("cannot read the signature", file, e).hint("give a model.sig file")
    })?;
    if meta.len() as usize > MAX_SIGNATURE_BYTES {
        return Err(Error::invalid(format!(
            "{} is larger than any signature of a version",
            file.display()
        )));
    }
    std::fs::read(file).map_err(|e| Error::io("cannot read the signature", file, e))
}

#[derive(Serialize)]
struct VerifiedOut {
    #[serde(rename = "ref")]
    pinned: String,
    valid: bool,
    signatures: Vec<Checked>,
}

/// Every stored signature of `v` checked against `keys`; a SHA-256 one reads the files
/// once if their SHA-256s are not kept yet (and keeps them).
fn check_all(v: &Version, keys: &[PublicKey]) -> Result<Vec<Checked>> {
    let sha256 = || v.sha256s().map(Some);
    verdict::check_all(&v.repo, &v.volume, &v.digest, &v.manifest, keys, &sha256)
}

pub fn verify_signature(ctx: &Ctx, reference: &str, keys: &[PathBuf], as_json: bool) -> Result<()> {
    let keys: Vec<PublicKey> = keys
        .iter()
        .map(|k| PublicKey::load(k))
        .collect::<Result<_>>()?;
    let v = open(ctx, reference)?;
    let checked = check_all(&v, &keys)?;
    let refusal = match checked.iter().any(|c| c.valid) {
        true => None,
        false => Some(
            Error::new(
                sealvol_core::ErrorKind::Denied,
                format!(
                    "{} has no valid signature: {}",
                    v.pinned,
                    verdict::why_none(&keys, &checked)
                ),
            )
            .hint(format!(
                "sign it with `sealvol volume sign {} --key KEY.pem`",
                v.pinned
            )),
        ),
    };
    if as_json {
        json(&VerifiedOut {
            pinned: v.pinned.clone(),
            valid: refusal.is_none(),
            signatures: checked,
        })?;
    } else if let Some(c) = checked.iter().find(|c| c.valid) {
        println!(
            "{}: signed by {} ({}, every file)",
            v.pinned,
            c.signer.as_deref().unwrap_or_default(),
            c.hash.unwrap_or_default()
        );
    }
    refusal.map_or(Ok(()), Err)
}

#[derive(Serialize)]
struct Listed {
    key: String,
    hash: String,
    algorithm: Option<&'static str>,
    files: Option<usize>,
    key_hint: Option<String>,
    file: Option<String>,
    error: Option<String>,
}

pub fn signatures(ctx: &Ctx, reference: &str, out: Option<&Path>, as_json: bool) -> Result<()> {
    let v = open(ctx, reference)?;
    let stored = v.repo.signatures(&v.volume, &v.digest)?;
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    }
    let mut listed = Vec::new();
    for s in stored {
        let claims = bundle::claims(&s.bytes);
        let file = match out {
            Some(dir) => {
                let path = dir.join(format!("{}.sig", &s.hash.hex()[..16]));
                write_new(&path, &s.bytes)?;
                Some(path.display().to_string())
            }
            None => None,
        };
        listed.push(match claims {
            Ok(c) => Listed {
                key: s.key,
                hash: s.hash.hex(),
                algorithm: Some(c.statement.algorithm.name()),
                files: Some(c.statement.resources.len()),
                key_hint: c.hint,
                file,
                error: None,
            },
            Err(e) => Listed {
                key: s.key,
                hash: s.hash.hex(),
                algorithm: None,
                files: None,
                key_hint: None,
                file,
                error: Some(e.message().to_string()),
            },
        });
    }
    if as_json {
        #[derive(Serialize)]
        struct All {
            #[serde(rename = "ref")]
            pinned: String,
            signatures: Vec<Listed>,
        }
        return json(&All {
            pinned: v.pinned,
            signatures: listed,
        });
    }
    if listed.is_empty() {
        println!("{}: no signatures", v.pinned);
        return Ok(());
    }
    println!(
        "{:<18} {:<7} {:>8}  {:<18} FILE",
        "SIGNATURE", "HASH", "FILES", "KEY HINT"
    );
    for l in &listed {
        println!(
            "{:<18} {:<7} {:>8}  {:<18} {}",
            &l.hash[..16],
            l.algorithm.unwrap_or("-"),
            l.files.map_or("-".into(), |n| n.to_string()),
            l.key_hint.as_deref().map_or("-", |h| &h[..h.len().min(16)]),
            l.file.as_deref().or(l.error.as_deref()).unwrap_or("")
        );
    }
    Ok(())
}

/// Writes a new file; one already there is left alone (and said).
fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::io("cannot write", path, e).hint("write into an empty folder"))?;
    f.write_all(bytes)
        .map_err(|e| Error::io("cannot write", path, e))
}
