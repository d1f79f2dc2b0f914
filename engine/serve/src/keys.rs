//! API keys: who may call the server and what each may touch.
//!
//! A key is `sv1:NAME:SECRET` (64 hex digits of randomness). A list keeps only the
//! BLAKE3 hash of each secret, and a check compares hashes in constant time. A key is
//! an admin key, or a read-write or read-only key, optionally scoped to namespaces.
//!
//! Where the list lives: a server starts on a list of its own, `keys.json` (0600) in
//! its key folder, and makes an admin key the first time, written to `admin.key`
//! (0600) beside it: its path is printed, the key never is. `sealvol key share` moves
//! that list into the repository (`access/keys.json`), and from then on every server
//! of the repository uses that one list: a key made once is valid on all of them, and
//! a revocation reaches each within `REFRESH` (5 s) while it can read the repository,
//! never later than `STALE_FOR` (2 minutes), after which a server that cannot read the
//! list refuses every key. A list that is damaged or gone refuses every key. No key,
//! an admin's neither, reads or writes the list over HTTP (`objects/`).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sealvol_core::Repository;
use sealvol_core::error::{Error, ErrorKind, Result};
use sealvol_core::store::ETag;
use serde::{Deserialize, Serialize};

pub const KEYS_FILE: &str = "keys.json";
/// What `keys.json` becomes once `key share` put it in the repository.
pub const SHARED_FILE: &str = "keys.json.shared";
/// The largest key list read (about 4,000 keys).
const MAX_LIST: usize = 1 << 20;
pub const ADMIN_KEY_FILE: &str = "admin.key";
/// The admin key's name in `key ls`.
pub const ADMIN: &str = "admin";
const PREFIX: &str = "sv1:";

/// What one key may do, once it is checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub name: String,
    pub admin: bool,
    pub read_only: bool,
    /// The namespaces it may see and write; empty: all of them.
    pub namespaces: Vec<String>,
}

impl Grant {
    /// Whether it may see namespace `ns`.
    pub fn sees(&self, ns: &str) -> bool {
        self.admin || self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == ns)
    }

    /// Whether it may write in namespace `ns`.
    pub fn writes(&self, ns: &str) -> bool {
        !self.read_only && self.sees(ns)
    }

    /// How `key ls` and the console describe it.
    pub fn scope(&self) -> String {
        let access = match (self.admin, self.read_only) {
            (true, _) => "admin",
            (false, true) => "read-only",
            (false, false) => "read-write",
        };
        match self.namespaces.as_slice() {
            [] => access.to_string(),
            ns => format!("{access} in {}", ns.join(", ")),
        }
    }
}

/// A key as the list keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredKey {
    pub name: String,
    /// BLAKE3 of the secret, hex.
    pub hash: String,
    #[serde(default)]
    pub admin: bool,
    #[serde(default)]
    pub read_only: bool,
    #[serde(default)]
    pub namespaces: Vec<String>,
    pub created: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked: Option<String>,
}

