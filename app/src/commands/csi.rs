//! `sealvol csi`: the Kubernetes CSI node plugin (`sealvol_csi`) on this node. Its
//! mounts are `volume mount`'s own, started the same way in processes of their own,
//! with this process's repository, credentials (the driver's config and environment,
//! never a pod's), node cache and cache servers.

use std::path::PathBuf;
use std::sync::Arc;

use sealvol_core::{Ref, Result};

use super::Ctx;
use sealvol_setup::settings::Peers;

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
            super::mount::Request {
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

pub fn csi(
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
