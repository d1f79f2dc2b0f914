//! The inode table of a mounted version, filled lazily from its listing (the entries in
//! the form the digest hashes, sorted by path; `sealvol_core::listing`). A mount is
//! ready once the listing is read and checked, whatever the file count: a directory's
//! children are worked out the first time someone looks into it, by binary search in
//! the listing (a directory's subtree is one contiguous run of it), and kept.
//!
//! Inode numbers are handed out as directories are first looked into, so they are
//! stable for the life of the mount, which is all the kernel needs.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::{Arc, OnceLock, RwLock};

use sealvol_core::digest::Hash;
use sealvol_core::listing::{EntryRef, Listing};

pub const ROOT: u64 = 1;

#[derive(Debug)]
pub struct Node {
    pub parent: u64,
    pub kind: NodeKind,
}

#[derive(Debug)]
pub enum NodeKind {
    Dir(Dir),
    File {
        size: u64,
        hash: Hash,
        exec: bool,
        /// A `.safetensors` file: read ahead by its header's plan.
        tensors: bool,
        entry: usize,
    },
    Symlink {
        entry: usize,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildKind {
    Dir,
    File,
    Symlink,
}

#[derive(Debug)]
pub struct Child {
    pub name: String,
    pub ino: u64,
    pub kind: ChildKind,
}

#[derive(Debug)]
pub struct Dir {
    /// Its path in the version ("" for the root) and the entries below it.
    path: String,
    subtree: Range<usize>,
    /// Sorted by name; an error if the version contradicts itself here.
    children: OnceLock<Result<Arc<Vec<Child>>, String>>,
}

pub struct Tree {
    listing: Listing,
    nodes: RwLock<Vec<Arc<Node>>>,
}

impl Tree {
    pub fn new(listing: Listing) -> Tree {
        let root = Node {
            parent: ROOT,
            kind: NodeKind::Dir(Dir {
                path: String::new(),
                subtree: 0..listing.len(),
                children: OnceLock::new(),
            }),
        };
        Tree {
            listing,
            nodes: RwLock::new(vec![Arc::new(root)]),
        }
    }

    pub fn get(&self, ino: u64) -> Option<Arc<Node>> {
        let nodes = self.nodes.read().unwrap_or_else(|p| p.into_inner());
        nodes.get(ino.checked_sub(1)? as usize).cloned()
    }

    /// The children of directory `dir` (inode `ino`), sorted by name; worked out on
    /// first use. An error names the contradiction (a path that is both a file and a
    /// directory, or named twice): the directory then cannot be listed.
    pub fn children(&self, ino: u64, dir: &Dir) -> Result<Arc<Vec<Child>>, String> {
        dir.children
            .get_or_init(|| self.load(ino, dir).map(Arc::new))
            .clone()
    }

    fn load(&self, ino: u64, dir: &Dir) -> Result<Vec<Child>, String> {
        let l = &self.listing;
        let skip = if dir.path.is_empty() {
            0
        } else {
            dir.path.len() + 1
        };
        let mut made = Vec::new();
        // Subtrees of directories that have an entry of their own: between such an
        // entry ("x") and what lies below it ("x/a") may come siblings ("x.txt").
        let mut claimed = std::collections::VecDeque::new();
        let mut i = dir.subtree.start;
        while i < dir.subtree.end {
            if let Some(r) = claimed.front().filter(|r: &&Range<usize>| r.start == i) {
                i = r.end;
                claimed.pop_front();
                continue;
            }
            let rest = &l.path(i)[skip..];
            let (name, node, next) = match rest.split_once('/') {
                // A directory implied by the paths below it.
                Some((name, _)) => {
                    let path = join(&dir.path, name);
                    let sub = l.with_prefix(&format!("{path}/"), i..dir.subtree.end);
                    let end = sub.end;
                    (name, self.dir_node(ino, path, sub), end)
                }
                None => match l.entry(i) {
                    EntryRef::Dir => {
                        // An empty directory's own entry; anything below it follows.
                        let path = join(&dir.path, rest);
                        let sub = l.with_prefix(&format!("{path}/"), i + 1..dir.subtree.end);
                        if !sub.is_empty() {
                            claimed.push_back(sub.clone());
                        }
                        (rest, self.dir_node(ino, path, sub), i + 1)
                    }
                    EntryRef::File { size, hash, exec } => (
                        rest,
                        Node {
                            parent: ino,
                            kind: NodeKind::File {
                                size,
                                hash,
                                exec,
                                tensors: has_tensor_plan(rest),
                                entry: i,
                            },
                        },
                        i + 1,
                    ),
                    EntryRef::Symlink { .. } => (
                        rest,
                        Node {
                            parent: ino,
                            kind: NodeKind::Symlink { entry: i },
                        },
                        i + 1,
                    ),
                },
            };
            made.push((name.to_string(), node));
            i = next;
        }
        made.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(w) = made.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(format!(
                "the version names {:?} twice (as a file and as a directory); refusing to list {:?}",
                join(&dir.path, &w[0].0),
                if dir.path.is_empty() { "/" } else { &dir.path }
            ));
        }
        let mut nodes = self.nodes.write().unwrap_or_else(|p| p.into_inner());
        Ok(made
            .into_iter()
            .map(|(name, node)| {
                let kind = match node.kind {
                    NodeKind::Dir(_) => ChildKind::Dir,
                    NodeKind::File { .. } => ChildKind::File,
                    NodeKind::Symlink { .. } => ChildKind::Symlink,
                };
                nodes.push(Arc::new(node));
                Child {
                    name,
                    ino: nodes.len() as u64,
                    kind,
                }
            })
            .collect())
    }

    fn dir_node(&self, parent: u64, path: String, subtree: Range<usize>) -> Node {
        Node {
            parent,
            kind: NodeKind::Dir(Dir {
                path,
                subtree,
                children: OnceLock::new(),
            }),
        }
    }

    /// The child `name` of directory `parent`: `Ok(None)` if there is none.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> Result<Option<u64>, String> {
        let Some(node) = self.get(parent) else {
            return Ok(None);
        };
        let NodeKind::Dir(dir) = &node.kind else {
            return Ok(None);
        };
        let children = self.children(parent, dir)?;
        Ok(children
            .binary_search_by(|c| c.name.as_bytes().cmp(name))
            .ok()
            .map(|i| children[i].ino))
    }

