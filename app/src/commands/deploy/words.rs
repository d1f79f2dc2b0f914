//! How the deploy commands name a file's mounts in what they print: what a mount
//! follows, and a ref that does not resolve at its place in the file.

use std::path::Path;

use sealvol_core::Error;
use sealvol_deploy::{Follows, MountEntry};

pub(super) fn follows_label(f: &Follows) -> String {
    match f {
        Follows::Digest => "pinned".into(),
        Follows::Prefix => "digest prefix".into(),
        Follows::Tag(t) => format!("tag {t}"),
        Follows::Latest => "newest version".into(),
    }
}

/// A mount's ref that does not resolve, named by its place in the file.
pub(super) fn ref_error(path: &Path, m: &MountEntry, e: &Error, hint: &str) -> Error {
    Error::new(
        e.kind(),
        format!(
            "{}:{}:{}: {}: {}",
            path.display(),
            m.at.line,
            m.at.col,
            m.reference,
            e.message()
        ),
    )
    .hint(hint.to_string())
}
