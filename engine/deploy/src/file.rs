//! A deployment file: any YAML file with a `sealvol:` block that lists what the
//! deployment mounts. Every other key is the deployment's own and left alone.
//!
//! ```yaml
//! sealvol:
//!   mounts:
//!     - ref: vol:weights/qwen3-8b@b3:9f3c…
//!       path: /app/weights
//!   trust:                       # optional: who must have signed what it mounts
//!     weights: [keys/release.pub]
//! ```
//!
//! Loading checks the block's shape strictly (a typo in a key is an error, not a key
//! silently ignored) and keeps, for every ref, where its bytes are, so that a rewrite
//! changes those bytes and nothing else.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use sealvol_core::{Error, Result};

use crate::yaml::{self, Node, Pos, Source};

/// Deployment files larger than this are refused: a config file is kilobytes.
pub const MAX_BYTES: u64 = 8 << 20;

const SHAPE_HINT: &str = "a deployment lists its volumes as `sealvol:` → `mounts:` → a list of `- ref: vol:NS/NAME@b3:…` with `path: /absolute/path` (README, Deployments)";

#[derive(Debug, Clone)]
pub struct DeployFile {
    pub path: PathBuf,
    /// The file's bytes as read (UTF-8).
    pub text: String,
    /// Where `sealvol:` is.
    pub block: Pos,
    pub mounts: Vec<MountEntry>,
    /// `trust:`: namespace (or "*") → public key files, relative to the file's folder;
    /// what it mounts must be signed by them as well as by what config.toml trusts.
    pub trust: BTreeMap<String, Vec<PathBuf>>,
}

/// One `- ref: … / path: …` of the block.
#[derive(Debug, Clone)]
pub struct MountEntry {
    /// The ref as written.
    pub reference: String,
    /// Where the ref's value is written in the mount (an alias: where the alias is).
    pub at: Pos,
    /// Where the bytes to rewrite are (an alias: its anchor's scalar), or why they
    /// cannot be rewritten in place.
    pub source: Source,
    /// The anchor the ref comes from, when it is an alias (`ref: *weights`) or merged.
    pub anchor: Option<String>,
    /// The mount point, normalised (no trailing `/`).
    pub path: String,
    pub path_at: Pos,
}

