//! `sealvol key create | ls | revoke`: the API keys of this node's `sealvol serve`, kept
//! in `<state>/serve` (sealvol_serve::keys). A new key is printed once, on stdout; the
//! server keeps only its hash.

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
    let dir = dir(ctx);
    match cmd {
        KeyCommand::Create {
            name,
            read_only,
            namespaces,
            json: as_json,
        } => {
            let key = keys::create(&dir, &name, read_only, namespaces)?;
            if as_json {
                return json(&serde_json::json!({ "name": name, "key": key }));
            }
            if !ctx.quiet {
                errln!("created key {name}; it is shown this once (set SEALVOL_API_KEY to it):");
            }
            println!("{key}");
            Ok(())
        }
        KeyCommand::Ls { json: as_json } => {
            let list = keys::list(&dir)?;
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
            let k = keys::revoke(&dir, &name)?;
            if as_json {
                return json(&serde_json::json!({ "name": k.name, "revoked": k.revoked }));
            }
            if !ctx.quiet {
                errln!("revoked key {name}: the server refuses it from its next request");
            }
            Ok(())
        }
    }
}
