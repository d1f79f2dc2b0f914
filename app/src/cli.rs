//! The command line's top: the global options, the console's own flags, and the
//! commands, each of which holds its arguments beside the code that runs it
//! (`commands/`). Every command has an example in its help.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser};

use crate::commands::{
    Ctx, Run, cache, csi, deploy, group, info, jobs, key, peers, repair, secret, serve, volume,
    watch,
};
use crate::complete;

#[derive(Parser, Debug)]
#[command(
    name = "sealvol",
    version,
    about = "Sealed, content-addressed volumes of model data: push once, get a digest, pull or mount it anywhere.",
    after_help = "Examples:\n  sealvol                      (in a terminal: the console)\n  sealvol --demo               (seed demo volumes if the repository is empty, then the console)\n  sealvol volume push ./ckpt weights/qwen3-8b --tag prod\n  sealvol volume versions weights/qwen3-8b\n  sealvol volume pull weights/qwen3-8b:prod ./out\n\nConfiguration: flags override SEALVOL_* variables, which override config.toml in the XDG config directory."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,

    /// Seed the repository with demo volumes if it is empty, then open the console.
    #[arg(long)]
    pub demo: bool,

    /// Console: disable every change (tag moves, undo, delete, restore).
    #[arg(long)]
    pub readonly: bool,

    /// Console: a deployment file, or a folder of them, for the Deployments screen (repeatable) [default: deploy_dirs in config.toml]
    #[arg(long = "deploy", value_name = "PATH")]
    pub deploy: Vec<PathBuf>,

    /// Console theme: dark, light, high-contrast, or a file in <config>/themes/ [default: from config.toml, else dark]
    #[arg(long, env = "SEALVOL_THEME", value_name = "NAME")]
    pub theme: Option<String>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Args, Debug)]
pub struct Global {
    /// Repository: a directory, s3://BUCKET/PREFIX, r2://ACCOUNT/BUCKET/PREFIX or cw://BUCKET/PREFIX [default: $XDG_DATA_HOME/sealvol/repo]
    #[arg(long, env = "SEALVOL_REPO", global = true, value_name = "ADDRESS")]
    pub repo: Option<String>,

    /// A remote engine (`sealvol serve` elsewhere) to work on instead of a repository, as http://HOST:PORT; the API key comes from SEALVOL_API_KEY
    #[arg(long, env = "SEALVOL_REMOTE", global = true, value_name = "URL")]
    pub remote: Option<String>,

    /// Stored secret (`sealvol secret set NAME`) with KEY_ID:SECRET for the repository's bucket [default: the AWS credential chain]
    #[arg(long, env = "SEALVOL_REPO_SECRET", global = true, value_name = "NAME")]
    pub repo_secret: Option<String>,

    /// Local state directory: database, caches, socket [default: $XDG_STATE_HOME/sealvol]
    #[arg(long, env = "SEALVOL_STATE", global = true, value_name = "DIR")]
    pub state: Option<PathBuf>,

    /// How long a backend (bucket, source, remote engine) may leave a request unanswered, retries included, before the command fails [default: 2m, or `timeout` in config.toml]
    #[arg(long, env = "SEALVOL_TIMEOUT", global = true, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub timeout: Option<std::time::Duration>,

    /// More log output (-v info, -vv debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    /// Only errors on stderr; no progress, no summaries.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

group! {
    // Each command's arguments are defined where it runs (`commands/`); a group of
    // subcommands is described here, its members there.
    #[derive(clap::Subcommand, Debug)]
    pub enum Command {
        Digest(info::Digest),
        Init(info::Init),

        /// Push, list, tag, pull and verify volumes.
        #[command(subcommand)]
        Volume(volume::VolumeCommand),

        /// Store, list and remove secrets for sync sources (values are never printed).
        #[command(subcommand)]
        Secret(secret::SecretCommand),

        /// API keys of this node's `sealvol serve`: create (printed once), list, revoke.
        #[command(subcommand)]
        Key(key::KeyCommand),

        /// List sync jobs, show one, cancel or retry it.
        #[command(subcommand)]
        Jobs(jobs::JobsCommand),

        /// List watches (`volume watch`), show one with its pushes, stop one.
        #[command(subcommand)]
        Watch(watch::WatchCommand),

        /// Deployments: check, pin, compare, roll back and mount the volumes their config files name.
        #[command(subcommand)]
        Deploy(deploy::DeployCommand),

        /// The startup cache: a folder of compiled kernels saved under a key, restored by later replicas.
        #[command(subcommand)]
        Cache(cache::CacheCommand),

        Serve(Box<serve::Serve>),
        Agent(jobs::Agent),
        Repair(repair::Repair),
        Settings(info::Settings),
        Peers(peers::Peers),
        Csi(csi::Csi),
        Info(info::Info),
        Completions(Completions),
    }
}

/// Print a shell completion script.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  echo 'source <(sealvol completions bash)' >> ~/.bashrc\n  sealvol completions fish > ~/.config/fish/completions/sealvol.fish\n  sealvol completions nushell | save -f ~/.config/nushell/sealvol.nu\n\nVolume, tag and digest names complete from the repository in effect (not in nushell)."
)]
pub struct Completions {
    /// bash, zsh, fish, elvish, powershell or nushell.
    #[arg(value_enum)]
    shell: complete::Shell,
}

impl Completions {
    /// Needs no repository nor settings: run before they are read.
    pub fn print(&self) -> sealvol_core::Result<()> {
        outln!(
            "{}",
            complete::script(self.shell, Cli::command())?.trim_end()
        )
    }
}

impl Run for Completions {
    fn run(self, _: &Ctx) -> sealvol_core::Result<()> {
        self.print()
    }
}