    /// A symlink's target.
    pub fn target(&self, entry: usize) -> &str {
        match self.listing.entry(entry) {
            EntryRef::Symlink { target } => target,
            _ => "",
        }
    }

    /// The path of inode `ino` inside the version, for messages.
    pub fn path_of(&self, ino: u64) -> String {
        match self.get(ino).map(|n| match &n.kind {
            NodeKind::Dir(d) => d.path.clone(),
            NodeKind::File { entry, .. } | NodeKind::Symlink { entry } => {
                self.listing.path(*entry).to_string()
            }
        }) {
            Some(p) => p,
            None => format!("inode {ino}"),
        }
    }

    /// Entries of the version, the root included (what statfs reports).
    pub fn inodes(&self) -> u64 {
        self.listing.len() as u64 + 1
    }

    pub fn files(&self) -> u64 {
        self.listing.files().0
    }

    pub fn bytes(&self) -> u64 {
        self.listing.files().1
    }

    /// The version's `.safetensors` files (one pass over the listing, done only to
    /// replay a read profile).
    pub fn tensor_files(&self) -> HashSet<Hash> {
        (0..self.listing.len())
            .filter(|&i| has_tensor_plan(self.listing.path(i)))
            .filter_map(|i| match self.listing.entry(i) {
                EntryRef::File { hash, .. } => Some(hash),
                _ => None,
            })
            .collect()
    }
}

/// A file the mount reads ahead by its header (`readahead`'s tensor plans).
fn has_tensor_plan(name: &str) -> bool {
    name.ends_with(".safetensors")
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sealvol_core::digest::Entry;

    fn file(path: &str, size: u64) -> Entry {
        Entry::File {
            path: path.into(),
            size,
            hash: Hash::of(path.as_bytes()),
            exec: false,
        }
    }

    fn tree(entries: &[Entry]) -> Tree {
        Tree::new(Listing::from_entries(entries).unwrap())
    }

    fn names(t: &Tree, ino: u64) -> Vec<String> {
        let node = t.get(ino).unwrap();
        let NodeKind::Dir(d) = &node.kind else {
            panic!()
        };
        t.children(ino, d)
            .unwrap()
            .iter()
            .map(|c| c.name.clone())
            .collect()
    }

    #[test]
    fn directories_come_from_paths_and_lookups_find_by_name() {
        let t = tree(&[
            file("a.txt", 1),
            file("a/b/c.bin", 3),
            Entry::Symlink {
                path: "a/l".into(),
                target: "x".into(),
            },
            file("a/x", 1),
            Entry::Dir {
                path: "empty".into(),
            },
        ]);
        assert_eq!(names(&t, ROOT), ["a", "a.txt", "empty"]);
        let a = t.lookup(ROOT, b"a").unwrap().unwrap();
        assert_eq!(names(&t, a), ["b", "l", "x"]);
        let b = t.lookup(a, b"b").unwrap().unwrap();
        let c = t.lookup(b, b"c.bin").unwrap().unwrap();
        assert!(matches!(
            t.get(c).unwrap().kind,
            NodeKind::File { size: 3, .. }
        ));
        assert_eq!(t.path_of(c), "a/b/c.bin");
        assert_eq!(t.path_of(b), "a/b");
        let empty = t.lookup(ROOT, b"empty").unwrap().unwrap();
        assert!(names(&t, empty).is_empty());
        assert_eq!(t.lookup(ROOT, b"nope").unwrap(), None);
        assert_eq!(t.lookup(c, b"x").unwrap(), None, "a file has no children");
        assert_eq!((t.files(), t.bytes()), (3, 5));
        let l = t.lookup(a, b"l").unwrap().unwrap();
        let NodeKind::Symlink { entry } = t.get(l).unwrap().kind else {
            panic!()
        };
        assert_eq!(t.target(entry), "x");
    }

    #[test]
    fn a_directory_with_an_entry_of_its_own_and_files_below_it_is_one_directory() {
        let t = tree(&[
            Entry::Dir { path: "x".into() },
            file("x.txt", 1),
            file("x/a", 1),
        ]);
        assert_eq!(names(&t, ROOT), ["x", "x.txt"]);
        let x = t.lookup(ROOT, b"x").unwrap().unwrap();
        assert_eq!(names(&t, x), ["a"]);
    }

    #[test]
    fn a_path_that_is_both_file_and_directory_cannot_be_listed() {
        let t = tree(&[file("a", 1), file("a/b", 1), file("ok/c", 1)]);
        assert!(t.lookup(ROOT, b"a").unwrap_err().contains("twice"));
        // The contradiction is at the root here; below it, only its own directory.
        let t = tree(&[file("d/a", 1), file("d/a/b", 1), file("ok/c", 1)]);
        let ok = t.lookup(ROOT, b"ok").unwrap().unwrap();
        assert!(t.lookup(ok, b"c").unwrap().is_some());
        let d = t.lookup(ROOT, b"d").unwrap().unwrap();
        assert!(t.lookup(d, b"a").is_err());
    }
}
