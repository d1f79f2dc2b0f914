//! `sealvol key create | ls | revoke | share`: the API keys of `sealvol serve`, kept in
//! `<state>/serve` for one server, or in the repository for every server of it once
//! `key share` put them there (sealvol_serve::keys). A new key is printed once, on
//! stdout; a list keeps only its hash.

use sealvol_core::Result;
use sealvol_serve::keys;

use super::Ctx;
use crate::cli::KeyCommand;
use crate::output::{json, table, when};

/// Where `sealvol serve` with this state keeps its keys.
pub fn dir(ctx: &Ctx) -> std::path::PathBuf {
    ctx.settings.state.join("serve")
}

pub fn run(ctx: &Ctx, cmd: KeyCommand) -> Result<()> {
    if let Some(url) = &ctx.settings.remote {
        // Keys are the server's own business: no route changes them.
        return Err(sealvol_core::Error::usage(format!(
            "--remote {url}: keys are made where the server's repository is reachable, not through a server"
        ))
        .hint("run `sealvol key` on the server's machine, with its --repo and --state"));
    }
    let dir = dir(ctx);
    let repo = std::sync::Arc::new(ctx.open_repo(false)?);
    let place = || keys::Place::of(&dir, std::sync::Arc::clone(&repo));
    match cmd {
        KeyCommand::Create {
            name,
            read_only,
            namespaces,
            json: as_json,
        } => {
            let place = place()?;
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
        KeyCommand::Ls { json: as_json } => {
            let list = keys::list(&place()?)?;
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
        KeyCommand::Revoke {
            name,
            json: as_json,
        } => {
            let place = place()?;
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
        KeyCommand::RotateRing { json: as_json } => {
            let id = sealvol_serve::credential::rotate(&repo)?;
            if as_json {
                return json(&serde_json::json!({ "ring_key": id, "repository": repo.location() }));
            }
            if !ctx.quiet {
                errln!(
                    "ring key {id} made in repository {}: its servers sign with it within {} s; the key before still checks",
                    repo.location(),
                    sealvol_serve::credential::REFRESH.as_secs()
                );
            }
            Ok(())
        }
        KeyCommand::Share { json: as_json } => {
            let n = keys::share(&dir, &repo)?;
            if as_json {
                return json(&serde_json::json!({ "shared": n, "repository": repo.location() }));
            }
            if !ctx.quiet {
                errln!(
                    "{n} key(s) now in repository {}: every `sealvol serve` of it accepts them within {} s, and `sealvol key` changes them there",
                    repo.location(),
                    keys::REFRESH.as_secs()
                );
            }
            Ok(())
        }
    }
}
