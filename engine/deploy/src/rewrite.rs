//! Rewriting refs in a deployment file: the bytes of each ref's value are replaced,
//! written the way the old value was (plain, 'single' or "double" quoted), and every
//! other byte (comments, key order, indentation, anchors, line endings) stays as it was.
//! The new file goes through a temporary file and a rename, and only over the very
//! bytes the edit was made from: a file someone changed meanwhile is refused.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use sealvol_core::{Error, ErrorKind, Result};

use crate::file::DeployFile;
use crate::yaml::{self, Style};

/// One line as it is and as it will be.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LineChange {
    pub line: usize,
    pub old: String,
    pub new: String,
}

/// A planned change to a deployment file, made from the bytes it was read with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub path: PathBuf,
    pub original: String,
    pub text: String,
    pub lines: Vec<LineChange>,
    /// Anchors whose value the edit changes: every alias of them changes with it.
    pub anchors: Vec<String>,
}

/// Replaces the refs of the mounts `changes` names (mount index, new ref) in `file`.
pub fn edit(file: &DeployFile, changes: &[(usize, String)]) -> Result<Edit> {
    let mut spans: Vec<(std::ops::Range<usize>, String)> = Vec::new();
    let mut anchors = Vec::new();
    for (i, new_ref) in changes {
        let m = &file.mounts[*i];
        let (range, style) = m.source.clone().map_err(|why| {
            Error::invalid(format!(
                "{}:{}:{}: cannot rewrite the ref of {} in place: {why}",
                file.path.display(),
                m.at.line,
                m.at.col,
                m.path
            ))
            .hint("edit that line by hand, or write the ref on one line and run this again")
        })?;
        if new_ref.contains(['\'', '"', '\\', '#', ',', '[', ']', '{', '}', ' ', '\n'])
            && style == Style::Plain
        {
            return Err(Error::invalid(format!(
                "{new_ref:?} cannot be written as a plain scalar"
            )));
        }
        if spans.iter().any(|(r, _)| *r == range) {
            continue;
        }
        if let Some(a) = &m.anchor {
            anchors.push(a.clone());
        }
        spans.push((range, yaml::write_scalar(new_ref, style)));
    }
    spans.sort_by_key(|(r, _)| r.start);
    let mut text = file.text.clone();
    for (range, new) in spans.iter().rev() {
        text.replace_range(range.clone(), new);
    }
    let old_lines: Vec<&str> = file.text.split('\n').collect();
    let new_lines: Vec<&str> = text.split('\n').collect();
    let trim = |l: &str| l.strip_suffix('\r').unwrap_or(l).to_string();
    let lines = old_lines
        .iter()
        .zip(&new_lines)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(n, (a, b))| LineChange {
            line: n + 1,
            old: trim(a),
            new: trim(b),
        })
        .collect();
    anchors.sort();
    anchors.dedup();
    Ok(Edit {
        path: file.path.clone(),
        original: file.text.clone(),
        text,
        lines,
        anchors,
    })
}