impl StoredKey {
    pub fn grant(&self) -> Grant {
        Grant {
            name: self.name.clone(),
            admin: self.admin,
            read_only: self.read_only,
            namespaces: self.namespaces.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct KeyList {
    keys: Vec<StoredKey>,
}

/// Why a request was refused a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    Missing,
    Malformed,
    Unknown,
    Revoked(String),
}

impl Refused {
    pub fn message(&self) -> String {
        match self {
            Refused::Missing => "no API key: send `Authorization: Bearer KEY` (the CLI reads SEALVOL_API_KEY)".into(),
            Refused::Malformed => "the API key is malformed: a key looks like sv1:NAME:SECRET, as `sealvol key create` printed it".into(),
            Refused::Unknown => "the API key is not known to this server: ask its operator for one (`sealvol key create`)".into(),
            Refused::Revoked(name) => format!("API key {name} was revoked: ask the server's operator for a new one"),
        }
    }
}

/// Which file a list was read from: inode and modification time.
type FileId = (u64, std::time::SystemTime);

/// How often a server reads the repository's key list again: a key made or revoked
/// there takes effect on every server of the repository within this.
pub const REFRESH: Duration = Duration::from_secs(5);
/// How long a server that cannot read the repository's list keeps the last one it
/// read; after that it refuses every key until it reads the list again, so a
/// revocation never waits longer than this on a server cut off from the repository.
pub const STALE_FOR: Duration = Duration::from_secs(120);

/// The key list of a running server: its own (`<state>/serve/keys.json`, reloaded
/// when the file changes), or, once the repository holds one (`sealvol key share`),
/// the repository's, which every server of it reads every `REFRESH`.
pub struct Keys {
    dir: PathBuf,
    repo: Option<Arc<Repository>>,
    inner: Mutex<Inner>,
}

struct Inner {
    /// Reading the repository's list (else the folder's).
    shared: bool,
    /// The (inode, mtime) of the folder's file the list came from: a save renames a
    /// new file over it, so the inode changes with every save.
    file: Option<FileId>,
    list: Arc<KeyList>,
    /// When the repository's list was last read whole.
    read: Option<Instant>,
    /// Why the repository's list cannot be used (gone, damaged): every key is refused
    /// while this is set, rather than letting anyone in.
    broken: Option<String>,
    /// The last failure to reach the list was logged (one line per outage).
    unreachable: bool,
}

impl Keys {
    /// Opens the key list of a server with key folder `dir` over `repo`: the
    /// repository's when it holds one; else the folder's, made on the first start with
    /// the folder (0700), an admin key and the list. Returns the admin key's file when
    /// it was just made. With a repository, a thread reads its list every `REFRESH`
    /// (a server on its own list moves to the repository's when one appears).
    pub fn open(dir: &Path, repo: Option<Arc<Repository>>) -> Result<(Arc<Keys>, Option<PathBuf>)> {
        let mut made = None;
        let shared = match &repo {
            Some(r) => read_shared(r)?,
            None => None,
        };
        if shared.is_some() {
            retire(dir)?;
        } else {
            refuse_retired(dir)?;
            made = make_local(dir)?;
        }
        let keys = Arc::new(Keys {
            dir: dir.to_path_buf(),
            repo,
            inner: Mutex::new(Inner {
                shared: shared.is_some(),
                file: None,
                read: shared.as_ref().map(|_| Instant::now()),
                list: Arc::new(shared.map(|(l, _)| l).unwrap_or_default()),
                broken: None,
                unreachable: false,
            }),
        });
        keys.current()
            .map_err(|why| Error::new(ErrorKind::Io, why))?;
        if keys.repo.is_some() {
            let weak = Arc::downgrade(&keys);
            std::thread::Builder::new()
                .name("sealvol-keys".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(REFRESH);
                        let Some(keys) = weak.upgrade() else { break };
                        keys.refresh();
                    }
                })
                .map_err(|e| {
                    Error::new(ErrorKind::Io, format!("cannot start the key reader: {e}"))
                })?;
        }
        Ok((keys, made))
    }

    /// Reads the repository's list again (the thread does it every `REFRESH`; tests
    /// call it to act at once).
    pub fn refresh(&self) {
        let Some(repo) = &self.repo else { return };
        let read = read_shared(repo);
        let mut i = sealvol_core::lock(&self.inner);
        match read {
            Ok(Some((list, _))) => {
                if !i.shared {
                    tracing::info!("the repository holds a key list now: keys are read from it");
                    if let Err(e) = retire(&self.dir) {
                        tracing::error!("{e}");
                    }
                }
                if let Some(why) = i.broken.take() {
                    tracing::info!("the repository's key list is usable again (it was: {why})");
                }
                i.shared = true;
                i.list = Arc::new(list);
                i.read = Some(Instant::now());
                i.unreachable = false;
            }
            Ok(None) if i.shared => {
                let why = format!(
                    "the repository's key list ({}) is gone",
                    sealvol_core::keys::Key::AccessList
                );
                if i.broken.is_none() {
                    tracing::error!("{why}: every key is refused until it is restored");
                }
                i.broken = Some(why);
            }
            Ok(None) => {}
            Err(e) if e.kind() == ErrorKind::Corrupt => {
                if i.broken.is_none() {
                    tracing::error!("{e}: every key is refused until it is repaired");
                }
                i.shared = true;
                i.broken = Some(e.message().to_string());
            }
            Err(e) => {
                if !i.unreachable {
                    tracing::warn!("cannot read the repository's key list: {e}");
                }
                i.unreachable = true;
            }
        }
    }