impl DeployFile {
    pub fn read(path: &Path) -> Result<DeployFile> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io("cannot read", path, e))?;
        if !meta.is_file() {
            return Err(Error::invalid(format!(
                "{} is not a file",
                path.display()
            ))
            .hint("name a deployment's YAML file, or a directory of them where a command takes one"));
        }
        if meta.len() > MAX_BYTES {
            return Err(Error::invalid(format!(
                "{} is {} bytes: a deployment file over {} MiB is refused",
                path.display(),
                meta.len(),
                MAX_BYTES >> 20
            )));
        }
        let bytes = std::fs::read(path).map_err(|e| Error::io("cannot read", path, e))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            Error::invalid(format!(
                "{} is not UTF-8 text (byte {} is not)",
                path.display(),
                e.utf8_error().valid_up_to()
            ))
        })?;
        DeployFile::parse(path, text)
    }

    pub fn parse(path: &Path, text: String) -> Result<DeployFile> {
        let shown = path.display().to_string();
        let at = |p: Pos, msg: String| {
            Error::invalid(format!("{shown}:{}:{}: {msg}", p.line, p.col)).hint(SHAPE_HINT)
        };
        let docs = yaml::parse(&text).map_err(|e| {
            Error::invalid(format!(
                "{shown}:{}:{}: malformed YAML: {}",
                e.line, e.col, e.message
            ))
            .hint("fix the YAML there; nothing was changed")
        })?;
        let mut found: Option<(Pos, &Node)> = None;
        for doc in &docs {
            let Some(entries) = doc.entries() else {
                continue;
            };
            no_duplicates(&entries, &at, "at the top level")?;
            for (k, v) in entries {
                if k.as_str() != Some("sealvol") {
                    continue;
                }
                if let Some((first, _)) = found {
                    return Err(at(
                        k.at(),
                        format!(
                            "a second `sealvol:` block (the first is on line {})",
                            first.line
                        ),
                    ));
                }
                found = Some((k.at(), v));
            }
        }
        let Some((block, value)) = found else {
            return Err(Error::invalid(format!("{shown} has no `sealvol:` block")).hint(SHAPE_HINT));
        };
        let entries = value.entries().ok_or_else(|| {
            at(
                value.at(),
                format!(
                    "`sealvol:` must be a mapping with `mounts:`, not {}",
                    value.kind()
                ),
            )
        })?;
        no_duplicates(&entries, &at, "under `sealvol:`")?;
        let mut list = None;
        let mut trust = BTreeMap::new();
        for (k, v) in &entries {
            match k.as_str() {
                Some("mounts") => list = Some(*v),
                Some("trust") => trust = trust_entries(v, &at)?,
                other => {
                    return Err(at(
                        k.at(),
                        format!(
                            "unknown key `{}` under `sealvol:` (the keys are `mounts` and `trust`)",
                            other.unwrap_or("?")
                        ),
                    ));
                }
            }
        }
        let list = list.ok_or_else(|| at(block, "`sealvol:` has no `mounts:` list".into()))?;
        let Node::Seq { items, .. } = list.resolved() else {
            return Err(at(
                list.at(),
                format!("`mounts:` must be a list, not {}", list.kind()),
            ));
        };
        let mut mounts = Vec::with_capacity(items.len());
        for (n, item) in items.iter().enumerate() {
            mounts.push(mount_entry(n + 1, item, &at)?);
        }
        Ok(DeployFile {
            path: path.to_path_buf(),
            text,
            block,
            mounts,
            trust,
        })
    }

    /// The rules of `base` (config.toml's) with this file's own `trust:` added: each
    /// key file loaded now, relative to the file's folder.
    pub fn policy(&self, base: &sealvol_sign::Policy) -> Result<sealvol_sign::Policy> {
        let folder = self.path.parent().unwrap_or(Path::new(""));
        let rules =
            sealvol_sign::Rules::load(&self.path.display().to_string(), folder, &self.trust)?;
        Ok(base.clone().with(rules))
    }

    /// The 1-based line `line` of the text, without its line ending.
    pub fn line(&self, line: usize) -> &str {
        self.text
            .split('\n')
            .nth(line.saturating_sub(1))
            .map_or("", |l| l.strip_suffix('\r').unwrap_or(l))
    }
}

/// `trust:` as namespace → key files: each value a path or a list of paths.
fn trust_entries(
    node: &Node,
    at: &dyn Fn(Pos, String) -> Error,
) -> Result<BTreeMap<String, Vec<PathBuf>>> {
    let entries = node.entries().ok_or_else(|| {
        at(
            node.at(),
            format!(
                "`trust:` must map namespaces to public key files, not {}",
                node.kind()
            ),
        )
    })?;
    no_duplicates(&entries, at, "under `trust:`")?;
    let mut out = BTreeMap::new();
    for (k, v) in entries {
        let ns = k
            .as_str()
            .ok_or_else(|| at(k.at(), "a namespace under `trust:` must be text".into()))?;
        let files: Vec<&Node> = match v.resolved() {
            Node::Seq { items, .. } => items.iter().collect(),
            _ => vec![v],
        };
        let mut paths = Vec::with_capacity(files.len());
        for f in files {
            let p = f.as_str().ok_or_else(|| {
                at(
                    f.at(),
                    format!(
                        "a key file under `trust: {ns}:` must be a path, not {}",
                        f.kind()
                    ),
                )
            })?;
            paths.push(PathBuf::from(p));
        }
        out.insert(ns.to_string(), paths);
    }
    Ok(out)
}

