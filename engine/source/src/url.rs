//! Source addresses: `hf://`, `s3://`, `r2://`, `cw://`, `gs://`, `az://`, `oci://`,
//! `oci:` (an OCI image layout), `file://` and plain paths. Parsed strictly, so a typo is an error that shows the right form rather
//! than a sync of the wrong bucket.

use std::fmt;
use std::path::PathBuf;

use sealvol_core::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HfKind {
    Model,
    Dataset,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceUrl {
    /// An OCI registry's image (a ModelPack artifact): `oci://HOST[:PORT]/REPO[:TAG |
    /// @sha256:HEX]`; a tag is read once, as the digest it names then.
    Oci {
        host: String,
        repo: String,
        /// A tag, or `sha256:HEX`.
        reference: String,
    },
    HuggingFace {
        kind: HfKind,
        /// `org/name`.
        repo: String,
        /// A branch, tag or commit; `main` when not given.
        revision: String,
    },
    S3 {
        bucket: String,
        prefix: String,
    },
    R2 {
        account: String,
        bucket: String,
        prefix: String,
    },
    CoreWeave {
        bucket: String,
        prefix: String,
    },
    Gcs {
        bucket: String,
        prefix: String,
    },
    Azure {
        account: String,
        container: String,
        prefix: String,
    },
    /// An OCI image layout on this machine (`oci:DIR[:NAME]`, as skopeo writes it): the
    /// image `NAME` names in its index, or its only one.
    OciLayout {
        dir: PathBuf,
        name: Option<String>,
    },
    Local(PathBuf),
}

const FORMS: &str = "hf://ORG/NAME[@REV], hf://datasets/ORG/NAME[@REV], s3://BUCKET/PREFIX, \
r2://ACCOUNT/BUCKET/PREFIX, cw://BUCKET/PREFIX, gs://BUCKET/PREFIX, \
az://ACCOUNT/CONTAINER/PREFIX, oci://HOST/REPO[:TAG], oci:DIR[:NAME], file:///PATH or a path";

fn bad(s: &str, why: impl fmt::Display) -> Error {
    Error::invalid(format!("source {s:?}: {why}")).hint(format!("sources look like {FORMS}"))
}

/// A registry's repository name, as the distribution spec has it: lowercase path
/// components of `a-z 0-9 . _ -`, each starting with a letter or digit.
pub fn registry_repository_ok(repo: &str) -> bool {
    !repo.is_empty()
        && repo.len() <= 255
        && repo.split('/').all(|c| {
            !c.is_empty()
                && c.as_bytes()[0].is_ascii_alphanumeric()
                && c.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
        })
}

/// A registry's tag, as the distribution spec has it: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn registry_tag_ok(tag: &str) -> bool {
    !tag.is_empty()
        && tag.len() <= 128
        && (tag.as_bytes()[0].is_ascii_alphanumeric() || tag.starts_with('_'))
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// `DIR[:NAME]` of an `oci:` layout address: the image name is what follows the last
/// colon, unless that holds a slash (then it is all the folder), as skopeo reads it.
pub fn oci_layout(rest: &str) -> std::result::Result<(PathBuf, Option<String>), String> {
    let (dir, name) = match rest.rsplit_once(':') {
        Some((d, n)) if !d.is_empty() && !n.contains('/') => (d, Some(n)),
        _ => (rest, None),
    };
    if dir.is_empty() || dir.starts_with(':') {
        return Err("no folder after oci: (give oci:DIR or oci:DIR:NAME)".into());
    }
    if dir.contains('\0') {
        return Err("the folder holds a NUL byte".into());
    }
    if let Some(n) = name {
        let ok = !n.is_empty()
            && n.len() <= 128
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !ok {
            return Err(format!(
                "{n:.80} is not an image name: 1-128 of A-Z a-z 0-9 . _ -"
            ));
        }
    }
    Ok((dir.into(), name.map(str::to_string)))
}

/// The scheme of `s` if it starts like `name:` (letters, digits, `+ - .`, from a
/// letter): what an address starts with. A local folder whose name holds a colon is
/// written `./name:…`.
pub fn scheme(s: &str) -> Option<&str> {
    let (head, _) = s.split_once(':')?;
    let mut chars = head.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(head)
}

fn name_ok(s: &str, min: usize, max: usize, extra: &[char]) -> bool {
    (min..=max).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || extra.contains(&c))
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.'])
}