    /// Makes the list read `by` older, as if the repository had not answered for that
    /// long.
    #[cfg(test)]
    fn age_by(&self, by: Duration) {
        let mut i = sealvol_core::lock(&self.inner);
        i.read = i.read.and_then(|at| at.checked_sub(by));
    }

    /// The list in use, or why every key is refused.
    fn current(&self) -> std::result::Result<Arc<KeyList>, String> {
        use std::os::unix::fs::MetadataExt;
        let mut i = sealvol_core::lock(&self.inner);
        if i.shared {
            if let Some(why) = &i.broken {
                return Err(why.clone());
            }
            return match i.read {
                Some(at) if at.elapsed() <= STALE_FOR => Ok(Arc::clone(&i.list)),
                _ => Err(format!(
                    "the repository's key list could not be read for {} s",
                    STALE_FOR.as_secs()
                )),
            };
        }
        let path = self.dir.join(KEYS_FILE);
        let file = std::fs::metadata(&path)
            .and_then(|m| Ok((m.ino(), m.modified()?)))
            .map_err(|e| Error::io("cannot read", &path, e).to_string())?;
        if i.file != Some(file) {
            i.list = Arc::new(load(&path).map_err(|e| e.to_string())?);
            i.file = Some(file);
        }
        Ok(Arc::clone(&i.list))
    }

    /// Where the keys in use are kept, and, for the repository's list, how many
    /// seconds ago it was read: for the metrics.
    pub fn state(&self) -> (bool, f64) {
        let i = sealvol_core::lock(&self.inner);
        let age = i.read.map_or(0.0, |at| at.elapsed().as_secs_f64());
        (i.shared, if i.shared { age } else { 0.0 })
    }

    /// The grant of `authorization` (an `Authorization` header's value).
    pub fn check(&self, authorization: Option<&str>) -> std::result::Result<Grant, Refused> {
        // The scheme is case-insensitive (RFC 7235).
        let header = authorization.ok_or(Refused::Missing)?.trim();
        let (scheme, token) = header.split_once(' ').ok_or(Refused::Malformed)?;
        // Basic credentials carry the key as the password of any user name, for the
        // clients that speak no other scheme (registry clients, pull secrets).
        let basic;
        let token = match scheme {
            s if s.eq_ignore_ascii_case("bearer") => token.trim(),
            s if s.eq_ignore_ascii_case("basic") && token.len() <= 1024 => {
                use base64::Engine as _;
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(token.trim())
                    .map_err(|_| Refused::Malformed)?;
                basic = String::from_utf8(raw).map_err(|_| Refused::Malformed)?;
                basic.split_once(':').ok_or(Refused::Malformed)?.1
            }
            _ => return Err(Refused::Malformed),
        };
        let (name, secret) = parse(token).ok_or(Refused::Malformed)?;
        // A list that cannot be read refuses everyone rather than letting anyone in.
        let list = self.current().map_err(|why| {
            tracing::error!("{why}");
            Refused::Unknown
        })?;
        let key = list
            .keys
            .iter()
            .find(|k| k.name == name)
            .ok_or(Refused::Unknown)?;
        let stored = blake3::Hash::from_hex(&key.hash).map_err(|_| Refused::Unknown)?;
        // blake3::Hash compares in constant time.
        if blake3::hash(secret.as_bytes()) != stored {
            return Err(Refused::Unknown);
        }
        if key.revoked.is_some() {
            return Err(Refused::Revoked(key.name.clone()));
        }
        Ok(key.grant())
    }
}

