//! Labels on a version (`push --label step=4000 --label git=abc123`): what a person or a
//! training run says about it, never part of the digest. The push that seals a version
//! writes its labels into the manifest's provenance and its summary; a manifest is
//! written once, so later changes (`volume label REF K=V --remove K`) live beside it in
//! `labels/<ns>/<vol>/<digest hex>`, which holds the labels as they are now and every
//! change, moved by compare-and-swap like a tag. A version's labels are that object's
//! when it exists and reads back, else the manifest's.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
// What a change is asked and answers, as plain data below the engine and the server.
use crate::keys::Key;
pub use crate::ops::LabelRequest;
pub use crate::outcomes::{LabelChange, LabelsChanged};
use crate::refs::{Digest, Name, Ref, VolumeName};
use crate::repo::{Repository, json_error};
use crate::stamp::{now_rfc3339, whoami};

pub type Labels = BTreeMap<String, String>;

/// The most labels one version carries.
pub const MAX_LABELS: usize = 64;
/// The longest value, in bytes.
pub const MAX_VALUE: usize = 256;
/// The changes a label object keeps: the newest, with a count of the older ones, so
/// that no number of changes grows it past about 2 MB (each is at most `MAX_LABELS`
/// values).
pub const MAX_HISTORY: usize = 100;

/// `KEY=VALUE` arguments as labels; a key given twice, or an argument without `=`, is
/// an error that names it.
pub fn parse(args: &[String]) -> Result<Labels> {
    let mut out = Labels::new();
    for a in args {
        let Some((k, v)) = a.split_once('=') else {
            return Err(Error::invalid(format!("--label {a:?} has no `=`"))
                .hint("write --label KEY=VALUE, e.g. --label step=4000"));
        };
        if out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(
                Error::invalid(format!("--label {k} is given twice")).hint("give each key once")
            );
        }
    }
    check(&out)?;
    Ok(out)
}

/// What every sealed version's labels must be (a server checks what a key sends):
/// at most `MAX_LABELS`, keys that are names (`a-z 0-9 . _ -`), values of printable
/// characters, at most `MAX_VALUE` bytes.
pub fn check(labels: &Labels) -> Result<()> {
    if labels.len() > MAX_LABELS {
        return Err(Error::invalid(format!(
            "{} labels: a version carries at most {MAX_LABELS}",
            labels.len()
        )));
    }
    for (k, v) in labels {
        Name::parse("label key", k)?;
        if v.len() > MAX_VALUE {
            return Err(Error::invalid(format!(
                "label {k}: the value is {} bytes; at most {MAX_VALUE}",
                v.len()
            )));
        }
        if v.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "label {k}: the value holds control characters"
            )));
        }
    }
    Ok(())
}

/// `k=v, k=v` as listings show them.
pub fn shown(labels: &Labels) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

const LABELS_FORMAT: u32 = 1;

/// `labels/<ns>/<vol>/<digest hex>` (docs/FORMAT.md).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LabelFile {
    pub format: u32,
    pub digest: String,
    /// The labels as they are now, whole.
    pub labels: Labels,
    /// The changes, oldest first; append-only but for the oldest, dropped past
    /// `MAX_HISTORY` and counted in `earlier`.
    pub history: Vec<LabelChange>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub earlier: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn label_key(vol: &VolumeName, d: &Digest) -> String {
    Key::Labels(vol.clone(), *d).to_string()
}

/// Why a label change cannot be asked for as it is: a key removed that is no name or
/// that is also set, or what it sets is no labels (`check`).
pub fn check_request(req: &LabelRequest) -> Result<()> {
    for k in &req.remove {
        Name::parse("label key", k)?;
        if req.set.contains_key(k) {
            return Err(Error::invalid(format!("label {k} is both set and removed"))
                .hint("give each key once"));
        }
    }
    check(&req.set)
}

impl Repository {
    /// The labels of `vol@d` now: its label object's when it reads back and is of this
    /// version, else `sealed` (the manifest's). A damaged one is reported and ignored.
    pub fn labels_now(&self, vol: &VolumeName, d: &Digest, sealed: &Labels) -> Result<Labels> {
        Ok(match self.label_file(vol, d)? {
            Some((f, _)) => f.labels,
            None => sealed.clone(),
        })
    }

    /// The label changes of `vol@d` since its seal (empty: none).
    pub fn label_history(&self, vol: &VolumeName, d: &Digest) -> Result<Vec<LabelChange>> {
        Ok(self
            .label_file(vol, d)?
            .map(|(f, _)| f.history)
            .unwrap_or_default())
    }

    /// The digests of `vol` whose labels changed since their seal, and their labels:
    /// one listing and a read of each (a listing overlays them on its summaries).
    pub fn changed_labels(&self, vol: &VolumeName) -> Result<BTreeMap<Digest, Labels>> {
        let prefix = crate::keys::volume_folder("labels", vol);
        let mut out = BTreeMap::new();
        for o in self.store().list(&prefix)? {
            let Some(Ok(d)) = o.key.strip_prefix(&prefix).map(Digest::parse) else {
                continue;
            };
            if let Some((f, _)) = self.label_file(vol, &d)? {
                out.insert(d, f.labels);
            }
        }
        Ok(out)
    }

    fn label_file(
        &self,
        vol: &VolumeName,
        d: &Digest,
    ) -> Result<Option<(LabelFile, crate::store::ETag)>> {
        let key = label_key(vol, d);
        let Some((bytes, etag)) = self.store().get_versioned(&key)? else {
            return Ok(None);
        };
        match parse_label_file(&key, d, &bytes) {
            Ok(f) => Ok(Some((f, etag))),
            Err(e) => {
                tracing::warn!("{}; the labels it was sealed with are used", e.message());
                Ok(None)
            }
        }
    }

