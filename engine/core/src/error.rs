//! One error type for the engine: a kind (what went wrong, for exit codes and for the
//! console's wording), a message that names the thing concerned, and a hint that tells
//! the person reading it what to do next.

use std::fmt;
use std::io;
use std::path::Path;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ErrorKind {
    /// The command line itself is wrong (no command where one is needed). Exit code 2,
    /// as for clap's own usage errors; everything else exits 1.
    Usage,
    /// The input was refused: a malformed ref, name, path, size, address or setting.
    Invalid,
    /// A volume, version, tag or file that does not exist.
    NotFound,
    /// A digest prefix that matches more than one version.
    Ambiguous,
    /// Something already exists where the operation needs nothing (a non-empty target).
    Conflict,
    /// A compare-and-swap lost against a concurrent writer.
    Race,
    /// Data in the repository fails its checks.
    Corrupt,
    /// The repository uses a format this build does not know, or a server or client a
    /// protocol version it does not speak (`sealvol_wire::protocol`).
    Format,
    /// The input changed while it was being read.
    Changed,
    /// A source refused our credentials (HTTP 401 or 403).
    Denied,
    /// The trust policy refuses a version: no valid signature by a key it trusts for
    /// the version's namespace (sealvol-sign's `Policy`).
    Untrusted,
    /// A source failed in a way that may pass: a timeout, a reset connection, a 5xx.
    /// Retried with backoff before it is reported.
    Unavailable,
    /// Someone cancelled the work.
    Cancelled,
    /// A garbage collection removed data the operation was building on (a push that
    /// reused a chunk list or pack of a deleted version): running it again writes the
    /// data anew. Pushes and syncs do that themselves.
    Collected,
    /// A shared server already has as much of this caller's work as it takes (its
    /// jobs queued, its connections): the same request succeeds once some has finished.
    Busy,
    /// A namespace's quota would be passed (`usage.rs`): nothing was stored.
    Quota,
    /// Any other I/O failure.
    Io,
}

#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    hint: Option<String>,
    source: Option<io::Error>,
    reason: Option<Reason>,
}

/// Which of a kind's cases an error is, where a caller must tell them apart (never by
/// the message's words). Crosses processes and the wire with the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// `Corrupt`: a chunk list fails its file's proof (it names other bytes than the
    /// file's), rather than a chunk copy its hash (`proof::unproven`).
    UnprovenList,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            hint: None,
            source: None,
            reason: None,
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Usage, message)
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// Work someone stopped (a cancelled job, an agent shutting down).
    pub fn cancelled() -> Self {
        Self::new(ErrorKind::Cancelled, "cancelled").hint("`sealvol jobs retry ID` starts it again")
    }

    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Corrupt, message)
            .hint("run `sealvol volume verify` to see everything that is damaged")
    }

    /// An I/O error with what we were doing and to which path.
    pub fn io(what: &str, path: &Path, source: io::Error) -> Self {
        let message = format!("{what} {}", shown(path));
        let hint = match source.kind() {
            io::ErrorKind::PermissionDenied => {
                Some("check the permissions of that path, or run as a user who can read it")
            }
            io::ErrorKind::StorageFull => Some("free some disk space and run the command again"),
            _ => None,
        };
        Error {
            kind: ErrorKind::Io,
            message,
            hint: hint.map(str::to_string),
            source: Some(source),
            reason: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// Marks which case of its kind the error is.
    pub fn because(mut self, reason: Reason) -> Self {
        self.reason = Some(reason);
        self
    }

    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub fn reason(&self) -> Option<Reason> {
        self.reason
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn hint_text(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        self.source.as_ref().map(io::Error::kind)
    }
}

/// An error as it crosses a process boundary (the agent's socket): the text of the
/// I/O cause is folded into the message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WireError {
    pub kind: ErrorKind,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// A reason this build does not know (from a newer peer) is read as none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "known_reason"
    )]
    pub reason: Option<Reason>,
}

fn known_reason<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Reason>, D::Error> {
    use serde::Deserialize;
    let text = Option::<String>::deserialize(d)?;
    Ok(text.and_then(|t| {
        Reason::deserialize(serde::de::value::StrDeserializer::<'_, D::Error>::new(&t)).ok()
    }))
}

impl From<&Error> for WireError {
    fn from(e: &Error) -> Self {
        WireError {
            kind: e.kind,
            message: e.to_string(),
            hint: e.hint.clone(),
            reason: e.reason,
        }
    }
}

impl From<WireError> for Error {
    fn from(w: WireError) -> Self {
        Error {
            kind: w.kind,
            message: w.message,
            hint: w.hint,
            source: None,
            reason: w.reason,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(source) = &self.source {
            write!(f, ": {source}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

/// Adds "while doing X to path" to an `io::Result`.
pub trait IoContext<T> {
    fn ctx(self, what: &str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, what: &str, path: &Path) -> Result<T> {
        self.map_err(|e| Error::io(what, path, e))
    }
}

/// A path of this machine as a person reads it: as is when it is UTF-8, else with each
/// byte that is not as a C escape (`bad\xFFname.bin`), so that two names that differ
/// only there stay apart and the one meant can be found (`U+FFFD` would hide which).
pub fn shown(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_is_told_by_itself_and_crosses_the_wire_never_by_words() {
        let e = crate::proof::unproven("chunk list files/ab", "block 3");
        assert!(crate::proof::is_unproven(&e));
        // The same words without the reason are another corruption.
        let words = Error::corrupt(e.message().to_string());
        assert!(!crate::proof::is_unproven(&words));
        let sent = serde_json::to_string(&WireError::from(&e)).unwrap();
        let back: Error = serde_json::from_str::<WireError>(&sent).unwrap().into();
        assert!(crate::proof::is_unproven(&back), "{sent}");
        // A reason a newer peer knows and this build does not: read as none.
        let newer = r#"{"kind":"Corrupt","message":"m","reason":"something-new"}"#;
        let w: WireError = serde_json::from_str(newer).unwrap();
        assert_eq!((w.kind, w.reason), (ErrorKind::Corrupt, None));
    }
}
