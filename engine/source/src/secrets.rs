//! Secrets for sync sources (tokens, keys): one file per secret in `<state>/secrets/`,
//! mode 0600 in a 0700 directory. A value is never printed: `Secret` shows as
//! `<secret NAME>` in every `Debug` and `Display`, so it cannot reach a log, an error or
//! a job record by accident; `expose` is the one way to the bytes.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use sealvol_core::error::{Error, ErrorKind, IoContext, Result};
use sealvol_core::refs::Name;

pub struct Secret {
    name: Name,
    value: Vec<u8>,
}

impl Secret {
    pub fn name(&self) -> &Name {
        &self.name
    }

    pub fn expose(&self) -> &[u8] {
        &self.value
    }

    /// The value as text (a token, a key), trimmed; a value that is not UTF-8 is refused
    /// without being shown.
    pub fn text(&self) -> Result<String> {
        std::str::from_utf8(&self.value)
            .map(|t| t.trim().to_string())
            .map_err(|_| Error::invalid(format!("{self} is not text (not UTF-8)")))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<secret {}>", self.name)
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<secret {}>", self.name)
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Not a guarantee (copies may exist), but the stored value does not linger.
        self.value.iter_mut().for_each(|b| *b = 0);
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SecretInfo {
    pub name: String,
    pub bytes: u64,
    /// RFC 3339, UTC.
    pub updated: String,
}

fn dir(state: &Path) -> PathBuf {
    state.join("secrets")
}

/// The secrets a server's jobs use: one shelf per namespace, so that a key reaches the
/// secrets of its own namespaces only (`<state>/namespace-secrets/<NS>/`).
const BY_NAMESPACE: &str = "namespace-secrets";

/// Where secrets are kept: this machine's (`sealvol secret set`), or, on a server, one
/// namespace's (`sealvol --remote URL secret set NAME --namespace NS`).
#[derive(Debug, Clone)]
pub struct Shelf {
    dir: PathBuf,
    namespace: Option<Name>,
}

fn parse_name(name: &str) -> Result<Name> {
    Name::parse("secret name", name)
}

impl Shelf {
    pub fn machine(state: &Path) -> Shelf {
        Shelf {
            dir: dir(state),
            namespace: None,
        }
    }

    pub fn namespace(state: &Path, ns: &Name) -> Shelf {
        Shelf {
            dir: state.join(BY_NAMESPACE).join(ns.as_str()),
            namespace: Some(ns.clone()),
        }
    }

    /// The namespaces that have a shelf on a server.
    pub fn namespaces(state: &Path) -> Result<Vec<Name>> {
        let d = state.join(BY_NAMESPACE);
        let rd = match fs::read_dir(&d) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("cannot list", &d, e)),
        };
        let mut out: Vec<Name> = rd
            .flatten()
            .filter_map(|e| parse_name(&e.file_name().to_string_lossy()).ok())
            .collect();
        out.sort();
        Ok(out)
    }

    /// How a person stores `name` on this shelf.
    fn how_to_set(&self, name: &Name) -> String {
        match &self.namespace {
            None => format!("store it with: sealvol secret set {name} < FILE"),
            Some(ns) => format!(
                "store it with: sealvol --remote URL secret set {name} --namespace {ns} < FILE"
            ),
        }
    }

    fn missing(&self, name: &Name) -> Error {
        let whose = match &self.namespace {
            None => String::new(),
            Some(ns) => format!(" in namespace {ns}"),
        };
        Error::not_found(format!("no secret named {name}{whose}")).hint(self.how_to_set(name))
    }

