//! Object keys: every name an object has in a repository, built and read here and
//! nowhere else (docs/FORMAT.md, "Repository layout").
//!
//! A key is built from typed parts (`Key::Pack(id).to_string()`), and a key that comes
//! from outside (a request to `sealvol serve`, a damage record a listing finds) is read
//! back with `Key::parse`, which takes only a key of a kind the
//! repository keeps, in that kind's exact shape: relative, `/`-separated, printable
//! ASCII, at most 1 KiB, hashes as 64 lowercase hex digits in their fan-out folder,
//! namespaces, volumes and tags as valid names. What does not parse is no object of
//! ours, and nothing acts on it.

use std::fmt;

use crate::digest::Hash;
use crate::objects::PackId;
use crate::refs::{Digest, Name, VolumeName};

/// The longest key accepted.
pub const MAX_KEY: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// `sealvol.repo`: the repository's settings.
    Config,
    /// `packs/<aa>/<pack id>`.
    Pack(PackId),
    /// `index/<pack id>`.
    Index(PackId),
    /// `files/<aa>/<file hash>`: a file's chunk list.
    File(Hash),
    /// `manifests/<ns>/<vol>/<digest hex>`.
    Manifest(VolumeName, Digest),
    /// `listings/<ns>/<vol>/<digest hex>`.
    Listing(VolumeName, Digest),
    /// `summaries/<ns>/<vol>/<digest hex>`.
    Summary(VolumeName, Digest),
    /// `profiles/<ns>/<vol>/<digest hex>/<BLAKE3 of the object>`.
    Profile(VolumeName, Digest, Hash),
    /// `signatures/<ns>/<vol>/<digest hex>/<BLAKE3 of the object>`: a model-signing
    /// signature of the version (a Sigstore bundle, `sealvol-sign`).
    Signature(VolumeName, Digest, Hash),
    /// `sha256/<ns>/<vol>/<digest hex>`: the SHA-256 of each file of the version, kept
    /// once a SHA-256 signature needed them.
    Sha256s(VolumeName, Digest),
    /// `hub/<ns>/<vol>/<digest hex>`: the ids the Hugging Face Hub's clients check for
    /// each file of the version (git blob ids, SHA-256s of large files), computed by a
    /// server from bytes it proved and kept for it alone: no key reads or writes them.
    HubIds(VolumeName, Digest),
    /// `labels/<ns>/<vol>/<digest hex>`: the version's labels as changed since its seal.
    Labels(VolumeName, Digest),
    /// `tags/<ns>/<vol>/<tag>`.
    Tag(VolumeName, Name),
    /// `trash/<ns>/<vol>/<digest hex>`.
    Trash(VolumeName, Digest),
    /// `damage/<pack id>/<chunk hash>`.
    Damage(PackId, Hash),
    /// `damage/files/<file hash>`.
    ListDamage(Hash),
    /// `gc/rounds/<id>`.
    GcRound(String),
    /// `gc/lease`.
    GcLease,
    /// `quarantine/<stamp>/<original key>`: the stamp and the original key as text (the
    /// original may be damaged beyond parsing: that is why it is here).
    Quarantine(String, String),
    /// `tmp/…`: a writer's staging and locks.
    Tmp(String),
    /// `probe/…`: the conditional-write probe's objects.
    Probe(String),
    /// `access/keys.json`: the API keys every server of the repository accepts (hashes
    /// of their secrets, never the secrets), once `sealvol key share` put them here.
    AccessList,
    /// `access/ring.json`: the ring's signing keys, which the servers of the repository
    /// prove themselves with (private halves: the servers' only).
    RingKeys,
    /// `access/ring-public.json`: their public halves, which nodes check proofs with.
    RingPublic,
}

/// The folders of the kinds whose keys start with a namespace.
pub const NAMESPACED: [&str; 9] = [
    "manifests",
    "listings",
    "summaries",
    "profiles",
    "signatures",
    "sha256",
    "labels",
    "tags",
    "trash",
];

impl Key {
    /// The namespace the object belongs to, for the kinds that have one.
    pub fn namespace(&self) -> Option<&Name> {
        match self {
            Key::Manifest(v, _)
            | Key::Listing(v, _)
            | Key::Summary(v, _)
            | Key::Profile(v, _, _)
            | Key::Signature(v, _, _)
            | Key::Sha256s(v, _)
            | Key::HubIds(v, _)
            | Key::Labels(v, _)
            | Key::Tag(v, _)
            | Key::Trash(v, _) => Some(&v.namespace),
            _ => None,
        }
    }

