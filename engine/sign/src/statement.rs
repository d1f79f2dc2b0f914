//! The in-toto statement of a model-signing signature: one subject (the model's name
//! and a SHA-256 over every resource's digest, in order) and a predicate listing each
//! file with its digest. What a signature carries is parsed strictly: any statement
//! this module accepts is one model-signing 1.x verifies the same way, and one it
//! would refuse is refused here too.

use std::collections::HashSet;

use aws_lc_rs::digest;
use sealvol_core::{Error, Result};
use serde_json::{Value, json};

pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://model_signing/signature/v1.0";
/// At most this many files in one statement (a version's own limit is lower).
const MAX_RESOURCES: usize = 10_000_000;

/// The hash a statement's resources are given in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    Blake3,
    Sha256,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Blake3 => "blake3",
            Algorithm::Sha256 => "sha256",
        }
    }

    fn parse(s: &str) -> Option<Algorithm> {
        match s {
            "blake3" => Some(Algorithm::Blake3),
            "sha256" => Some(Algorithm::Sha256),
            _ => None,
        }
    }
}

/// One file and its digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// Relative path with `/` separators.
    pub name: String,
    pub digest: [u8; 32],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The subject's name: informative only (model-signing ignores it when it
    /// compares), the version's volume name here.
    pub model_name: String,
    pub algorithm: Algorithm,
    pub allow_symlinks: bool,
    pub ignore_paths: Vec<String>,
    /// In model-signing's order: by path components.
    pub resources: Vec<Resource>,
}

/// model-signing sorts resources as Python sorts `PurePosixPath`s: component by
/// component, so `a/b` comes before `a-b/c` (a plain string sort says otherwise).
fn order(a: &Resource, b: &Resource) -> std::cmp::Ordering {
    a.name.split('/').cmp(b.name.split('/'))
}

impl Statement {
    pub fn new(
        model_name: &str,
        algorithm: Algorithm,
        allow_symlinks: bool,
        mut resources: Vec<Resource>,
    ) -> Statement {
        resources.sort_by(order);
        Statement {
            model_name: model_name.to_string(),
            algorithm,
            allow_symlinks,
            ignore_paths: Vec::new(),
            resources,
        }
    }

    /// The subject's digest: SHA-256 over the resources' digests in order.
    pub fn root(&self) -> [u8; 32] {
        let mut ctx = digest::Context::new(&digest::SHA256);
        for r in &self.resources {
            ctx.update(&r.digest);
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.finish().as_ref());
        out
    }

    pub fn to_json(&self) -> Vec<u8> {
        let resources: Vec<Value> = self
            .resources
            .iter()
            .map(|r| {
                json!({"name": r.name, "algorithm": self.algorithm.name(), "digest": hex::encode(r.digest)})
            })
            .collect();
        let mut serialization = json!({
            "method": "files",
            "hash_type": self.algorithm.name(),
            "allow_symlinks": self.allow_symlinks,
        });
        if !self.ignore_paths.is_empty() {
            serialization["ignore_paths"] = json!(self.ignore_paths);
        }
        let v = json!({
            "_type": STATEMENT_TYPE,
            "subject": [{"name": self.model_name, "digest": {"sha256": hex::encode(self.root())}}],
            "predicateType": PREDICATE_TYPE,
            "predicate": {"serialization": serialization, "resources": resources},
        });
        serde_json::to_vec(&v).unwrap_or_default()
    }

