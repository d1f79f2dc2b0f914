//! `sealvol key create | ls | revoke | share`: the API keys of `sealvol serve`, kept in
//! `<state>/serve` for one server, or in the repository for every server of it once
//! `key share` put them there (sealvol_serve::keys). A new key is printed once, on
//! stdout; a list keeps only its hash.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use sealvol_core::{Repository, Result};
use sealvol_serve::keys;

use super::Ctx;
use crate::args::JSON_HELP;
use crate::commands::{Run, group};
use crate::output::{json, table, when};

/// Where `sealvol serve` with this state keeps its keys.
pub fn dir(ctx: &Ctx) -> PathBuf {
    ctx.settings.state.join("serve")
}

/// What every key command works on: the server's folder and its repository.
struct Keys {
    dir: PathBuf,
    repo: Arc<Repository>,
}

impl Keys {
    fn open(ctx: &Ctx) -> Result<Keys> {
        if let Some(url) = &ctx.settings.remote {
            // Keys are the server's own business: no route changes them.
            return Err(sealvol_core::Error::usage(format!(
                "--remote {url}: keys are made where the server's repository is reachable, not through a server"
            ))
            .hint("run `sealvol key` on the server's machine, with its --repo and --state"));
        }
        Ok(Keys {
            dir: dir(ctx),
            repo: Arc::new(ctx.open_repo(false)?),
        })
    }

    /// Where the key list is: the server's folder, or the repository once shared.
    fn place(&self) -> Result<keys::Place> {
        keys::Place::of(&self.dir, Arc::clone(&self.repo))
    }
}

group! {
    // `sealvol key …`: the API keys of this node's `sealvol serve`.
    #[derive(clap::Subcommand, Debug)]
    pub enum KeyCommand {
        Create(Create),
        Ls(Ls),
        Revoke(Revoke),
        Share(Share),
        RotateRing(RotateRing),
    }
}

/// Make a key for callers of `sealvol serve`; it is printed once, on stdout, and only its hash is kept.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol key create training-ci --namespace weights\n  sealvol key create dashboards --read-only\n\nThe caller sets SEALVOL_API_KEY to it and runs `sealvol --remote http://HOST:7420 …`.\nRevocation takes effect at the server's next request, without a restart."
)]
pub struct Create {
    /// 1-63 characters of a-z 0-9 . _ -
    name: String,
    /// Reads only: no push, tag, delete or restore.
    #[arg(long)]
    read_only: bool,
    /// Only this namespace (repeatable) [default: every namespace]
    #[arg(long = "namespace", value_name = "NS")]
    namespaces: Vec<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Create {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let k = Keys::open(ctx)?;
        let Create {
            name,
            read_only,
            namespaces,
            json: as_json,
        } = self;
        let place = k.place()?;
        // Before the first `serve`: the list (and its admin key) is made now, as
        // the server would make it, so keys can come first.
        if let keys::Place::Folder(dir) = &place
            && let Some(admin) = keys::make_local(dir)?
            && !ctx.quiet
        {
            errln!(
                "made the key list in {} with an admin key in {} (mode 0600)",
                dir.display(),
                admin.display()
            );
        }
        let key = keys::create(&place, &name, read_only, namespaces)?;
        if as_json {
            return json(&serde_json::json!({ "name": name, "key": key }));
        }
        if !ctx.quiet {
            errln!(
                "created key {name} in {}; it is shown this once (set SEALVOL_API_KEY to it):",
                place.describe()
            );
        }
        println!("{key}");
        Ok(())
    }
}

/// List keys: name, scope, created, revoked (never the keys).
#[derive(Args, Debug)]
pub struct Ls {
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Ls {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let k = Keys::open(ctx)?;
        let Ls { json: as_json } = self;
        let list = keys::list(&k.place()?)?;
        if as_json {
            let keys: Vec<_> = list
                .iter()
                .map(|k| {
                    serde_json::json!({
                        "name": k.name,
                        "scope": k.grant().scope(),
                        "admin": k.admin,
                        "read_only": k.read_only,
                        "namespaces": k.namespaces,
                        "created": k.created,
                        "revoked": k.revoked,
                    })
                })
                .collect();
            return json(&serde_json::json!({ "keys": keys }));
        }
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|k| {
                vec![
                    k.name.clone(),
                    k.grant().scope(),
                    when(&k.created),
                    k.revoked.as_deref().map(when).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        table(&["NAME", "SCOPE", "CREATED", "REVOKED"], &rows)
    }
}

/// Revoke a key: refused from the server's next request on (within 5 s on every server of a shared list).
#[derive(Args, Debug)]
pub struct Revoke {
    /// The key's name, from `sealvol key ls`.
    name: String,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Revoke {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let k = Keys::open(ctx)?;
        let Revoke {
            name,
            json: as_json,
        } = self;
        let place = k.place()?;
        let k = keys::revoke(&place, &name)?;
        if as_json {
            return json(&serde_json::json!({ "name": k.name, "revoked": k.revoked }));
        }
        if !ctx.quiet {
            let when = match place {
                keys::Place::Folder(_) => "from its next request".to_string(),
                keys::Place::Repository(_) => format!("within {} s", keys::REFRESH.as_secs()),
            };
            errln!("revoked key {name} in {}: refused {when}", place.describe());
        }
        Ok(())
    }
}

/// Move this server's key list into the repository, for every server of it.
#[derive(Args, Debug)]
#[command(
    long_about = "Move this server's key list (<state>/serve/keys.json) into the repository (access/keys.json).\n\nFrom then on every `sealvol serve` of the repository accepts the same keys: each reads the list every 5 s, so a key made or revoked with `sealvol key` reaches all of them within 5 s (a server that cannot read the repository for 2 minutes refuses every key). The local list is renamed keys.json.shared and no longer read; the admin key stays valid. Refused when the repository already holds a list."
)]
pub struct Share {
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Share {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let k = Keys::open(ctx)?;
        let Share { json: as_json } = self;
        let n = keys::share(&k.dir, &k.repo)?;
        if as_json {
            return json(&serde_json::json!({ "shared": n, "repository": k.repo.location() }));
        }
        if !ctx.quiet {
            errln!(
                "{n} key(s) now in repository {}: every `sealvol serve` of it accepts them within {} s, and `sealvol key` changes them there",
                k.repo.location(),
                keys::REFRESH.as_secs()
            );
        }
        Ok(())
    }
}

/// Make a new ring key: the servers of the repository prove themselves with it from now on.
#[derive(Args, Debug)]
#[command(
    long_about = "Make a new key of the ring (access/ring.json in the repository): every `sealvol serve` of the repository signs with it within 5 s, and the key before is kept so that what it signed still checks; older keys go. Nodes that read the repository find the new public key there; a node given ring_key in config.toml needs the new access/ring-public.json copied to it."
)]
pub struct RotateRing {
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for RotateRing {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let k = Keys::open(ctx)?;
        let RotateRing { json: as_json } = self;
        let id = sealvol_serve::credential::rotate(&k.repo)?;
        if as_json {
            return json(&serde_json::json!({ "ring_key": id, "repository": k.repo.location() }));
        }
        if !ctx.quiet {
            errln!(
                "ring key {id} made in repository {}: its servers sign with it within {} s; the key before still checks",
                k.repo.location(),
                sealvol_serve::credential::REFRESH.as_secs()
            );
        }
        Ok(())
    }
}