    /// The folder its kind lives in (`packs`, `manifests`, …; `sealvol.repo` for the
    /// settings).
    pub fn folder(&self) -> &'static str {
        match self {
            Key::Config => "sealvol.repo",
            Key::Pack(_) => "packs",
            Key::Index(_) => "index",
            Key::File(_) => "files",
            Key::Manifest(..) => "manifests",
            Key::Listing(..) => "listings",
            Key::Summary(..) => "summaries",
            Key::Profile(..) => "profiles",
            Key::Signature(..) => "signatures",
            Key::Sha256s(..) => "sha256",
            Key::HubIds(..) => "hub",
            Key::Labels(..) => "labels",
            Key::Tag(..) => "tags",
            Key::Trash(..) => "trash",
            Key::Damage(..) | Key::ListDamage(_) => "damage",
            Key::GcRound(_) | Key::GcLease => "gc",
            Key::Quarantine(..) => "quarantine",
            Key::Tmp(_) => "tmp",
            Key::Probe(_) => "probe",
            Key::AccessList | Key::RingKeys | Key::RingPublic => "access",
        }
    }

    /// Reads a key from outside, strictly (see the module's comment); the error says
    /// what is wrong with it in one line.
    pub fn parse(key: &str) -> Result<Key, String> {
        let bad = || format!("{key:.100} is not an object key of a kind a repository keeps");
        let clean = !key.is_empty()
            && key.len() <= MAX_KEY
            && key.bytes().all(|b| b.is_ascii_graphic())
            && key
                .split('/')
                .all(|s| !s.is_empty() && s != "." && s != "..");
        if !clean {
            return Err(format!(
                "{key:.100} is not an object key (relative, printable, no empty, . or .. parts, at most {MAX_KEY} bytes)"
            ));
        }
        let parts: Vec<&str> = key.split('/').collect();
        let hash = |s: &str| Hash::parse_hex(s).filter(|h| h.hex() == s);
        let fanned = |aa: &str, name: &str| hash(name).filter(|_| name.get(..2) == Some(aa));
        let volume = |ns: &str, vol: &str| -> Option<VolumeName> {
            Some(VolumeName {
                namespace: Name::parse("namespace", ns).ok()?,
                name: Name::parse("volume name", vol).ok()?,
            })
        };
        let digest = |s: &str| hash(s).map(|h| Digest(h.0));
        let versioned = |ns: &str, vol: &str, d: &str| Some((volume(ns, vol)?, digest(d)?));
        let rest = |from: usize| parts[from..].join("/");
        let k = match parts.as_slice() {
            ["sealvol.repo"] => Some(Key::Config),
            ["packs", aa, name] => fanned(aa, name).map(Key::Pack),
            ["index", name] => hash(name).map(Key::Index),
            ["files", aa, name] => fanned(aa, name).map(Key::File),
            ["manifests", ns, vol, d] => versioned(ns, vol, d).map(|(v, d)| Key::Manifest(v, d)),
            ["listings", ns, vol, d] => versioned(ns, vol, d).map(|(v, d)| Key::Listing(v, d)),
            ["summaries", ns, vol, d] => versioned(ns, vol, d).map(|(v, d)| Key::Summary(v, d)),
            ["trash", ns, vol, d] => versioned(ns, vol, d).map(|(v, d)| Key::Trash(v, d)),
            ["profiles", ns, vol, d, h] => {
                versioned(ns, vol, d).and_then(|(v, d)| Some(Key::Profile(v, d, hash(h)?)))
            }
            ["signatures", ns, vol, d, h] => {
                versioned(ns, vol, d).and_then(|(v, d)| Some(Key::Signature(v, d, hash(h)?)))
            }
            ["sha256", ns, vol, d] => versioned(ns, vol, d).map(|(v, d)| Key::Sha256s(v, d)),
            ["hub", ns, vol, d] => versioned(ns, vol, d).map(|(v, d)| Key::HubIds(v, d)),
            ["labels", ns, vol, d] => versioned(ns, vol, d).map(|(v, d)| Key::Labels(v, d)),
            ["tags", ns, vol, tag] => {
                volume(ns, vol).and_then(|v| Some(Key::Tag(v, Name::parse("tag", tag).ok()?)))
            }
            ["damage", "files", h] => hash(h).map(Key::ListDamage),
            ["damage", pack, chunk] => hash(pack).zip(hash(chunk)).map(|(p, c)| Key::Damage(p, c)),
            ["gc", "lease"] => Some(Key::GcLease),
            ["gc", "rounds", id] => Some(Key::GcRound(id.to_string())),
            ["quarantine", stamp, _, ..] => Some(Key::Quarantine(stamp.to_string(), rest(2))),
            ["tmp", _, ..] => Some(Key::Tmp(rest(1))),
            ["probe", _, ..] => Some(Key::Probe(rest(1))),
            ["access", "keys.json"] => Some(Key::AccessList),
            ["access", "ring.json"] => Some(Key::RingKeys),
            ["access", "ring-public.json"] => Some(Key::RingPublic),
            _ => None,
        };
        k.ok_or_else(bad)
    }
}