fn hf_part_ok(s: &str) -> bool {
    (1..=96).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.'])
        && !s.contains("..")
        && !s.contains("--")
}

/// A prefix inside a bucket: no NUL, no `..` component, and always ending in `/` (or
/// empty) so that `s3://b/ckpt` never picks up `ckpt-old/`.
fn prefix(s: &str, rest: &str) -> Result<String> {
    if rest.contains('\0') {
        return Err(bad(s, "the prefix holds a NUL byte"));
    }
    if rest.split('/').any(|p| p == "..") {
        return Err(bad(s, "the prefix has a .. component"));
    }
    let p = rest.trim_start_matches('/');
    Ok(if p.is_empty() || p.ends_with('/') {
        p.to_string()
    } else {
        format!("{p}/")
    })
}

impl SourceUrl {
    pub fn parse(s: &str) -> Result<SourceUrl> {
        let Some((scheme, rest)) = s.split_once("://") else {
            if s.is_empty() {
                return Err(bad(s, "is empty"));
            }
            // skopeo's spelling of a layout; `oci://` (a registry) has its `//`.
            if let Some(rest) = s.strip_prefix("oci:") {
                let (dir, name) = oci_layout(rest).map_err(|why| bad(s, why))?;
                return Ok(SourceUrl::OciLayout { dir, name });
            }
            // `s3:/ckpts/x` is an address with a slash missing, never a local folder.
            if let Some(scheme) = scheme(s) {
                let rest = s[scheme.len() + 1..].trim_start_matches('/');
                return Err(Error::invalid(format!(
                    "source {s:?} looks like an address missing a slash: {scheme}://{rest}"
                ))
                .hint(format!(
                    "write {scheme}://{rest}, or ./{s} for a local folder of that name"
                )));
            }
            return Ok(SourceUrl::Local(PathBuf::from(s)));
        };
        let split1 = |r: &str| -> (String, String) {
            match r.split_once('/') {
                Some((a, b)) => (a.to_string(), b.to_string()),
                None => (r.to_string(), String::new()),
            }
        };
        match scheme {
            "hf" => {
                let (kind, rest) = match rest.split_once('/') {
                    Some(("datasets", r)) => (HfKind::Dataset, r),
                    Some(("models", r)) => (HfKind::Model, r),
                    _ => (HfKind::Model, rest),
                };
                let (repo, revision) = match rest.split_once('@') {
                    Some((r, rev)) => (r, rev),
                    None => (rest, "main"),
                };
                let parts: Vec<&str> = repo.split('/').collect();
                if parts.len() != 2 || !parts.iter().all(|p| hf_part_ok(p)) {
                    return Err(bad(s, "a Hugging Face repository is ORG/NAME"));
                }
                let rev_ok = !revision.is_empty()
                    && revision.len() <= 255
                    && revision
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
                    && !revision.starts_with('/')
                    && !revision.split('/').any(|p| p.is_empty() || p == "..");
                if !rev_ok {
                    return Err(bad(s, format!("{revision:?} is not a revision")));
                }
                Ok(SourceUrl::HuggingFace {
                    kind,
                    repo: repo.to_string(),
                    revision: revision.to_string(),
                })
            }
            "s3" | "cw" | "gs" => {
                let (bucket, rest) = split1(rest);
                if !name_ok(&bucket, 3, 63, &['-', '.', '_'])
                    || (scheme != "gs" && bucket.contains('_'))
                {
                    return Err(bad(s, format!("{bucket:?} is not a bucket name")));
                }
                let prefix = prefix(s, &rest)?;
                Ok(match scheme {
                    "s3" => SourceUrl::S3 { bucket, prefix },
                    "cw" => SourceUrl::CoreWeave { bucket, prefix },
                    _ => SourceUrl::Gcs { bucket, prefix },
                })
            }
            "r2" | "az" => {
                let (account, rest) = split1(rest);
                let (bucket, rest) = split1(&rest);
                let account_ok = if scheme == "az" {
                    name_ok(&account, 3, 24, &[])
                } else {
                    name_ok(&account, 1, 64, &[])
                };
                if !account_ok {
                    return Err(bad(s, format!("{account:?} is not an account name")));
                }
                if !name_ok(&bucket, 3, 63, &['-']) {
                    return Err(bad(
                        s,
                        format!(
                            "{bucket:?} is not a {} name",
                            if scheme == "az" {
                                "container"
                            } else {
                                "bucket"
                            }
                        ),
                    ));
                }
                let prefix = prefix(s, &rest)?;
                Ok(if scheme == "az" {
                    SourceUrl::Azure {
                        account,
                        container: bucket,
                        prefix,
                    }
                } else {
                    SourceUrl::R2 {
                        account,
                        bucket,
                        prefix,
                    }
                })
            }
            "oci" => {
                let (host, path) = rest.split_once('/').ok_or_else(|| {
                    bad(s, "an OCI source is oci://HOST/REPO[:TAG | @sha256:DIGEST]")
                })?;
                let host_ok = !host.is_empty()
                    && host.len() <= 255
                    && host
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':'));
                if !host_ok {
                    return Err(bad(s, format!("{host:?} is not a registry host")));
                }
                let (repo, reference) = match path.split_once('@') {
                    Some((r, d)) => (r, d.to_string()),
                    None => match path.rsplit_once(':') {
                        Some((r, t)) if !t.contains('/') => (r, t.to_string()),
                        _ => (path, "latest".to_string()),
                    },
                };
                let repo_ok = registry_repository_ok(repo);
                if !repo_ok {
                    return Err(bad(
                        s,
                        format!("{repo:?} is not a repository name: lowercase path components"),
                    ));
                }
                let digest_ok = reference.strip_prefix("sha256:").is_some_and(|h| {
                    h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                });
                let tag_ok = registry_tag_ok(&reference);
                if !(digest_ok || tag_ok) {
                    return Err(bad(
                        s,
                        format!("{reference:?} is not a tag or a sha256 digest"),
                    ));
                }
                Ok(SourceUrl::Oci {
                    host: host.to_string(),
                    repo: repo.to_string(),
                    reference,
                })
            }
            "file" => {
                if !rest.starts_with('/') {
                    return Err(bad(
                        s,
                        "a file:// source needs an absolute path: file:///data/ckpt",
                    ));
                }
                Ok(SourceUrl::Local(PathBuf::from(rest)))
            }
            other => Err(bad(s, format!("unknown scheme {other}://"))),
        }
    }
}

