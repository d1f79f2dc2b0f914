//! Where a push goes, as a registry names it: `docker://HOST[:PORT]/REPO[:TAG]`, read
//! strictly (the distribution spec's repository names and tags), never reinterpreted.

use sealvol_core::{Error, Result};

/// A registry destination, `docker://HOST[:PORT]/REPO[:TAG]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub host: String,
    pub repo: String,
    pub tag: Option<String>,
}

impl Destination {
    pub fn parse(s: &str) -> Result<Destination> {
        let bad = |why: &str| {
            Error::usage(format!("{s:.200}: {why}"))
                .hint("give docker://HOST[:PORT]/REPO[:TAG], e.g. docker://registry.example/models/qwen3-8b:prod")
        };
        let rest = s
            .strip_prefix("docker://")
            .ok_or_else(|| bad("not docker://"))?;
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no repository after the host"))?;
        let host_ok = !host.is_empty()
            && host.len() <= 255
            && host.bytes().all(|b| {
                b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
            });
        if !host_ok {
            return Err(bad("not a host name"));
        }
        let (repo, tag) = match path.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, Some(t)),
            _ => (path, None),
        };
        if !repository_name_ok(repo) {
            return Err(bad(
                "not a repository name: lowercase path components of a-z 0-9 . _ -",
            ));
        }
        if tag.is_some_and(|t| !sealvol_source::url::registry_tag_ok(t)) {
            return Err(bad("not a tag: 1-128 of A-Z a-z 0-9 . _ -"));
        }
        Ok(Destination {
            host: host.to_string(),
            repo: repo.to_string(),
            tag: tag.map(str::to_string),
        })
    }
}

/// A registry's repository name (lowercase path components of `a-z 0-9 . _ -`).
pub use sealvol_source::url::registry_repository_ok as repository_name_ok;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_is_read_strictly() {
        let d = Destination::parse("docker://localhost:5000/models/qwen:prod").unwrap();
        assert_eq!(
            (d.host.as_str(), d.repo.as_str(), d.tag.as_deref()),
            ("localhost:5000", "models/qwen", Some("prod"))
        );
        let d = Destination::parse("docker://r.example/m").unwrap();
        assert_eq!(d.tag, None);
        for bad in [
            "docker://",
            "docker://host",
            "docker://host/Upper",
            "docker://host/a//b",
            "docker://host/a:bad tag",
            "docker://ho st/a",
            "oci:x",
            "docker://host/../x",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
    }
}