impl Keys {
    /// Whether key `name` is still known and not revoked: an upload begun before a
    /// revocation ends with it.
    pub fn is_live(&self, name: &str) -> bool {
        self.current()
            .map(|list| {
                list.keys
                    .iter()
                    .any(|k| k.name == name && k.revoked.is_none())
            })
            .unwrap_or(false)
    }
}

/// Where a key list is kept, for `sealvol key`.
pub enum Place {
    /// `<dir>/keys.json`: one server's own.
    Folder(PathBuf),
    /// `access/keys.json` in the repository: every server of it reads this one.
    Repository(Arc<Repository>),
}

impl Place {
    /// The list the servers with key folder `dir` over `repo` use: the repository's
    /// once it holds one (`share`), else the folder's.
    pub fn of(dir: &Path, repo: Arc<Repository>) -> Result<Place> {
        match read_shared(&repo)? {
            Some(_) => Ok(Place::Repository(repo)),
            None => {
                refuse_retired(dir)?;
                Ok(Place::Folder(dir.to_path_buf()))
            }
        }
    }

    /// How a person is told where the list is.
    pub fn describe(&self) -> String {
        match self {
            Place::Folder(dir) => format!("the key list in {}", dir.display()),
            Place::Repository(repo) => format!(
                "the key list of repository {} (every server of it within {} s)",
                repo.location(),
                REFRESH.as_secs()
            ),
        }
    }

