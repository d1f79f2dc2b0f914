//! Shell completion: `sealvol completions SHELL` prints a script that asks this binary
//! for candidates as you type (clap's dynamic completion, `COMPLETE=SHELL sealvol`),
//! so refs complete to the volumes and tags of the repository in effect
//! (`SEALVOL_REPO` or config.toml). Nushell gets clap's static script: commands and
//! flags, not names.

use std::ffi::OsStr;

use clap_complete::CompletionCandidate;
use clap_complete::env::{Bash, Elvish, EnvCompleter, Fish, Powershell, Zsh};

use sealvol_core::{Repository, Result, VolumeName};

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Elvish,
    Powershell,
    Nushell,
}

/// Answers a completion request when the shell's script made one (`COMPLETE` is set),
/// and exits; otherwise returns at once.
pub fn answer_if_asked(cli: fn() -> clap::Command) {
    clap_complete::CompleteEnv::with_factory(cli).complete();
}

/// The script that registers completions of `cli` for `shell`.
pub fn script(shell: Shell, mut cli: clap::Command) -> Result<String> {
    let mut buf = Vec::new();
    let dynamic: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
        Shell::Elvish => &Elvish,
        Shell::Powershell => &Powershell,
        Shell::Nushell => {
            clap_complete::generate(
                clap_complete_nushell::Nushell,
                &mut cli,
                "sealvol",
                &mut buf,
            );
            return Ok(String::from_utf8_lossy(&buf).into_owned());
        }
    };
    dynamic
        .write_registration("COMPLETE", "sealvol", "sealvol", "sealvol", &mut buf)
        .map_err(|e| {
            sealvol_core::Error::io(
                "cannot write the script for",
                std::path::Path::new("the shell"),
                e,
            )
        })?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The repository the completed command would use, if there is one.
fn repository() -> Option<Repository> {
    // Completion runs at every key press: a local repository only, never a bucket.
    let repo = std::env::var("SEALVOL_REPO").ok();
    let settings = sealvol_setup::settings::resolve(sealvol_setup::settings::Flags {
        repo,
        ..Default::default()
    })
    .ok()?;
    Repository::open_local(settings.repo.local()?, false, false).ok()
}

/// Refs: `NS/NAME`, `NS/NAME:TAG`, and `NS/NAME@b3:DIGEST` once an `@` is typed.
pub fn refs(current: &OsStr) -> Vec<CompletionCandidate> {
    let Some(typed) = current.to_str() else {
        return Vec::new();
    };
    let Some(repo) = repository() else {
        return Vec::new();
    };
    let (prefix, typed) = match typed.strip_prefix("vol:") {
        Some(rest) => ("vol:", rest),
        None => ("", typed),
    };
    let mut out = Vec::new();
    for vol in repo.volumes(None).unwrap_or_default() {
        let name = vol.to_string();
        if !name.starts_with(typed) && !typed.starts_with(&name) {
            continue;
        }
        out.push(CompletionCandidate::new(format!("{prefix}{name}")));
        for t in repo.tags(&vol).unwrap_or_default() {
            out.push(CompletionCandidate::new(format!(
                "{prefix}{name}:{}",
                t.tag
            )));
        }
        if typed.starts_with(&format!("{name}@")) {
            for d in repo.version_digests(&vol).unwrap_or_default() {
                out.push(CompletionCandidate::new(format!("{prefix}{name}@{d}")));
            }
        }
    }
    out.retain(|c| {
        c.get_value()
            .to_string_lossy()
            .starts_with(&format!("{prefix}{typed}"))
    });
    out
}

/// Volumes: `NS/NAME`.
pub fn volumes(current: &OsStr) -> Vec<CompletionCandidate> {
    let typed = current.to_str().unwrap_or("");
    let Some(repo) = repository() else {
        return Vec::new();
    };
    repo.volumes(None)
        .unwrap_or_default()
        .iter()
        .map(VolumeName::to_string)
        .filter(|v| v.starts_with(typed))
        .map(CompletionCandidate::new)
        .collect()
}