/// The canonical form, as recorded in a version's provenance.
impl fmt::Display for SourceUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceUrl::HuggingFace {
                kind,
                repo,
                revision,
            } => {
                let k = if *kind == HfKind::Dataset {
                    "datasets/"
                } else {
                    ""
                };
                write!(f, "hf://{k}{repo}@{revision}")
            }
            SourceUrl::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            SourceUrl::CoreWeave { bucket, prefix } => write!(f, "cw://{bucket}/{prefix}"),
            SourceUrl::Gcs { bucket, prefix } => write!(f, "gs://{bucket}/{prefix}"),
            SourceUrl::R2 {
                account,
                bucket,
                prefix,
            } => write!(f, "r2://{account}/{bucket}/{prefix}"),
            SourceUrl::Azure {
                account,
                container,
                prefix,
            } => write!(f, "az://{account}/{container}/{prefix}"),
            SourceUrl::Oci {
                host,
                repo,
                reference,
            } => match reference.starts_with("sha256:") {
                true => write!(f, "oci://{host}/{repo}@{reference}"),
                false => write!(f, "oci://{host}/{repo}:{reference}"),
            },
            SourceUrl::OciLayout { dir, name } => match name {
                Some(n) => write!(f, "oci:{}:{n}", dir.display()),
                None => write!(f, "oci:{}", dir.display()),
            },
            SourceUrl::Local(p) => write!(f, "file://{}", p.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> SourceUrl {
        SourceUrl::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn every_scheme_parses_and_prints_canonically() {
        let cases = [
            ("hf://Qwen/Qwen3-8B", "hf://Qwen/Qwen3-8B@main"),
            ("hf://Qwen/Qwen3-8B@v1.0", "hf://Qwen/Qwen3-8B@v1.0"),
            (
                "hf://models/Qwen/Qwen3-8B@refs/pr/1",
                "hf://Qwen/Qwen3-8B@refs/pr/1",
            ),
            (
                "hf://datasets/org/evals@9f3c1a2",
                "hf://datasets/org/evals@9f3c1a2",
            ),
            ("s3://bucket/ckpt", "s3://bucket/ckpt/"),
            ("s3://bucket", "s3://bucket/"),
            ("s3://my.bucket/a/b/", "s3://my.bucket/a/b/"),
            ("cw://bucket-1/x", "cw://bucket-1/x/"),
            ("gs://my_bucket/p", "gs://my_bucket/p/"),
            ("r2://0123abcd/bucket/p", "r2://0123abcd/bucket/p/"),
            (
                "az://devstoreaccount1/models/qwen",
                "az://devstoreaccount1/models/qwen/",
            ),
            ("file:///data/ckpt", "file:///data/ckpt"),
            ("oci:/data/layout", "oci:/data/layout"),
            ("oci:/data/layout:v1.0", "oci:/data/layout:v1.0"),
            ("oci:rel/lay:out/x", "oci:rel/lay:out/x"),
        ];
        for (input, canonical) in cases {
            assert_eq!(ok(input).to_string(), canonical, "{input}");
            assert_eq!(
                ok(canonical).to_string(),
                canonical,
                "{canonical} round trip"
            );
        }
        assert_eq!(ok("./ckpt"), SourceUrl::Local("./ckpt".into()));
        assert_eq!(
            ok("oci:out:v2"),
            SourceUrl::OciLayout {
                dir: "out".into(),
                name: Some("v2".into())
            }
        );
    }

    #[test]
    fn malformed_sources_get_one_line_with_the_forms() {
        for s in [
            "",
            "ftp://x/y",
            "hf://just-a-name",
            "hf://a/b/c",
            "hf://../x",
            "hf://org/name@",
            "hf://org/name@../main",
            "s3://B/x",
            "s3://ab/x",
            "s3://bucket/../x",
            "s3://bad_bucket/x",
            "r2:///bucket/x",
            "az://account/Container/x",
            "az://a/container",
            "file://relative/path",
            "s3://bucket/a\0b",
            "oci:",
            "oci::v1",
            "oci:dir:bad name",
            "oci:dir:",
        ] {
            let e = SourceUrl::parse(s).unwrap_err();
            assert!(!e.to_string().contains('\n'), "{s:?}: {e}");
            assert!(
                e.hint_text().unwrap().contains("s3://BUCKET/PREFIX"),
                "{s:?}"
            );
        }
    }

    /// A slash short of an address is said so, never read as a local folder named `s3:`.
    #[test]
    fn an_address_missing_a_slash_is_not_a_local_folder() {
        for (s, fixed) in [
            ("s3:/ckpts/run-7/step-1", "s3://ckpts/run-7/step-1"),
            ("s3:ckpts/x", "s3://ckpts/x"),
            ("hf:/Qwen/Qwen3-8B", "hf://Qwen/Qwen3-8B"),
            ("gs:/bucket/p", "gs://bucket/p"),
        ] {
            let e = SourceUrl::parse(s).unwrap_err();
            assert_eq!(
                e.message(),
                format!("source {s:?} looks like an address missing a slash: {fixed}")
            );
            assert!(e.hint_text().unwrap().contains(&format!("./{s}")), "{e:?}");
        }
        assert_eq!(ok("./s3:/x"), SourceUrl::Local("./s3:/x".into()));
        assert_eq!(ok("/data/ckpt"), SourceUrl::Local("/data/ckpt".into()));
    }
}
