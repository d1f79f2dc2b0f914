//! One module per command group, each with its arguments (clap) beside the code that
//! runs them; `Ctx` carries what every command needs, `Run` is how a command's
//! arguments are run, and `group!` makes a group's enum of subcommands.

pub mod cache;
pub mod csi;
pub mod demo;
pub mod deploy;
pub mod info;
pub mod jobs;
pub mod key;
pub mod launch;
pub mod mount;
pub mod peers;
pub mod repair;
pub mod secret;
pub mod serve;
pub mod volume;
pub mod watch;

use sealvol_core::Result;
use sealvol_core::progress::Progress;
use sealvol_setup::Setup;
use sealvol_setup::settings::Settings;

/// What every command works on: the settings and the repository they name
/// (`sealvol_setup::Setup`, which the console and the Python package share), with the
/// CLI's way of saying things.
pub struct Ctx(Setup);

impl std::ops::Deref for Ctx {
    type Target = Setup;
    fn deref(&self) -> &Setup {
        &self.0
    }
}

impl Ctx {
    pub fn new(settings: Settings, quiet: bool) -> Ctx {
        Ctx(Setup {
            settings,
            quiet,
            note: |line| errln!("{line}"),
        })
    }

    /// The global options that make a child process use this repository.
    pub fn repo_args(&self) -> Vec<std::ffi::OsString> {
        let s = &self.settings;
        // A child (agent, mount) waits on backends as long as this process would.
        let timeout: [std::ffi::OsString; 2] = [
            "--timeout".into(),
            format!("{}ms", s.timeout.as_millis()).into(),
        ];
        if let Some(url) = &s.remote {
            // The key goes by the environment, which the child inherits.
            let mut args: Vec<std::ffi::OsString> = vec!["--remote".into(), url.into()];
            args.extend(timeout);
            return args;
        }
        let mut args: Vec<std::ffi::OsString> = vec!["--repo".into(), s.repo.to_string().into()];
        if let Some(name) = &s.repo_secret {
            args.extend(["--repo-secret".into(), name.into()]);
        }
        args.extend(timeout);
        args
    }

    pub fn progress(&self) -> Box<dyn Progress> {
        crate::progress::for_terminal(self.quiet)
    }
}

/// A command's parsed arguments, run.
pub trait Run {
    fn run(self, ctx: &Ctx) -> Result<()>;
}

/// A command whose arguments are boxed in its group (they are large).
impl<T: Run> Run for Box<T> {
    fn run(self, ctx: &Ctx) -> Result<()> {
        (*self).run(ctx)
    }
}

/// A group of subcommands: the clap enum as written (one variant per command, holding
/// that command's arguments), and its `Run`, which runs the variant given.
macro_rules! group {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident($args:ty), )*
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant($args), )*
        }

        impl $crate::commands::Run for $name {
            fn run(self, ctx: &$crate::commands::Ctx) -> sealvol_core::Result<()> {
                match self {
                    $( Self::$variant(args) => $crate::commands::Run::run(args, ctx), )*
                }
            }
        }
    };
}
pub(crate) use group;
