//! TLS for `sealvol serve` (`--tls-cert`, `--tls-key`): rustls with aws-lc-rs, the one
//! TLS stack of the build. Its clients' side is `sealvol_client::tls`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sealvol_core::error::{Error, Result};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's side of TLS from a certificate chain and its key, both PEM files.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
        Error::invalid(format!("{what} {}: {e}", path.display())).hint(
            "give PEM files: the certificate chain (--tls-cert) and its private key (--tls-key)",
        )
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad("cannot read the certificate", cert, &e))?
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| bad("cannot read the certificate", cert, &e))?;
    if certs.is_empty() {
        return Err(bad("no certificate in", cert, &"no CERTIFICATE section"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| bad("cannot read the key", key, &e))?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| {
            Error::invalid(format!(
                "the certificate and key do not make a TLS server: {e}"
            ))
            .hint("check that --tls-key is the key of --tls-cert's first certificate")
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// Connections of `tcp` once their handshake is done; handshakes run side by side, so a
/// slow client never holds up the next.
pub struct TlsListener {
    rx: tokio::sync::mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    addr: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, acceptor: TlsAcceptor) -> std::io::Result<TlsListener> {
        let addr = tcp.local_addr()?;
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let (stream, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors and the like: wait, then go on.
                        tracing::warn!("accept: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => tracing::debug!("TLS handshake with {peer}: {e}"),
                        Err(_) => tracing::debug!("TLS handshake with {peer} timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { rx, addr })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept loop never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.addr)
    }
}