/// Writes the edit, if the file still holds exactly the bytes it was made from. A
/// symbolic link is followed (a ConfigMap's files are links): its target is replaced.
pub fn apply(edit: &Edit) -> Result<()> {
    let shown = edit.path.display();
    let real =
        std::fs::canonicalize(&edit.path).map_err(|e| Error::io("cannot find", &edit.path, e))?;
    let meta = std::fs::metadata(&real).map_err(|e| Error::io("cannot read", &real, e))?;
    if meta.permissions().mode() & 0o222 == 0 {
        return Err(
            Error::invalid(format!("{shown} is read-only; nothing was written"))
                .hint("make it writable (chmod u+w), or change the file where it is generated"),
        );
    }
    // Writable by this user, too: a rename in a writable folder would get round it.
    if let Err(e) = std::fs::OpenOptions::new().write(true).open(&real) {
        return Err(Error::io("cannot write", &real, e)
            .hint("nothing was written; the file must be writable by this user"));
    }
    let now = std::fs::read(&real).map_err(|e| Error::io("cannot read", &real, e))?;
    if now != edit.original.as_bytes() {
        return Err(changed(&edit.path));
    }
    let dir = real.parent().unwrap_or(Path::new("."));
    let name = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    sweep_litter(dir, &name);
    let tmp = dir.join(format!(".{name}.sealvol-{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(edit.text.as_bytes())?;
        f.set_permissions(std::fs::Permissions::from_mode(
            meta.permissions().mode() & 0o7777,
        ))?;
        // Keep the owner too, where this process may (it runs as root).
        let _ = std::os::unix::fs::fchown(&f, Some(meta.uid()), Some(meta.gid()));
        f.sync_all()?;
        Ok(())
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io("cannot write beside", &real, e)
            .hint("the folder must be writable: the file is replaced by a rename"));
    }
    // The last look: a change between the read above and now is refused too.
    let refused = match std::fs::read(&real) {
        Ok(b) if b == edit.original.as_bytes() => None,
        Ok(_) => Some(changed(&edit.path)),
        Err(e) => Some(Error::io("cannot read", &real, e)),
    };
    if let Some(e) = refused {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = std::fs::rename(&tmp, &real) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io("cannot replace", &real, e));
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes the temporary copies of `name` that runs killed mid-write left in `dir`
/// (`.NAME.sealvol-PID.tmp`, whose process is gone or started after the copy was
/// written), so a user's deployment folder does not collect them.
fn sweep_litter(dir: &Path, name: &str) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!(".{name}.sealvol-");
    for item in rd.flatten() {
        let file = item.file_name();
        let Some(pid) = file
            .to_str()
            .and_then(|f| f.strip_prefix(&prefix))
            .and_then(|f| f.strip_suffix(".tmp"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(written) = item.metadata().and_then(|m| m.modified()) else {
            continue;
        };
        let gone = match sealvol_core::store::process_started(pid) {
            None => true,
            Some(started) => started > written + std::time::Duration::from_secs(1),
        };
        if gone {
            let _ = std::fs::remove_file(item.path());
        }
    }
}

fn changed(path: &Path) -> Error {
    Error::new(
        ErrorKind::Changed,
        format!(
            "{} changed since it was read (by someone else?); nothing was written",
            path.display()
        ),
    )
    .hint("run the command again: it shows the change against the file as it is now")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_ref_changes_in_every_style() {
        let text = "# top\r\nx: &w 'vol:a/w:prod' # anchored\r\nsealvol:\r\n  mounts:\r\n    - ref: *w\r\n      path: /w\r\n    - {ref: \"vol:a/l:t\", path: /l}   # flow\r\n    - ref: a/p:t\r\n      path: /p\r\n";
        let f = DeployFile::parse(Path::new("d.yaml"), text.to_string()).unwrap();
        let e = edit(
            &f,
            &[
                (0, "vol:a/w@b3:1111".into()),
                (1, "vol:a/l@b3:2222".into()),
                (2, "a/p@b3:3333".into()),
            ],
        )
        .unwrap();
        let want = "# top\r\nx: &w 'vol:a/w@b3:1111' # anchored\r\nsealvol:\r\n  mounts:\r\n    - ref: *w\r\n      path: /w\r\n    - {ref: \"vol:a/l@b3:2222\", path: /l}   # flow\r\n    - ref: a/p@b3:3333\r\n      path: /p\r\n";
        assert_eq!(e.text, want);
        assert_eq!(e.anchors, ["w"]);
        assert_eq!(
            e.lines.iter().map(|l| l.line).collect::<Vec<_>>(),
            [2, 7, 8]
        );
        assert_eq!(e.lines[0].old, "x: &w 'vol:a/w:prod' # anchored");
    }

    #[test]
    fn apply_refuses_a_changed_vanished_or_read_only_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.yaml");
        let text = "sealvol:\n  mounts:\n    - {ref: a/b:t, path: /p}\n";
        std::fs::write(&p, text).unwrap();
        let f = DeployFile::read(&p).unwrap();
        let e = edit(&f, &[(0, "a/b@b3:1111".into())]).unwrap();
        std::fs::write(&p, format!("# theirs\n{text}")).unwrap();
        let err = apply(&e).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Changed, "{err}");
        assert!(std::fs::read_to_string(&p).unwrap().starts_with("# theirs"));
        std::fs::remove_file(&p).unwrap();
        assert!(apply(&e).is_err());
        assert!(!p.exists(), "a vanished file is not made again");
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
        assert!(apply(&e).unwrap_err().message().contains("read-only"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        apply(&e).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            text.replace("a/b:t", "a/b@b3:1111")
        );
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "the mode is kept");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temporary left: {names:?}");
    }

    #[test]
    fn a_write_removes_what_killed_writes_left_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.yaml");
        std::fs::write(&p, "sealvol:\n  mounts:\n    - {ref: a/b:t, path: /p}\n").unwrap();
        // No process has a pid this large; this test's parent runs (a write in flight).
        let dead = dir.path().join(".d.yaml.sealvol-4000000000.tmp");
        let live = dir.path().join(format!(
            ".d.yaml.sealvol-{}.tmp",
            std::os::unix::process::parent_id()
        ));
        let other = dir.path().join(".e.yaml.sealvol-4000000000.tmp");
        let odd = dir.path().join(".d.yaml.sealvol-x.tmp");
        for f in [&dead, &live, &other, &odd] {
            std::fs::write(f, "partial").unwrap();
        }
        let f = DeployFile::read(&p).unwrap();
        apply(&edit(&f, &[(0, "a/b@b3:1111".into())]).unwrap()).unwrap();
        assert!(!dead.exists(), "a dead writer's copy is removed");
        assert!(live.exists(), "a running writer's copy stays");
        assert!(
            other.exists() && odd.exists(),
            "other files are not touched"
        );
    }

    #[test]
    fn a_block_scalar_is_refused_with_the_place() {
        let text = "sealvol:\n  mounts:\n    - ref: >-\n        a/b:t\n      path: /p\n";
        let f = DeployFile::parse(Path::new("d.yaml"), text.to_string()).unwrap();
        let err = edit(&f, &[(0, "a/b@b3:1111".into())]).unwrap_err();
        assert!(
            err.message()
                .starts_with("d.yaml:4:9: cannot rewrite the ref of /p"),
            "{}",
            err.message()
        );
        assert!(err.message().contains("block scalar"), "{}", err.message());
    }
}
