//! What a deployment serves: every ref of its file resolved against the repository,
//! and what is wrong or risky about it, as findings with a place in the file.

use std::path::PathBuf;

use serde::Serialize;

use sealvol_core::refs::{DigestSpec, Target};
use sealvol_core::{Digest, Error, Ref, Repository, VolumeName};

use crate::file::{DeployFile, MountEntry};

/// How a ref picks its version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Follows {
    /// A full digest: the same bytes for every replica, always.
    Digest,
    /// A digest prefix: the same version until another one shares the prefix.
    Prefix,
    /// A tag: whatever it points at when a replica starts.
    Tag(String),
    /// A bare volume: its newest version when a replica starts.
    Latest,
}

impl Follows {
    pub fn pinned(&self) -> bool {
        *self == Follows::Digest
    }
}

/// A ref as the repository answers it now.
#[derive(Debug, Clone)]
pub struct Served {
    pub volume: VolumeName,
    pub digest: Digest,
    pub follows: Follows,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub file: PathBuf,
    pub line: usize,
    pub col: usize,
    pub severity: Severity,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// A warning that writing the digest answers (an unpinned or abbreviated ref):
    /// `deploy k8s` renders such a mount pinned, so only the other findings stop it.
    #[serde(skip)]
    pub pinning: bool,
}

impl Finding {
    /// Whether `deploy k8s` must refuse to render a file with this finding.
    pub fn blocks_render(&self) -> bool {
        self.severity == Severity::Error || !self.pinning
    }
}

/// A deployment file, each of its mounts as resolved (or why not), and its findings.
#[derive(Debug)]
pub struct Checked {
    pub file: DeployFile,
    pub served: Vec<std::result::Result<Served, Error>>,
    pub findings: Vec<Finding>,
}

impl Checked {
    /// Adds what the trust policy (`base`, config.toml's, with the file's own `trust:`)
    /// says of each version the file resolves to: one it refuses would not mount, an
    /// error where its ref is written; a policy that cannot be loaded, an error at the
    /// `sealvol:` block.
    pub fn check_trust(&mut self, repo: &Repository, base: &sealvol_sign::Policy) {
        let at = |line: usize, col: usize, message: String, hint: Option<String>| Finding {
            file: self.file.path.clone(),
            line,
            col,
            severity: Severity::Error,
            message,
            hint,
            pinning: false,
        };
        let policy = match self.file.policy(base) {
            Ok(p) => p,
            Err(e) => {
                let f = at(
                    self.file.block.line,
                    self.file.block.col,
                    e.message().to_string(),
                    e.hint_text().map(str::to_string),
                );
                self.findings.push(f);
                return;
            }
        };
        let mut found = Vec::new();
        for (m, s) in self.file.mounts.iter().zip(&self.served) {
            let Ok(s) = s else { continue };
            if let Err(e) = policy.admit(repo, &s.volume, &s.digest) {
                found.push(at(
                    m.at.line,
                    m.at.col,
                    format!("{}: {}", m.reference, e.message()),
                    e.hint_text().map(str::to_string),
                ));
            }
        }
        self.findings.extend(found);
        self.findings.sort_by_key(|f| (f.line, f.col));
    }

    pub fn errors(&self) -> usize {
        self.count(Severity::Error)
    }

    pub fn warnings(&self) -> usize {
        self.count(Severity::Warning)
    }

    fn count(&self, s: Severity) -> usize {
        self.findings.iter().filter(|f| f.severity == s).count()
    }
}

/// Parses a mount's ref and asks the repository what it names now.
pub fn resolve(repo: &Repository, m: &MountEntry) -> std::result::Result<Served, Error> {
    let r = Ref::parse(&m.reference)?;
    let follows = match &r.target {
        Target::Digest(DigestSpec::Full(_)) => Follows::Digest,
        Target::Digest(DigestSpec::Prefix(_)) => Follows::Prefix,
        Target::Tag(t) => Follows::Tag(t.to_string()),
        Target::Latest => Follows::Latest,
    };
    let digest = repo.resolve(&r)?;
    Ok(Served {
        volume: r.volume,
        digest,
        follows,
    })
}

/// Resolves every mount of `file` and says what is wrong (errors) or risky (warnings).
pub fn check(repo: &Repository, file: DeployFile) -> Checked {
    let mut findings = Vec::new();
    let mut served = Vec::with_capacity(file.mounts.len());
    let finding = |m: &MountEntry, severity, message: String, hint: Option<String>| Finding {
        file: file.path.clone(),
        line: m.at.line,
        col: m.at.col,
        pinning: severity == Severity::Warning,
        severity,
        message,
        hint,
    };
    // A command that works as printed: `deploy pin` needs the volume (or --all).
    let pin_hint = |volume: &VolumeName| {
        Some(format!(
            "`sealvol deploy pin {} {volume}` writes the digest it resolves to now",
            file.path.display()
        ))
    };
    for m in &file.mounts {
        let s = resolve(repo, m);
        match &s {
            Err(e) => findings.push(finding(
                m,
                Severity::Error,
                format!("{}: {}", m.reference, e.message()),
                e.hint_text().map(str::to_string),
            )),
            Ok(s) => match &s.follows {
                Follows::Digest => {}
                Follows::Prefix => findings.push(finding(
                    m,
                    Severity::Warning,
                    format!(
                        "abbreviated digest: {} is {} now, but a later version may share the prefix",
                        m.reference, s.digest
                    ),
                    pin_hint(&s.volume),
                )),
                Follows::Tag(t) => findings.push(finding(
                    m,
                    Severity::Warning,
                    format!(
                        "unpinned: new replicas may serve a different version than running ones (tag {t} resolves to {} now)",
                        s.digest
                    ),
                    pin_hint(&s.volume),
                )),
                Follows::Latest => findings.push(finding(
                    m,
                    Severity::Warning,
                    format!(
                        "unpinned: new replicas may serve a different version than running ones ({} follows the newest version, {} now)",
                        m.reference, s.digest
                    ),
                    pin_hint(&s.volume),
                )),
            },
        }
        served.push(s);
    }
    for (i, m) in file.mounts.iter().enumerate() {
        for earlier in &file.mounts[..i] {
            let (a, b) = (earlier.path.as_str(), m.path.as_str());
            let message = if a == b {
                format!(
                    "two mounts on {b} (the other on line {})",
                    earlier.path_at.line
                )
            } else if b.starts_with(a) && b.as_bytes()[a.len()] == b'/' {
                format!(
                    "{b} is inside the mount on {a} (line {}), which is read-only",
                    earlier.path_at.line
                )
            } else if a.starts_with(b) && a.as_bytes()[b.len()] == b'/' {
                format!(
                    "the mount on {a} (line {}) is inside this one on {b}, which is read-only",
                    earlier.path_at.line
                )
            } else {
                continue;
            };
            findings.push(Finding {
                file: file.path.clone(),
                line: m.path_at.line,
                col: m.path_at.col,
                severity: Severity::Warning,
                message,
                hint: Some("give each mount a path of its own".into()),
                pinning: false,
            });
        }
    }
    findings.sort_by_key(|f| (f.line, f.col));
    Checked {
        file,
        served,
        findings,
    }
}