    /// A statement as a signature carries it, checked: its types, one subject whose
    /// digest is the resources' root, one known hash for every resource, each digest
    /// 32 bytes, each name a clean relative path, none twice.
    pub fn parse(payload: &[u8]) -> Result<Statement> {
        let bad = |what: &str| {
            Error::invalid(format!("the signature's statement {what}"))
                .hint("it was not made by model-signing 1.x or sealvol, or it was altered")
        };
        let v: Value = serde_json::from_slice(payload).map_err(|_| bad("is not JSON"))?;
        if v["_type"] != STATEMENT_TYPE {
            return Err(bad("is not an in-toto v1 statement"));
        }
        if v["predicateType"] != PREDICATE_TYPE {
            return Err(bad(&format!(
                "has predicate type {}, not {PREDICATE_TYPE}",
                v["predicateType"]
            )));
        }
        let subjects = v["subject"]
            .as_array()
            .ok_or_else(|| bad("has no subject"))?;
        let [subject] = subjects.as_slice() else {
            return Err(bad("has more than one subject"));
        };
        let model_name = subject["name"].as_str().unwrap_or_default().to_string();
        let root = subject["digest"]["sha256"]
            .as_str()
            .and_then(|h| hex::decode(h).ok())
            .ok_or_else(|| bad("has no SHA-256 subject digest"))?;
        let p = &v["predicate"];
        let s = &p["serialization"];
        if s["method"] != "files" {
            return Err(bad(&format!(
                "serializes by {}, not by files (shards are not supported)",
                s["method"]
            )));
        }
        let algorithm = s["hash_type"]
            .as_str()
            .and_then(Algorithm::parse)
            .ok_or_else(|| {
                bad(&format!(
                    "uses hash {}, not blake3 or sha256",
                    s["hash_type"]
                ))
            })?;
        let allow_symlinks = s["allow_symlinks"].as_bool().unwrap_or(false);
        let ignore_paths = match &s["ignore_paths"] {
            Value::Null => Vec::new(),
            Value::Array(a) => a
                .iter()
                .map(|p| p.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| bad("has an ignore path that is not text"))?,
            _ => return Err(bad("has ignore paths that are not a list")),
        };
        let list = p["resources"]
            .as_array()
            .ok_or_else(|| bad("lists no files"))?;
        if list.len() > MAX_RESOURCES {
            return Err(bad("lists too many files"));
        }
        let mut resources = Vec::with_capacity(list.len());
        let mut seen = HashSet::with_capacity(list.len());
        for r in list {
            let name = r["name"]
                .as_str()
                .ok_or_else(|| bad("lists a file with no name"))?;
            if !clean(name) {
                return Err(bad(&format!(
                    "lists {name:?}, which is not a clean relative path"
                )));
            }
            if r["algorithm"].as_str() != Some(algorithm.name()) {
                return Err(bad(&format!(
                    "gives {name} in {}, not in its hash type {}",
                    r["algorithm"],
                    algorithm.name()
                )));
            }
            let digest = r["digest"]
                .as_str()
                .and_then(|h| hex::decode(h).ok())
                .and_then(|d| <[u8; 32]>::try_from(d).ok())
                .ok_or_else(|| {
                    bad(&format!(
                        "gives {name} a digest that is not 32 bytes of hex"
                    ))
                })?;
            if !seen.insert(name) {
                return Err(bad(&format!("lists {name} twice")));
            }
            resources.push(Resource {
                name: name.to_string(),
                digest,
            });
        }
        let st = Statement {
            model_name,
            algorithm,
            allow_symlinks,
            ignore_paths,
            resources,
        };
        // model-signing hashes the resources in the order they are listed.
        if st.root().as_slice() != root.as_slice() {
            return Err(bad(
                "has a subject digest that is not its files' (the list was altered)",
            ));
        }
        let mut sorted = st.clone();
        sorted.resources.sort_by(order);
        Ok(sorted)
    }
}

/// A relative path of plain components, as a version's paths are.
fn clean(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\0')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(name: &str, b: u8) -> Resource {
        Resource {
            name: name.into(),
            digest: [b; 32],
        }
    }

    #[test]
    fn resources_are_in_path_component_order_and_round_trip() {
        let s = Statement::new(
            "m",
            Algorithm::Blake3,
            false,
            vec![r("a-b/c", 1), r("a/b", 2), r("a.txt", 3)],
        );
        let names: Vec<&str> = s.resources.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["a/b", "a-b/c", "a.txt"]);
        assert_eq!(Statement::parse(&s.to_json()).unwrap(), s);
    }

    #[test]
    fn an_altered_list_a_twice_listed_file_or_a_climbing_path_is_refused() {
        let s = Statement::new("m", Algorithm::Sha256, false, vec![r("a", 1), r("b", 2)]);
        let mut v: Value = serde_json::from_slice(&s.to_json()).unwrap();
        let good = v.clone();
        v["predicate"]["resources"].as_array_mut().unwrap().pop();
        let e = Statement::parse(&serde_json::to_vec(&v).unwrap()).unwrap_err();
        assert!(e.to_string().contains("altered"), "{e}");
        for (path, value, says) in [
            ("/predicate/resources/1/name", json!("a"), "twice"),
            ("/predicate/resources/1/name", json!("../b"), "clean"),
            (
                "/predicate/resources/1/algorithm",
                json!("md5"),
                "hash type",
            ),
            ("/predicate/resources/1/digest", json!("00"), "32 bytes"),
            ("/predicate/serialization/method", json!("shards"), "shards"),
            ("/predicateType", json!("x"), "predicate type"),
        ] {
            let mut v = good.clone();
            *v.pointer_mut(path).unwrap() = value;
            let e = Statement::parse(&serde_json::to_vec(&v).unwrap()).unwrap_err();
            assert!(e.to_string().contains(says), "{path}: {e}");
        }
    }
}