fn mount_entry(n: usize, item: &Node, at: &dyn Fn(Pos, String) -> Error) -> Result<MountEntry> {
    let entries = item.entries().ok_or_else(|| {
        at(
            item.at(),
            format!(
                "mount {n} must be a mapping with `ref:` and `path:`, not {}",
                item.kind()
            ),
        )
    })?;
    no_duplicates(&entries, at, &format!("in mount {n}"))?;
    let (mut reference, mut path) = (None, None);
    for (k, v) in entries {
        match k.as_str() {
            Some("ref") => reference = Some(v),
            Some("path") => path = Some(v),
            other => {
                return Err(at(
                    k.at(),
                    format!(
                        "unknown key `{}` in mount {n} (a mount has `ref:` and `path:`)",
                        other.unwrap_or("?")
                    ),
                ));
            }
        }
    }
    let reference = reference.ok_or_else(|| at(item.at(), format!("mount {n} has no `ref:`")))?;
    let path = path.ok_or_else(|| at(item.at(), format!("mount {n} has no `path:`")))?;
    let scalar = |v: &Node, key: &str| {
        v.as_str().map(str::to_string).ok_or_else(|| {
            at(
                v.at(),
                format!("`{key}:` of mount {n} must be text, not {}", v.kind()),
            )
        })
    };
    let ref_text = scalar(reference, "ref")?;
    let path_text = scalar(path, "path")?;
    let (source, anchor) = match reference {
        Node::Alias { target, anchor, .. } => match target.resolved() {
            Node::Scalar { source, .. } => (source.clone(), Some(anchor.clone())),
            _ => unreachable!("as_str succeeded on a scalar"),
        },
        Node::Scalar { source, .. } => (source.clone(), None),
        _ => unreachable!("as_str succeeded on a scalar"),
    };
    Ok(MountEntry {
        reference: ref_text,
        at: reference.at(),
        source,
        anchor,
        path: mount_path(&path_text).map_err(|why| at(path.at(), format!("mount {n}: {why}")))?,
        path_at: path.at(),
    })
}

/// A mount point as the deployment means it: absolute, with nothing that climbs.
fn mount_path(p: &str) -> std::result::Result<String, String> {
    if !p.starts_with('/') {
        return Err(format!("path {p:?} must be absolute (start with /)"));
    }
    let path = Path::new(p);
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(format!("path {p:?} must not contain . or .. components"));
    }
    if p == "/" {
        return Err("path \"/\" would mount over the whole file system".into());
    }
    Ok(p.trim_end_matches('/').to_string())
}

/// A key written twice in one mapping is refused: YAML forbids it, and which one a
/// program reads differs between parsers.
fn no_duplicates(
    entries: &[(&Node, &Node)],
    at: &dyn Fn(Pos, String) -> Error,
    where_: &str,
) -> Result<()> {
    for (i, (k, _)) in entries.iter().enumerate() {
        let Some(name) = k.as_str() else { continue };
        if let Some((first, _)) = entries[..i].iter().find(|(o, _)| o.as_str() == Some(name)) {
            return Err(at(
                k.at(),
                format!(
                    "key `{name}` appears twice {where_} (first on line {})",
                    first.at().line
                ),
            ));
        }
    }
    Ok(())
}

/// How deep below a named folder deployment files are looked for, and how many
/// entries are looked at in all: `deploy/prod/config.yaml` is two levels down, and a
/// folder is not a file system to crawl.
const MAX_DEPTH: usize = 8;
const MAX_ENTRIES: usize = 100_000;

/// The deployment files named: a file is itself; a directory gives the `*.yaml` and
/// `*.yml` files below it (in folders too, to `MAX_DEPTH` levels; hidden folders and
/// links to folders are passed over, so a ConfigMap's `..data` is read once, through
/// its links) that mention `sealvol:`, sorted. A directory with none is an error.
pub fn collect(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let meta = std::fs::metadata(p).map_err(|e| Error::io("cannot read", p, e))?;
        if !meta.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut found = Vec::new();
        let mut seen = 0;
        find_below(p, 0, &mut seen, &mut found)?;
        if found.is_empty() {
            return Err(Error::not_found(format!(
                "{} holds no deployment files (*.yaml or *.yml with a `sealvol:` block), in it or in its folders",
                p.display()
            ))
            .hint(SHAPE_HINT));
        }
        found.sort();
        out.extend(found);
    }
    out.dedup();
    Ok(out)
}