    /// Changes the list with `f` and keeps the result: in the repository by
    /// compare-and-swap, so two people changing keys at once cannot lose one change.
    fn edit<T>(&self, mut f: impl FnMut(&mut KeyList) -> Result<T>) -> Result<T> {
        match self {
            Place::Folder(dir) => {
                let path = dir.join(KEYS_FILE);
                let mut list = load_existing(&path)?;
                let out = f(&mut list)?;
                save(&path, &list)?;
                Ok(out)
            }
            Place::Repository(repo) => {
                let key = sealvol_core::keys::Key::AccessList.to_string();
                let store = repo.object_store();
                for _ in 0..16 {
                    let (mut list, etag) = read_shared(repo)?.ok_or_else(|| {
                        Error::not_found(format!("the repository's key list ({key}) is gone"))
                            .hint("restore it from a backup: until then every server of the repository refuses every key")
                    })?;
                    let out = f(&mut list)?;
                    match store.put_if_match(&key, &encode(&list)?, Some(&etag)) {
                        Ok(()) => {
                            store.sync()?;
                            return Ok(out);
                        }
                        Err(e) if e.kind() == ErrorKind::Race => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(Error::new(
                    ErrorKind::Race,
                    "the repository's key list keeps changing under us",
                )
                .hint("try again in a moment"))
            }
        }
    }

    fn read(&self) -> Result<KeyList> {
        match self {
            Place::Folder(dir) => load_existing(&dir.join(KEYS_FILE)),
            Place::Repository(repo) => Ok(read_shared(repo)?.map(|(l, _)| l).unwrap_or_default()),
        }
    }
}

/// The repository's key list and its version, if it holds one; a damaged one is an
/// error (`Corrupt`), never an empty list.
fn read_shared(repo: &Repository) -> Result<Option<(KeyList, ETag)>> {
    let key = sealvol_core::keys::Key::AccessList.to_string();
    let Some((bytes, etag)) = repo.object_store().get_versioned(&key)? else {
        return Ok(None);
    };
    let list = decode(&bytes).map_err(|why| {
        Error::corrupt(format!(
            "the repository's key list ({key}) is damaged: {why}"
        ))
        .hint(
            "restore it from a backup: until then every server of the repository refuses every key",
        )
    })?;
    Ok(Some((list, etag)))
}

/// A folder whose list went to the repository (`share`) is not read again: were the
/// repository's list lost, the old one would bring revoked keys back.
fn refuse_retired(dir: &Path) -> Result<()> {
    let retired = dir.join(SHARED_FILE);
    match retired.exists() && !dir.join(KEYS_FILE).exists() {
        true => Err(Error::not_found(format!(
            "this server's keys went to the repository ({} says so), which holds no key list now",
            retired.display()
        ))
        .hint("restore the repository's access/keys.json from a backup; to start over on this server's own list, move that file away")),
        false => Ok(()),
    }
}

/// Retires the folder's own list, if it has one, once the repository's is in use: its
/// keys that are not in the repository's no longer work, and never come back.
fn retire(dir: &Path) -> Result<()> {
    let path = dir.join(KEYS_FILE);
    if !path.exists() {
        return Ok(());
    }
    let retired = dir.join(SHARED_FILE);
    std::fs::rename(&path, &retired).map_err(|e| Error::io("cannot retire", &path, e))?;
    tracing::info!(
        "this server's own key list is retired ({}): the repository's is used",
        retired.display()
    );
    Ok(())
}

/// `key share`: puts the folder's list in the repository, where every server of it
/// reads it from then on, and retires the folder's (renamed to `keys.json.shared`).
/// Returns how many keys went. The admin key's file stays where it is: its hash went
/// with the list.
pub fn share(dir: &Path, repo: &Repository) -> Result<usize> {
    let held = || {
        Error::new(
            ErrorKind::Conflict,
            format!("repository {} already holds a key list", repo.location()),
        )
        .hint("`sealvol key ls` shows it: keys are made and revoked there now")
    };
    if read_shared(repo)?.is_some() {
        return Err(held());
    }
    let list = load_existing(&dir.join(KEYS_FILE))?;
    let key = sealvol_core::keys::Key::AccessList.to_string();
    let store = repo.object_store();
    if !store.put_if_absent(&key, &encode(&list)?)? {
        return Err(held());
    }
    store.sync()?;
    retire(dir)?;
    Ok(list.keys.len())
}

fn encode(list: &KeyList) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(list)
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot encode the key list: {e}")))
}

/// A list as stored; every hash must be one, or the whole list is refused.
fn decode(bytes: &[u8]) -> std::result::Result<KeyList, String> {
    if bytes.len() > MAX_LIST {
        return Err(format!("{} bytes, more than {MAX_LIST}", bytes.len()));
    }
    let list: KeyList = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if let Some(k) = list
        .keys
        .iter()
        .find(|k| blake3::Hash::from_hex(&k.hash).is_err())
    {
        return Err(format!("key {:.64} has no hash a key could match", k.name));
    }
    Ok(list)
}

/// `NAME` and `SECRET` of `sv1:NAME:SECRET`.
fn parse(token: &str) -> Option<(&str, &str)> {
    let (name, secret) = token.strip_prefix(PREFIX)?.rsplit_once(':')?;
    (!name.is_empty() && secret.len() == 64 && secret.bytes().all(|b| b.is_ascii_hexdigit()))
        .then_some((name, secret))
}

fn new_key(
    name: &str,
    admin: bool,
    read_only: bool,
    namespaces: Vec<String>,
) -> Result<(String, StoredKey)> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)
        .map_err(|e| Error::new(ErrorKind::Io, format!("no randomness for a key: {e}")))?;
    let secret: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let stored = StoredKey {
        name: name.to_string(),
        hash: blake3::hash(secret.as_bytes()).to_hex().to_string(),
        admin,
        read_only,
        namespaces,
        created: sealvol_core::stamp::now_rfc3339(),
        revoked: None,
    };
    Ok((format!("{PREFIX}{name}:{secret}"), stored))
}

/// `key create NAME`: adds a key to the list at `place` and returns it (the only
/// time it is shown).
pub fn create(
    place: &Place,
    name: &str,
    read_only: bool,
    namespaces: Vec<String>,
) -> Result<String> {
    sealvol_core::refs::Name::parse("key name", name)?;
    for ns in &namespaces {
        sealvol_core::refs::Name::parse("namespace", ns)?;
    }
    let (token, stored) = new_key(name, false, read_only, namespaces)?;
    place.edit(|list| {
        if list.keys.iter().any(|k| k.name == name) {
            return Err(Error::new(ErrorKind::Conflict, format!("there is already a key named {name}"))
                .hint("pick another name, or `sealvol key revoke` the old one first (a revoked name stays taken)"));
        }
        list.keys.push(stored.clone());
        Ok(())
    })?;
    Ok(token)
}

