//! `sealvol`: the binary. Parses the command line, sets up logging, runs one command and
//! turns its error into one line on stderr and an exit code (1 failure, 2 usage).

#[macro_use]
mod output;

mod alloc;
mod args;
mod cli;
mod commands;
mod complete;
/// Settings from flags, the environment and config.toml (`sealvol-setup`).
use sealvol_setup::settings as config;
mod progress;
mod signals;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use sealvol_core::{Error, ErrorKind, Result};

use cli::{Cli, Command};
use commands::{Ctx, Run};

fn main() -> ExitCode {
    // SIGPIPE stays ignored (Rust's default): a write to a connection the other end
    // cut (an object store's, mid-upload) must be an error the client retries, not the
    // end of the process. Standard output alone ends quietly, by SIGPIPE, when its
    // reader goes away (`output::stdout_failed`).
    complete::answer_if_asked(Cli::command);
    // A foreground mount sets its own (commands/mount.rs).
    alloc::for_streams();
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(both) => both,
        // Help, the version, or a usage error: clap's own text, whose write is checked
        // (clap's `exit` would pass over a full disk with status 0).
        Err(e) => {
            return match e.print() {
                Ok(()) => ExitCode::from(e.exit_code().clamp(0, 255) as u8),
                Err(_) => ExitCode::from(1),
            };
        }
    };
    init_logging(cli.global.verbose, cli.global.quiet);
    match run(cli, &matches) {
        Ok(()) => ExitCode::from(output::exit_code()),
        Err(e) => {
            // errln! makes the commands the hint offers pasteable (`output::pasteable`).
            errln!("error: {e}");
            if let Some(hint) = e.hint_text() {
                errln!("hint: {hint}");
            }
            ExitCode::from(match e.kind() {
                ErrorKind::Usage => 2,
                // A job that ended CANCELLED, a question answered no.
                ErrorKind::Cancelled => 3,
                _ => 1,
            })
        }
    }
}

fn init_logging(verbose: u8, quiet: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (_, 0) => "warn",
        (_, 1) => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // The certificate verifier, hf-hub and the AWS credential chain log the
        // failures our own errors then report, with what to do: said once, not twice.
        .unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new(format!(
                "{default},rustls_platform_verifier=off,hf_hub=off,aws_config=off"
            ))
        });
    let color = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| output::StderrWriter)
        .log_internal_errors(false)
        .with_ansi(color)
        .with_target(false)
        .init();
}

/// Where each value the command line gave came from: `--theme`, or the variable clap
/// read for it. A global flag may be given after the subcommands, so they are searched.
fn flag_origins(m: &clap::ArgMatches) -> std::collections::BTreeMap<&'static str, String> {
    use clap::parser::ValueSource;
    let flags: [(&str, &'static str, &str, &str, bool); 5] = [
        ("repo", "repository", "--repo", "SEALVOL_REPO", true),
        ("remote", "remote", "--remote", "SEALVOL_REMOTE", true),
        ("state", "state", "--state", "SEALVOL_STATE", true),
        ("timeout", "timeout", "--timeout", "SEALVOL_TIMEOUT", true),
        ("theme", "theme", "--theme", "SEALVOL_THEME", false),
    ];
    let mut out = std::collections::BTreeMap::new();
    for (id, key, flag, var, global) in flags {
        let mut level = Some(m);
        while let Some(here) = level {
            match here.value_source(id) {
                Some(ValueSource::CommandLine) => {
                    out.insert(key, flag.to_string());
                    break;
                }
                Some(ValueSource::EnvVariable) => {
                    out.insert(key, var.to_string());
                }
                _ => {}
            }
            level = match global {
                true => here.subcommand().map(|(_, sub)| sub),
                false => None,
            };
        }
    }
    out
}

fn run(cli: Cli, matches: &clap::ArgMatches) -> Result<()> {
    // These two need no repository nor settings.
    match &cli.command {
        Some(Command::Completions(c)) => return c.print(),
        Some(Command::Digest(d)) => return d.print(),
        _ => {}
    }
    let ctx = Ctx::new(
        config::resolve(config::Flags {
            repo: cli.global.repo.clone(),
            remote: cli.global.remote.clone(),
            repo_secret: cli.global.repo_secret.clone(),
            state: cli.global.state.clone(),
            timeout: cli.global.timeout,
            theme: cli.theme.clone(),
            from: flag_origins(matches),
        })?,
        cli.global.quiet,
    );
    if let Some(url) = &ctx.settings.remote {
        output::set_remote(url);
    }
    // A theme named on the command line is checked even where no console opens.
    if let Some(name) = &cli.theme {
        load_theme(name)?;
    }
    match cli.command {
        Some(command) => command.run(&ctx),
        None if cli.demo => {
            if commands::demo::seed_if_empty(&ctx)? && !ctx.quiet {
                errln!("seeded a demo repository at {}", ctx.settings.repo);
            }
            // The demo's own deployment files, unless the user named some.
            let deploy = match cli.deploy.is_empty() && ctx.settings.deploy_dirs.is_empty() {
                true => commands::demo::deployments(&ctx)?.into_iter().collect(),
                false => cli.deploy.clone(),
            };
            if interactive() {
                return open_console(&ctx, cli.readonly, &deploy);
            }
            // Not a terminal: show what the console would.
            commands::volume::Ls {
                namespace: None,
                json: false,
            }
            .run(&ctx)
        }
        None if interactive() => open_console(&ctx, cli.readonly, &cli.deploy),
        None => {
            let _ = Cli::command().print_help();
            Err(
                Error::usage("no command given, and not in a terminal for the console")
                    .hint("try `sealvol --demo` in a terminal, or `sealvol volume ls`"),
            )
        }
    }
}

