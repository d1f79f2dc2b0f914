//! The `:` command palette: one line per command, each naming where it goes. Refs typed
//! on a volume's screens may be relative to it (`:diff prod canary`, `:files @9f3c`).
//! What a command names is checked before the console moves (`To::Open`). Three
//! commands start work, each as its CLI command does it (`To::Launch`): `:sync`,
//! `:mount`, and `:watch DIR VOLUME`.

use sealvol_core::refs::{Ref, VolumeName};
use sealvol_node::api::Work;

use crate::effects::Open;
use crate::screens::Kind;

/// Where a command goes.
pub enum To {
    Quit,
    /// The volumes list.
    Volumes,
    /// One of the live screens (mounts, jobs), unless it is shown already.
    Live(Kind),
    /// A screen over the volumes list, once the engine says what it names exists.
    Open(Open),
    /// Work to start (a sync, a mount, a watch), then its live screen.
    Launch(Work),
}

pub struct Command {
    pub names: &'static [&'static str],
    /// How the unknown-command hint and the palette's list show it.
    pub usage: &'static str,
    /// One line on what it does, for the list under the prompt.
    pub about: &'static str,
    /// What it takes: completes the word after the name.
    pub takes: Takes,
    /// The command's words after its name, and the volume the console is on.
    run: fn(&[&str], Option<&VolumeName>) -> Result<To, String>,
}

/// What a command's argument is, for completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    Nothing,
    Volume,
    Ref,
    /// A source, then a volume; a secret's name after `--secret`.
    Sync,
    /// A ref, then a folder.
    Mount,
}

pub const COMMANDS: &[Command] = &[
    Command {
        names: &["volumes", "vol", "ls"],
        usage: "volumes",
        about: "back to the list of volumes",
        takes: Takes::Nothing,
        run: |_, _| Ok(To::Volumes),
    },
    Command {
        names: &["versions", "ver"],
        usage: "versions NS/NAME",
        about: "a volume's versions",
        takes: Takes::Volume,
        run: |args, current| Ok(To::Open(Open::Versions(volume(args.first(), current)?))),
    },
    Command {
        names: &["files"],
        usage: "files REF",
        about: "a version's files",
        takes: Takes::Ref,
        run: |args, current| match args.first() {
            Some(a) => Ok(To::Open(Open::Files(reference(a, current)?))),
            None => Err("files needs a ref: :files NS/NAME:TAG".into()),
        },
    },
    Command {
        names: &["tags"],
        usage: "tags NS/NAME",
        about: "a volume's tags and their histories",
        takes: Takes::Volume,
        run: |args, current| Ok(To::Open(Open::Tags(volume(args.first(), current)?))),
    },
    Command {
        names: &["diff"],
        usage: "diff A B",
        about: "what changed between two versions",
        takes: Takes::Ref,
        run: |args, current| {
            match (args.first(), args.get(1)) {
            (Some(a), Some(b)) => {
                let a = reference(a, current)?;
                // B may be relative to A's volume, as in `volume diff`.
                let b = Ref::parse_in(b, &a.volume).map_err(|e| e.to_string())?;
                Ok(To::Open(Open::Diff(a, b)))
            }
            _ => Err("diff needs two refs: :diff NS/NAME@DIGEST NS/NAME:TAG (or :diff prod canary on a volume)".into()),
        }
        },
    },
    Command {
        names: &["mounts", "mnt"],
        usage: "mounts",
        about: "live mounts on this node",
        takes: Takes::Nothing,
        run: |_, _| Ok(To::Live(Kind::Mounts)),
    },
    Command {
        names: &["jobs"],
        usage: "jobs",
        about: "sync jobs",
        takes: Takes::Nothing,
        run: |_, _| Ok(To::Live(Kind::Jobs)),
    },
    Command {
        names: &["sync"],
        usage: "sync SOURCE NS/NAME [--tag T] [--secret NAME]",
        about: "start a sync job (on the server, on a remote engine)",
        takes: Takes::Sync,
        run: |args, current| sync(args, current),
    },
    Command {
        names: &["mount"],
        usage: "mount REF DIR",
        about: "mount a version read-only at DIR, in the background",
        takes: Takes::Mount,
        run: |args, current| match (args.first(), args.get(1), args.get(2)) {
            (Some(r), Some(dir), None) => {
                let r = reference(r, current)?;
                Ok(To::Launch(Work::Mount {
                    reference: r.to_string(),
                    dir: (*dir).into(),
                }))
            }
            _ => Err("mount needs a ref and a folder: :mount NS/NAME:TAG DIR".into()),
        },
    },
    Command {
        names: &["watch", "watches"],
        usage: "watch [DIR NS/NAME]",
        about: "watches; with a folder and a volume, start one",
        takes: Takes::Nothing,
        run: |args, _| {
            match (args.first(), args.get(1), args.get(2)) {
            (None, ..) => Ok(To::Live(Kind::Watch)),
            (Some(dir), Some(v), None) => Ok(To::Launch(Work::Watch {
                dir: (*dir).into(),
                volume: VolumeName::parse(v).map_err(|e| e.to_string())?,
            })),
            _ => Err("watch takes a folder and a volume: :watch DIR NS/NAME (or nothing, for the watches)".into()),
        }
        },
    },
    Command {
        names: &["deployments", "deploy"],
        usage: "deployments",
        about: "which version each deployment serves; roll one back",
        takes: Takes::Nothing,
        run: |_, _| Ok(To::Live(Kind::Deployments)),
    },
    Command {
        names: &["trash"],
        usage: "trash [NS/NAME]",
        about: "deleted versions, and the time left to restore them",
        takes: Takes::Volume,
        run: |args, _| {
            let v = args
                .first()
                .map(|s| VolumeName::parse(s).map_err(|e| e.to_string()))
                .transpose()?;
            Ok(To::Open(Open::Trash(v)))
        },
    },
    Command {
        names: &["q", "quit"],
        usage: "quit",
        about: "leave the console",
        takes: Takes::Nothing,
        run: |_, _| Ok(To::Quit),
    },
];