    /// Stores a value (one trailing newline, as `echo` adds, is dropped). Replacing an
    /// existing secret is atomic: readers see the old value or the new, never a mix.
    pub fn set(&self, name: &str, value: &[u8]) -> Result<()> {
        let name = parse_name(name)?;
        let value = value
            .strip_suffix(b"\r\n")
            .or_else(|| value.strip_suffix(b"\n"))
            .unwrap_or(value);
        if value.is_empty() {
            return Err(Error::invalid(format!("secret {name}: the value is empty"))
                .hint("pipe the value in: printf %s \"$TOKEN\" | sealvol secret set NAME"));
        }
        sealvol_core::private::dir(&self.dir)?;
        let d = &self.dir;
        let tmp = d.join(format!(
            ".{name}.{}",
            sealvol_core::store::unique_temp_name()
        ));
        let result = (|| -> Result<()> {
            let mut f = sealvol_core::private::create_new()
                .open(&tmp)
                .ctx("cannot write", &tmp)?;
            f.write_all(value).ctx("cannot write", &tmp)?;
            f.sync_all().ctx("cannot write", &tmp)?;
            fs::rename(&tmp, d.join(name.as_str())).ctx("cannot store secret", d)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    pub fn get(&self, name: &str) -> Result<Secret> {
        let name = parse_name(name)?;
        let p = self.dir.join(name.as_str());
        match fs::read(&p) {
            Ok(value) => Ok(Secret { name, value }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(self.missing(&name)),
            Err(e) => Err(Error::io("cannot read secret", &p, e)),
        }
    }

    /// Names, sizes and when each was set; never a value.
    pub fn list(&self) -> Result<Vec<SecretInfo>> {
        let d = &self.dir;
        let rd = match fs::read_dir(d) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io("cannot list", d, e)),
        };
        let mut out = Vec::new();
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || parse_name(&name).is_err() {
                continue;
            }
            let Ok(m) = e.metadata() else { continue };
            if !m.is_file() {
                continue;
            }
            let updated = m
                .modified()
                .map(|t| humantime::format_rfc3339_millis(t).to_string())
                .unwrap_or_default();
            out.push(SecretInfo {
                name,
                bytes: m.len(),
                updated,
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    pub fn remove(&self, name: &str) -> Result<()> {
        let name = parse_name(name)?;
        let p = self.dir.join(name.as_str());
        match fs::remove_file(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::new(
                ErrorKind::NotFound,
                self.missing(&name).message().to_string(),
            )
            .hint("`sealvol secret ls` lists them")),
            Err(e) => Err(Error::io("cannot remove secret", &p, e)),
        }
    }
}

/// Stores a secret of this machine (`Shelf::set`).
pub fn set(state: &Path, name: &str, value: &[u8]) -> Result<()> {
    Shelf::machine(state).set(name, value)
}

pub fn get(state: &Path, name: &str) -> Result<Secret> {
    Shelf::machine(state).get(name)
}

pub fn list(state: &Path) -> Result<Vec<SecretInfo>> {
    Shelf::machine(state).list()
}

pub fn remove(state: &Path, name: &str) -> Result<()> {
    Shelf::machine(state).remove(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn set_get_list_remove_and_never_show_the_value() {
        let d = tempfile::tempdir().unwrap();
        set(d.path(), "hf-token", b"hf_s3cr3tvalue\n").unwrap();
        let s = get(d.path(), "hf-token").unwrap();
        assert_eq!(s.expose(), b"hf_s3cr3tvalue");
        assert_eq!(format!("{s} {s:?}"), "<secret hf-token> <secret hf-token>");
        let l = list(d.path()).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!((l[0].name.as_str(), l[0].bytes), ("hf-token", 14));
        assert!(!format!("{l:?}").contains("s3cr3t"));
        let m = fs::metadata(dir(d.path()).join("hf-token")).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(dir(d.path())).unwrap().mode() & 0o777, 0o700);
        set(d.path(), "hf-token", b"second").unwrap();
        assert_eq!(get(d.path(), "hf-token").unwrap().expose(), b"second");
        remove(d.path(), "hf-token").unwrap();
        assert!(list(d.path()).unwrap().is_empty());
        assert_eq!(
            remove(d.path(), "hf-token").unwrap_err().kind(),
            ErrorKind::NotFound
        );
    }

    #[test]
    fn bad_names_and_empty_values_are_refused() {
        let d = tempfile::tempdir().unwrap();
        for name in [
            "",
            "../x",
            "a/b",
            "UPPER",
            ".hidden",
            "x".repeat(64).as_str(),
        ] {
            assert_eq!(
                set(d.path(), name, b"v").unwrap_err().kind(),
                ErrorKind::Invalid,
                "{name:?}"
            );
        }
        assert_eq!(
            set(d.path(), "ok", b"\n").unwrap_err().kind(),
            ErrorKind::Invalid
        );
        assert!(!dir(d.path()).join("ok").exists());
        let e = get(d.path(), "missing").unwrap_err();
        assert!(e.hint_text().unwrap().contains("secret set missing"));
    }
}
