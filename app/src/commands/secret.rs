//! `sealvol secret set | ls | rm`. The value comes from stdin (a pipe, a file, or typed
//! at a prompt with echo off), never from argv, where `ps` and shell history would see it.
//! With `--remote`, the secret is the server's, for its jobs in one namespace: sent
//! once, and never readable again by anyone.

use std::io::{IsTerminal, Read};

use clap::Args;
use sealvol_client::remote::jobs::RemoteJobs;
use sealvol_core::{Error, Result};
use sealvol_source::secrets;

use super::{Ctx, Run, group};
use crate::args::JSON_HELP;
use crate::output::{json, size, table, when};

group! {
    // `sealvol secret …`: this machine's secrets, or with --remote the server's.
    #[derive(clap::Subcommand, Debug)]
    pub enum SecretCommand {
        Set(Set),
        Ls(Ls),
        Rm(Rm),
    }
}

/// Store a secret; the value is read from stdin, never from the command line.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  printf %s \"$HF_TOKEN\" | sealvol secret set hf-token\n  sealvol secret set aws-key < key.txt\n  sealvol secret set hf-token            (in a terminal: asks, without echo)"
)]
pub struct Set {
    /// 1-63 characters of a-z 0-9 . _ -
    name: String,
    /// With --remote: the namespace whose jobs use it (default: the key's one namespace).
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
    /// Caught only to refuse it without printing it back.
    #[arg(hide = true)]
    value_on_command_line: Option<String>,
}

impl Run for Set {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let name = &self.name;
        refuse_value_on_command_line(name, self.value_on_command_line.as_deref())?;
        let Some(url) = &ctx.settings.remote else {
            if let Some(ns) = &self.namespace {
                return Err(only_remote(ns));
            }
            let value = read_value(name)?;
            secrets::set(&ctx.settings.state, name, &value)?;
            if !ctx.quiet {
                errln!("stored secret {name}");
            }
            return Ok(());
        };
        let (jobs, key) = server(ctx, url)?;
        let ns = namespace_for(url, key, self.namespace)?;
        let value = read_value(name)?;
        jobs.set_secret(&ns, name, value)?;
        if !ctx.quiet {
            errln!("stored secret {name} on the server {url}, for the jobs of namespace {ns}");
        }
        Ok(())
    }
}

/// List secret names, sizes and when they were set (never values).
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol secret ls --json")]
pub struct Ls {
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Ls {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let Some(url) = &ctx.settings.remote else {
            let l = secrets::list(&ctx.settings.state)?;
            if self.json {
                json(&serde_json::json!({ "secrets": l }))?;
            } else if l.is_empty() {
                if !ctx.quiet {
                    errln!("no secrets; store one with: sealvol secret set NAME < FILE");
                }
            } else {
                let rows: Vec<Vec<String>> = l
                    .iter()
                    .map(|s| vec![s.name.clone(), size(s.bytes), when(&s.updated)])
                    .collect();
                table(&["NAME", "SIZE", "SET"], &rows)?;
            }
            return Ok(());
        };
        let l = server(ctx, url)?.0.secrets()?;
        if self.json {
            json(&serde_json::json!({ "secrets": l }))?;
        } else if l.is_empty() {
            if !ctx.quiet {
                errln!(
                    "no secrets on the server; store one with: sealvol --remote {url} secret set NAME --namespace NS < FILE"
                );
            }
        } else {
            let rows: Vec<Vec<String>> = l
                .iter()
                .map(|s| {
                    vec![
                        s.namespace.clone(),
                        s.name.clone(),
                        size(s.bytes),
                        when(&s.updated),
                    ]
                })
                .collect();
            table(&["NAMESPACE", "NAME", "SIZE", "SET"], &rows)?;
        }
        Ok(())
    }
}

