//! A version's Hub ids (`ids.rs`), computed once per version and kept beside it: each
//! distinct file's bytes are read once, every byte proven against its BLAKE3 proof
//! (`held::HeldChunks`), and hashed the one way the Hub names it: a small file by its
//! git blob id, a large one by its SHA-256 (its blob id is then its LFS pointer's).
//! The result is written to `hub/NS/VOL/DIGEST`, a key no client reads or writes
//! (`objects::parse_key`), so ids are never taken from a client; one read back is
//! checked against the version's manifest before it is used, and computed again if it
//! does not match. One that fits is used as written: whoever may write the bucket
//! itself could name other ids in it, which would make `hf cache verify` fail, never
//! change a byte sent (every byte is proven against the version, whatever it says). The server holds the ids of a few versions in memory, and a version
//! asked for by many requests at once is computed by one of them.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use aws_lc_rs::digest;
use sealvol_core::digest::{Entry, Hash};
use sealvol_core::keys::Key;
use sealvol_core::manifest::Manifest;
use sealvol_core::read::Chunks as _;
use sealvol_core::refs::{Digest, VolumeName};
use sealvol_core::{Error, Result};
use serde::{Deserialize, Serialize};

use super::ids::{self, LFS_MIN};
use crate::chunks::ChunkService;
use crate::held::HeldChunks;

const FORMAT: u32 = 1;

/// How many versions' ids the server holds in memory.
const HELD_VERSIONS: usize = 8;

/// How many files are hashed at once when a version's ids are computed.
const HASHERS: usize = 4;

/// What the Hub's clients are told of one file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct FileIds {
    pub size: u64,
    /// The git blob id: of the bytes for a small file, of its LFS pointer for a large one.
    pub blob: String,
    /// The SHA-256 of the bytes, for a file of at least `LFS_MIN` bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl FileIds {
    /// The `ETag` the Hub gives the file: its SHA-256 if it is an LFS file, else its
    /// blob id.
    pub fn etag(&self) -> &str {
        self.sha256.as_deref().unwrap_or(&self.blob)
    }
}

/// The ids of every file of a version, by path.
#[derive(Debug, Serialize, Deserialize)]
pub struct VersionIds {
    format: u32,
    digest: String,
    pub files: BTreeMap<String, FileIds>,
    /// Each folder's git tree id (the root's as `""`), derived from the files' ids
    /// when they are read or computed, never kept.
    #[serde(skip)]
    pub folders: BTreeMap<String, String>,
}

impl VersionIds {
    fn with_folders(mut self, m: &Manifest) -> VersionIds {
        self.folders = folders(&self.files, m);
        self
    }

    /// Whether these are the ids of `m` (version `d`): every file, each of its size,
    /// each id of its shape. A record that is not is computed again, never used.
    fn fits(&self, d: &Digest, m: &Manifest) -> bool {
        let hex = |s: &str, n: usize| {
            s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        };
        let files: Vec<(&str, u64)> = m
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::File { path, size, .. } => Some((path.as_str(), *size)),
                _ => None,
            })
            .collect();
        self.format == FORMAT
            && self.digest == d.to_string()
            && self.files.len() == files.len()
            && files.iter().all(|(p, size)| {
                self.files.get(*p).is_some_and(|f| {
                    f.size == *size
                        && hex(&f.blob, 40)
                        && match &f.sha256 {
                            Some(s) => *size >= LFS_MIN && hex(s, 64),
                            None => *size < LFS_MIN,
                        }
                })
            })
    }
}

type Slot = Arc<Mutex<Option<Arc<VersionIds>>>>;
type FileSlot = Arc<Mutex<Option<FileIds>>>;

/// How many files' ids the server holds apart from whole versions': each file a
/// request asked for before its version's ids were ready (a `HEAD` of one file need
/// not wait for the whole version: `Kept::of_file`).
const HELD_FILES: usize = 100_000;

/// A bounded number of something by key, the oldest asked for dropped first.
struct Lately<K, T> {
    map: HashMap<K, T>,
    order: VecDeque<K>,
    bound: usize,
}

impl<K: Clone + Eq + std::hash::Hash, T: Clone + Default> Lately<K, T> {
    fn new(bound: usize) -> Self {
        Lately {
            map: HashMap::new(),
            order: VecDeque::new(),
            bound,
        }
    }

