//! The `:` command palette: one line per command, each naming where it goes.

use sealvol_core::refs::{Ref, VolumeName};

use crate::effects::Effect;
use crate::screens::{Kind, Screen, diff::Diff, tags::Tags, versions::Versions};

/// Where a command goes.
pub enum To {
    Quit,
    /// The volumes list.
    Volumes,
    /// This screen, over the volumes list.
    Screen(Box<dyn Screen>),
    /// One of the live screens (mounts, jobs), unless it is shown already.
    Live(Kind),
    /// Engine work first: the screen opens when its result comes (`:files REF`, whose
    /// digest is known only once the ref is resolved).
    Resolve(Effect),
}

struct Command {
    names: &'static [&'static str],
    /// How the unknown-command hint shows it.
    usage: &'static str,
    /// The command's words after its name, and the volume the console is on.
    run: fn(&[&str], Option<VolumeName>) -> Result<To, String>,
}

const COMMANDS: &[Command] = &[
    Command {
        names: &["volumes", "vol", "ls"],
        usage: "volumes",
        run: |_, _| Ok(To::Volumes),
    },
    Command {
        names: &["versions", "ver"],
        usage: "versions NS/NAME",
        run: |args, _| Ok(To::Screen(Box::new(Versions::new(volume(args.first())?)))),
    },
    Command {
        names: &["files"],
        usage: "files REF",
        run: |args, _| match args.first().map(|a| Ref::parse(a)) {
            Some(Ok(r)) => Ok(To::Resolve(Effect::ResolveFiles(r))),
            Some(Err(e)) => Err(e.to_string()),
            None => Err("files needs a ref: :files NS/NAME:TAG".into()),
        },
    },
    Command {
        names: &["tags"],
        usage: "tags NS/NAME",
        run: |args, current| {
            let v = volume(args.first()).or_else(|e| current.ok_or(e))?;
            Ok(To::Screen(Box::new(Tags::new(v))))
        },
    },
    Command {
        names: &["diff"],
        usage: "diff A B",
        run: |args, _| match (
            args.first().map(|a| Ref::parse(a)),
            args.get(1).map(|b| Ref::parse(b)),
        ) {
            (Some(Ok(a)), Some(Ok(b))) => Ok(To::Screen(Box::new(Diff::new(a, b)))),
            (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e.to_string()),
            _ => Err("diff needs two refs: :diff NS/NAME@DIGEST NS/NAME:TAG".into()),
        },
    },
    Command {
        names: &["mounts", "mnt"],
        usage: "mounts",
        run: |_, _| Ok(To::Live(Kind::Mounts)),
    },
    Command {
        names: &["jobs"],
        usage: "jobs",
        run: |_, _| Ok(To::Live(Kind::Jobs)),
    },
    Command {
        names: &["q", "quit"],
        usage: "quit",
        run: |_, _| Ok(To::Quit),
    },
];

fn volume(arg: Option<&&str>) -> Result<VolumeName, String> {
    match arg {
        Some(s) => Ref::parse(s).map(|r| r.volume).map_err(|e| e.to_string()),
        None => Err("name a volume: NS/NAME".into()),
    }
}

/// What a line typed after `:` asks for; `None` for an empty line.
pub fn parse(line: &str, current: Option<VolumeName>) -> Option<Result<To, String>> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let (name, args) = words.split_first()?;
    Some(match COMMANDS.iter().find(|c| c.names.contains(name)) {
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
