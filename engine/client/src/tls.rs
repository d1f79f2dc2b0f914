//! The clients' side of TLS: rustls with aws-lc-rs (reqwest's), trusting the system's
//! roots and the PEM certificates in `SEALVOL_CA_CERT` (a private CA, a self-signed
//! server).

use std::time::Duration;

use sealvol_core::error::{Error, ErrorKind, Result};

/// The certificates a client trusts besides the system's, PEM (env).
pub const CA_ENV: &str = "SEALVOL_CA_CERT";

/// A blocking HTTP client trusting `SEALVOL_CA_CERT` too (a `sealvol serve`'s clients
/// add the protocol's version: `crate::protocol::client`).
pub fn client(connect: Duration, total: Duration) -> Result<reqwest::blocking::Client> {
    builder(connect, total)?
        .build()
        .map_err(|e| Error::new(ErrorKind::Io, format!("cannot set up an HTTP client: {e}")))
}

/// `client`'s settings, to add to.
pub fn builder(connect: Duration, total: Duration) -> Result<reqwest::blocking::ClientBuilder> {
    let mut b = reqwest::blocking::Client::builder()
        .connect_timeout(connect)
        .timeout(total);
    if let Some(path) = std::env::var_os(CA_ENV) {
        let path = std::path::PathBuf::from(path);
        let pem = std::fs::read(&path).map_err(|e| Error::io("cannot read", &path, e))?;
        let not_pem = |why: String| {
            Error::invalid(format!("{CA_ENV}={}: {why}", path.display())).hint(
                "point it at the CA (or self-signed) certificate the server's --tls-cert chains to, in PEM",
            )
        };
        let certs = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| not_pem(format!("not PEM certificates: {e}")))?;
        // A file with no PEM certificate in it would otherwise be passed over in silence.
        if certs.is_empty() {
            return Err(not_pem("holds no PEM certificate".into()));
        }
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    Ok(b)
}
