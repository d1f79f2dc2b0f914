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

/// The findings so far, by damaged object.
type Blame = BTreeMap<String, Acc>;

/// Which versions hold a file, and at which path: `(vol:ns/name@digest, path)`.
type Holders = HashMap<Hash, Vec<(String, String)>>;

/// Adds a finding about `object`, once.
fn note<'a>(acc: &'a mut Blame, object: &str, detail: String) -> &'a mut Acc {
    let a = acc.entry(object.to_string()).or_default();
    if !a.details.contains(&detail) {
        a.details.push(detail);
    }
    a
}

impl Survey {
    pub fn report(&self) -> VerifyReport {
        let mut acc = Blame::new();
        self.blame_stored(&mut acc);
        let garbage_lists = self.blame_lists(&mut acc);
        let holders = self.blame_versions(&mut acc);
        let history_notes = self.blame_tags(&mut acc);
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
        self.add_problems(acc, &holders, &mut report);
        self.add_notes(garbage_lists, &mut report);
        report.fix = self.fixes(&report);
        report
    }

    /// The repository's configuration, stray files, packs and indexes.
    fn blame_stored(&self, acc: &mut Blame) {
        if let Some(c) = &self.config {
            note(acc, "sealvol.repo", c.clone());
        }
        for s in &self.strays {
            note(
                acc,
                s,
                "is not named as its folder's objects are (a stray file?)".into(),
            );
        }
        for (id, p) in &self.packs {
            let name = Kind::Pack.name(id);
            if let Err(why) = &p.trailer {
                note(acc, &name, why.clone());
            }
            for why in p.bad.values() {
                note(acc, &name, why.clone());
            }
        }
        for (id, ix) in &self.indexes {
            let name = Kind::Index.name(id);
            match (ix, self.packs.get(id)) {
                (IndexFacts::Damaged(why), Some(_)) if why != "is missing" => {
                    note(acc, &name, why.clone());
                }
                (IndexFacts::Ok(e), Some(p)) => {
                    if let Ok(t) = &p.trailer
                        && t != e
                    {
                        note(acc, &name, "disagrees with its pack's trailer".into());
                    }
                }
                // Left by a push that re-indexed the pack while a sweep removed it:
                // nothing uses it, and the next gc removes it.
                (IndexFacts::Ok(_), None) if self.whole && self.collected_packs.contains(id) => {}
                (IndexFacts::Ok(_), None) if self.whole => {
                    note(acc, &name, "indexes a pack that is missing".into());
                }
                _ => {}
            }
        }
    }

    /// Each broken chunk list, blamed on the object that breaks it; returns the lists
    /// that are garbage rather than damage (no version reads them).
    fn blame_lists(&self, acc: &mut Blame) -> BTreeSet<String> {
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
                    note(acc, &name, why.clone()).files.insert(*hash);
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
                            note(acc, &object, why).files.insert(*hash);
                        }
                    }
                }
            }
        }
        garbage_lists
    }

    /// Damaged manifests and trash records, and missing chunk lists; returns which
    /// versions hold each file, by path.
    fn blame_versions(&self, acc: &mut Blame) -> Holders {
        let mut holders: HashMap<Hash, Vec<(String, String)>> = HashMap::new();
        for (vol, digest, m) in &self.manifests {
            let version = format!("vol:{vol}@{digest}");
            match m {
                Err(why) => {
                    let key = crate::repo::manifest_key(vol, digest);
                    note(acc, &key, why.clone())
                        .versions
                        .insert((version, true));
                }
                Ok(m) => {
                    for e in &m.entries {
                        if let Entry::File { path, hash, .. } = e {
                            if !self.files.contains_key(hash) {
                                note(acc, &Kind::File.name(hash), "is missing".into())
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
                acc,
                &key,
                format!(
                    "{why}; its version is kept in the trash, never purged, until repair writes it anew"
                ),
            );
        }
        holders
    }

    /// Damaged tags and tags that point at no version; returns notes on histories
    /// that name no valid digest (the tag still resolves: not damage).
    fn blame_tags(&self, acc: &mut Blame) -> Vec<String> {
        let versions: HashSet<String> = self
            .manifests
            .iter()
            .map(|(v, d, _)| format!("vol:{v}@{d}"))
            .collect();
        let mut history_notes = Vec::new();
        for t in &self.tags {
            let full = format!("{}:{}", t.volume, t.tag);
            match &t.file {
                Err(why) => {
                    note(acc, &t.key, why.clone()).tags.insert(full);
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
                            acc,
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
        history_notes
    }

    /// The tags on each version, `vol:ns/name@digest` → `ns/name:tag`.
    fn tags_on(&self) -> HashMap<String, Vec<String>> {
        let mut tags_on: HashMap<String, Vec<String>> = HashMap::new();
        for t in &self.tags {
            if let Ok(f) = &t.file {
                tags_on
                    .entry(format!("vol:{}@{}", t.volume, f.digest))
                    .or_default()
                    .push(format!("{}:{}", t.volume, t.tag));
            }
        }
        tags_on
    }

    /// Each blamed object as a problem with what it breaks, and the versions that
    /// cannot be read back in full.
    fn add_problems(&self, acc: Blame, holders: &Holders, report: &mut VerifyReport) {
        let tags_on = self.tags_on();
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
    }

    /// Notes on what is worth knowing but is not damage.
    fn add_notes(&self, garbage_lists: BTreeSet<String>, report: &mut VerifyReport) {
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