/// `key ls`.
pub fn list(place: &Place) -> Result<Vec<StoredKey>> {
    Ok(place.read()?.keys)
}

/// `key revoke NAME`.
pub fn revoke(place: &Place, name: &str) -> Result<StoredKey> {
    place.edit(|list| {
        let Some(key) = list.keys.iter_mut().find(|k| k.name == name) else {
            return Err(Error::not_found(format!("no key named {name}"))
                .hint("list them with `sealvol key ls`"));
        };
        if key.revoked.is_none() {
            key.revoked = Some(sealvol_core::stamp::now_rfc3339());
        }
        Ok(key.clone())
    })
}

/// Makes the key folder `dir` (0700) with its list and an admin key when it has no
/// list yet: on a server's first start, or at the first `key create` before it. The
/// admin key's file when it was just made.
pub fn make_local(dir: &Path) -> Result<Option<PathBuf>> {
    let path = dir.join(KEYS_FILE);
    if path.exists() {
        return Ok(None);
    }
    private_dir(dir)?;
    let (token, stored) = new_key(ADMIN, true, false, Vec::new())?;
    let admin = dir.join(ADMIN_KEY_FILE);
    write_private(&admin, format!("{token}\n").as_bytes())?;
    save(&path, &KeyList { keys: vec![stored] })?;
    Ok(Some(admin))
}

fn load_existing(path: &Path) -> Result<KeyList> {
    if !path.exists() {
        return Err(
            Error::not_found(format!("no key list at {}", path.display())).hint(
                "start `sealvol serve` once with this --state: it makes the list and an admin key",
            ),
        );
    }
    load(path)
}

fn load(path: &Path) -> Result<KeyList> {
    let bytes = std::fs::read(path).map_err(|e| Error::io("cannot read", path, e))?;
    decode(&bytes).map_err(|e| {
        Error::corrupt(format!("{} is damaged: {e}", path.display()))
            .hint("restore it from a backup, or move it away and start `sealvol serve` to make a new admin key")
    })
}

/// Writes the list whole (a temporary file renamed over it), mode 0600.
fn save(path: &Path, list: &KeyList) -> Result<()> {
    let bytes = encode(list)?;
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    write_private(&tmp, &bytes)?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io("cannot write", path, e))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io("cannot create", path, e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| Error::io("cannot write", path, e))
}

