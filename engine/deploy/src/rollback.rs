//! A rollback: one mount's ref pointed at another version, planned from the file as it
//! is now (the plan carries the bytes it was made from), shown, then applied only over
//! those bytes. The CLI and the console both plan and apply through here.

use std::path::{Path, PathBuf};

use sealvol_core::refs::{DigestSpec, Target};
use sealvol_core::{Digest, Error, Ref, Repository, Result, VolumeName};

use crate::check::{self, Served};
use crate::file::DeployFile;
use crate::history;
use crate::rewrite::{self, Edit};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackPlan {
    pub file: PathBuf,
    pub volume: VolumeName,
    /// The mount's path in the file.
    pub path: String,
    /// The ref as written now, and what it resolves to (`None`: it does not resolve).
    pub reference: String,
    pub from: Option<Digest>,
    pub to: Digest,
    pub edit: Edit,
}

/// The mount of `volume` in `f` (the one at `path` when it is mounted more than once).
pub fn mount_of(f: &DeployFile, volume: &VolumeName, path: Option<&str>) -> Result<usize> {
    let found: Vec<usize> = f
        .mounts
        .iter()
        .enumerate()
        .filter(|(_, m)| Ref::parse(&m.reference).is_ok_and(|r| r.volume == *volume))
        .filter(|(_, m)| path.is_none_or(|p| m.path == p.trim_end_matches('/')))
        .map(|(i, _)| i)
        .collect();
    match (found.as_slice(), path) {
        ([i], _) => Ok(*i),
        ([], Some(p)) => Err(Error::not_found(format!(
            "{} mounts {volume} at no path {p}",
            f.path.display()
        ))),
        ([], None) => Err(not_mounted(f, volume)),
        (many, _) => Err(Error::usage(format!(
            "{} mounts {volume} {} times: at {}",
            f.path.display(),
            many.len(),
            many.iter()
                .map(|i| f.mounts[*i].path.clone())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .hint("say which with --path")),
    }
}

pub fn not_mounted(f: &DeployFile, volume: &VolumeName) -> Error {
    // A ref that is this volume's but does not read as a ref (a block scalar keeps its
    // line break) is what the user meant: say what is wrong with it, as `deploy check`.
    for m in &f.mounts {
        let Err(why) = Ref::parse(&m.reference) else {
            continue;
        };
        if Ref::parse(m.reference.trim()).is_ok_and(|r| r.volume == *volume) {
            return Error::invalid(format!(
                "{}:{}:{}: the ref of the mount at {} does not read as a ref: {}",
                f.path.display(),
                m.at.line,
                m.at.col,
                m.path,
                why.message()
            ))
            .hint("write it on one line, plain or quoted (not `|` or `>`), then run this again");
        }
    }
    let mounted: Vec<String> = f
        .mounts
        .iter()
        .filter_map(|m| Ref::parse(&m.reference).ok().map(|r| r.volume.to_string()))
        .collect();
    Error::not_found(format!("{} mounts no volume {volume}", f.path.display())).hint(match mounted
        .is_empty()
    {
        true => "it mounts nothing".to_string(),
        false => format!("it mounts {}", mounted.join(", ")),
    })
}

/// What the mount `i` of `f` serves now, or why it does not resolve.
pub fn current(repo: &Repository, f: &DeployFile, i: usize) -> std::result::Result<Served, Error> {
    check::resolve(repo, &f.mounts[i])
}

/// Which version a rollback goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// A ref of the volume (a tag, a digest or its prefix).
    To(String),
    /// The live version sealed just before the one the mount serves.
    Previous,
}

/// The version a rollback of mount `i` of `f` (the file at `path`), which mounts
/// `volume`, goes to. For
/// `Previous`, a pin of a version now in the trash still says where "previous" is (its
/// manifest is kept there); a ref that does not resolve has no "previous".
pub fn target(
    repo: &Repository,
    path: &Path,
    f: &DeployFile,
    i: usize,
    volume: &VolumeName,
    choice: &Choice,
) -> Result<Digest> {
    let m = &f.mounts[i];
    match choice {
        Choice::To(to) => {
            let r = Ref::parse_in(to, volume)?;
            if r.volume != *volume {
                return Err(Error::invalid(format!(
                    "--to {to} names a version of {}, not of {volume}",
                    r.volume
                )));
            }
            repo.resolve(&r)
        }
        Choice::Previous => {
            let pinned = match Ref::parse(&m.reference).map(|r| r.target) {
                Ok(Target::Digest(DigestSpec::Full(d))) => Some(d),
                _ => None,
            };
            let cur = current(repo, f, i)
                .map(|c| c.digest)
                .or_else(|e| pinned.ok_or(e))
                .map_err(|e| {
                    Error::new(
                        e.kind(),
                        format!(
                            "{}: the ref of {volume} ({}) does not resolve, so there is no \"previous\": {}",
                            path.display(),
                            m.reference,
                            e.message()
                        ),
                    )
                    .hint(format!(
                        "name the version with --to; `sealvol volume versions {volume}` lists them"
                    ))
                })?;
            history::previous(repo, volume, &cur)
        }
    }
}

/// Plans pointing mount `i` of `f` at `to`. `None`: it is pinned there already.
pub fn plan(
    repo: &Repository,
    f: &DeployFile,
    i: usize,
    to: Digest,
    policy: &sealvol_sign::Policy,
) -> Result<Option<RollbackPlan>> {
    let m = &f.mounts[i];
    let volume = Ref::parse(&m.reference)?.volume;
    // The target must be a live version of this volume (not in the trash), and one
    // the policy (config.toml's and the file's own) would mount: refused before any
    // confirmation, so that the rollback an on-call engineer picks is one that starts.
    repo.resolve(&Ref::pinned(volume.clone(), to))?;
    f.policy(policy)?.admit(repo, &volume, &to)?;
    let from = current(repo, f, i).ok();
    if from
        .as_ref()
        .is_some_and(|s| s.digest == to && s.follows.pinned())
    {
        return Ok(None);
    }
    let new_ref = history::pinned_text(&m.reference, &volume, &to);
    let edit = rewrite::edit(f, &[(i, new_ref)])?;
    Ok(Some(RollbackPlan {
        file: f.path.clone(),
        volume,
        path: m.path.clone(),
        reference: m.reference.clone(),
        from: from.map(|s| s.digest),
        to,
        edit,
    }))
}

/// Reads `file` now and plans pointing `volume`'s mount at `path` at `to` (the console,
/// which shows the plan before anything is written).
pub fn plan_file(
    repo: &Repository,
    file: &Path,
    volume: &VolumeName,
    path: &str,
    to: Digest,
    policy: &sealvol_sign::Policy,
) -> Result<Option<RollbackPlan>> {
    let f = DeployFile::read(file)?;
    let i = mount_of(&f, volume, Some(path))?;
    plan(repo, &f, i, to, policy)
}

/// Writes the plan, if the file still holds the bytes it was made from.
pub fn apply(plan: &RollbackPlan) -> Result<()> {
    rewrite::apply(&plan.edit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ref_written_as_a_block_scalar_is_named_with_what_is_wrong() {
        let text = "sealvol:\n  mounts:\n    - path: /w\n      ref: |\n        vol:w/ck:prod\n";
        let f = DeployFile::parse(Path::new("d.yaml"), text.to_string()).unwrap();
        let err = mount_of(&f, &VolumeName::parse("w/ck").unwrap(), None).unwrap_err();
        assert!(err.message().starts_with("d.yaml:5:"), "{err}");
        assert!(err.message().contains("does not read as a ref"), "{err}");
        assert!(err.hint_text().unwrap_or("").contains("one line"), "{err}");
    }

    fn repository_with_two_versions() -> (tempfile::TempDir, Repository, Digest, Digest) {
        use sealvol_core::push::{PushOptions, push};
        let tmp = tempfile::tempdir().unwrap();
        let repo = Repository::open_local(&tmp.path().join("repo"), true, false).unwrap();
        let vol = VolumeName::parse("w/ck").unwrap();
        let mut digests = Vec::new();
        for (i, body) in [b"one", b"two"].iter().enumerate() {
            let dir = tmp.path().join(format!("v{i}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("f"), body).unwrap();
            let opts = PushOptions::new(&sealvol_core::progress::Quiet);
            digests.push(push(&repo, &dir, &vol, &[], &opts).unwrap().digest);
            // Versions are ordered by their seal time, to the second.
            std::thread::sleep(std::time::Duration::from_millis(1100));
        }
        (tmp, repo, digests[0], digests[1])
    }

    #[test]
    fn previous_is_the_version_before_the_one_pinned_and_to_resolves_in_the_volume() {
        let (_tmp, repo, v1, v2) = repository_with_two_versions();
        let vol = VolumeName::parse("w/ck").unwrap();
        let file = |d: &Digest| {
            let text = format!("sealvol:\n  mounts:\n    - path: /w\n      ref: vol:w/ck@{d}\n");
            DeployFile::parse(Path::new("d.yaml"), text).unwrap()
        };
        let at = Path::new("d.yaml");
        assert_eq!(
            target(&repo, at, &file(&v2), 0, &vol, &Choice::Previous).unwrap(),
            v1
        );
        let oldest = target(&repo, at, &file(&v1), 0, &vol, &Choice::Previous).unwrap_err();
        assert!(oldest.message().contains("oldest"), "{oldest}");
        let to = Choice::To(format!("@{}", &v1.to_string()[..15]));
        assert_eq!(target(&repo, at, &file(&v2), 0, &vol, &to).unwrap(), v1);
        let other = Choice::To("x/y:prod".into());
        let e = target(&repo, at, &file(&v2), 0, &vol, &other).unwrap_err();
        assert!(e.message().contains("not of w/ck"), "{e}");
    }
}