    fn get_or_default(&mut self, key: &K) -> T {
        if let Some(t) = self.map.get(key) {
            return t.clone();
        }
        let t = T::default();
        self.map.insert(key.clone(), t.clone());
        self.order.push_back(key.clone());
        while self.order.len() > self.bound {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
        t
    }
}

type Versioned = (VolumeName, Digest);

/// The manifests and ids of the versions asked for lately, one turn per version to
/// compute its ids, and one per file.
pub struct Kept {
    held: Mutex<Lately<Versioned, Slot>>,
    manifests: Mutex<Lately<Versioned, Option<Arc<Manifest>>>>,
    files: Mutex<Lately<Hash, FileSlot>>,
    /// The versions whose ids are being computed ahead of their first listing.
    warming: Mutex<std::collections::HashSet<Versioned>>,
}

/// How many versions' ids are computed ahead at once: no number of requests makes the
/// server hash more than this many versions beside what they wait for themselves.
const WARMING: usize = 2;

impl Default for Kept {
    fn default() -> Self {
        Kept {
            held: Mutex::new(Lately::new(HELD_VERSIONS)),
            manifests: Mutex::new(Lately::new(HELD_VERSIONS)),
            files: Mutex::new(Lately::new(HELD_FILES)),
            warming: Mutex::default(),
        }
    }
}

impl Kept {
    /// The manifest of `vol@d`, read once while it is asked for. Blocking.
    pub fn manifest(
        &self,
        repo: &sealvol_core::Repository,
        vol: &VolumeName,
        d: &Digest,
    ) -> Result<Arc<Manifest>> {
        let key = (vol.clone(), *d);
        if let Some(m) = sealvol_core::lock(&self.manifests).get_or_default(&key) {
            return Ok(m);
        }
        let m = Arc::new(repo.manifest(vol, d)?);
        let mut held = sealvol_core::lock(&self.manifests);
        held.get_or_default(&key);
        held.map.insert(key, Some(Arc::clone(&m)));
        Ok(m)
    }

    /// The ids of `vol@d` (manifest `m`): held, else read from the repository, else
    /// computed from the proven bytes and kept. Blocking.
    pub fn of(
        &self,
        service: &ChunkService,
        vol: &VolumeName,
        d: &Digest,
        m: &Manifest,
    ) -> Result<Arc<VersionIds>> {
        let slot = sealvol_core::lock(&self.held).get_or_default(&(vol.clone(), *d));
        // One turn per version: who waits here finds the ids when it gets it.
        let mut turn = sealvol_core::lock(&slot);
        if let Some(ids) = &*turn {
            return Ok(Arc::clone(ids));
        }
        let (kept, damaged) = read_kept(service, vol, d, m)?;
        let ids = match kept {
            Some(ids) => ids,
            None => self.compute_and_keep(service, vol, d, m, damaged)?,
        };
        let ids = Arc::new(ids.with_folders(m));
        *turn = Some(Arc::clone(&ids));
        Ok(ids)
    }

