//! How the console starts work (`sealvol_node::api::Launch`): by running this binary's
//! own commands, detached, with the console's repository and state. What the console
//! starts is therefore checked and done exactly as in a shell, on a remote engine too
//! (a sync there is the server's job), and it outlives the console.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use sealvol_core::{Error, ErrorKind, Result};
use sealvol_node::api::{Launch, Work};

use super::Ctx;

pub struct Commands {
    exe: PathBuf,
    /// The global options that make a command use the console's repository and state.
    base: Vec<OsString>,
    state: PathBuf,
    remote: Option<(String, Option<String>)>,
}

impl Commands {
    pub fn new(ctx: &Ctx) -> Result<Commands> {
        let exe = std::env::current_exe().map_err(|e| {
            Error::io(
                "cannot find this program",
                std::path::Path::new("sealvol"),
                e,
            )
        })?;
        let mut base = ctx.repo_args();
        base.extend([
            "--state".into(),
            ctx.settings.state.clone().into_os_string(),
        ]);
        Ok(Commands {
            exe,
            base,
            state: ctx.settings.state.clone(),
            remote: ctx.settings.remote.clone().map(|url| {
                (
                    url,
                    ctx.settings
                        .api_key
                        .as_ref()
                        .map(|k| k.expose().to_string()),
                )
            }),
        })
    }

    /// Runs `sealvol ARGS`; its error is the command's own (`error:` and `hint:`).
    fn run(&self, args: Vec<OsString>) -> Result<(String, String)> {
        let out = Command::new(&self.exe)
            .args(&self.base)
            .arg("--quiet")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io("cannot run", &self.exe, e))?;
        let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        if out.status.success() {
            return Ok((stdout, stderr));
        }
        let line = |prefix: &str| {
            stderr
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .map(str::to_string)
        };
        let e = Error::new(
            ErrorKind::Invalid,
            line("error: ").unwrap_or_else(|| format!("the command failed ({})", out.status)),
        );
        Err(match line("hint: ") {
            Some(h) => e.hint(h),
            None => e,
        })
    }
}

impl Launch for Commands {
    fn launch(&self, work: &Work) -> Result<String> {
        match work {
            Work::Sync {
                source,
                volume,
                tags,
                secret,
            } => {
                let mut args: Vec<OsString> = vec![
                    "volume".into(),
                    "sync".into(),
                    source.into(),
                    volume.to_string().into(),
                    "--detach".into(),
                ];
                for t in tags {
                    args.extend(["--tag".into(), t.into()]);
                }
                if let Some(s) = secret {
                    args.extend(["--secret".into(), s.into()]);
                }
                let (id, _) = self.run(args)?;
                let place = match &self.remote {
                    Some((url, _)) => format!("on the server {url}"),
                    None => "in the agent".to_string(),
                };
                Ok(format!("job {id} queued {place}: {source} -> {volume}"))
            }
            Work::Mount { reference, dir } => {
                self.run(vec![
                    "volume".into(),
                    "mount".into(),
                    reference.into(),
                    dir.clone().into_os_string(),
                ])?;
                Ok(format!(
                    "mounted {reference} at {} (`sealvol volume unmount {}` ends it)",
                    dir.display(),
                    dir.display()
                ))
            }
            Work::Watch { dir, volume } => {
                let (id, _) = self.run(vec![
                    "volume".into(),
                    "watch".into(),
                    dir.clone().into_os_string(),
                    volume.to_string().into(),
                    "--detach".into(),
                ])?;
                let id = id.lines().last().unwrap_or_default();
                Ok(format!("watch {id} started: {} -> {volume}", dir.display()))
            }
        }
    }

    fn secret_names(&self) -> Result<Vec<String>> {
        match &self.remote {
            Some((url, key)) => {
                let jobs = sealvol_client::remote::jobs::RemoteJobs::connect(url, key.as_deref())?;
                let mut names: Vec<String> = jobs.secrets()?.into_iter().map(|s| s.name).collect();
                names.sort();
                names.dedup();
                Ok(names)
            }
            None => Ok(sealvol_source::secrets::list(&self.state)?
                .into_iter()
                .map(|s| s.name)
                .collect()),
        }
    }
}
