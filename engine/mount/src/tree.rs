//! The inode table of a mounted version, built once from its manifest: the only thing a
//! mount reads before it answers `ls`. Inode numbers are positions in one vector, so a
//! lookup is a binary search in the parent's sorted children and nothing else.

use std::collections::HashMap;

use sealvol_core::digest::{Entry, Hash};
use sealvol_core::error::{Error, Result};
use sealvol_core::paths::{is_clean_relative, link_stays_inside};

pub const ROOT: u64 = 1;

#[derive(Debug)]
pub struct Node {
    pub parent: u64,
    pub kind: NodeKind,
}

#[derive(Debug)]
pub enum NodeKind {
    /// Children sorted by name, so lookups and readdir offsets are stable.
    Dir {
        children: Vec<(String, u64)>,
    },
    File {
        size: u64,
        hash: Hash,
        exec: bool,
        /// A `.safetensors` file: read ahead by its header's plan.
        tensors: bool,
    },
    Symlink {
        target: String,
    },
}

#[derive(Debug)]
pub struct Tree {
    nodes: Vec<Node>,
    files: u64,
    bytes: u64,
}

impl Tree {
    /// Refuses a manifest whose paths are not clean relative paths, whose links climb
    /// out of the volume, or that names one path twice: a mount must never show what a
    /// pull would refuse to write.
    pub fn build(entries: &[Entry]) -> Result<Tree> {
        let mut t = Tree {
            nodes: vec![Node {
                parent: ROOT,
                kind: NodeKind::Dir {
                    children: Vec::new(),
                },
            }],
            files: 0,
            bytes: 0,
        };
        let mut dirs: HashMap<(u64, &str), u64> = HashMap::new();
        for e in entries {
            let path = e.path();
            let safe = is_clean_relative(path)
                && match e {
                    Entry::Symlink { path, target } => link_stays_inside(path, target),
                    _ => true,
                };
            if !safe {
                return Err(Error::corrupt(format!(
                    "the version holds an unsafe path {path:?}; refusing to mount it"
                )));
            }
            let (parent_path, name) = match path.rsplit_once('/') {
                Some((p, n)) => (Some(p), n),
                None => (None, path),
            };
            let mut parent = ROOT;
            if let Some(pp) = parent_path {
                for part in pp.split('/') {
                    parent = match dirs.get(&(parent, part)) {
                        Some(&d) => d,
                        None => {
                            let d = t.add(
                                parent,
                                part,
                                NodeKind::Dir {
                                    children: Vec::new(),
                                },
                            )?;
                            dirs.insert((parent, part), d);
                            d
                        }
                    };
                }
            }
            let kind = match e {
                Entry::Dir { .. } => {
                    if dirs.contains_key(&(parent, name)) {
                        continue;
                    }
                    let d = t.add(
                        parent,
                        name,
                        NodeKind::Dir {
                            children: Vec::new(),
                        },
                    )?;
                    dirs.insert((parent, name), d);
                    continue;
                }
                Entry::File {
                    size, hash, exec, ..
                } => {
                    t.files += 1;
                    t.bytes += size;
                    NodeKind::File {
                        size: *size,
                        hash: *hash,
                        exec: *exec,
                        tensors: name.ends_with(".safetensors"),
                    }
                }
                Entry::Symlink { target, .. } => NodeKind::Symlink {
                    target: target.clone(),
                },
            };
            if dirs.contains_key(&(parent, name)) {
                return Err(duplicate(path));
            }
            t.add(parent, name, kind)?;
        }
        for n in &mut t.nodes {
            if let NodeKind::Dir { children } = &mut n.kind {
                children.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            }
        }
        for n in &t.nodes {
            if let NodeKind::Dir { children } = &n.kind
                && children.windows(2).any(|w| w[0].0 == w[1].0)
            {
                return Err(Error::corrupt(
                    "the version names one path twice; refusing to mount it",
                ));
            }
        }
        Ok(t)
    }

    fn add(&mut self, parent: u64, name: &str, kind: NodeKind) -> Result<u64> {
        let ino = self.nodes.len() as u64 + 1;
        match &mut self.nodes[(parent - 1) as usize].kind {
            NodeKind::Dir { children } => children.push((name.to_string(), ino)),
            _ => return Err(duplicate(name)),
        }
        self.nodes.push(Node { parent, kind });
        Ok(ino)
    }

    pub fn get(&self, ino: u64) -> Option<&Node> {
        self.nodes.get(ino.checked_sub(1)? as usize)
    }

    pub fn lookup(&self, parent: u64, name: &[u8]) -> Option<u64> {
        match &self.get(parent)?.kind {
            NodeKind::Dir { children } => children
                .binary_search_by(|(n, _)| n.as_bytes().cmp(name))
                .ok()
                .map(|i| children[i].1),
            _ => None,
        }
    }

    /// The path of inode `ino` inside the version, for messages (found by searching
    /// each parent's children: only errors need it).
    pub fn path_of(&self, ino: u64) -> String {
        let mut parts = Vec::new();
        let mut at = ino;
        while at != ROOT {
            let Some(node) = self.get(at) else { break };
            if let Some(NodeKind::Dir { children }) = self.get(node.parent).map(|n| &n.kind)
                && let Some((name, _)) = children.iter().find(|(_, c)| *c == at)
            {
                parts.push(name.as_str());
            }
            at = node.parent;
        }
        parts.reverse();
        parts.join("/")
    }

    /// Inodes, the root included.
    pub fn inodes(&self) -> u64 {
        self.nodes.len() as u64
    }

    pub fn files(&self) -> u64 {
        self.files
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

fn duplicate(path: &str) -> Error {
    Error::corrupt(format!(
        "the version has {path:?} both as a file and as a directory; refusing to mount it"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, size: u64) -> Entry {
        Entry::File {
            path: path.into(),
            size,
            hash: Hash::of(path.as_bytes()),
            exec: false,
        }
    }

    #[test]
    fn builds_directories_from_paths_and_looks_up_by_name() {
        let t = Tree::build(&[
            file("a/b/c.bin", 3),
            file("a/x", 1),
            Entry::Dir {
                path: "empty".into(),
            },
            Entry::Symlink {
                path: "a/l".into(),
                target: "x".into(),
            },
        ])
        .unwrap();
        let a = t.lookup(ROOT, b"a").unwrap();
        let b = t.lookup(a, b"b").unwrap();
        let c = t.lookup(b, b"c.bin").unwrap();
        assert!(matches!(
            t.get(c).unwrap().kind,
            NodeKind::File { size: 3, .. }
        ));
        assert!(t.lookup(ROOT, b"empty").is_some());
        assert!(t.lookup(ROOT, b"nope").is_none());
        assert!(t.lookup(c, b"x").is_none(), "a file has no children");
        assert_eq!((t.files(), t.bytes()), (2, 4));
        let NodeKind::Dir { children } = &t.get(a).unwrap().kind else {
            panic!()
        };
        let names: Vec<&str> = children.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["b", "l", "x"]);
        assert_eq!(t.path_of(c), "a/b/c.bin");
    }

    #[test]
    fn refuses_unsafe_or_contradictory_manifests() {
        for bad in [
            vec![file("../x", 1)],
            vec![file("/etc/passwd", 1)],
            vec![file("a//b", 1)],
            vec![Entry::Symlink {
                path: "l".into(),
                target: "../../etc".into(),
            }],
            vec![file("a", 1), file("a/b", 1)],
            vec![file("a/b", 1), file("a", 1)],
            vec![file("a", 1), file("a", 1)],
        ] {
            assert!(Tree::build(&bad).is_err(), "{bad:?}");
        }
    }
}
