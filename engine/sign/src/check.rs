//! A statement against a version: every file of the version listed with its digest,
//! and nothing else. A version's files are given as (path, digest) in the statement's
//! hash; for BLAKE3 those are the manifest's own hashes.

use std::collections::HashMap;

use sealvol_core::{Error, Result};

use crate::statement::Statement;

/// What differs between a statement and a version, by path.
#[derive(Debug, Default, PartialEq)]
pub struct Mismatch {
    /// Files of the version the statement does not list.
    pub unsigned: Vec<String>,
    /// Files the statement lists that the version does not hold.
    pub absent: Vec<String>,
    /// Files whose digest differs.
    pub other: Vec<String>,
}

impl Mismatch {
    pub fn is_empty(&self) -> bool {
        self.unsigned.is_empty() && self.absent.is_empty() && self.other.is_empty()
    }

    /// One line: what differs, a few paths of each.
    pub fn line(&self) -> String {
        let few = |v: &[String]| {
            let mut s = v.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
            if v.len() > 3 {
                s.push_str(&format!(" and {} more", v.len() - 3));
            }
            s
        };
        let mut parts = Vec::new();
        if !self.other.is_empty() {
            parts.push(format!("other bytes in {}", few(&self.other)));
        }
        if !self.unsigned.is_empty() {
            parts.push(format!("not signed: {}", few(&self.unsigned)));
        }
        if !self.absent.is_empty() {
            parts.push(format!(
                "signed but not in the version: {}",
                few(&self.absent)
            ));
        }
        parts.join("; ")
    }
}

pub fn compare(statement: &Statement, files: &[(String, [u8; 32])]) -> Mismatch {
    let signed: HashMap<&str, &[u8; 32]> = statement
        .resources
        .iter()
        .map(|r| (r.name.as_str(), &r.digest))
        .collect();
    let mut m = Mismatch::default();
    let mut held = std::collections::HashSet::with_capacity(files.len());
    for (path, digest) in files {
        held.insert(path.as_str());
        match signed.get(path.as_str()) {
            None => m.unsigned.push(path.clone()),
            Some(d) if *d != digest => m.other.push(path.clone()),
            Some(_) => {}
        }
    }
    for r in &statement.resources {
        if !held.contains(r.name.as_str()) {
            m.absent.push(r.name.clone());
        }
    }
    m
}

/// `compare`, as an error naming the version when anything differs.
pub fn matches(statement: &Statement, files: &[(String, [u8; 32])], version: &str) -> Result<()> {
    let m = compare(statement, files);
    if m.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        sealvol_core::ErrorKind::Denied,
        format!("the signature is not of {version}: {}", m.line()),
    )
    .hint("it was made for other files; sign this version, or use the version it was made for"))
}