    /// The ids of one file of `vol@d`, `path` (`hash`, `size`): from its version's when
    /// they are held or kept, else computed for this file alone, so that a client's
    /// `HEAD` of one file waits for that file's bytes, not the whole version's (the
    /// Hub's clients give a `HEAD` 10 s). Blocking.
    pub fn of_file(
        &self,
        service: &ChunkService,
        vol: &VolumeName,
        d: &Digest,
        m: &Manifest,
        (path, hash, size): (&str, &Hash, u64),
    ) -> Result<FileIds> {
        let slot = sealvol_core::lock(&self.held).get_or_default(&(vol.clone(), *d));
        // A version being computed is not waited for.
        let turn = match slot.try_lock() {
            Ok(t) => Some(t),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some(mut turn) = turn {
            if turn.is_none()
                && let (Some(ids), _) = read_kept(service, vol, d, m)?
            {
                *turn = Some(Arc::new(ids.with_folders(m)));
            }
            if let Some(f) = turn.as_ref().and_then(|ids| ids.files.get(path)) {
                return Ok(f.clone());
            }
        }
        self.file(service, &m.small_files(), hash, size)
    }

    /// Starts computing the ids of `vol@d` on a thread of its own, unless they are held,
    /// being computed, or `WARMING` versions are: a client that asks for one file of a
    /// version (`from_pretrained` asks for `config.json` first) will soon ask for the
    /// others, and finds their ids computed or under way (a file is hashed once,
    /// whoever asks first).
    pub fn warm(
        self: &Arc<Self>,
        service: &Arc<ChunkService>,
        vol: &VolumeName,
        d: &Digest,
        m: &Arc<Manifest>,
    ) {
        let key = (vol.clone(), *d);
        let slot = sealvol_core::lock(&self.held).get_or_default(&key);
        match slot.try_lock() {
            // Held, or being computed by a request that waits for them.
            Ok(ids) if ids.is_some() => return,
            Err(std::sync::TryLockError::WouldBlock) => return,
            _ => {}
        }
        {
            let mut warming = sealvol_core::lock(&self.warming);
            if warming.len() >= WARMING || !warming.insert(key.clone()) {
                return;
            }
        }
        let (kept, service, m) = (Arc::clone(self), Arc::clone(service), Arc::clone(m));
        let spawned = std::thread::Builder::new()
            .name("hub-ids".into())
            .spawn(move || {
                if let Err(e) = kept.of(&service, &key.0, &key.1, &m) {
                    tracing::warn!(
                        "the Hub's ids of {}@{} were not computed: {e}",
                        key.0,
                        key.1
                    );
                }
                sealvol_core::lock(&kept.warming).remove(&key);
            });
        if spawned.is_err() {
            sealvol_core::lock(&self.warming).remove(&(vol.clone(), *d));
        }
    }

    /// One file's ids, computed once however many ask at once.
    fn file(
        &self,
        service: &ChunkService,
        small: &sealvol_core::small::SmallFiles,
        hash: &Hash,
        size: u64,
    ) -> Result<FileIds> {
        let slot = sealvol_core::lock(&self.files).get_or_default(hash);
        let mut turn = sealvol_core::lock(&slot);
        if let Some(f) = &*turn {
            return Ok(f.clone());
        }
        let f = file_ids(service, small, hash, size)?;
        *turn = Some(f.clone());
        Ok(f)
    }

    fn compute_and_keep(
        &self,
        service: &ChunkService,
        vol: &VolumeName,
        d: &Digest,
        m: &Manifest,
        damaged: bool,
    ) -> Result<VersionIds> {
        let started = std::time::Instant::now();
        let ids = self.compute(service, d, m)?;
        let bytes: u64 = ids.files.values().map(|f| f.size).sum();
        tracing::info!(
            "the Hub's ids of {vol}@{d}: {} files, {bytes} bytes hashed in {:.2?}",
            ids.files.len(),
            started.elapsed()
        );
        let key = Key::HubIds(vol.clone(), *d).to_string();
        let store = service.repository().object_store();
        let json = serde_json::to_vec(&ids)
            .map_err(|e| Error::new(sealvol_core::error::ErrorKind::Io, e.to_string()))?;
        let kept = (|| {
            if damaged {
                store.delete(&key)?;
            }
            store.put_if_absent(&key, &json)
        })();
        if let Err(e) = kept {
            tracing::warn!(
                "the Hub's ids of {vol}@{d} were not kept ({e}); they will be computed again"
            );
        }
        Ok(ids)
    }

    /// Every file's ids, each distinct file read once, `HASHERS` at a time.
    fn compute(&self, service: &ChunkService, d: &Digest, m: &Manifest) -> Result<VersionIds> {
        let small = m.small_files();
        let mut distinct: Vec<(Hash, u64)> = m
            .entries
            .iter()
            .filter_map(|e| match e {
                Entry::File { hash, size, .. } => Some((*hash, *size)),
                _ => None,
            })
            .collect();
        distinct.sort_unstable_by_key(|(h, _)| h.0);
        distinct.dedup();
        let next = Mutex::new(distinct.into_iter());
        let found: Mutex<HashMap<Hash, FileIds>> = Mutex::default();
        let failed: Mutex<Option<Error>> = Mutex::default();
        std::thread::scope(|s| {
            for _ in 0..HASHERS {
                s.spawn(|| {
                    loop {
                        if sealvol_core::lock(&failed).is_some() {
                            return;
                        }
                        let Some((hash, size)) = sealvol_core::lock(&next).next() else {
                            return;
                        };
                        match self.file(service, &small, &hash, size) {
                            Ok(ids) => {
                                sealvol_core::lock(&found).insert(hash, ids);
                            }
                            Err(e) => {
                                *sealvol_core::lock(&failed) = Some(e);
                                return;
                            }
                        }
                    }
                });
            }
        });
        if let Some(e) = sealvol_core::lock(&failed).take() {
            return Err(e);
        }
        let found = sealvol_core::lock(&found);
        let mut files = BTreeMap::new();
        for e in &m.entries {
            if let Entry::File { path, hash, .. } = e
                && let Some(ids) = found.get(hash)
            {
                files.insert(path.clone(), ids.clone());
            }
        }
        Ok(VersionIds {
            format: FORMAT,
            digest: d.to_string(),
            files,
            folders: BTreeMap::new(),
        })
    }
}

/// The ids kept for `vol@d` if they fit it; and whether a record was there that did not.
fn read_kept(
    service: &ChunkService,
    vol: &VolumeName,
    d: &Digest,
    m: &Manifest,
) -> Result<(Option<VersionIds>, bool)> {
    let key = Key::HubIds(vol.clone(), *d).to_string();
    let Some(bytes) = service.repository().object_store().get(&key)? else {
        return Ok((None, false));
    };
    match serde_json::from_slice::<VersionIds>(&bytes) {
        Ok(ids) if ids.fits(d, m) => Ok((Some(ids), false)),
        _ => {
            tracing::warn!("{key} does not fit its version; its ids are computed again");
            Ok((None, true))
        }
    }
}

/// Every folder's git tree id, deepest first, from its files' blob ids and its
/// folders' tree ids: the folders are those the files' paths imply, and the empty
/// folders the version holds.
fn folders(files: &BTreeMap<String, FileIds>, m: &Manifest) -> BTreeMap<String, String> {
    let parent = |p: &str| {
        p.rsplit_once('/')
            .map_or(("", p), |(a, b)| (a, b))
            .0
            .to_string()
    };
    let mut all: std::collections::BTreeSet<String> = [String::new()].into();
    let mut add_with_ancestors = |mut p: String| {
        while !p.is_empty() && all.insert(p.clone()) {
            p = parent(&p);
        }
    };
    for path in files.keys() {
        add_with_ancestors(parent(path));
    }
    for e in &m.entries {
        if let Entry::Dir { path } = e {
            add_with_ancestors(path.clone());
        }
    }
    let mut children: HashMap<String, Vec<(String, bool, String)>> = HashMap::new();
    for (path, f) in files {
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        children
            .entry(parent(path))
            .or_default()
            .push((name, false, f.blob.clone()));
    }
    let mut deepest_first: Vec<&String> = all.iter().collect();
    deepest_first
        .sort_by_key(|p| std::cmp::Reverse(p.matches('/').count() + usize::from(!p.is_empty())));
    let mut out = BTreeMap::new();
    for dir in deepest_first {
        let kids = children.remove(dir.as_str()).unwrap_or_default();
        let mut entries: Vec<ids::TreeEntry<'_>> = kids
            .iter()
            .map(|(name, folder, id)| ids::TreeEntry {
                name,
                folder: *folder,
                id,
            })
            .collect();
        let Some(id) = ids::tree_id(&mut entries) else {
            continue;
        };
        if !dir.is_empty() {
            let name = dir.rsplit('/').next().unwrap_or(dir).to_string();
            children
                .entry(parent(dir))
                .or_default()
                .push((name, true, id.clone()));
        }
        out.insert(dir.clone(), id);
    }
    out
}

/// One file's ids, from its proven bytes.
fn file_ids(
    service: &ChunkService,
    small: &sealvol_core::small::SmallFiles,
    hash: &Hash,
    size: u64,
) -> Result<FileIds> {
    let repo = service.repository();
    let held = HeldChunks::new(service, repo);
    let each = |f: &mut dyn FnMut(&[u8])| -> Result<()> {
        if size == 0 {
            return Ok(());
        }
        let obj = repo.file_list(hash, size, small)?;
        held.for_each(&obj, 0..obj.chunks.len(), &mut |c| {
            f(c);
            Ok(())
        })
    };
    if size < LFS_MIN {
        let mut blob = ids::GitBlob::new(size);
        each(&mut |c| blob.update(c))?;
        let blob = blob.finish().ok_or_else(|| short(hash, size))?;
        return Ok(FileIds {
            size,
            blob,
            sha256: None,
        });
    }
    let mut sha = digest::Context::new(&digest::SHA256);
    let mut seen = 0u64;
    each(&mut |c| {
        seen += c.len() as u64;
        sha.update(c);
    })?;
    if seen != size {
        return Err(short(hash, size));
    }
    let sha256 = hex::encode(sha.finish().as_ref());
    Ok(FileIds {
        size,
        blob: ids::blob_id(ids::lfs_pointer(&sha256, size).as_bytes()),
        sha256: Some(sha256),
    })
}

fn short(hash: &Hash, size: u64) -> Error {
    Error::new(
        sealvol_core::error::ErrorKind::Corrupt,
        format!(
            "file {} read as another size than its {size} bytes",
            hash.hex()
        ),
    )
    .hint("run `sealvol verify --data` on the repository")
}
