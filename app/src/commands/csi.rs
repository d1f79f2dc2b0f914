//! `sealvol csi`: the Kubernetes CSI node plugin (`sealvol_csi`) on this node. Its
//! mounts are `volume mount`'s own, started the same way in processes of their own,
//! with this process's repository, credentials (the driver's config and environment,
//! never a pod's), node cache and cache servers.

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use sealvol_core::{Ref, Result};
use sealvol_setup::settings::Peers;

use super::{Ctx, Run};
use crate::args::{PEER_HELP, PEERS_FILE_HELP};

/// The plugin's side of a mount: this program's settings, as `volume mount` uses them.
struct Mounts {
    ctx: Ctx,
    /// The driver's cache servers (`--peer`, `--peers-file`; none: config.toml's).
    peers: Vec<String>,
    peers_file: Option<PathBuf>,
}

impl sealvol_csi::Mounter for Mounts {
    fn resolve(&self, reference: &str) -> Result<String> {
        let r = Ref::parse(reference)?;
        let repo = self.ctx.open_repo(false)?;
        let digest = repo.resolve(&r)?;
        // The driver's config.toml policy: a pod gets PERMISSION_DENIED with the reason.
        self.ctx
            .settings
            .policy()?
            .admit(&repo, &r.volume, &digest)?;
        Ok(Ref::pinned(r.volume, digest).to_string())
    }

    fn mount(&self, m: &sealvol_csi::Mount) -> Result<()> {
        super::mount::mount(
            &self.ctx,
            super::mount::Mount {
                reference: m.pinned.clone(),
                dir: m.target.clone(),
                cache: None,
                cache_size: None,
                prefetch_memory: m.prefetch_memory.clone(),
                read_timeout: sealvol_mount::DEFAULT_READ_TIMEOUT,
                // A volume's own `peers` are a subset of the driver's (checked).
                peers: m.peers.clone().unwrap_or_else(|| self.peers.clone()),
                peers_file: match m.peers {
                    Some(_) => None,
                    None => self.peers_file.clone(),
                },
                origins: Vec::new(),
                metrics: None,
                foreground: false,
                requested: Some(m.requested.clone()),
                quiet: true,
            },
        )
    }

    fn peers(&self) -> Result<Vec<String>> {
        let key = self.ctx.settings.api_key.as_ref().map(|k| k.expose());
        match self
            .ctx
            .settings
            .peers_or(&self.peers, self.peers_file.as_deref())?
        {
            Peers::Urls(urls) => Ok(urls),
            // Only the list is read here; each mount process checks its peers.
            Peers::File(path) => Ok(sealvol_client::peer::PeersFile::open(
                &path,
                key,
                sealvol_client::peer::Trust::Unknown,
            )?
            .1),
        }
    }
}

/// Serve the Kubernetes CSI node plugin: pods mount sealed versions read-only by ref.
#[derive(Args, Debug)]
#[command(
    after_help = "kubelet calls it over gRPC on a unix socket (CSI spec 1.12: Identity and Node).\nEach publish is a `volume mount` in a process of its own that outlives the plugin,\nwith this node's cache and the repository, key and cache servers given here (never\na pod's). A restarted plugin adopts the mounts it made. deploy/kubernetes/ runs it\nas a DaemonSet.\n\nExamples:\n  sealvol --remote http://sealvol:7420 csi --node-id \"$NODE_NAME\"\n  sealvol csi --node-id node-a --peers-file /etc/sealvol/peers"
)]
pub struct Csi {
    /// The socket to serve on: unix:///PATH or an absolute path.
    #[arg(
        long,
        value_name = "ENDPOINT",
        env = "CSI_ENDPOINT",
        default_value = "unix:///csi/csi.sock"
    )]
    endpoint: String,
    /// This node's name as kubelet knows it (the DaemonSet passes spec.nodeName).
    #[arg(long, value_name = "NAME", env = "NODE_NAME")]
    node_id: String,
    #[arg(long = "peer", value_name = "URL", help = PEER_HELP)]
    peers: Vec<String>,
    #[arg(long, value_name = "FILE", help = PEERS_FILE_HELP, conflicts_with = "peers")]
    peers_file: Option<PathBuf>,
}

impl Run for Csi {
    fn run(self, ctx: &Ctx) -> Result<()> {
        csi(
            ctx,
            &self.endpoint,
            &self.node_id,
            self.peers,
            self.peers_file,
        )
    }
}

fn csi(
    ctx: &Ctx,
    endpoint: &str,
    node_id: &str,
    peers: Vec<String>,
    peers_file: Option<PathBuf>,
) -> Result<()> {
    let endpoint = sealvol_csi::Endpoint::parse(endpoint)?;
    let mounter = Arc::new(Mounts {
        ctx: Ctx::new(ctx.settings.clone(), true),
        peers,
        peers_file,
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            sealvol_core::Error::usage(format!("cannot start the plugin's runtime: {e}"))
        })?;
    let plugin = sealvol_csi::Plugin {
        endpoint,
        node_id: node_id.to_string(),
        state: ctx.settings.state.clone(),
        mounter,
    };
    rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let fail = |e: std::io::Error| {
            sealvol_core::Error::new(
                sealvol_core::ErrorKind::Io,
                format!("cannot watch for signals: {e}"),
            )
        };
        let mut term = signal(SignalKind::terminate()).map_err(fail)?;
        let mut int = signal(SignalKind::interrupt()).map_err(fail)?;
        // SIGTERM (kubelet stopping the pod) or Ctrl-C ends the plugin, not its mounts.
        sealvol_csi::serve(plugin, async move {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        })
        .await
    })
}
