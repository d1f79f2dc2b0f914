//! The trust policy: which public keys a namespace's versions must be signed by before
//! they are mounted or pulled. Rules come from config.toml (`[trust]`) and from a
//! deployment file (`trust:` in its `sealvol:` block); every set of rules that names a
//! namespace must be met, so a deployment can add to what the node requires and never
//! take from it.
//!
//! A namespace no rule names is not policed; `*` names every namespace its own rules do
//! not name. A rule that names a key file that is missing, or not a P-256 public key,
//! is an error when the rules are loaded, not a rule that passes or refuses everything.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sealvol_core::refs::{Digest, Name, VolumeName};
use sealvol_core::{Error, ErrorKind, Ref, Repository, Result};

use crate::keys::PublicKey;
use crate::verdict;

/// Every namespace a rule set does not name otherwise.
pub const ANY: &str = "*";

/// The rules of one place (config.toml, a deployment file).
#[derive(Debug, Clone)]
pub struct Rules {
    /// Where they are written, as the refusal names it.
    pub origin: String,
    by_namespace: BTreeMap<String, Vec<PublicKey>>,
}

impl Rules {
    /// `entries` maps a namespace (or `*`) to key files; a relative path is taken from
    /// `base` (the folder of the file that names it).
    pub fn load(
        origin: &str,
        base: &Path,
        entries: &BTreeMap<String, Vec<PathBuf>>,
    ) -> Result<Rules> {
        let mut by_namespace = BTreeMap::new();
        for (ns, files) in entries {
            if ns != ANY {
                Name::parse("namespace", ns).map_err(|e| {
                    Error::invalid(format!("{origin}: trust names {}", e.message()))
                        .hint("trust maps a namespace (or \"*\" for any other) to public key files")
                })?;
            }
            if files.is_empty() {
                return Err(Error::invalid(format!(
                    "{origin}: trust for {ns} lists no key, so it would refuse every version"
                ))
                .hint("name the signers' public key files, or remove the entry"));
            }
            let mut keys = Vec::with_capacity(files.len());
            for f in files {
                let path = base.join(f);
                let key = PublicKey::load(&path).map_err(|e| {
                    let hint = e.hint_text().map(str::to_string);
                    let err = Error::new(
                        e.kind(),
                        format!("{origin}: trust for {ns}: {}", e.message()),
                    );
                    match hint {
                        Some(h) => err.hint(h),
                        None => err.hint("the policy names this key file: put the signer's public key there, or change the policy"),
                    }
                })?;
                keys.push(key);
            }
            by_namespace.insert(ns.clone(), keys);
        }
        Ok(Rules {
            origin: origin.to_string(),
            by_namespace,
        })
    }

    /// The keys these rules trust for `namespace`, if they police it.
    pub fn keys_for(&self, namespace: &Name) -> Option<&[PublicKey]> {
        self.by_namespace
            .get(namespace.as_str())
            .or_else(|| self.by_namespace.get(ANY))
            .map(Vec::as_slice)
    }

    pub fn is_empty(&self) -> bool {
        self.by_namespace.is_empty()
    }
}

/// Every set of rules in force for one command.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    rules: Vec<Rules>,
}

/// What the policy says of a version it lets through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// No rule names its namespace.
    Unpoliced,
    /// Signed as every rule requires: the key file that verified it, per rule.
    Signed(Vec<String>),
}

/// Where a version stands under the policy, for people (the console's SIGNED column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// No rule polices its namespace: this many signatures are stored, checked by no key.
    Unpoliced(usize),
    /// Signed as every rule requires: the key files that verified it.
    Trusted(Vec<String>),
    /// The policy refuses it: why, in one line.
    Refused(String),
}

impl Policy {
    /// `admit`, as a standing: a refusal is an answer here, not an error.
    pub fn standing(
        &self,
        repo: &Repository,
        volume: &VolumeName,
        digest: &Digest,
    ) -> Result<Standing> {
        match self.admit(repo, volume, digest) {
            Ok(Admitted::Signed(by)) => Ok(Standing::Trusted(by)),
            Ok(Admitted::Unpoliced) => {
                Ok(Standing::Unpoliced(repo.signature_count(volume, digest)?))
            }
            Err(e) if e.kind() == ErrorKind::Untrusted => {
                Ok(Standing::Refused(e.message().to_string()))
            }
            Err(e) => Err(e),
        }
    }

    pub fn with(mut self, rules: Rules) -> Policy {
        if !rules.is_empty() {
            self.rules.push(rules);
        }
        self
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether any rule polices `volume`'s namespace.
    pub fn governs(&self, volume: &VolumeName) -> bool {
        self.rules
            .iter()
            .any(|r| r.keys_for(&volume.namespace).is_some())
    }

    /// Lets `volume@digest` through if, for every rule set that names its namespace, it
    /// carries a valid signature of exactly its files by one of that set's keys; else
    /// one line naming the version, the keys tried and why none counted.
    pub fn admit(
        &self,
        repo: &Repository,
        volume: &VolumeName,
        digest: &Digest,
    ) -> Result<Admitted> {
        let applying: Vec<(&Rules, &[PublicKey])> = self
            .rules
            .iter()
            .filter_map(|r| r.keys_for(&volume.namespace).map(|k| (r, k)))
            .collect();
        if applying.is_empty() {
            return Ok(Admitted::Unpoliced);
        }
        let manifest = repo.manifest(volume, digest)?;
        // Only SHA-256s already kept: deciding whether to start never reads the files.
        let kept = || {
            Ok(repo
                .sha256s(volume, digest)?
                .and_then(|k| crate::version::from_hex(&k.files)))
        };
        let pinned = Ref::pinned(volume.clone(), *digest);
        let mut signers = Vec::new();
        for (rules, keys) in applying {
            let checked = verdict::check_all(repo, volume, digest, &manifest, keys, &kept)?;
            match checked.iter().find(|c| c.valid) {
                Some(c) => signers.push(c.signer.clone().unwrap_or_default()),
                None => {
                    return Err(Error::new(
                        ErrorKind::Untrusted,
                        format!(
                            "{pinned} is not signed by a key {} trusts for {}: {}",
                            rules.origin,
                            volume.namespace,
                            verdict::why_none(keys, &checked)
                        ),
                    )
                    .hint(format!(
                        "use a version signed by one of those keys, or sign this one: `sealvol volume sign {pinned} --key KEY.pem`"
                    )));
                }
            }
        }
        Ok(Admitted::Signed(signers))
    }
}
