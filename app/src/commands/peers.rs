//! `sealvol peers`: the cache servers this node's mounts and pulls would read through,
//! each asked how it is doing (`GET /v1/ring`): up or not, its share of the key space,
//! what it served, its hit ratio, what it read from the origin and from its fellows.

use std::path::{Path, PathBuf};

use clap::Args;
use sealvol_client::peer::HttpPeer;
use sealvol_core::Result;
use sealvol_core::error::ErrorKind;
use sealvol_setup::settings;
use sealvol_wire::ring::Report;

use super::{Ctx, Run};
use crate::args::{JSON_HELP, PEER_HELP, PEERS_FILE_HELP};
use crate::output::{json, size, table};

/// One server as `sealvol peers` shows it.
#[derive(serde::Serialize)]
struct Row {
    url: String,
    up: bool,
    /// Its share of the key space, 1/N of the ring listed here.
    share: f64,
    /// Why it is not up (cannot be reached, refuses the key).
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    report: Option<Report>,
}

/// The cache servers mounts and pulls read through, each asked how it is doing.
#[derive(Args, Debug)]
#[command(
    after_help = "Per server: whether it answers, its share of the key space (1/N of the ring), bytes served, cache hit ratio, bytes read from the origin, bytes its fellows gave it, and the servers in its own ring (serve --peer). The servers are those a mount would use: --peer, --peers-file, config.toml, else the remote engine.\n\nExamples:\n  sealvol peers\n  sealvol peers --peers-file /etc/sealvol/peers --json"
)]
pub struct Peers {
    #[arg(long = "peer", value_name = "URL", help = PEER_HELP)]
    peers: Vec<String>,
    #[arg(long, value_name = "FILE", help = PEERS_FILE_HELP, conflicts_with = "peers")]
    peers_file: Option<PathBuf>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Peers {
    fn run(self, ctx: &Ctx) -> Result<()> {
        peers(ctx, &self.peers, self.peers_file.as_deref(), self.json)
    }
}

fn peers(ctx: &Ctx, flags: &[String], file: Option<&Path>, as_json: bool) -> Result<()> {
    let urls = match ctx.settings.peers_or(flags, file)? {
        settings::Peers::Urls(urls) => urls,
        settings::Peers::File(path) => {
            sealvol_client::peer::PeersFile::open(
                &path,
                None,
                sealvol_client::peer::Trust::Unknown,
            )?
            .1
        }
    };
    let key = ctx.settings.api_key.as_ref().map(|k| k.expose());
    // The repository, read directly, holds the ring's public keys: a server that does not
    // prove it is one of the ring's is not sent this node's key.
    let origin = match ctx.settings.remote {
        Some(_) => None,
        None => ctx.open_repo(false).ok(),
    };
    let trust = ctx.peer_trust(origin.as_ref())?;
    let n = urls.len().max(1) as f64;
    let rows: Vec<Row> = urls
        .iter()
        .map(|u| {
            let asked = HttpPeer::with_trust(u, key, trust.for_url(u)).and_then(|p| p.report());
            let (report, error) = match asked {
                Ok(r) => (Some(r), None),
                Err(e) if e.kind() == ErrorKind::Denied => (
                    None,
                    Some(format!("refuses this node's key: {}", e.message())),
                ),
                Err(e) => (None, Some(e.message().to_string())),
            };
            Row {
                url: u.clone(),
                up: report.is_some(),
                share: 1.0 / n,
                error,
                report,
            }
        })
        .collect();
    if as_json {
        return json(&serde_json::json!({ "peers": rows }));
    }
    if rows.is_empty() {
        errln!(
            "no cache servers: give --peer URL or --peers-file FILE, or set peers in config.toml"
        );
        return Ok(());
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| match &r.report {
            Some(s) => vec![
                r.url.clone(),
                "up".into(),
                format!("{:.0}%", r.share * 100.0),
                size(s.bytes_served),
                format!("{:.0}%", s.hit_ratio * 100.0),
                size(s.origin_bytes),
                size(s.fellow_bytes),
                match s.ring {
                    0 => "-".into(),
                    n => n.to_string(),
                },
            ],
            None => vec![
                r.url.clone(),
                format!("DOWN: {}", r.error.as_deref().unwrap_or("?")),
                format!("{:.0}%", r.share * 100.0),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ],
        })
        .collect();
    table(
        &[
            "SERVER", "STATE", "SHARE", "SERVED", "HITS", "ORIGIN", "FELLOWS", "RING",
        ],
        &cells,
    )
}
