//! The plugin's socket and serving loop: `unix:///path` (what kubelet's registrar and
//! the CSI sidecars pass as CSI_ENDPOINT) or an absolute path; nothing else. A stale
//! socket from a killed run is replaced; a live one, or any other file, is not.

use std::future::Future;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sealvol_core::{Error, ErrorKind, Result};
use tokio::net::UnixListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tracing::info;

use crate::identity::IdentityService;
use crate::mounter::Mounter;
use crate::node::NodeService;
use crate::proto::identity_server::IdentityServer;
use crate::proto::node_server::NodeServer;

/// Where the plugin listens.
#[derive(Debug, Clone, PartialEq)]
pub struct Endpoint(PathBuf);

impl Endpoint {
    pub fn parse(s: &str) -> Result<Endpoint> {
        let path = s.strip_prefix("unix://").unwrap_or(s);
        if s.contains("://") && !s.starts_with("unix://") {
            return Err(Error::invalid(format!("endpoint {s} is not a unix socket"))
                .hint("sealvol csi listens on a unix socket: give unix:///csi/csi.sock or an absolute path"));
        }
        if !Path::new(path).is_absolute() {
            return Err(
                Error::invalid(format!("endpoint {s} is not an absolute path"))
                    .hint("give unix:///csi/csi.sock or an absolute path"),
            );
        }
        Ok(Endpoint(PathBuf::from(path)))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

/// A plugin to serve.
pub struct Plugin {
    pub endpoint: Endpoint,
    /// The node's name, as kubelet knows it (NodeGetInfo).
    pub node_id: String,
    /// Where the plugin keeps its records and its mounts theirs.
    pub state: PathBuf,
    pub mounter: Arc<dyn Mounter>,
}

/// Adopts what a former run published, then serves until `shutdown` completes.
pub async fn serve(p: Plugin, shutdown: impl Future<Output = ()> + Send) -> Result<()> {
    if p.node_id.is_empty() {
        return Err(Error::invalid("no node id")
            .hint("give --node-id (the DaemonSet passes spec.nodeName)"));
    }
    let node = NodeService::new(Arc::clone(&p.mounter), &p.state, p.node_id.clone())?;
    let node = tokio::task::spawn_blocking(move || {
        let a = node.adopt();
        info!(
            "adopted the mounts of a former run: {} serving, {} mounted again, {} gone, {} failed; publishes cut short: {} finished, {} undone",
            a.serving, a.remounted, a.forgotten, a.failed, a.finished, a.undone
        );
        node
    })
    .await
    .map_err(|e| Error::new(ErrorKind::Io, format!("adopting mounts failed: {e}")))?;
    let listener = bind(p.endpoint.path())?;
    info!(
        "sealvol csi {} ({}) serves node {} on unix://{}",
        env!("CARGO_PKG_VERSION"),
        crate::mounter::DRIVER_NAME,
        p.node_id,
        p.endpoint.path().display()
    );
    let result = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(IdentityService))
        .add_service(NodeServer::new(node))
        // Through the shim that takes any :authority (authority.rs).
        .serve_with_incoming_shutdown(
            UnixListenerStream::new(listener).map(|c| c.map(crate::authority::accept)),
            shutdown,
        )
        .await;
    let _ = std::fs::remove_file(p.endpoint.path());
    result.map_err(|e| Error::new(ErrorKind::Io, format!("the CSI socket failed: {e}")))
}

fn bind(path: &Path) -> Result<UnixListener> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(Error::new(
                    ErrorKind::Conflict,
                    format!("another process serves {}", path.display()),
                )
                .hint("stop the other plugin first; one plugin per node"));
            }
            // Left by a run that was killed.
            std::fs::remove_file(path).map_err(|e| Error::io("cannot replace", path, e))?;
        }
        Ok(_) => {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("{} exists and is not a socket", path.display()),
            )
            .hint("give another --endpoint; sealvol never removes a file it did not make"));
        }
        Err(_) => {}
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io("cannot create", parent, e))?;
    }
    UnixListener::bind(path).map_err(|e| Error::io("cannot listen on", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_a_unix_socket_path_and_nothing_else() {
        assert_eq!(
            Endpoint::parse("unix:///csi/csi.sock").unwrap().path(),
            Path::new("/csi/csi.sock")
        );
        assert_eq!(
            Endpoint::parse("/run/csi.sock").unwrap().path(),
            Path::new("/run/csi.sock")
        );
        for bad in [
            "tcp://0.0.0.0:10000",
            "unix://csi.sock",
            "csi.sock",
            "http:///x",
        ] {
            assert_eq!(
                Endpoint::parse(bad).unwrap_err().kind(),
                ErrorKind::Invalid,
                "{bad}"
            );
        }
    }

    #[test]
    fn a_stale_socket_is_replaced_and_a_plain_file_is_not() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("plain");
        std::fs::write(&file, b"keep").unwrap();
        assert_eq!(bind(&file).unwrap_err().kind(), ErrorKind::Conflict);
        assert_eq!(std::fs::read(&file).unwrap(), b"keep");
        let sock = d.path().join("csi.sock");
        drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let live = bind(&sock).unwrap();
            assert_eq!(bind(&sock).unwrap_err().kind(), ErrorKind::Conflict);
            drop(live);
        });
    }
}