    /// Sets and removes labels of a sealed version (not one in the trash), by
    /// compare-and-swap with its history kept. A key to remove that the version does
    /// not carry is an error naming the ones it does; the result is checked as a
    /// push's labels are.
    pub(crate) fn change_labels_here(&self, req: &LabelRequest) -> Result<LabelsChanged> {
        let (vol, d) = (&req.volume, &req.digest);
        let manifest = self
            .manifest(vol, d)
            .map_err(|e| self.or_unknown_volume(vol, e))?;
        if let Some(t) = self.in_trash(vol, d)? {
            return Err(self.trashed_error(vol, d, &t));
        }
        let key = label_key(vol, d);
        for _attempt in 0..64 {
            let raw = self.store().get_versioned(&key)?;
            let (mut file, etag) = match &raw {
                Some((bytes, etag)) => match parse_label_file(&key, d, bytes) {
                    Ok(f) => (f, Some(etag.clone())),
                    // A damaged one is kept in quarantine and written anew from the
                    // manifest's labels: what it said cannot be read.
                    Err(e) => {
                        let at = self.quarantine_copy(&key, bytes)?;
                        tracing::warn!("{}; kept at {at}", e.message());
                        (fresh(d, &manifest.provenance.labels), Some(etag.clone()))
                    }
                },
                None => (fresh(d, &manifest.provenance.labels), None),
            };
            let before = file.labels.clone();
            for k in &req.remove {
                if file.labels.remove(k).is_none() {
                    let has = if before.is_empty() {
                        "it has none".to_string()
                    } else {
                        format!(
                            "it has {}",
                            before.keys().cloned().collect::<Vec<_>>().join(", ")
                        )
                    };
                    return Err(Error::not_found(format!(
                        "{} has no label {k}: {has}",
                        Ref::pinned(vol.clone(), *d)
                    ))
                    .hint("name a label it has (`sealvol volume describe REF` lists them)"));
                }
            }
            for (k, v) in &req.set {
                file.labels.insert(k.clone(), v.clone());
            }
            check(&file.labels)?;
            let reference = Ref::pinned(vol.clone(), *d).to_string();
            if file.labels == before {
                return Ok(LabelsChanged {
                    reference,
                    before,
                    labels: file.labels,
                    changed: false,
                    history: file.history,
                });
            }
            file.history.push(LabelChange {
                set: req
                    .set
                    .iter()
                    .filter(|(k, v)| before.get(*k) != Some(*v))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                removed: req.remove.clone(),
                at: now_rfc3339(),
                by: whoami(),
            });
            if file.history.len() > MAX_HISTORY {
                let over = file.history.len() - MAX_HISTORY;
                file.history.drain(..over);
                file.earlier += over as u64;
            }
            let bytes = serde_json::to_vec_pretty(&file).map_err(json_error)?;
            match self.store().put_if_match(&key, &bytes, etag.as_ref()) {
                Ok(()) => {
                    return Ok(LabelsChanged {
                        reference,
                        before,
                        labels: file.labels,
                        changed: true,
                        history: file.history,
                    });
                }
                Err(e) if e.kind() == ErrorKind::Race => continue,
                Err(e) => return Err(e),
            }
        }
        Err(Error::new(
            ErrorKind::Race,
            format!(
                "the labels of {} keep changing under us",
                Ref::pinned(vol.clone(), *d)
            ),
        )
        .hint("try again in a moment"))
    }

    pub(crate) fn delete_labels(&self, vol: &VolumeName, d: &Digest) -> Result<()> {
        self.store().delete(&label_key(vol, d))
    }
}

/// A label object not written yet: the version's labels as sealed, no changes.
fn fresh(d: &Digest, sealed: &Labels) -> LabelFile {
    LabelFile {
        format: LABELS_FORMAT,
        digest: d.to_string(),
        labels: sealed.clone(),
        history: Vec::new(),
        earlier: 0,
    }
}

/// A label object as stored, checked: JSON of our format, about `d`, its labels valid.
fn parse_label_file(key: &str, d: &Digest, bytes: &[u8]) -> Result<LabelFile> {
    let f: LabelFile = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt(format!("{key} is damaged: {e}")))?;
    if f.format != LABELS_FORMAT {
        return Err(Error::corrupt(format!(
            "{key} is of format {}, which this sealvol does not read",
            f.format
        )));
    }
    if f.digest != d.to_string() {
        return Err(Error::corrupt(format!(
            "{key} is about {}, not the version it is named for",
            f.digest
        )));
    }
    check(&f.labels).map_err(|e| Error::corrupt(format!("{key} is damaged: {}", e.message())))?;
    if f.history.len() > MAX_HISTORY {
        return Err(Error::corrupt(format!(
            "{key} keeps {} changes; at most {MAX_HISTORY}",
            f.history.len()
        )));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn labels_are_key_value_pairs_each_key_once() {
        let l = parse(&args(&["step=4000", "git=abc123", "note=a=b"])).unwrap();
        assert_eq!(shown(&l), "git=abc123, note=a=b, step=4000");
        for (bad, why) in [
            (vec!["step"], "has no `=`"),
            (vec!["step=1", "step=2"], "given twice"),
            (vec!["Step=1"], "invalid label key"),
            (vec!["=1"], "invalid label key"),
            (vec!["k=a\nb"], "control characters"),
        ] {
            let e = parse(&args(&bad)).unwrap_err();
            assert!(e.to_string().contains(why), "{bad:?}: {e}");
        }
        let long = format!("k={}", "x".repeat(MAX_VALUE + 1));
        assert!(parse(&[long]).is_err());
        let many: Vec<String> = (0..=MAX_LABELS).map(|i| format!("k{i}=v")).collect();
        assert!(parse(&many).is_err());
    }
}