fn find_below(dir: &Path, depth: usize, seen: &mut usize, found: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).map_err(|e| Error::io("cannot list", dir, e))? {
        let e = e.map_err(|e| Error::io("cannot list", dir, e))?;
        *seen += 1;
        if *seen > MAX_ENTRIES {
            return Err(Error::invalid(format!(
                "{} holds more than {MAX_ENTRIES} entries to look through for deployment files",
                dir.display()
            ))
            .hint("name the deployment files, or the folder that holds them"));
        }
        let path = e.path();
        let hidden = e.file_name().to_str().is_some_and(|n| n.starts_with('.'));
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            if !hidden && depth + 1 < MAX_DEPTH {
                find_below(&path, depth + 1, seen, found)?;
            }
            continue;
        }
        let yaml = path.extension().is_some_and(|x| x == "yaml" || x == "yml");
        // A file, or a link to one (a ConfigMap's files are links); never a large one.
        let small_file =
            std::fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() <= MAX_BYTES);
        if yaml && small_file && std::fs::read_to_string(&path).is_ok_and(|t| has_block(&t)) {
            found.push(path);
        }
    }
    Ok(())
}

/// Whether YAML `text` has a top-level `sealvol:` key: what makes a file a deployment
/// file, not the word somewhere in it (a kustomization's image `…/sealvol:1.4`).
pub fn has_block(text: &str) -> bool {
    text.lines().any(|l| {
        l.strip_prefix("sealvol:")
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '#']))
    })
}