fn config_dir() -> Option<std::path::PathBuf> {
    config::config_path().and_then(|p| p.parent().map(|d| d.to_path_buf()))
}

fn load_theme(name: &str) -> Result<sealvol_themes::Theme> {
    let dir = config_dir();
    sealvol_themes::Theme::load(name, dir.as_deref(), sealvol_themes::ColorMode::detect()).map_err(
        |e| {
            let shown = dir.as_deref().map_or_else(
                || "<config>/themes".to_string(),
                |d| d.join("themes").display().to_string(),
            );
            Error::invalid(e.to_string()).hint(format!(
                "themes: {}; add your own as {shown}/NAME.toml",
                sealvol_themes::Theme::available(dir.as_deref()).join(", ")
            ))
        },
    )
}

/// The console's engine: the repository (an empty one made on a first run), what the
/// key may do on a remote engine, and the agent (hosted here when none runs; put in
/// `hosted` so that it is handed over when the console ends).
fn open_engine(
    ctx: &commands::Ctx,
    hosted: &std::sync::Mutex<Option<std::sync::Arc<dyn sealvol_node::jobs::JobsApi>>>,
) -> Result<(std::sync::Arc<dyn sealvol_node::api::Api>, bool)> {
    let repo = ctx.open_repo(false).or_else(|e| {
        if e.kind() == ErrorKind::NotFound {
            // A first run: an empty repository is a fine thing to look at.
            ctx.open_repo(true)
        } else {
            Err(e)
        }
    })?;
    // On a remote engine the title says so, with what the key may do; a read-only key
    // makes a read-only console, so that it offers nothing the server would refuse.
    let (label, readonly) = match &ctx.settings.remote {
        Some(url) => {
            let key = sealvol_client::remote::whoami(
                url,
                ctx.settings.api_key.as_ref().map(|k| k.expose()),
            )?;
            (
                Some(format!("{url} · remote, key {} ({})", key.name, key.scope)),
                key.read_only,
            )
        }
        None => (None, false),
    };
    let (jobs, is_hosted) = commands::jobs::agent_for_console(ctx);
    if is_hosted {
        *sealvol_core::lock(hosted) = jobs.clone();
    }
    let node = sealvol_node::api::Node {
        repo,
        state: ctx.settings.state.clone(),
        jobs,
        label,
        launcher: Some(std::sync::Arc::new(commands::launch::Commands::new(ctx)?)),
        policy: {
            let settings = ctx.settings.clone();
            std::sync::Arc::new(move || settings.policy())
        },
    };
    Ok((std::sync::Arc::new(node), readonly))
}

fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

fn open_console(ctx: &Ctx, readonly: bool, deploy: &[std::path::PathBuf]) -> Result<()> {
    // Named on the command line: checked now, so a typo is an error, not an empty screen.
    for p in deploy {
        if !p.exists() {
            return Err(Error::not_found(format!(
                "--deploy {}: no such file or folder",
                p.display()
            ))
            .hint("name a deployment's YAML file, or a folder of them"));
        }
    }
    let deploy = match deploy.is_empty() {
        true => ctx.settings.deploy_dirs.clone(),
        false => deploy.to_vec(),
    };
    let config_dir = config_dir();
    let theme = load_theme(&ctx.settings.theme)?;
    let keymap =
        sealvol_console::Keymap::load(config_dir.map(|d| d.join("keymap.toml")).as_deref())
            .map_err(Error::invalid)?;
    // Opened on the console's own thread: a repository that does not answer shows a
    // spinner, then its error, and `q` quits meanwhile.
    let location = ctx
        .settings
        .remote
        .clone()
        .unwrap_or_else(|| ctx.settings.repo.to_string());
    let hosted: std::sync::Arc<
        std::sync::Mutex<Option<std::sync::Arc<dyn sealvol_node::jobs::JobsApi>>>,
    > = Default::default();
    let open = {
        let ctx = commands::Ctx::new(ctx.settings.clone(), ctx.quiet);
        let hosted = std::sync::Arc::clone(&hosted);
        Box::new(move || open_engine(&ctx, &hosted)) as sealvol_console::Open
    };
    // What the engine logs meanwhile goes to a file: the terminal is the console's.
    let _ = sealvol_core::private::dir(&ctx.settings.state);
    output::divert_log(&ctx.settings.state.join("console.log"));
    let result = sealvol_console::run(
        location,
        open,
        sealvol_console::Options {
            readonly,
            deploy,
            theme,
            keymap,
        },
    )
    .map_err(|e| Error::io("console failed on", std::path::Path::new("the terminal"), e));
    output::restore_log();
    let agent = sealvol_core::lock(&hosted).take();
    if let Some(agent) = agent {
        commands::jobs::hand_over(ctx, agent)?;
    }
    result
}