/// Remove a secret.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol secret rm hf-token")]
pub struct Rm {
    /// The secret's name, from `sealvol secret ls`.
    name: String,
    /// With --remote: the namespace it is stored in (default: the key's one namespace).
    #[arg(long, value_name = "NS")]
    namespace: Option<String>,
}

impl Run for Rm {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let name = &self.name;
        let Some(url) = &ctx.settings.remote else {
            if let Some(ns) = &self.namespace {
                return Err(only_remote(ns));
            }
            secrets::remove(&ctx.settings.state, name)?;
            if !ctx.quiet {
                errln!("removed secret {name}");
            }
            return Ok(());
        };
        let (jobs, key) = server(ctx, url)?;
        let ns = namespace_for(url, key, self.namespace)?;
        jobs.remove_secret(&ns, name)?;
        if !ctx.quiet {
            errln!("removed secret {name} of namespace {ns} from the server {url}");
        }
        Ok(())
    }
}

fn refuse_value_on_command_line(name: &str, value: Option<&str>) -> Result<()> {
    match value {
        None => Ok(()),
        Some(_) => Err(Error::invalid(
            "secret values are read from stdin, never from the command line",
        )
        .hint(format!(
            "printf %s \"$VALUE\" | sealvol secret set {name}; and rotate this one: it is in your shell history"
        ))),
    }
}

fn only_remote(ns: &str) -> Error {
    Error::invalid(format!(
        "--namespace {ns}: this machine's secrets belong to no namespace"
    ))
    .hint("--namespace is for a server's secrets: sealvol --remote URL secret set NAME --namespace NS")
}

/// The server's secrets (`--remote`), and the key they are reached with.
fn server<'a>(ctx: &'a Ctx, url: &str) -> Result<(RemoteJobs, Option<&'a str>)> {
    let key = ctx.settings.api_key.as_ref().map(|k| k.expose());
    Ok((RemoteJobs::connect(url, key)?, key))
}

/// The namespace a server's secret is for: as given, or the key's only one.
fn namespace_for(url: &str, key: Option<&str>, given: Option<String>) -> Result<String> {
    if let Some(ns) = given {
        return Ok(ns);
    }
    let me = sealvol_client::remote::whoami(url, key)?;
    match me.namespaces.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Error::usage(format!(
            "key {} writes in every namespace: say which one's jobs use this secret",
            me.name
        ))
        .hint("pass --namespace NS")),
        many => Err(Error::usage(format!(
            "key {} writes in {}: say which one's jobs use this secret",
            me.name,
            many.join(", ")
        ))
        .hint("pass --namespace NS")),
    }
}

fn read_value(name: &str) -> Result<Vec<u8>> {
    let stdin = std::io::stdin();
    let io_err = |e| {
        Error::io(
            "cannot read the secret from",
            std::path::Path::new("stdin"),
            e,
        )
    };
    if !stdin.is_terminal() {
        let mut v = Vec::new();
        stdin.lock().read_to_end(&mut v).map_err(io_err)?;
        return Ok(v);
    }
    crate::output::note(format_args!("value for secret {name} (not echoed): "));
    let echo = EchoOff::new();
    let mut line = String::new();
    let r = stdin.read_line(&mut line);
    drop(echo);
    errln!();
    r.map_err(io_err)?;
    Ok(line.into_bytes())
}

/// Turns terminal echo off until dropped.
struct EchoOff(Option<libc::termios>);

impl EchoOff {
    fn new() -> EchoOff {
        // SAFETY: tcgetattr/tcsetattr on stdin with a zeroed termios they fill.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut t) != 0 {
                return EchoOff(None);
            }
            let saved = t;
            t.c_lflag &= !libc::ECHO;
            t.c_lflag |= libc::ECHONL;
            libc::tcsetattr(0, libc::TCSANOW, &t);
            EchoOff(Some(saved))
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        if let Some(t) = self.0 {
            // SAFETY: restores the settings read in `new`.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, &t);
            }
        }
    }
}