fn private_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("cannot create", dir, e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io("cannot protect", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_scoped_and_revoked() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("keys");
        let (keys, made) = Keys::open(&dir, None).unwrap();
        let place = Place::Folder(dir.clone());
        let admin_file = made.unwrap();
        let mode = std::fs::metadata(&admin_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let list_mode = std::fs::metadata(dir.join(KEYS_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(list_mode & 0o777, 0o600);
        let admin = std::fs::read_to_string(&admin_file).unwrap();
        let admin = admin.trim();
        // The list holds no secret.
        let stored = std::fs::read_to_string(dir.join(KEYS_FILE)).unwrap();
        assert!(!stored.contains(admin.rsplit(':').next().unwrap()));
        assert!(keys.check(Some(&format!("Bearer {admin}"))).unwrap().admin);

        let ci = create(&place, "ci", false, vec!["weights".into()]).unwrap();
        let g = keys.check(Some(&format!("Bearer {ci}"))).unwrap();
        assert!(g.writes("weights") && !g.sees("other") && !g.admin);
        let ro = create(&place, "reader", true, vec![]).unwrap();
        let g = keys.check(Some(&format!("Bearer {ro}"))).unwrap();
        assert!(g.sees("anything") && !g.writes("anything"));

        assert_eq!(keys.check(None), Err(Refused::Missing));
        assert_eq!(keys.check(Some("Basic x")), Err(Refused::Malformed));
        // The key as the password of basic credentials, any user name (registry
        // clients, pull secrets); anything else in them is refused.
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let g = keys
            .check(Some(&format!("Basic {}", b64(&format!("anyone:{ci}")))))
            .unwrap();
        assert!(g.writes("weights") && !g.sees("other"));
        for bad in [
            b64(&ci),
            b64(&format!("{ci}:")),
            "%%%".to_string(),
            b64(&format!("u:{}", "x".repeat(2000))),
        ] {
            assert!(
                keys.check(Some(&format!("Basic {bad}"))).is_err(),
                "{bad:.40}"
            );
        }
        let wrong = format!(
            "{}{}",
            &ci[..ci.len() - 1],
            if ci.ends_with('0') { "1" } else { "0" }
        );
        assert_eq!(
            keys.check(Some(&format!("Bearer {wrong}"))),
            Err(Refused::Unknown)
        );
        assert!(create(&place, "ci", true, vec![]).is_err());
        assert!(create(&place, "Bad Name", true, vec![]).is_err());

        // Revoked: refused at the next request, without a restart.
        revoke(&place, "ci").unwrap();
        assert_eq!(
            keys.check(Some(&format!("Bearer {ci}"))),
            Err(Refused::Revoked("ci".into()))
        );
        assert_eq!(
            revoke(&place, "nope").unwrap_err().kind(),
            ErrorKind::NotFound
        );
        // Reopening keeps the list and makes no new admin key.
        let (_, made) = Keys::open(&dir, None).unwrap();
        assert!(made.is_none());
        assert_eq!(list(&place).unwrap().len(), 3);
    }

    fn bearer(k: &str) -> Option<String> {
        Some(format!("Bearer {k}"))
    }

    #[test]
    fn a_shared_list_is_every_server_s_and_a_revocation_reaches_each() {
        let t = tempfile::tempdir().unwrap();
        let repo = Arc::new(Repository::open_local(&t.path().join("repo"), true, false).unwrap());
        let (one_dir, two_dir) = (t.path().join("one"), t.path().join("two"));
        // Server one starts on its own list; server two too, with another admin key.
        let (one, made) = Keys::open(&one_dir, Some(Arc::clone(&repo))).unwrap();
        let admin = std::fs::read_to_string(made.unwrap()).unwrap();
        let admin = admin.trim();
        let (two, _) = Keys::open(&two_dir, Some(Arc::clone(&repo))).unwrap();
        assert_eq!(two.check(bearer(admin).as_deref()), Err(Refused::Unknown));
        assert!(matches!(
            Place::of(&one_dir, Arc::clone(&repo)).unwrap(),
            Place::Folder(_)
        ));

        // Shared: one's list goes to the repository, and two moves to it at its next read.
        assert_eq!(share(&one_dir, &repo).unwrap(), 1);
        assert!(!one_dir.join(KEYS_FILE).exists() && one_dir.join(SHARED_FILE).exists());
        let e = share(&two_dir, &repo).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
        two.refresh();
        one.refresh();
        assert!(two.check(bearer(admin).as_deref()).unwrap().admin);
        assert!(two.state().0);
        // Two's own list is retired too: a lost shared list never revives it.
        assert!(!two_dir.join(KEYS_FILE).exists() && two_dir.join(SHARED_FILE).exists());

        // A key made once is every server's; a revocation too.
        let place = Place::of(&two_dir, Arc::clone(&repo)).unwrap();
        assert!(matches!(place, Place::Repository(_)));
        let ci = create(&place, "ci", true, vec![]).unwrap();
        for k in [&one, &two] {
            k.refresh();
            assert!(k.check(bearer(&ci).as_deref()).unwrap().read_only);
        }
        revoke(&place, "ci").unwrap();
        for k in [&one, &two] {
            k.refresh();
            assert_eq!(
                k.check(bearer(&ci).as_deref()),
                Err(Refused::Revoked("ci".into()))
            );
            assert!(!k.is_live("ci"));
        }
        // A third server over the repository makes no admin key of its own.
        let (three, made) = Keys::open(&t.path().join("three"), Some(Arc::clone(&repo))).unwrap();
        assert!(made.is_none());
        assert!(three.check(bearer(admin).as_deref()).unwrap().admin);

        // A damaged list refuses everyone, at once and at a start; repaired, it serves again.
        let key = sealvol_core::keys::Key::AccessList.to_string();
        let store = repo.object_store();
        let good = store.get(&key).unwrap().unwrap();
        store
            .put(&key, b"{\"keys\": [{\"name\": \"x\", \"hash\": \"zz\"")
            .unwrap();
        one.refresh();
        assert_eq!(one.check(bearer(admin).as_deref()), Err(Refused::Unknown));
        let e = Keys::open(&t.path().join("four"), Some(Arc::clone(&repo)))
            .err()
            .unwrap();
        assert!(
            e.to_string().contains("(access/keys.json) is damaged"),
            "{e}"
        );
        let e = create(&place, "other", false, vec![]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Corrupt, "{e}");
        // A hash that is no hash spoils the whole list, not just its entry.
        store
            .put(
                &key,
                br#"{"keys": [{"name": "x", "hash": "not hex", "created": "now"}]}"#,
            )
            .unwrap();
        assert!(Keys::open(&t.path().join("four"), Some(Arc::clone(&repo))).is_err());
        store.put(&key, &good).unwrap();
        one.refresh();
        assert!(one.check(bearer(admin).as_deref()).unwrap().admin);

        // Gone: every key refused, and the retired folder's old list is not taken back.
        store.delete(&key).unwrap();
        one.refresh();
        assert_eq!(one.check(bearer(admin).as_deref()), Err(Refused::Unknown));
        for dir in [&one_dir, &two_dir] {
            let e = Keys::open(dir, Some(Arc::clone(&repo))).err().unwrap();
            assert!(e.to_string().contains("went to the repository"), "{e}");
        }
        assert!(Place::of(&one_dir, Arc::clone(&repo)).is_err());
    }

    #[test]
    fn a_server_cut_off_from_the_repository_keeps_its_list_only_so_long() {
        use sealvol_core::store::faults::{Call, Fault, When};
        use sealvol_core::store::{Faulty, MemoryStore};
        let t = tempfile::tempdir().unwrap();
        let store = Arc::new(Faulty::new(MemoryStore::new().unwrap()));
        let repo = Arc::new(
            Repository::open(Box::new(Arc::clone(&store)), "memory".into(), true).unwrap(),
        );
        let dir = t.path().join("one");
        let (_, made) = Keys::open(&dir, None).unwrap();
        let admin = std::fs::read_to_string(made.unwrap()).unwrap();
        share(&dir, &repo).unwrap();
        let (keys, _) = Keys::open(&t.path().join("two"), Some(Arc::clone(&repo))).unwrap();
        assert!(keys.check(bearer(admin.trim()).as_deref()).is_ok());
        // The repository stops answering: the last list read holds…
        store.inject(
            Call::GetVersioned,
            "access/",
            When::Every,
            Fault::Fail(ErrorKind::Unavailable),
        );
        keys.refresh();
        assert!(keys.check(bearer(admin.trim()).as_deref()).is_ok());
        // …until it is older than STALE_FOR: then no key is taken.
        keys.age_by(STALE_FOR + Duration::from_secs(1));
        keys.refresh();
        assert_eq!(
            keys.check(bearer(admin.trim()).as_deref()),
            Err(Refused::Unknown)
        );
        assert!(keys.state().1 > STALE_FOR.as_secs_f64());
        // Answering again, it is read again and keys work.
        store.heal();
        keys.refresh();
        assert!(keys.check(bearer(admin.trim()).as_deref()).is_ok());
        assert!(keys.state().1 < 1.0);
    }

    #[test]
    fn a_list_too_large_or_not_json_is_refused_whole() {
        assert!(
            decode(&vec![b' '; MAX_LIST + 1])
                .unwrap_err()
                .contains("more than")
        );
        assert!(decode(b"[]").is_err());
        assert!(decode(br#"{"keys": []}"#).unwrap().keys.is_empty());
    }
}
