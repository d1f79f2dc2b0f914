//! What a source holds, as the sync sees it: each object's key at the source, the path
//! it becomes in the version, its size, and the version tag (ETag, commit) that lets a
//! resumed or repeated sync know the bytes are still the same.

use serde::Serialize;

use super::checks::Expected;
use super::filter::Filter;
use super::keys::{Mapped, map_key};
use sealvol_core::error::Result;
use sealvol_core::paths::check_listing;

/// One object as a source lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawObject {
    /// Relative to the sync's prefix.
    pub key: String,
    pub size: u64,
    /// ETag, version id or content hash: changes whenever the bytes do.
    pub version: String,
    /// What the source says the content hashes to: every byte read is checked.
    pub expect: Vec<Expected>,
    /// An executable file: only a source that says so (an OCI layer's file metadata).
    pub exec: bool,
}

/// One file to sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Object {
    /// Relative to the sync's prefix; the clients add the prefix back.
    pub key: String,
    /// The clean relative path in the version.
    pub path: String,
    pub size: u64,
    pub version: String,
    /// What the source says the content hashes to (`checks.rs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expect: Vec<Expected>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exec: bool,
}

impl Object {
    /// The file this object becomes, for the push pipeline.
    pub fn stream_file(&self) -> sealvol_core::push::StreamFile {
        sealvol_core::push::StreamFile {
            path: self.path.clone(),
            size: self.size,
            exec: self.exec,
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Sorted by path.
    pub objects: Vec<Object>,
    /// The source's revision when it has one (a Hugging Face commit).
    pub revision: Option<String>,
    /// Objects the filters left out.
    pub excluded: u64,
}

impl Listing {
    /// Filters and maps raw keys. The filter sees the key before it is checked, so that
    /// `--exclude` can leave out a key that could never be a path.
    pub fn build(raw: Vec<RawObject>, filter: &Filter, revision: Option<String>) -> Result<Self> {
        let mut objects = Vec::with_capacity(raw.len());
        let mut excluded = 0;
        for r in raw {
            if !filter.takes(&r.key) {
                excluded += 1;
                continue;
            }
            if let Mapped::File(path) = map_key(&r.key, r.size)? {
                objects.push(Object {
                    path,
                    key: r.key,
                    size: r.size,
                    version: r.version,
                    expect: r.expect,
                    exec: r.exec,
                });
            }
        }
        objects.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        check_listing(objects.iter().map(|o| o.path.as_str()))?;
        Ok(Listing {
            objects,
            revision,
            excluded,
        })
    }

    pub fn bytes(&self) -> u64 {
        self.objects.iter().map(|o| o.size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(key: &str, size: u64) -> RawObject {
        RawObject {
            key: key.into(),
            size,
            version: "v".into(),
            expect: Vec::new(),
            exec: false,
        }
    }

    #[test]
    fn filters_run_before_keys_are_judged_and_markers_vanish() {
        let keys = vec![
            raw("b/w.bin", 3),
            raw("a/", 0),
            raw("../evil", 1),
            raw("a/x", 1),
        ];
        let none = Filter::new(&[], &[]).unwrap();
        let e = Listing::build(keys.clone(), &none, None).unwrap_err();
        assert!(e.to_string().contains("../evil"), "{e}");

        let skip = Filter::new(&[], &["../evil".into()]).unwrap();
        let l = Listing::build(keys, &skip, None).unwrap();
        let paths: Vec<&str> = l.objects.iter().map(|o| o.path.as_str()).collect();
        assert_eq!(paths, ["a/x", "b/w.bin"]);
        assert_eq!(l.excluded, 1);
        assert_eq!(l.bytes(), 4);
    }
}
