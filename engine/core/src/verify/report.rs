//! The report: each damaged object with what it breaks (versions, files, tags), the
//! versions that cannot be read back, notes, and the commands that fix it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use serde::Serialize;

use super::survey::{IndexFacts, Survey};
use crate::digest::{Entry, Hash};
use crate::refs::Digest;
use crate::repo::Kind;

/// What a damaged object breaks.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct Affected {
    /// `vol:ns/name@b3:…`; absent when only a tag is affected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Files of the version that cannot be read back; empty with `whole`.
    pub files: Vec<String>,
    /// The whole version is unreadable (its manifest is damaged).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub whole: bool,
    /// Tags (`ns/name:tag`) that point at the version, or the tag that is broken.
    pub tags: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Problem {
    /// The damaged object: `packs/ab/…`, `index/…`, `files/ab/…`, `manifests/…`, `tags/…`.
    pub object: String,
    /// What is wrong with it, every finding joined by "; ".
    pub problem: String,
    pub details: Vec<String>,
    pub affects: Vec<Affected>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Fix {
    pub command: String,
    pub why: String,
}

#[derive(Debug, Default, Serialize)]
pub struct VerifyReport {
    pub packs: u64,
    pub packs_read: u64,
    pub chunks: u64,
    pub files: u64,
    pub versions: u64,
    pub tags: u64,
    /// Chunk bytes read and hashed.
    pub bytes: u64,
    /// `all`, `sample`, `subset N/T`, `P%`, `none` or `this version`.
    pub read_data: String,
    pub problems: Vec<Problem>,
    /// Versions that cannot be read back in full, with the files that cannot.
    pub damaged_versions: Vec<Affected>,
    pub fix: Vec<Fix>,
    /// Worth knowing, not damage: a pack a killed push left without its index, a
    /// version repair had to quarantine.
    pub notes: Vec<String>,
}

#[derive(Default)]
struct Acc {
    details: Vec<String>,
    files: BTreeSet<Hash>,
    versions: BTreeSet<(String, bool)>,
    tags: BTreeSet<String>,
}

/// Adds a finding about `object`, once.
fn note<'a>(acc: &'a mut BTreeMap<String, Acc>, object: &str, detail: String) -> &'a mut Acc {
    let a = acc.entry(object.to_string()).or_default();
    if !a.details.contains(&detail) {
        a.details.push(detail);
    }
    a
}