/// `:sync SOURCE NS/NAME [--tag T]... [--secret NAME]`.
fn sync(args: &[&str], current: Option<&VolumeName>) -> Result<To, String> {
    const USAGE: &str = ":sync SOURCE NS/NAME [--tag T] [--secret NAME]";
    let mut words = args.iter();
    let mut plain = Vec::new();
    let (mut tags, mut secret) = (Vec::new(), None);
    while let Some(w) = words.next() {
        match *w {
            "--tag" | "-t" => match words.next() {
                Some(t) => tags.push(t.to_string()),
                None => return Err(format!("--tag needs a tag: {USAGE}")),
            },
            "--secret" => match words.next() {
                Some(s) => secret = Some(s.to_string()),
                None => return Err(format!("--secret needs a name: {USAGE}")),
            },
            w if w.starts_with('-') => return Err(format!("unknown option {w}: {USAGE}")),
            w => plain.push(w),
        }
    }
    let (source, volume) = match plain.as_slice() {
        [source, volume] => (
            source,
            VolumeName::parse(volume).map_err(|e| e.to_string())?,
        ),
        [source] => match current {
            Some(v) => (source, v.clone()),
            None => return Err(format!("sync needs a source and a volume: {USAGE}")),
        },
        _ => return Err(format!("sync needs a source and a volume: {USAGE}")),
    };
    Ok(To::Launch(Work::Sync {
        source: source.to_string(),
        volume,
        tags,
        secret,
    }))
}

/// A ref, relative to the current volume when it names none.
fn reference(s: &str, current: Option<&VolumeName>) -> Result<Ref, String> {
    match current {
        Some(v) => Ref::parse_in(s, v),
        None => Ref::parse(s),
    }
    .map_err(|e| e.to_string())
}

/// The named volume, or the current one.
fn volume(arg: Option<&&str>, current: Option<&VolumeName>) -> Result<VolumeName, String> {
    match (arg, current) {
        (Some(s), _) => VolumeName::parse(s).map_err(|e| e.to_string()),
        (None, Some(v)) => Ok(v.clone()),
        (None, None) => Err("name a volume: NS/NAME".into()),
    }
}

