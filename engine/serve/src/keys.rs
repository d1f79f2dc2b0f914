//! API keys: who may call the server and what each may touch.
//!
//! A key is `sv1:NAME:SECRET` (64 hex digits of randomness). The server keeps only the
//! BLAKE3 hash of each secret, in `keys.json` (mode 0600) in its key folder, and
//! compares hashes in constant time. A key is an admin key, or a read-write or
//! read-only key, optionally scoped to namespaces. The first start makes an admin key
//! and writes it to `admin.key` (0600) beside the list: its path is printed, the key
//! never is. `key create` prints a new key once; `key revoke` takes effect at the
//! next request (the server reloads the list when the file changes).

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use sealvol_core::error::{Error, ErrorKind, Result};
use serde::{Deserialize, Serialize};

pub const KEYS_FILE: &str = "keys.json";
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

#[derive(Debug, Default, Serialize, Deserialize)]
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

/// The key list of a running server, reloaded when its file changes.
pub struct Keys {
    path: PathBuf,
    /// The list as last read, and the (inode, mtime) of the file it came from: a save
    /// renames a new file over it, so the inode changes with every save.
    cached: Mutex<(Option<FileId>, Arc<KeyList>)>,
}

impl Keys {
    /// Opens the key list in `dir`; on the first start, creates the folder (0700), an
    /// admin key and the list. Returns the admin key's file when it was just made.
    pub fn open(dir: &Path) -> Result<(Keys, Option<PathBuf>)> {
        let path = dir.join(KEYS_FILE);
        let mut made = None;
        if !path.exists() {
            private_dir(dir)?;
            let (token, stored) = new_key(ADMIN, true, false, Vec::new())?;
            let admin = dir.join(ADMIN_KEY_FILE);
            write_private(&admin, format!("{token}\n").as_bytes())?;
            save(&path, &KeyList { keys: vec![stored] })?;
            made = Some(admin);
        }
        let keys = Keys {
            path,
            cached: Mutex::new((None, Arc::new(KeyList::default()))),
        };
        keys.current()?;
        Ok((keys, made))
    }

    fn current(&self) -> Result<Arc<KeyList>> {
        use std::os::unix::fs::MetadataExt;
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| Ok((m.ino(), m.modified()?)))
            .map_err(|e| Error::io("cannot read", &self.path, e))?;
        let mut c = sealvol_core::lock(&self.cached);
        if c.0 != Some(modified) {
            *c = (Some(modified), Arc::new(load(&self.path)?));
        }
        Ok(Arc::clone(&c.1))
    }

    /// The grant of `authorization` (an `Authorization` header's value).
    pub fn check(&self, authorization: Option<&str>) -> std::result::Result<Grant, Refused> {
        // The scheme is case-insensitive (RFC 7235).
        let header = authorization.ok_or(Refused::Missing)?.trim();
        let (scheme, token) = header.split_once(' ').ok_or(Refused::Malformed)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Refused::Malformed);
        }
        let token = token.trim();
        let (name, secret) = parse(token).ok_or(Refused::Malformed)?;
        // A list that cannot be read refuses everyone rather than letting anyone in.
        let list = self.current().map_err(|e| {
            tracing::error!("{e}");
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

/// `key create NAME`: adds a key and returns it (the only time it is shown).
pub fn create(dir: &Path, name: &str, read_only: bool, namespaces: Vec<String>) -> Result<String> {
    sealvol_core::refs::Name::parse("key name", name)?;
    for ns in &namespaces {
        sealvol_core::refs::Name::parse("namespace", ns)?;
    }
    let path = dir.join(KEYS_FILE);
    let mut list = load_existing(&path)?;
    if list.keys.iter().any(|k| k.name == name) {
        return Err(Error::new(ErrorKind::Conflict, format!("there is already a key named {name}"))
            .hint("pick another name, or `sealvol key revoke` the old one first (a revoked name stays taken)"));
    }
    let (token, stored) = new_key(name, false, read_only, namespaces)?;
    list.keys.push(stored);
    save(&path, &list)?;
    Ok(token)
}

/// `key ls`.
pub fn list(dir: &Path) -> Result<Vec<StoredKey>> {
    Ok(load_existing(&dir.join(KEYS_FILE))?.keys)
}

/// `key revoke NAME`.
pub fn revoke(dir: &Path, name: &str) -> Result<StoredKey> {
    let path = dir.join(KEYS_FILE);
    let mut list = load_existing(&path)?;
    let Some(key) = list.keys.iter_mut().find(|k| k.name == name) else {
        return Err(Error::not_found(format!("no key named {name}"))
            .hint("list them with `sealvol key ls`"));
    };
    if key.revoked.is_none() {
        key.revoked = Some(sealvol_core::stamp::now_rfc3339());
    }
    let done = key.clone();
    save(&path, &list)?;
    Ok(done)
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
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::corrupt(format!("{} is damaged: {e}", path.display()))
            .hint("restore it from a backup, or move it away and start `sealvol serve` to make a new admin key")
    })
}

/// Writes the list whole (a temporary file renamed over it), mode 0600.
fn save(path: &Path, list: &KeyList) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(list)
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot encode the key list: {e}")))?;
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
        let (keys, made) = Keys::open(&dir).unwrap();
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

        let ci = create(&dir, "ci", false, vec!["weights".into()]).unwrap();
        let g = keys.check(Some(&format!("Bearer {ci}"))).unwrap();
        assert!(g.writes("weights") && !g.sees("other") && !g.admin);
        let ro = create(&dir, "reader", true, vec![]).unwrap();
        let g = keys.check(Some(&format!("Bearer {ro}"))).unwrap();
        assert!(g.sees("anything") && !g.writes("anything"));

        assert_eq!(keys.check(None), Err(Refused::Missing));
        assert_eq!(keys.check(Some("Basic x")), Err(Refused::Malformed));
        let wrong = format!(
            "{}{}",
            &ci[..ci.len() - 1],
            if ci.ends_with('0') { "1" } else { "0" }
        );
        assert_eq!(
            keys.check(Some(&format!("Bearer {wrong}"))),
            Err(Refused::Unknown)
        );
        assert!(create(&dir, "ci", true, vec![]).is_err());
        assert!(create(&dir, "Bad Name", true, vec![]).is_err());

        // Revoked: refused at the next request, without a restart.
        revoke(&dir, "ci").unwrap();
        assert_eq!(
            keys.check(Some(&format!("Bearer {ci}"))),
            Err(Refused::Revoked("ci".into()))
        );
        assert_eq!(
            revoke(&dir, "nope").unwrap_err().kind(),
            ErrorKind::NotFound
        );
        // Reopening keeps the list and makes no new admin key.
        let (_, made) = Keys::open(&dir).unwrap();
        assert!(made.is_none());
        assert_eq!(list(&dir).unwrap().len(), 3);
    }
}