impl Survey {
    pub fn report(&self) -> VerifyReport {
        let mut acc: BTreeMap<String, Acc> = BTreeMap::new();
        if let Some(c) = &self.config {
            note(&mut acc, "sealvol.repo", c.clone());
        }
        for s in &self.strays {
            note(
                &mut acc,
                s,
                "is not named as its folder's objects are (a stray file?)".into(),
            );
        }
        for (id, p) in &self.packs {
            let name = Kind::Pack.name(id);
            if let Err(why) = &p.trailer {
                note(&mut acc, &name, why.clone());
            }
            for why in p.bad.values() {
                note(&mut acc, &name, why.clone());
            }
        }
        for (id, ix) in &self.indexes {
            let name = Kind::Index.name(id);
            match (ix, self.packs.get(id)) {
                (IndexFacts::Damaged(why), Some(_)) if why != "is missing" => {
                    note(&mut acc, &name, why.clone());
                }
                (IndexFacts::Ok(e), Some(p)) => {
                    if let Ok(t) = &p.trailer
                        && t != e
                    {
                        note(&mut acc, &name, "disagrees with its pack's trailer".into());
                    }
                }
                // Left by a push that re-indexed the pack while a sweep removed it:
                // nothing uses it, and the next gc removes it.
                (IndexFacts::Ok(_), None) if self.whole && self.collected_packs.contains(id) => {}
                (IndexFacts::Ok(_), None) if self.whole => {
                    note(&mut acc, &name, "indexes a pack that is missing".into());
                }
                _ => {}
            }
        }
        // Chunk lists: each broken one, blamed on the object that breaks it.
        let named: HashSet<Hash> = self
            .manifests
            .iter()
            .filter_map(|(_, _, m)| m.as_ref().ok())
            .flat_map(|m| m.entries.iter())
            .filter_map(|e| match e {
                Entry::File { hash, .. } => Some(*hash),
                _ => None,
            })
            .collect();
        let mut garbage_lists = BTreeSet::new();
        for (hash, f) in &self.files {
            let name = Kind::File.name(hash);
            match f {
                Err(why) => {
                    note(&mut acc, &name, why.clone()).files.insert(*hash);
                }
                Ok(obj) => {
                    for c in &obj.chunks {
                        let pack = obj.packs[c.pack as usize];
                        // Garbage, not damage: no version reads the list, and the pack
                        // it names was collected (the list was too young to go with
                        // it, or a killed sweep had not reached it). A writer never
                        // builds on it (it heals a list naming a missing pack), and
                        // the next gc removes it.
                        if self.whole
                            && !named.contains(hash)
                            && !self.packs.contains_key(&pack)
                            && self.collected_packs.contains(&pack)
                        {
                            garbage_lists.insert(name.clone());
                            continue;
                        }
                        if let Some((object, why)) = self.copy_problem(&pack, &c.entry) {
                            let object = if object.is_empty() {
                                name.clone()
                            } else {
                                object
                            };
                            note(&mut acc, &object, why).files.insert(*hash);
                        }
                    }
                }
            }
        }
        // Which version holds which file, and the tags on each version.
        let mut tags_on: HashMap<String, Vec<String>> = HashMap::new();
        for t in &self.tags {
            if let Ok(f) = &t.file {
                tags_on
                    .entry(format!("vol:{}@{}", t.volume, f.digest))
                    .or_default()
                    .push(format!("{}:{}", t.volume, t.tag));
            }
        }
        let mut holders: HashMap<Hash, Vec<(String, String)>> = HashMap::new();
        let versions: HashSet<String> = self
            .manifests
            .iter()
            .map(|(v, d, _)| format!("vol:{v}@{d}"))
            .collect();
        for (vol, digest, m) in &self.manifests {
            let version = format!("vol:{vol}@{digest}");
            match m {
                Err(why) => {
                    let key = crate::repo::manifest_key(vol, digest);
                    note(&mut acc, &key, why.clone())
                        .versions
                        .insert((version, true));
                }
                Ok(m) => {
                    for e in &m.entries {
                        if let Entry::File { path, hash, .. } = e {
                            if !self.files.contains_key(hash) {
                                note(&mut acc, &Kind::File.name(hash), "is missing".into())
                                    .files
                                    .insert(*hash);
                            }
                            holders
                                .entry(*hash)
                                .or_default()
                                .push((version.clone(), path.clone()));
                        }
                    }
                }
            }
        }
        for (vol, digest, why) in &self.trash {
            let key = crate::trash::trash_key(vol, digest);
            note(
                &mut acc,
                &key,
                format!(
                    "{why}; its version is kept in the trash, never purged, until repair writes it anew"
                ),
            );
        }
        let mut history_notes = Vec::new();
        for t in &self.tags {
            let full = format!("{}:{}", t.volume, t.tag);
            match &t.file {
                Err(why) => {
                    note(&mut acc, &t.key, why.clone()).tags.insert(full);
                }
                Ok(f) => {
                    for (n, m) in f.history.iter().enumerate() {
                        let from_ok = m.from.as_deref().is_none_or(|d| Digest::parse(d).is_ok());
                        if Digest::parse(&m.to).is_err() || !from_ok {
                            // The tag still resolves: worth a note, not damage.
                            history_notes.push(format!(
                                "{}: move {} of its history names no valid digest",
                                t.key,
                                n + 1
                            ));
                        }
                    }
                    let target = format!("vol:{}@{}", t.volume, f.digest);
                    if !versions.contains(&target) {
                        note(
                            &mut acc,
                            &t.key,
                            format!(
                                "points at {}, which is not a version of {}",
                                f.digest, t.volume
                            ),
                        )
                        .tags
                        .insert(full);
                    }
                }
            }
        }

        let mut report = VerifyReport {
            packs: self.packs.len() as u64,
            packs_read: self.packs_read,
            chunks: self
                .packs
                .values()
                .map(|p| p.trailer.as_ref().map_or(0, |e| e.len() as u64))
                .sum(),
            files: self.files.len() as u64,
            versions: self.manifests.len() as u64,
            tags: self.tags.len() as u64,
            bytes: self.bytes_read,
            read_data: self.read_data.clone(),
            notes: history_notes,
            ..VerifyReport::default()
        };
        let mut all: BTreeMap<String, (BTreeSet<String>, bool)> = BTreeMap::new();
        for (object, a) in acc {
            let mut by_version: BTreeMap<String, (BTreeSet<String>, bool)> = BTreeMap::new();
            for h in &a.files {
                for (v, path) in holders.get(h).into_iter().flatten() {
                    by_version
                        .entry(v.clone())
                        .or_default()
                        .0
                        .insert(path.clone());
                }
            }
            for (v, whole) in &a.versions {
                by_version.entry(v.clone()).or_default().1 |= whole;
            }
            let mut affects: Vec<Affected> = by_version
                .iter()
                .map(|(v, (files, whole))| Affected {
                    version: Some(v.clone()),
                    files: if *whole {
                        Vec::new()
                    } else {
                        files.iter().cloned().collect()
                    },
                    whole: *whole,
                    tags: tags_on.get(v).cloned().unwrap_or_default(),
                })
                .collect();
            for (v, (files, whole)) in by_version {
                let e = all.entry(v).or_default();
                e.0.extend(files);
                e.1 |= whole;
            }
            if !a.tags.is_empty() {
                affects.push(Affected {
                    version: None,
                    files: Vec::new(),
                    whole: false,
                    tags: a.tags.into_iter().collect(),
                });
            }
            if !self.whole && affects.is_empty() {
                // Checking one version: damage that does not break it is worth a note.
                report.notes.push(format!(
                    "{object}, which this version reads, {}; it does not break the version (`sealvol repair` fixes it)",
                    a.details.join("; ")
                ));
                continue;
            }
            report.problems.push(Problem {
                object,
                problem: a.details.join("; "),
                details: a.details,
                affects,
            });
        }
        report.damaged_versions = all
            .into_iter()
            .map(|(v, (files, whole))| Affected {
                tags: tags_on.get(&v).cloned().unwrap_or_default(),
                version: Some(v),
                files: if whole {
                    Vec::new()
                } else {
                    files.into_iter().collect()
                },
                whole,
            })
            .collect();
        for (id, p) in &self.packs {
            if self.whole && p.trailer.is_ok() && !self.indexes.contains_key(id) {
                report.notes.push(format!(
                    "{} has no index (a push was stopped before writing it); the next push or `sealvol repair` writes it from the pack's trailer",
                    Kind::Pack.name(id)
                ));
            }
        }
        for id in self.indexes.keys() {
            if self.whole && !self.packs.contains_key(id) && self.collected_packs.contains(id) {
                report.notes.push(format!(
                    "{} indexes a pack garbage collection removed; the next `sealvol volume gc` removes it",
                    Kind::Index.name(id)
                ));
            }
        }
        for name in garbage_lists {
            report.notes.push(format!(
                "{name}, which no version reads, names a pack garbage collection removed; the next `sealvol volume gc` removes it"
            ));
        }
        for (vol, digest, at) in &self.lost {
            report.notes.push(format!(
                "vol:{vol}@{digest} is not in the repository: repair moved its damaged manifest to {at}; `sealvol repair --from DIR` seals it again from a folder with that digest"
            ));
        }
        report.fix = self.fixes(&report);
        report
    }