/// `<folder>/<aa>/<hex>`: the fan-out shape of content-addressed kinds.
fn fanned(f: &mut fmt::Formatter<'_>, folder: &str, h: &Hash) -> fmt::Result {
    let hex = h.hex();
    write!(f, "{folder}/{}/{hex}", &hex[..2])
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vol = |v: &VolumeName| format!("{}/{}", v.namespace, v.name);
        match self {
            Key::Config => f.write_str("sealvol.repo"),
            Key::Pack(id) => fanned(f, "packs", id),
            Key::Index(id) => write!(f, "index/{}", id.hex()),
            Key::File(h) => fanned(f, "files", h),
            Key::Manifest(v, d) => write!(f, "manifests/{}/{}", vol(v), d.hex()),
            Key::Listing(v, d) => write!(f, "listings/{}/{}", vol(v), d.hex()),
            Key::Summary(v, d) => write!(f, "summaries/{}/{}", vol(v), d.hex()),
            Key::Profile(v, d, h) => write!(f, "profiles/{}/{}/{}", vol(v), d.hex(), h.hex()),
            Key::Signature(v, d, h) => {
                write!(f, "signatures/{}/{}/{}", vol(v), d.hex(), h.hex())
            }
            Key::Sha256s(v, d) => write!(f, "sha256/{}/{}", vol(v), d.hex()),
            Key::HubIds(v, d) => write!(f, "hub/{}/{}", vol(v), d.hex()),
            Key::Labels(v, d) => write!(f, "labels/{}/{}", vol(v), d.hex()),
            Key::Tag(v, t) => write!(f, "tags/{}/{t}", vol(v)),
            Key::Trash(v, d) => write!(f, "trash/{}/{}", vol(v), d.hex()),
            Key::Damage(p, c) => write!(f, "damage/{}/{}", p.hex(), c.hex()),
            Key::ListDamage(h) => write!(f, "damage/files/{}", h.hex()),
            Key::GcRound(id) => write!(f, "gc/rounds/{id}"),
            Key::GcLease => f.write_str("gc/lease"),
            Key::Quarantine(stamp, original) => write!(f, "quarantine/{stamp}/{original}"),
            Key::Tmp(rest) => write!(f, "tmp/{rest}"),
            Key::Probe(rest) => write!(f, "probe/{rest}"),
            Key::AccessList => f.write_str("access/keys.json"),
            Key::RingKeys => f.write_str("access/ring.json"),
            Key::RingPublic => f.write_str("access/ring-public.json"),
        }
    }
}

/// The folder listing one volume's objects of a namespaced kind
/// (`manifests/<ns>/<vol>/`).
pub fn volume_folder(kind: &str, v: &VolumeName) -> String {
    format!("{kind}/{}/{}/", v.namespace, v.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(b: u8) -> Hash {
        Hash::of(&[b])
    }

    #[test]
    fn every_kind_reads_back_as_it_was_built() {
        let v = VolumeName::parse("weights/m").unwrap();
        let d = Digest(h(1).0);
        let keys = [
            Key::Config,
            Key::Pack(h(2)),
            Key::Index(h(3)),
            Key::File(h(4)),
            Key::Manifest(v.clone(), d),
            Key::Listing(v.clone(), d),
            Key::Summary(v.clone(), d),
            Key::Labels(v.clone(), d),
            Key::Profile(v.clone(), d, h(5)),
            Key::Signature(v.clone(), d, h(10)),
            Key::Sha256s(v.clone(), d),
            Key::HubIds(v.clone(), d),
            Key::Tag(v.clone(), Name::parse("tag", "prod").unwrap()),
            Key::Trash(v.clone(), d),
            Key::Damage(h(6), h(7)),
            Key::ListDamage(h(8)),
            Key::GcRound("20261203T120000000Z-42".into()),
            Key::GcLease,
            Key::Quarantine("20261203T1200Z".into(), format!("packs/ab/{}", h(9).hex())),
            Key::Tmp("host-1-2.tmp".into()),
            Key::Probe("host-7".into()),
            Key::AccessList,
            Key::RingKeys,
            Key::RingPublic,
        ];
        for k in keys {
            let text = k.to_string();
            assert_eq!(Key::parse(&text), Ok(k.clone()), "{text}");
        }
    }

    #[test]
    fn keys_that_are_no_object_of_ours_are_refused() {
        let x = h(1).hex();
        let other_fan = format!("packs/zz/{x}");
        let long = "a/".repeat(600);
        for key in [
            "",
            "/sealvol.repo",
            "packs",
            "packs/ab",
            other_fan.as_str(),
            &format!("packs/{}/{x}/extra", &x[..2]),
            &format!("packs/{}/{}", &x[..2], x.to_uppercase()),
            &format!("manifests/../m/{x}"),
            &format!("manifests/Bad/m/{x}"),
            &format!("manifests/ns/m/{x}/more"),
            "tags/ns/m/no such tag",
            "tags/ns/m/",
            "gc/other",
            "damage/files",
            "secrets/x",
            "access/other.json",
            "access",
            "packs/\u{e9}",
            long.as_str(),
        ] {
            assert!(Key::parse(key).is_err(), "{key:?} parsed");
        }
    }
}
