//! Drift: for every volume that some deployment mounts, which version each deployment
//! serves now (tags resolved), and whether they agree.

use std::collections::BTreeMap;

use serde::Serialize;

use sealvol_core::Digest;

use crate::check::{Checked, Follows};

/// One mount of a volume in one deployment.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub line: usize,
    pub path: String,
    #[serde(rename = "ref")]
    pub reference: String,
    #[serde(serialize_with = "digest_or_none")]
    pub digest: Option<Digest>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub follows: Option<Follows>,
    /// Why the ref does not resolve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn digest_or_none<S: serde::Serializer>(d: &Option<Digest>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&d.to_string()),
        None => s.serialize_none(),
    }
}

/// A volume across deployments: per deployment (in the order given), its mounts.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub volume: String,
    pub cells: Vec<Vec<Cell>>,
    /// Every mount of it resolves, and all to one version.
    pub agree: bool,
}

impl Row {
    pub fn digests(&self) -> Vec<Digest> {
        let mut d: Vec<Digest> = self
            .cells
            .iter()
            .flatten()
            .filter_map(|c| c.digest)
            .collect();
        d.sort();
        d.dedup();
        d
    }
}

pub fn drift(deployments: &[Checked]) -> Vec<Row> {
    let mut rows: BTreeMap<String, Vec<Vec<Cell>>> = BTreeMap::new();
    for (i, c) in deployments.iter().enumerate() {
        for (m, served) in c.file.mounts.iter().zip(&c.served) {
            let volume = match served {
                Ok(s) => s.volume.to_string(),
                Err(_) => sealvol_core::Ref::parse(&m.reference)
                    .map(|r| r.volume.to_string())
                    .unwrap_or_else(|_| m.reference.clone()),
            };
            let cells = rows
                .entry(volume)
                .or_insert_with(|| vec![Vec::new(); deployments.len()]);
            cells[i].push(Cell {
                line: m.at.line,
                path: m.path.clone(),
                reference: m.reference.clone(),
                digest: served.as_ref().ok().map(|s| s.digest),
                follows: served.as_ref().ok().map(|s| s.follows.clone()),
                error: served.as_ref().err().map(|e| e.message().to_string()),
            });
        }
    }
    rows.into_iter()
        .map(|(volume, cells)| {
            let mut row = Row {
                volume,
                cells,
                agree: false,
            };
            let errors = row.cells.iter().flatten().any(|c| c.error.is_some());
            row.agree = !errors && row.digests().len() <= 1;
            row
        })
        .collect()
}

/// Deployments side by side: the files (in order), their short names, the rows, and
/// the files that could not be read (name, why).
#[derive(Debug, Clone, Default)]
pub struct Matrix {
    pub files: Vec<std::path::PathBuf>,
    pub names: Vec<String>,
    pub rows: Vec<Row>,
    pub failed: Vec<(String, String)>,
}

/// Reads and checks every deployment file `paths` name (files, or folders of them).
pub fn matrix(
    repo: &sealvol_core::Repository,
    paths: &[std::path::PathBuf],
) -> sealvol_core::Result<Matrix> {
    let all = crate::file::collect(paths)?;
    let names = crate::file::display_names(&all);
    let mut m = Matrix::default();
    let mut checked = Vec::new();
    for (p, n) in all.into_iter().zip(names) {
        match crate::file::DeployFile::read(&p) {
            Ok(f) => {
                checked.push(crate::check::check(repo, f));
                m.files.push(p);
                m.names.push(n);
            }
            Err(e) => m.failed.push((n, e.message().to_string())),
        }
    }
    m.rows = drift(&checked);
    Ok(m)
}
