//! A repository: its format file (`sealvol.repo`), its objects by kind (packs, their
//! indexes, file chunk lists; manifests in `manifest.rs`, the registry in
//! `registry/`), and the chunk index that tells a writer which chunks the repository
//! already holds.
//!
//! Only this module and the registry know where an object lives in the store (its
//! key): every other part asks for a typed object by the hash or name that identifies
//! it. The write order that keeps the repository consistent (packs → index → chunk
//! lists → barrier → manifest → tags) is stated in docs/FORMAT.md and kept by the
//! callers of `publish_pack`, `put_file_object`, `barrier` and `Repository::seal`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::chunk_index::ChunkIndex;
use crate::config::parse_config;
pub use crate::config::{
    CONFIG_KEY, ChunkerConfig, FORMAT, GC_GRACE, PACK_TARGET, RETENTION, RepoConfig,
};
use crate::digest::Hash;
use crate::error::{Error, ErrorKind, Result};
use crate::health::Health;
use crate::keys::Key;
use crate::objects::{self, FOOTER_LEN, FileObject, PackEntry, PackId};
use crate::refs::{Digest, Name, VolumeName};
use crate::store::{LocalStore, ObjectStore};

/// The kinds of content-addressed object, each named by a hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `packs/<aa>/<pack id>`: chunks and a trailer listing them.
    Pack,
    /// `index/<pack id>`: a pack's entry table, so a writer need not read the pack.
    Index,
    /// `files/<aa>/<file hash>`: one file's chunk list.
    File,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Pack => "packs/",
            Kind::Index => "index/",
            Kind::File => "files/",
        }
    }

    /// The object's name in the repository, for messages (`packs/ab/ab12…`).
    pub fn name(self, id: &Hash) -> String {
        match self {
            Kind::Pack => pack_key(id),
            Kind::Index => index_key(id),
            Kind::File => file_key(id),
        }
    }
}

/// An object found by listing one kind.
#[derive(Debug, Clone)]
pub struct Listed {
    /// Its name in the repository, for messages.
    pub name: String,
    /// The hash its name holds; `None` for a name that is not a well-formed one.
    pub id: Option<Hash>,
    pub size: u64,
    /// When it was written, by the store's clock.
    pub modified: Option<std::time::SystemTime>,
}

pub struct Repository {
    store: Box<dyn ObjectStore>,
    config: RepoConfig,
    location: String,
    /// Why `sealvol.repo` cannot be read, when it cannot: the repository is then open
    /// with the default settings for reading, verify and repair, and refuses writers
    /// (`check_writable`) until repair writes it anew.
    config_damage: Option<String>,
    /// The chunk index, loaded only when a reader finds a copy unusable and looks for
    /// another (`other_copy`); with when it was loaded.
    copies: std::sync::Mutex<Option<(std::time::Instant, std::sync::Arc<ChunkIndex>)>>,
    /// The server that owns this repository's writes, when it is reached through one
    /// (`remote.rs`): the registry's operations go to it (`registry/`), and a push
    /// asks it which chunks it holds and to write chunk lists.
    remote: Option<std::sync::Arc<dyn crate::remote::Remote>>,
}

