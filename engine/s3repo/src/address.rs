//! Where a repository lives, as the user writes it: a directory, or a bucket prefix
//! (`s3://BUCKET/PREFIX`, `r2://ACCOUNT/BUCKET/PREFIX`, `cw://BUCKET/PREFIX`). Parsed
//! strictly: an address with a scheme is a bucket or an error, never a local
//! directory named `s3:`.

use std::fmt;
use std::path::{Path, PathBuf};

use sealvol_core::error::{Error, Result};
use sealvol_source::SourceUrl;
use sealvol_source::url::scheme;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Local(PathBuf),
    /// An `S3`, `R2` or `CoreWeave` address.
    Bucket(SourceUrl),
}

const FORMS: &str = "a repository is a directory, s3://BUCKET/PREFIX, \
r2://ACCOUNT/BUCKET/PREFIX or cw://BUCKET/PREFIX (GCS through its S3 interoperability: \
s3:// with AWS_ENDPOINT_URL=https://storage.googleapis.com)";

fn bad(s: &str, why: impl fmt::Display) -> Error {
    Error::invalid(format!("repository {s:?}: {why}")).hint(FORMS)
}

impl Address {
    pub fn parse(s: &str) -> Result<Address> {
        if s.is_empty() {
            return Err(bad(s, "is empty"));
        }
        let Some(scheme) = scheme(s) else {
            return Ok(Address::Local(PathBuf::from(s)));
        };
        if !s[scheme.len() + 1..].starts_with("//") {
            return Err(bad(s, format!("{scheme}: is not followed by //"))
                .hint(format!("{FORMS}; write ./{s} for a directory of that name")));
        }
        match scheme {
            "s3" | "r2" | "cw" => {
                let url = SourceUrl::parse(s).map_err(|e| {
                    let why = e.message().split_once(": ").map_or(e.message(), |(_, w)| w);
                    bad(s, why)
                })?;
                Ok(Address::Bucket(url))
            }
            "file" => match SourceUrl::parse(s) {
                Ok(SourceUrl::Local(p)) => Ok(Address::Local(p)),
                _ => Err(bad(
                    s,
                    "a file:// address needs an absolute path: file:///srv/repo",
                )),
            },
            "gs" | "az" | "hf" => Err(bad(
                s,
                format!("{scheme}:// is a sync source, not a place a repository can live"),
            )),
            other => Err(bad(s, format!("unknown scheme {other}://"))),
        }
    }

    /// The directory, for a local repository.
    pub fn local(&self) -> Option<&Path> {
        match self {
            Address::Local(p) => Some(p),
            Address::Bucket(_) => None,
        }
    }

    /// Whether two addresses name one repository: the same bucket prefix, or
    /// directories that are the same once resolved (a mirror into itself would copy
    /// nothing and a failover to itself would read the same failing store).
    pub fn is_same_repository(&self, other: &Address) -> bool {
        match (self, other) {
            (Address::Local(x), Address::Local(y)) => {
                let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
                real(x) == real(y)
            }
            _ => self == other,
        }
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Local(p) => write!(f, "{}", p.display()),
            Address::Bucket(u) => write!(f, "{u}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_directories_and_refusals() {
        let b = |s: &str| match Address::parse(s).unwrap() {
            Address::Bucket(u) => u.to_string(),
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(b("s3://models/team-a"), "s3://models/team-a/");
        assert_eq!(b("s3://models"), "s3://models/");
        assert_eq!(b("r2://acct/models/p/"), "r2://acct/models/p/");
        assert_eq!(b("cw://models/x"), "cw://models/x/");
        let l = |s: &str| Address::parse(s).unwrap().local().unwrap().to_path_buf();
        assert_eq!(l("/srv/repo"), PathBuf::from("/srv/repo"));
        assert_eq!(l("repo"), PathBuf::from("repo"));
        assert_eq!(l("./s3:bucket"), PathBuf::from("./s3:bucket"));
        assert_eq!(l("file:///srv/repo"), PathBuf::from("/srv/repo"));
        for (s, says) in [
            ("", "is empty"),
            ("ftp://host/x", "unknown scheme ftp://"),
            ("S3X://b/p", "unknown scheme"),
            ("s3:bucket/prefix", "not followed by //"),
            ("vol:weights/x", "not followed by //"),
            ("gs://bucket/p", "sync source"),
            ("hf://org/name", "sync source"),
            ("s3://B_d/p", "is not a bucket name"),
            ("s3://ok-bucket/../x", ".. component"),
            ("r2://acct", "is not a bucket name"),
            ("file://relative", "absolute path"),
        ] {
            let e = Address::parse(s).unwrap_err();
            assert!(e.message().contains(says), "{s}: {e}");
            assert!(e.message().starts_with("repository"), "{s}: {e}");
            assert!(e.hint_text().is_some(), "{s}: {e}");
        }
    }
}