/// Short names for deployment files: their paths below the deepest folder they share
/// (`staging/config.yaml`, `prod/config.yaml`), or the file name for one file.
pub fn display_names(paths: &[PathBuf]) -> Vec<String> {
    let abs: Vec<PathBuf> = paths
        .iter()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone()))
        .collect();
    let mut common: Option<PathBuf> = abs.first().and_then(|p| p.parent()).map(Path::to_path_buf);
    for p in &abs {
        while let Some(c) = &common {
            if p.starts_with(c) {
                break;
            }
            common = c.parent().map(Path::to_path_buf);
        }
    }
    abs.iter()
        .map(|p| match &common {
            Some(c) => p.strip_prefix(c).unwrap_or(p).display().to_string(),
            None => p.display().to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<DeployFile> {
        DeployFile::parse(Path::new("d.yaml"), text.to_string())
    }

    #[test]
    fn the_block_is_found_among_other_keys_and_documents() {
        let f = parse(
            "app: {replicas: 3}\n---\n# comment\nsealvol:\n  mounts:\n    - ref: vol:w/q:prod\n      path: /app/w/\n    - {path: /app/l, ref: 'vol:a/l@b3:0123456789'}\nother: 1\n",
        )
        .unwrap();
        assert_eq!(f.block.line, 4);
        let got: Vec<(&str, &str, usize)> = f
            .mounts
            .iter()
            .map(|m| (m.reference.as_str(), m.path.as_str(), m.at.line))
            .collect();
        assert_eq!(
            got,
            [
                ("vol:w/q:prod", "/app/w", 6),
                ("vol:a/l@b3:0123456789", "/app/l", 8)
            ]
        );
    }

    #[test]
    fn an_alias_bomb_is_refused_at_its_line() {
        let mut text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n".to_string();
        for l in 1..=9 {
            let refs = vec![format!("*a{}", l - 1); 10].join(", ");
            text.push_str(&format!("a{l}: &a{l} [{refs}]\n"));
        }
        text.push_str("sealvol:\n  mounts:\n    - {ref: *a9, path: /p}\n");
        let err = parse(&text).unwrap_err();
        assert!(err.message().starts_with("d.yaml:5:"), "{err}");
        assert!(err.message().contains("100000 nodes"), "{err}");
    }

    #[test]
    fn wrong_shapes_say_what_and_where() {
        let cases = [
            ("a: 1\n", "has no `sealvol:` block"),
            (
                "sealvol: [1]\n",
                "d.yaml:1:10: `sealvol:` must be a mapping with `mounts:`, not a list",
            ),
            (
                "sealvol:\n  mount: []\n",
                "d.yaml:2:3: unknown key `mount` under `sealvol:`",
            ),
            ("sealvol: {}\n", "has no `mounts:` list"),
            (
                "sealvol:\n  mounts: x\n",
                "`mounts:` must be a list, not a scalar",
            ),
            ("sealvol:\n  mounts: [x]\n", "mount 1 must be a mapping"),
            (
                "sealvol:\n  mounts:\n    - path: /a\n",
                "mount 1 has no `ref:`",
            ),
            (
                "sealvol:\n  mounts:\n    - ref: a/b:t\n",
                "mount 1 has no `path:`",
            ),
            (
                "sealvol:\n  mounts:\n    - {ref: a/b:t, path: /a, size: 3}\n",
                "unknown key `size` in mount 1",
            ),
            (
                "sealvol:\n  mounts:\n    - {ref: [a], path: /a}\n",
                "`ref:` of mount 1 must be text, not a list",
            ),
            (
                "sealvol:\n  mounts:\n    - {ref: a/b:t, path: app}\n",
                "must be absolute",
            ),
            (
                "sealvol:\n  mounts:\n    - {ref: a/b:t, path: /a/../b}\n",
                "must not contain . or ..",
            ),
            (
                "sealvol:\n  mounts:\n    - {ref: a/b:t, ref: a/b:u, path: /a}\n",
                "key `ref` appears twice in mount 1",
            ),
            (
                "sealvol: {mounts: []}\nsealvol: {mounts: []}\n",
                "key `sealvol` appears twice at the top level",
            ),
            (
                "sealvol: {mounts: []}\n---\nsealvol: {mounts: []}\n",
                "d.yaml:3:1: a second `sealvol:` block (the first is on line 1)",
            ),
            ("sealvol:\n  mounts:\n\t- x\n", "d.yaml:3:"),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.message().contains(want), "{text:?}: {}", err.message());
            assert!(err.hint_text().is_some(), "{text:?} has a hint");
        }
    }

    #[test]
    fn deployment_folders_are_searched_below_their_top_level() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("deploy");
        let file = "sealvol:\n  mounts:\n    - {ref: a/b:t, path: /p}\n";
        for rel in [
            "prod/config.yaml",
            "canary/config.yml",
            "a/b/c/d.yaml",
            ".git/x.yaml",
        ] {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, file).unwrap();
        }
        std::fs::write(root.join("prod/values.yaml"), "replicas: 3\n").unwrap();
        // A ConfigMap's layout: the file is a link into `..data`, itself a link.
        let cm = root.join("cm");
        std::fs::create_dir_all(cm.join("..2026_12_03")).unwrap();
        std::fs::write(cm.join("..2026_12_03/config.yaml"), file).unwrap();
        std::os::unix::fs::symlink("..2026_12_03", cm.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/config.yaml", cm.join("config.yaml")).unwrap();
        let found: Vec<String> = collect(std::slice::from_ref(&root))
            .unwrap()
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            found,
            [
                "a/b/c/d.yaml",
                "canary/config.yml",
                "cm/config.yaml",
                "prod/config.yaml"
            ]
        );
        let empty = dir.path().join("empty/deep");
        std::fs::create_dir_all(&empty).unwrap();
        let err = collect(&[dir.path().join("empty")]).unwrap_err();
        assert!(err.message().contains("holds no deployment files"), "{err}");
    }

    #[test]
    fn names_are_paths_below_the_shared_folder() {
        let names = display_names(&[
            PathBuf::from("/d/staging/config.yaml"),
            PathBuf::from("/d/prod/config.yaml"),
        ]);
        assert_eq!(names, ["staging/config.yaml", "prod/config.yaml"]);
        assert_eq!(display_names(&[PathBuf::from("/d/a.yaml")]), ["a.yaml"]);
    }

    #[test]
    fn a_file_is_a_deployment_file_by_its_block_not_by_the_word() {
        assert!(has_block("sealvol:\n  mounts: []\n"));
        assert!(has_block("name: x\nsealvol: # mounts\n  mounts: []\n"));
        let kustomization = "images:\n  - name: sealvol\n    newName: ghcr.io/x/sealvol:1.4\nresources: [ds.yaml]\n";
        assert!(!has_block(kustomization));
        assert!(!has_block("  sealvol:\n    mounts: []\n"));
        assert!(!has_block("sealvolx: 1\n"));
    }
}