impl Repository {
    /// Opens the repository in a local directory; with `create`, makes it if the
    /// directory is missing or empty. `durable` fsyncs packs and manifests before they
    /// become visible (turn it off only for scratch repositories and benchmarks).
    pub fn open_local(path: &Path, create: bool, durable: bool) -> Result<Repository> {
        let location = path.display().to_string();
        let has_config = path.join(CONFIG_KEY).exists();
        if !has_config {
            // Another process may be creating the repository right now: `tmp/` alone is
            // its first step, and a config that appeared since we looked is its second.
            let empty = match std::fs::read_dir(path) {
                Ok(rd) => {
                    let names: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.file_name()).collect();
                    names.iter().any(|n| n == CONFIG_KEY) || names.iter().all(|n| n == "tmp")
                }
                Err(_) => true,
            };
            if !create {
                return Err(Error::not_found(format!("no repository at {location}"))
                    .hint("push a directory to create one, `sealvol init` it, or pass --repo / set SEALVOL_REPO"));
            }
            if !empty {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("{location} is not empty and is not a sealvol repository"),
                )
                .hint("pass --repo with an empty or new directory"));
            }
        }
        let store = LocalStore::new(path, durable)?;
        Repository::open(Box::new(store), location, create)
    }

    /// Writes `sealvol.repo` anew with this repository's settings, keeping the damaged
    /// one in quarantine (repair, after checking the settings against stored chunks).
    pub fn rewrite_config(&mut self) -> Result<Option<String>> {
        let kept = match self.store.get(CONFIG_KEY)? {
            Some(_) => Some(self.quarantine(CONFIG_KEY)?),
            None => None,
        };
        let bytes = serde_json::to_vec_pretty(&self.config).map_err(json_error)?;
        self.store.put_if_absent(CONFIG_KEY, &bytes)?;
        self.store.sync()?;
        self.config_damage = None;
        Ok(kept)
    }

    /// The settings as stored now, read afresh (another process may have changed them
    /// since this one opened the repository).
    pub fn current_config(&self) -> Result<RepoConfig> {
        match self.store.get(CONFIG_KEY)? {
            Some(bytes) => parse_config(&self.location, &bytes),
            None => Ok(self.config.clone()),
        }
    }

    /// Changes repository settings (`retention`, `gc_grace`) by compare-and-swap on
    /// `sealvol.repo`, so two people changing settings at once cannot lose one change.
    pub fn change_settings(&mut self, change: impl Fn(&mut RepoConfig)) -> Result<&RepoConfig> {
        self.check_writable()?;
        for _ in 0..16 {
            let (bytes, etag) = self
                .store
                .get_versioned(CONFIG_KEY)?
                .ok_or_else(|| Error::not_found(format!("no repository at {}", self.location)))?;
            let mut config = parse_config(&self.location, &bytes)?;
            change(&mut config);
            let new = serde_json::to_vec_pretty(&config).map_err(json_error)?;
            match self.store.put_if_match(CONFIG_KEY, &new, Some(&etag)) {
                Ok(()) => {
                    self.store.sync()?;
                    self.config = config;
                    return Ok(&self.config);
                }
                Err(e) if e.kind() == ErrorKind::Race => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::new(
            ErrorKind::Race,
            "the repository's settings keep changing under us",
        )
        .hint("try again in a moment"))
    }

    pub fn open(store: Box<dyn ObjectStore>, location: String, create: bool) -> Result<Self> {
        let mut config_damage = None;
        let config = match store.get(CONFIG_KEY)? {
            Some(bytes) => match parse_config(&location, &bytes) {
                Ok(c) => c,
                // Reading needs none of its settings: what is stored still lists, mounts
                // and pulls. Writing does (`check_writable`).
                Err(e) if e.kind() == ErrorKind::Corrupt => {
                    tracing::warn!(
                        "{}; reading with the default settings, and nothing can be written until `sealvol repair` writes it anew",
                        e.message()
                    );
                    config_damage = Some(e.message().to_string());
                    RepoConfig::default_new()
                }
                Err(e) => return Err(e),
            },
            None if create => {
                let config = RepoConfig::default_new();
                let bytes = serde_json::to_vec_pretty(&config).map_err(json_error)?;
                store.put_if_absent(CONFIG_KEY, &bytes)?;
                // Another process may have won the race to create it: read what is there.
                let bytes = store
                    .get(CONFIG_KEY)?
                    .ok_or_else(|| Error::not_found(format!("no repository at {location}")))?;
                parse_config(&location, &bytes)?
            }
            None => {
                return Err(Error::not_found(format!("no repository at {location}")));
            }
        };
        Ok(Repository {
            store,
            config,
            location,
            config_damage,
            copies: Default::default(),
            remote: None,
        })
    }

    /// A repository reached through a server that owns its writes: packs still go up
    /// through the store, every other write to `remote`.
    pub fn with_remote(mut self, remote: std::sync::Arc<dyn crate::remote::Remote>) -> Self {
        self.remote = Some(remote);
        self
    }

    /// The server that owns this repository's writes, if there is one.
    pub fn remote(&self) -> Option<&dyn crate::remote::Remote> {
        self.remote.as_deref()
    }

    /// The store itself, for the registry (manifests, tags) only.
    pub(crate) fn store(&self) -> &dyn ObjectStore {
        self.store.as_ref()
    }

    /// The store itself, for a server that offers it to remote engines (`sealvol
    /// serve`: the server decides what each caller may touch), and for the garbage
    /// collector (`sealvol-gc`: its lease and rounds, and the sweep).
    pub fn object_store(&self) -> &dyn ObjectStore {
        self.store.as_ref()
    }

    pub fn config(&self) -> &RepoConfig {
        &self.config
    }

    /// Why `sealvol.repo` is damaged, if it is.
    pub fn config_damage(&self) -> Option<&str> {
        self.config_damage.as_deref()
    }

    /// Refuses writers while `sealvol.repo` is damaged: chunking with other settings
    /// than the repository's would stop deduplication for good.
    pub fn check_writable(&self) -> Result<()> {
        match &self.config_damage {
            None => Ok(()),
            Some(why) => Err(Error::corrupt(format!("{why}; nothing can be pushed until it is repaired"))
                .hint("`sealvol repair` checks the stored chunks against the default settings and writes it anew")),
        }
    }

    pub fn location(&self) -> &str {
        &self.location
    }

    /// Loads every index object: which chunks exist and where, leaving out every copy
    /// that `Health` knows unusable, so a writer never builds on one. A damaged index
    /// is replaced, for this writer, by its pack's trailer. With `recover`, a pack left
    /// without an index (a push killed between publishing the two) is indexed from its
    /// trailer, so its chunks are not written again. One listing of packs and one of
    /// indexes serve all of it.
    /// `avoid`: packs a writer must not build on (what garbage collection condemned),
    /// left out like unusable copies.
    pub fn load_index(&self, recover: bool, avoid: &[PackId]) -> Result<ChunkIndex> {
        let since = self.store.now()?;
        let mut index = ChunkIndex {
            health: self.health()?,
            since: Some(since),
            ..ChunkIndex::default()
        };
        index.health.avoid(avoid.iter().copied());
        let listed = self.list(Kind::Index)?;
        if recover {
            let indexed: HashSet<Hash> = listed.iter().filter_map(|l| l.id).collect();
            // Not a pack a garbage collection condemned: it may be deleted under us.
            let orphans: Vec<PackId> = index
                .health
                .packs()
                .filter(|id| !indexed.contains(*id) && !avoid.contains(id))
                .copied()
                .collect();
            for id in orphans {
                match self.read_pack_entries(&id) {
                    Ok(entries) if objects::pack_id(&entries) == id => {
                        self.put_index(&id, &entries)?;
                        tracing::info!("re-indexed pack {} left by an interrupted push", id.hex());
                        index.add_pack(id, &entries);
                    }
                    // A damaged orphan is left for verify to report; it is never indexed.
                    Ok(_) | Err(_) => tracing::warn!(
                        "pack {} has no index and cannot be re-indexed",
                        Kind::Pack.name(&id)
                    ),
                }
            }
        }
        // One read per index: side by side on a remote store (`concurrency`).
        let ids: Vec<PackId> = listed.iter().filter_map(|l| l.id).collect();
        let read = crate::store::in_parallel(&ids, self.concurrency(), |id| Ok(self.index(id)))?;
        for (id, read) in ids.into_iter().zip(read) {
            let entries = match read {
                Ok(Some(entries)) => entries,
                Ok(None) => continue,
                Err(e) if e.kind() == ErrorKind::Corrupt => match self.read_pack_entries(&id) {
                    Ok(entries) if objects::pack_id(&entries) == id => {
                        tracing::warn!(
                            "{}; using its pack's trailer (`sealvol repair` rewrites it)",
                            e.message()
                        );
                        entries
                    }
                    _ => {
                        tracing::warn!("{}, and so is its pack's trailer", e.message());
                        continue;
                    }
                },
                Err(e) => return Err(e),
            };
            index.add_pack(id, &entries);
        }
        Ok(index)
    }

    /// What is known unusable: the packs present (a listing) and the damage records.
    pub fn health(&self) -> Result<Health> {
        let packs = self.list(Kind::Pack)?.into_iter().filter_map(|l| {
            l.id.filter(|id| l.name == Kind::Pack.name(id))
                .map(|id| (id, l.size))
        });
        let damaged = self.damage_records()?.into_iter().map(|(p, c, _)| (p, c));
        Ok(Health::new(
            packs.collect::<Vec<_>>(),
            damaged.collect::<Vec<_>>(),
        ))
    }

    /// Another usable copy of a chunk than the one at `entry` in `pack`, which a reader
    /// found unusable (its pack gone after a repair, or its bytes failing their hash):
    /// so that a reader holding an old chunk list still reads a chunk that has a
    /// healthy copy. The index is loaded on the first miss and again when it is older
    /// than `COPIES_FRESH`, never on the path of a healthy read.
    pub fn other_copy(
        &self,
        pack: &PackId,
        entry: &PackEntry,
    ) -> Result<Option<(PackId, PackEntry)>> {
        self.owner().other_copy(pack, entry)
    }

    /// `other_copy` in the repository's own index.
    pub(crate) fn other_copy_here(
        &self,
        pack: &PackId,
        entry: &PackEntry,
    ) -> Result<Option<(PackId, PackEntry)>> {
        // The copy the index prefers, unless it is the one that just failed.
        let look = |index: &ChunkIndex| {
            index
                .chunks
                .get(&entry.hash)
                .map(|loc| (index.packs[loc.slot as usize], loc.entry))
        };
        let same = |found: &(PackId, PackEntry)| found.0 == *pack && found.1.offset == entry.offset;
        let mut cached = crate::locks::lock(&self.copies);
        if let Some((at, index)) = cached.as_ref() {
            match look(index) {
                Some(found) if !same(&found) => return Ok(Some(found)),
                // Loaded before this copy was found bad: load again, at most every second.
                Some(_) if at.elapsed() < std::time::Duration::from_secs(1) => return Ok(None),
                Some(_) => {}
                None if at.elapsed() < COPIES_FRESH => return Ok(None),
                None => {}
            }
        }
        let index = std::sync::Arc::new(self.load_index(false, &[])?);
        let found = look(&index).filter(|f| !same(f));
        *cached = Some((std::time::Instant::now(), index));
        Ok(found)
    }

    /// Where the repository holds a usable copy of a chunk, by its index: how a mirror
    /// finds the chunks of a file whose chunk list names another repository's packs.
    /// The index is loaded on first use and again for a chunk it lacks once it is older
    /// than `COPIES_FRESH` (a mirror may have been filled meanwhile).
    pub fn locate(&self, hash: &Hash) -> Result<Option<(PackId, PackEntry)>> {
        self.owner().locate(hash)
    }

    /// `locate` in the repository's own index.
    pub(crate) fn locate_here(&self, hash: &Hash) -> Result<Option<(PackId, PackEntry)>> {
        let look = |index: &ChunkIndex| {
            index
                .chunks
                .get(hash)
                .map(|loc| (index.packs[loc.slot as usize], loc.entry))
        };
        let mut cached = crate::locks::lock(&self.copies);
        if let Some((at, index)) = cached.as_ref() {
            match look(index) {
                Some(found) => return Ok(Some(found)),
                None if at.elapsed() < COPIES_FRESH => return Ok(None),
                None => {}
            }
        }
        let index = std::sync::Arc::new(self.load_index(false, &[])?);
        let found = look(&index);
        *cached = Some((std::time::Instant::now(), index));
        Ok(found)
    }

    /// See `ObjectStore::writers_lock`.
    pub fn writers_lock(&self, exclusive: bool) -> Result<Option<crate::store::WriterGuard>> {
        self.store.writers_lock(exclusive)
    }

    /// See `ObjectStore::requests`.
    pub fn requests(&self) -> Option<crate::store::Requests> {
        self.store.requests()
    }

    /// See `ObjectStore::clean_abandoned`.
    pub fn clean_abandoned(&self) -> Result<()> {
        self.store.clean_abandoned()
    }

    /// Removes staging files of writers that are gone (a `kill -9` mid-push).
    pub fn clean_staging(&self) -> Result<(u64, u64)> {
        self.store.clean_staging()
    }

    /// Every object of one kind, in name order.
    pub fn list(&self, kind: Kind) -> Result<Vec<Listed>> {
        let prefix = kind.prefix();
        Ok(self
            .store
            .list(prefix)?
            .into_iter()
            .map(|o| {
                // Packs and chunk lists sit in fan-out folders; the hash is the last part.
                let id = o.key.rsplit('/').next().and_then(Hash::parse_hex);
                Listed {
                    name: o.key,
                    id,
                    size: o.size,
                    modified: o.modified,
                }
            })
            .collect())
    }

    /// A whole pack, or `None` if it does not exist (verify reads every byte).
    pub fn pack(&self, id: &PackId) -> Result<Option<Vec<u8>>> {
        self.store.get(&pack_key(id))
    }

    /// A fresh local path to build a pack in before `publish_pack` (on the store's file
    /// system when it is local, so that publishing is a rename).
    pub fn staging_path(&self) -> Result<PathBuf> {
        self.store.staging_path()
    }

    /// How many requests to keep in flight at once (`ObjectStore::concurrency`).
    pub fn concurrency(&self) -> usize {
        self.store.concurrency().max(1)
    }

    /// Publishes a finished pack file (consumed), then its index: in that order, so an
    /// index never names a pack that is not there. Returns whether the pack is new.
    pub fn publish_pack(&self, id: &PackId, file: &Path, entries: &[PackEntry]) -> Result<bool> {
        let created = self.store.put_file_if_absent(&pack_key(id), file)?;
        self.owner().publish_index(id, entries)?;
        Ok(created)
    }

    /// A pack's index, or `None` if it has none (yet). A damaged one is an error of kind
    /// `Corrupt`; one that cannot be read, of kind `Io`.
    pub fn index(&self, id: &PackId) -> Result<Option<Vec<PackEntry>>> {
        let key = index_key(id);
        match self.store.get(&key)? {
            Some(bytes) => objects::decode_index(&key, &bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Writes a pack's index from its trailer's entries, over a damaged or disagreeing
    /// one (kept in quarantine).
    pub fn rewrite_index(&self, id: &PackId, entries: &[PackEntry]) -> Result<()> {
        let key = index_key(id);
        if let Some(old) = self.store.get(&key)? {
            self.quarantine_copy(&key, &old)?;
        }
        self.store.put(&key, &objects::encode_index(entries))
    }

    /// Writes a pack's index, unless one is there.
    pub(crate) fn put_index(&self, id: &PackId, entries: &[PackEntry]) -> Result<bool> {
        self.store
            .put_if_absent(&index_key(id), &objects::encode_index(entries))
    }

    /// Stores a file's chunk list (after the packs it names). Returns whether it is new.
    /// Through a server, the server finds the chunks, proves them and writes the list.
    pub fn put_file_object(&self, hash: &Hash, obj: &FileObject) -> Result<bool> {
        self.owner().put_list(hash, obj)
    }

    /// `put_file_object` in the repository's own store.
    pub(crate) fn put_file_object_here(&self, hash: &Hash, obj: &FileObject) -> Result<bool> {
        self.store.put_if_absent(&file_key(hash), &obj.encode())
    }

    /// Replaces a chunk list with one that names other copies of the same chunks. Both
    /// describe the same bytes, so a reader holding either reads the same file or gets
    /// a clear error, never other data. Writers go through `gc::replace_chunk_list`,
    /// which first rescues the packs the new list names from garbage collection.
    pub fn replace_file_object(&self, hash: &Hash, obj: &FileObject) -> Result<()> {
        self.owner().replace_list(hash, obj)
    }

    /// `replace_file_object` in the repository's own store.
    pub(crate) fn replace_file_object_here(&self, hash: &Hash, obj: &FileObject) -> Result<()> {
        self.store.put(&file_key(hash), &obj.encode())
    }

    /// A file's chunk list, if it is stored and readable and every chunk it names is
    /// usable; what a writer may build on.
    pub fn healthy_file_object(&self, hash: &Hash, health: &Health) -> Result<Option<FileObject>> {
        match self.file_object(hash) {
            Ok(obj) if health.file_ok(&obj) => Ok(Some(obj)),
            Ok(_) => Ok(None),
            Err(e) if e.kind() == ErrorKind::Corrupt => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A write barrier: everything written before it is durable when it returns. A
    /// manifest is written only after one, so it never names unwritten data.
    pub fn barrier(&self) -> Result<()> {
        self.store.sync()
    }

    /// Bytes of a pack; a pack that is gone is damage to the repository, not an I/O
    /// error.
    pub fn pack_range(&self, pack: &PackId, offset: u64, len: u64) -> Result<Vec<u8>> {
        self.store
            .get_range(&pack_key(pack), offset, len)
            .map_err(|e| missing_pack(pack, e))
    }

    /// `pack_range` of `buf.len()` bytes into `buf` (the read path recycles its
    /// buffers: `recycled`).
    pub fn pack_range_into(&self, pack: &PackId, offset: u64, buf: &mut Vec<u8>) -> Result<()> {
        self.store
            .get_range_into(&pack_key(pack), offset, buf)
            .map_err(|e| missing_pack(pack, e))
    }

    /// `pack_range_into`, and the pack's stamp where the store can say
    /// (`ObjectStore::get_range_stamped_into`).
    pub fn pack_range_stamped_into(
        &self,
        pack: &PackId,
        offset: u64,
        buf: &mut Vec<u8>,
    ) -> Result<Option<crate::store::Stamp>> {
        self.store
            .get_range_stamped_into(&pack_key(pack), offset, buf)
            .map_err(|e| missing_pack(pack, e))
    }

    /// `pack_range_into` for a reader of file `file` (chunks its list names there).
    pub fn file_range_into(
        &self,
        file: &Hash,
        pack: &PackId,
        offset: u64,
        buf: &mut Vec<u8>,
    ) -> Result<()> {
        self.store
            .get_file_range_into(&pack_key(pack), offset, buf, file)
            .map_err(|e| missing_pack(pack, e))
    }

    /// `pack_range` for a reader of file `file`.
    pub fn file_range(&self, file: &Hash, pack: &PackId, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0; len as usize];
        self.file_range_into(file, pack, offset, &mut buf)?;
        Ok(buf)
    }

    /// A file's chunk list, or `None` if it is not stored.
    pub fn file_object_if_stored(&self, hash: &Hash) -> Result<Option<FileObject>> {
        let key = file_key(hash);
        match self.store.get(&key)? {
            Some(bytes) => FileObject::decode(&key, &bytes, hash).map(Some),
            None => Ok(None),
        }
    }

    /// Deletes an object of one kind (garbage collection's sweep).
    pub fn delete_object(&self, kind: Kind, id: &Hash) -> Result<()> {
        self.store.delete(&kind.name(id))
    }

    /// A file's chunk list; a missing one is damage (a manifest names it).
    pub fn file_object(&self, hash: &Hash) -> Result<FileObject> {
        let key = file_key(hash);
        let bytes = self
            .store
            .get(&key)?
            .ok_or_else(|| Error::corrupt(format!("chunk list {key} is missing")))?;
        FileObject::decode(&key, &bytes, hash)
    }

    /// Reads a pack's entry table from its trailer.
    pub fn read_pack_entries(&self, id: &PackId) -> Result<Vec<PackEntry>> {
        let key = pack_key(id);
        let size = self
            .store
            .size(&key)?
            .ok_or_else(|| Error::corrupt(format!("pack {} is missing", id.hex())))?;
        if size < (objects::PACK_MAGIC.len() + FOOTER_LEN) as u64 {
            return Err(Error::corrupt(format!("{key}: too short to be a pack")));
        }
        let footer = self
            .store
            .get_range(&key, size - FOOTER_LEN as u64, FOOTER_LEN as u64)?;
        let count = objects::decode_footer(&key, &footer)?;
        let table = count.saturating_mul(objects::ENTRY_LEN as u64);
        if table > size - FOOTER_LEN as u64 {
            return Err(Error::corrupt(format!("{key}: entry table is damaged")));
        }
        let bytes = self
            .store
            .get_range(&key, size - FOOTER_LEN as u64 - table, table)?;
        objects::decode_entries(&key, &bytes, count)
    }
}

pub fn json_error(e: serde_json::Error) -> Error {
    Error::new(ErrorKind::Io, format!("cannot encode JSON: {e}"))
}

fn pack_key(id: &PackId) -> String {
    Key::Pack(*id).to_string()
}

fn index_key(id: &PackId) -> String {
    Key::Index(*id).to_string()
}

pub(crate) fn file_key(hash: &Hash) -> String {
    Key::File(*hash).to_string()
}

pub(crate) fn manifest_prefix(vol: &VolumeName) -> String {
    crate::keys::volume_folder("manifests", vol)
}

pub(crate) fn manifest_key(vol: &VolumeName, digest: &Digest) -> String {
    Key::Manifest(vol.clone(), *digest).to_string()
}

pub(crate) fn tag_prefix(vol: &VolumeName) -> String {
    crate::keys::volume_folder("tags", vol)
}

pub(crate) fn tag_key(vol: &VolumeName, tag: &Name) -> String {
    Key::Tag(vol.clone(), tag.clone()).to_string()
}

/// How long a loaded chunk index answers that a chunk is not there (`other_copy`,
/// `locate`) before it is loaded again.
const COPIES_FRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// A pack that is not there is damage to the repository, not an I/O error, whichever
/// way the store says it is not there (`ObjectStore::get_range`).
fn missing_pack(pack: &PackId, e: Error) -> Error {
    let missing = e.kind() == ErrorKind::NotFound
        || (e.kind() == ErrorKind::Io && e.io_kind() == Some(std::io::ErrorKind::NotFound));
    if missing {
        Error::corrupt(format!("pack {} is missing", pack.hex()))
    } else {
        e
    }
}
