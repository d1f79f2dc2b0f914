//! Names, digests and refs: `vol:NS/NAME@b3:<64 hex>` (pinned) and `vol:NS/NAME:TAG`.
//!
//! Parsing is strict because names become paths in the repository: a name that parses
//! can never escape its directory.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

const NAME_RULE: &str =
    "names are 1-63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit";

/// Shortest digest prefix a person may type.
pub const MIN_PREFIX: usize = 8;

/// A namespace, volume or tag name: `[a-z0-9][a-z0-9._-]{0,62}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(String);

impl Name {
    pub fn parse(what: &str, s: &str) -> Result<Name> {
        let bad = |why: &str| {
            Error::invalid(format!("invalid {what} {s:?}: {why}")).hint(NAME_RULE.to_string())
        };
        if s.is_empty() {
            return Err(bad("it is empty"));
        }
        if s.len() > 63 {
            return Err(bad(&format!("it is {} characters long", s.chars().count())));
        }
        let first = s.as_bytes()[0];
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return Err(bad("it must start with a-z or 0-9"));
        }
        if let Some(c) = s.chars().find(|&c| {
            !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_' || c == '-')
        }) {
            return Err(bad(&format!("{c:?} is not allowed")));
        }
        if s.contains("..") {
            return Err(bad("'..' is not allowed"));
        }
        Ok(Name(s.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `NS/NAME`: a volume.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VolumeName {
    pub namespace: Name,
    pub name: Name,
}

impl VolumeName {
    pub fn parse(s: &str) -> Result<VolumeName> {
        let s = s.strip_prefix("vol:").unwrap_or(s);
        let Some((ns, name)) = s.split_once('/') else {
            return Err(
                Error::invalid(format!("invalid volume {s:?}: expected NAMESPACE/NAME"))
                    .hint("for example weights/qwen3-8b"),
            );
        };
        if name.contains('/') {
            return Err(Error::invalid(format!(
                "invalid volume {s:?}: only one '/' is allowed, between namespace and name"
            )));
        }
        Ok(VolumeName {
            namespace: Name::parse("namespace", ns)?,
            name: Name::parse("volume name", name)?,
        })
    }
}

impl fmt::Display for VolumeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A version digest: BLAKE3 of the canonical listing (see docs/FORMAT.md).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The first `n` hex digits, for screens and tables.
    pub fn short(&self, n: usize) -> String {
        let mut h = self.hex();
        h.truncate(n);
        h
    }

    /// Parses the full form `b3:<64 hex>` (the `b3:` may be left off).
    pub fn parse(s: &str) -> Result<Digest> {
        match DigestSpec::parse(s)? {
            DigestSpec::Full(d) => Ok(d),
            DigestSpec::Prefix(p) => Err(Error::invalid(format!(
                "digest b3:{p} is only a prefix; a full digest has 64 hex digits"
            ))),
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b3:{}", self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b3:{}", self.short(16))
    }
}

impl FromStr for Digest {
    type Err = Error;
    fn from_str(s: &str) -> Result<Digest> {
        Digest::parse(s)
    }
}

/// A digest as a person typed it: complete, or a prefix of 8+ hex digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestSpec {
    Full(Digest),
    Prefix(String),
}

impl DigestSpec {
    pub fn parse(s: &str) -> Result<DigestSpec> {
        let hex_part = s.strip_prefix("b3:").unwrap_or(s);
        let bad = |why: String| {
            Error::invalid(format!("invalid digest {s:?}: {why}"))
                .hint("a digest is b3: followed by 64 hex digits; 8 or more leading digits will do")
        };
        if let Some(c) = hex_part.chars().find(|c| !c.is_ascii_hexdigit()) {
            return Err(bad(format!("{c:?} is not a hex digit")));
        }
        if hex_part.len() < MIN_PREFIX {
            return Err(bad(format!(
                "{} hex digits is too short to be unambiguous",
                hex_part.len()
            )));
        }
        if hex_part.len() > 64 {
            return Err(bad(format!(
                "{} hex digits is more than 64",
                hex_part.len()
            )));
        }
        let lower = hex_part.to_ascii_lowercase();
        if lower.len() == 64 {
            let mut bytes = [0u8; 32];
            hex::decode_to_slice(&lower, &mut bytes).map_err(|e| bad(e.to_string()))?;
            Ok(DigestSpec::Full(Digest(bytes)))
        } else {
            Ok(DigestSpec::Prefix(lower))
        }
    }

    pub fn matches(&self, d: &Digest) -> bool {
        match self {
            DigestSpec::Full(full) => full == d,
            DigestSpec::Prefix(p) => d.hex().starts_with(p.as_str()),
        }
    }
}

/// What a ref points at inside a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Digest(DigestSpec),
    Tag(Name),
    /// A bare `NS/NAME`: the most recently sealed version.
    Latest,
}

/// A ref as typed: `[vol:]NS/NAME@b3:HEX`, `[vol:]NS/NAME:TAG` or `[vol:]NS/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub volume: VolumeName,
    pub target: Target,
}

impl Ref {
    pub fn parse(s: &str) -> Result<Ref> {
        if s.is_empty() {
            return Err(Error::invalid("empty ref").hint(REF_HINT));
        }
        if s.len() > 200 {
            return Err(
                Error::invalid(format!("invalid ref: it is {} characters long", s.len()))
                    .hint(REF_HINT),
            );
        }
        let body = s.strip_prefix("vol:").unwrap_or(s);
        let (vol, target) = if let Some((vol, digest)) = body.split_once('@') {
            (vol, Target::Digest(DigestSpec::parse(digest)?))
        } else if let Some((vol, tag)) = body.rsplit_once(':') {
            (vol, Target::Tag(Name::parse("tag", tag)?))
        } else {
            (body, Target::Latest)
        };
        let volume = VolumeName::parse(vol).map_err(|e| e.hint(REF_HINT))?;
        Ok(Ref { volume, target })
    }