/// What a line typed after `:` asks for; `None` for an empty line.
pub fn parse(line: &str, current: Option<&VolumeName>) -> Option<Result<To, String>> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let (name, args) = words.split_first()?;
    Some(match find(name) {
        Some(c) => (c.run)(args, current),
        None => Err(format!(
            "unknown command {name:?}: try {}",
            COMMANDS
                .iter()
                .map(|c| c.usage)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    })
}

pub fn find(name: &str) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.names.contains(&name))
}

/// The commands whose name starts with what is typed, for the list under the prompt.
pub fn matching(typed: &str) -> Vec<&'static Command> {
    let word = typed.split_whitespace().next().unwrap_or("");
    COMMANDS
        .iter()
        .filter(|c| c.names.iter().any(|n| n.starts_with(word)))
        .collect()
}

/// Tab: completes the word being typed, from the command names or, after a command,
/// from `names` (volumes and `volume:tag` refs the console knows) or, after
/// `--secret`, from `secrets` (stored secrets' names). Returns the new line, or `None`
/// when nothing (or more than one thing with no longer common prefix) completes it.
pub fn complete(line: &str, names: &[String], secrets: &[String]) -> Option<String> {
    let ends_in_space = line.ends_with(' ');
    let words: Vec<&str> = line.split_whitespace().collect();
    let (done, word) = match (words.split_last(), ends_in_space) {
        (None, _) => (Vec::new(), ""),
        (Some(_), true) => (words.clone(), ""),
        (Some((last, rest)), false) => (rest.to_vec(), *last),
    };
    let candidates: Vec<String> = if done.is_empty() {
        // Canonical names only: `ver` completes to `versions`, not to its own alias.
        COMMANDS
            .iter()
            .map(|c| c.names[0].to_string())
            .filter(|n| n.starts_with(word))
            .collect()
    } else {
        let volumes = || -> Vec<String> {
            names
                .iter()
                .filter(|n| !n.contains(':'))
                .filter(|n| n.starts_with(word))
                .cloned()
                .collect()
        };
        let refs = || -> Vec<String> {
            names
                .iter()
                .filter(|n| n.starts_with(word))
                .cloned()
                .collect()
        };
        // Words after the command that are not options or their values.
        let positional = done[1..]
            .iter()
            .enumerate()
            .filter(|(i, w)| !w.starts_with('-') && (*i == 0 || !done[*i].starts_with('-')))
            .count();
        match find(done[0]).map(|c| c.takes) {
            _ if done.last() == Some(&"--secret") => secrets
                .iter()
                .filter(|n| n.starts_with(word))
                .cloned()
                .collect(),
            Some(Takes::Sync) if positional == 1 => volumes(),
            Some(Takes::Mount) if positional == 0 => refs(),
            Some(Takes::Volume) => names
                .iter()
                .filter(|n| !n.contains(':'))
                .filter(|n| n.starts_with(word))
                .cloned()
                .collect(),
            Some(Takes::Ref) => names
                .iter()
                .filter(|n| n.starts_with(word))
                .cloned()
                .collect(),
            _ => Vec::new(),
        }
    };
    let first = candidates.first()?;
    let common = candidates.iter().fold(first.clone(), |acc, c| {
        acc.chars()
            .zip(c.chars())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a)
            .collect()
    });
    if common.len() <= word.len() && candidates.len() > 1 {
        return None;
    }
    let mut out: String = done.iter().map(|w| format!("{w} ")).collect();
    out.push_str(&common);
    if candidates.len() == 1 {
        out.push(' ');
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tab_completes_commands_then_names() {
        let names: Vec<String> = [
            "weights/tiny",
            "weights/tiny:prod",
            "weights/tiny:canary",
            "ds/eval",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(complete("ver", &names, &[]).as_deref(), Some("versions "));
        assert_eq!(complete("ta", &names, &[]).as_deref(), Some("tags "));
        assert_eq!(
            complete("versions w", &names, &[]).as_deref(),
            Some("versions weights/tiny ")
        );
        assert_eq!(
            complete("diff weights/tiny:p", &names, &[]).as_deref(),
            Some("diff weights/tiny:prod ")
        );
        // Two refs share "weights/tiny": completes to the common part, then stops.
        assert_eq!(complete("files weights/tiny:", &names, &[]), None);
        assert_eq!(
            complete("files we", &names, &[]).as_deref(),
            Some("files weights/tiny")
        );
        assert_eq!(complete("mounts x", &names, &[]), None);
        assert_eq!(complete("zzz", &names, &[]), None);
        // :sync completes the volume after the source, and secrets after --secret.
        let secrets = vec!["hf-token".to_string(), "aws".to_string()];
        assert_eq!(
            complete("sync hf://o/m we", &names, &secrets).as_deref(),
            Some("sync hf://o/m weights/tiny ")
        );
        assert_eq!(
            complete("sync hf://o/m weights/tiny --secret h", &names, &secrets).as_deref(),
            Some("sync hf://o/m weights/tiny --secret hf-token ")
        );
        assert_eq!(
            complete("sync hf://o/m weights/tiny --tag p", &names, &secrets),
            None
        );
        assert_eq!(
            complete("mount weights/tiny:p", &names, &secrets).as_deref(),
            Some("mount weights/tiny:prod ")
        );
    }

    #[test]
    fn sync_mount_and_watch_start_work_and_say_what_they_need() {
        let v = VolumeName::parse("weights/tiny").unwrap();
        match parse("sync hf://o/m --tag prod --secret hf", Some(&v)) {
            Some(Ok(To::Launch(Work::Sync {
                source,
                volume,
                tags,
                secret,
            }))) => {
                assert_eq!(
                    (source.as_str(), volume.to_string().as_str()),
                    ("hf://o/m", "weights/tiny")
                );
                assert_eq!(
                    (tags, secret.as_deref()),
                    (vec!["prod".to_string()], Some("hf"))
                );
            }
            _ => panic!("not a sync"),
        }
        for (line, why) in [
            ("sync", "needs a source and a volume"),
            ("sync hf://o/m Bad/Name", "invalid"),
            ("sync hf://o/m a/b --tag", "--tag needs a tag"),
            ("sync hf://o/m a/b --force", "unknown option --force"),
            ("mount weights/tiny:prod", "needs a ref and a folder"),
            ("watch ./out", "takes a folder and a volume"),
        ] {
            match parse(line, None) {
                Some(Err(e)) => assert!(e.contains(why), "{line}: {e}"),
                _ => panic!("{line} should be refused"),
            }
        }
        assert!(matches!(
            parse("mount prod /mnt/x", Some(&v)),
            Some(Ok(To::Launch(Work::Mount { .. })))
        ));
        assert!(matches!(
            parse("watch", None),
            Some(Ok(To::Live(Kind::Watch)))
        ));
        assert!(matches!(
            parse("watch ./out weights/run", None),
            Some(Ok(To::Launch(Work::Watch { .. })))
        ));
    }

    #[test]
    fn refs_are_relative_to_the_volume_shown() {
        let v = VolumeName::parse("weights/tiny").unwrap();
        match parse("diff prod canary", Some(&v)) {
            Some(Ok(To::Open(Open::Diff(a, b)))) => {
                assert_eq!(a.to_string(), "vol:weights/tiny:prod");
                assert_eq!(b.to_string(), "vol:weights/tiny:canary");
            }
            _ => panic!("not a diff"),
        }
        match parse("diff other/vol:x canary", Some(&v)) {
            Some(Ok(To::Open(Open::Diff(a, b)))) => {
                assert_eq!(b.to_string(), "vol:other/vol:canary", "B is relative to A");
                assert_eq!(a.to_string(), "vol:other/vol:x");
            }
            _ => panic!("not a diff"),
        }
        assert!(matches!(parse("files prod", None), Some(Err(_))));
    }
}