    /// The commands that fix what the report found.
    fn fixes(&self, report: &VerifyReport) -> Vec<Fix> {
        let mut out = Vec::new();
        // A pack repair already quarantined is past repair: only a source heals it.
        let repairable = report.problems.iter().any(|p| {
            !p.object.starts_with("packs/")
                || !p
                    .object
                    .rsplit('/')
                    .next()
                    .and_then(Hash::parse_hex)
                    .is_some_and(|id| self.quarantined_packs.contains(&id))
        });
        if repairable {
            out.push(Fix {
                command: "sealvol repair".into(),
                why: "rebuilds indexes from pack trailers, relinks chunk lists to healthy copies, restores tags from their history, and moves what is damaged to quarantine/ (`--dry-run` shows the plan first)".into(),
            });
        }
        let mut sources = BTreeSet::new();
        let lost = self.lost.iter().map(|(v, d, _)| format!("vol:{v}@{d}"));
        let damaged = report
            .damaged_versions
            .iter()
            .filter_map(|v| v.version.clone());
        for version in damaged.chain(lost) {
            let source = self
                .manifests
                .iter()
                .find(|(vol, d, _)| format!("vol:{vol}@{d}") == *version)
                .and_then(|(_, _, m)| m.as_ref().ok())
                .map(|m| m.provenance.source.clone());
            sources.insert((version.clone(), source));
        }
        for (version, source) in sources {
            let volume = version
                .trim_start_matches("vol:")
                .split('@')
                .next()
                .unwrap_or_default();
            let fix = match source.as_deref() {
                Some(s) if s.starts_with("file://") => Fix {
                    command: format!("sealvol repair --from {}", &s["file://".len()..]),
                    why: format!(
                        "heals {version} from its source folder, if repair alone cannot (its data has no healthy copy)"
                    ),
                },
                // A sync's source: the same objects seal the same digest.
                Some(s) if s.contains("://") => Fix {
                    command: format!("sealvol volume sync {s} {volume}"),
                    why: format!(
                        "heals {version} from its source, if repair alone cannot (the same objects seal the same digest)"
                    ),
                },
                _ => Fix {
                    command: "sealvol repair --from DIR".into(),
                    why: format!(
                        "heals {version} from a folder holding its files, if repair alone cannot"
                    ),
                },
            };
            out.push(fix);
        }
        out
    }
}