    /// A ref typed where a volume is already known (its screens in the console, the
    /// second ref of a diff): `TAG`, `:TAG` or `@DIGEST` are in `base`; anything with
    /// a `/` is a whole ref.
    pub fn parse_in(s: &str, base: &VolumeName) -> Result<Ref> {
        let body = s.strip_prefix("vol:").unwrap_or(s);
        if body.contains('/') || body.is_empty() {
            return Ref::parse(s);
        }
        let target = match body.strip_prefix('@') {
            Some(digest) => Target::Digest(DigestSpec::parse(digest)?),
            None => Target::Tag(Name::parse("tag", body.strip_prefix(':').unwrap_or(body))?),
        };
        Ok(Ref {
            volume: base.clone(),
            target,
        })
    }

    pub fn pinned(volume: VolumeName, digest: Digest) -> Ref {
        Ref {
            volume,
            target: Target::Digest(DigestSpec::Full(digest)),
        }
    }
}

/// A digest prefix that names more than one version (`among`: where, e.g. " in the
/// trash").
pub(crate) fn ambiguous_prefix(
    spec: &DigestSpec,
    vol: &VolumeName,
    found: &[Digest],
    among: &str,
) -> Error {
    let typed = match spec {
        DigestSpec::Full(d) => d.hex(),
        DigestSpec::Prefix(p) => p.clone(),
    };
    let names: Vec<String> = found.iter().map(|d| d.short(16)).collect();
    Error::new(
        crate::error::ErrorKind::Ambiguous,
        format!(
            "digest prefix {typed} matches {} versions of {vol}{among}: {}",
            found.len(),
            names.join(", ")
        ),
    )
    .hint("type more hex digits")
}

const REF_HINT: &str =
    "a ref looks like vol:weights/qwen3-8b@b3:9f3c1a2b or vol:weights/qwen3-8b:prod";

impl fmt::Display for Ref {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vol:{}", self.volume)?;
        match &self.target {
            Target::Digest(DigestSpec::Full(d)) => write!(f, "@{d}"),
            Target::Digest(DigestSpec::Prefix(p)) => write!(f, "@b3:{p}"),
            Target::Tag(t) => write!(f, ":{t}"),
            Target::Latest => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pinned_and_tagged_refs() {
        let hex = "9f".repeat(32);
        let r = Ref::parse(&format!("vol:weights/qwen3-8b@b3:{hex}")).unwrap();
        assert_eq!(r.volume.to_string(), "weights/qwen3-8b");
        assert!(matches!(r.target, Target::Digest(DigestSpec::Full(_))));
        assert_eq!(r.to_string(), format!("vol:weights/qwen3-8b@b3:{hex}"));

        let r = Ref::parse("weights/qwen3-8b:prod").unwrap();
        assert_eq!(r.target, Target::Tag(Name::parse("tag", "prod").unwrap()));
        assert_eq!(r.to_string(), "vol:weights/qwen3-8b:prod");

        let r = Ref::parse("weights/qwen3-8b@9F3C1A2B").unwrap();
        assert_eq!(
            r.target,
            Target::Digest(DigestSpec::Prefix("9f3c1a2b".into()))
        );

        let r = Ref::parse("weights/qwen3-8b").unwrap();
        assert_eq!(r.target, Target::Latest);
    }

    #[test]
    fn rejects_bad_names_with_a_reason() {
        for bad in [
            "",
            "Weights/x",
            "weights/has space",
            "weights/..",
            "../etc/passwd",
            "weights/a/b",
            "weights",
            "weights/",
            "/x",
            "weights/x:",
            "weights/x:Prod",
            "weights/x@b3:12",
            "weights/x@b3:zzzzzzzzzz",
        ] {
            let e = Ref::parse(bad).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::Invalid, "{bad:?}");
            assert!(!e.message().is_empty());
        }
        let long = format!("weights/{}", "a".repeat(300));
        assert!(
            Ref::parse(&long)
                .unwrap_err()
                .message()
                .contains("characters long")
        );
        let long_name = format!("weights/{}", "a".repeat(64));
        assert!(
            Ref::parse(&long_name)
                .unwrap_err()
                .message()
                .contains("64 characters")
        );
    }

    #[test]
    fn digest_prefix_matching() {
        let d = Digest([0xab; 32]);
        assert!(DigestSpec::parse("abababab").unwrap().matches(&d));
        assert!(!DigestSpec::parse("abababac").unwrap().matches(&d));
        assert!(DigestSpec::parse(&d.to_string()).unwrap().matches(&d));
    }

    #[test]
    fn refs_relative_to_a_volume() {
        let base = VolumeName::parse("weights/tiny").unwrap();
        let r = Ref::parse_in("canary", &base).unwrap();
        assert_eq!(r.to_string(), "vol:weights/tiny:canary");
        assert_eq!(
            Ref::parse_in(":prod", &base).unwrap().to_string(),
            "vol:weights/tiny:prod"
        );
        assert_eq!(
            Ref::parse_in("@9f3c1a2b", &base).unwrap().to_string(),
            "vol:weights/tiny@b3:9f3c1a2b"
        );
        assert_eq!(
            Ref::parse_in("other/vol:x", &base).unwrap().to_string(),
            "vol:other/vol:x"
        );
        for bad in ["", "Bad Tag", "@zz", ":"] {
            assert!(Ref::parse_in(bad, &base).is_err(), "{bad:?}");
        }
    }
}
