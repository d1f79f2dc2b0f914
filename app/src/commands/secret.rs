//! `sealvol secret set | ls | rm`. The value comes from stdin (a pipe, a file, or typed
//! at a prompt with echo off), never from argv, where `ps` and shell history would see it.

use std::io::{IsTerminal, Read};

use sealvol_core::{Error, Result};
use sealvol_source::secrets;

use super::Ctx;
use crate::cli::SecretCommand;
use crate::output::{json, size, table, when};

pub fn run(ctx: &Ctx, cmd: SecretCommand) -> Result<()> {
    let state = &ctx.settings.state;
    match cmd {
        SecretCommand::Set {
            name,
            value_on_command_line,
        } => {
            if value_on_command_line.is_some() {
                return Err(Error::invalid(
                    "secret values are read from stdin, never from the command line",
                )
                .hint(format!(
                    "printf %s \"$VALUE\" | sealvol secret set {name}; and rotate this one: it is in your shell history"
                )));
            }
            let value = read_value(&name)?;
            secrets::set(state, &name, &value)?;
            if !ctx.quiet {
                errln!("stored secret {name}");
            }
            Ok(())
        }
        SecretCommand::Ls { json: as_json } => {
            let l = secrets::list(state)?;
            if as_json {
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
            Ok(())
        }
        SecretCommand::Rm { name } => {
            secrets::remove(state, &name)?;
            if !ctx.quiet {
                errln!("removed secret {name}");
            }
            Ok(())
        }
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
