//! `sealvol serve`: the in-cluster cache tier and the remote engine (`sealvol_serve`)
//! over this repository, for the holders of its API keys.

use std::net::SocketAddr;
use std::sync::Arc;

use sealvol_core::cache::ChunkCache;
use sealvol_core::error::{Error, Result};

use super::Ctx;
use crate::cli::ServeArgs;
use crate::config::parse_size;

pub fn serve(ctx: &Ctx, args: ServeArgs) -> Result<()> {
    let ServeArgs {
        cache,
        cache_size,
        listen,
        tls_cert,
        tls_key,
        insecure_http,
        metrics_listen,
    } = args;
    let listen = listen.as_str();
    let tls = match (&tls_cert, &tls_key) {
        (Some(c), Some(k)) => Some(sealvol_serve::tls::acceptor(c, k)?),
        (None, None) => None,
        _ => {
            return Err(Error::usage("--tls-cert and --tls-key go together")
                .hint("give both: the certificate chain and its private key, PEM"));
        }
    };
    let addr: SocketAddr = listen.parse().map_err(|_| {
        Error::usage(format!("--listen {listen} is not an address"))
            .hint("give an IP and a port, e.g. 127.0.0.1:7420 or [::1]:7420")
    })?;
    sealvol_serve::check_listen(&addr, tls.is_some(), insecure_http).map_err(Error::usage)?;
    let dir = cache.unwrap_or_else(|| {
        let mut d = ctx.settings.cache.clone().into_os_string();
        d.push("-serve");
        d.into()
    });
    let bytes = match &cache_size {
        Some(s) => parse_size(s)?,
        None => ctx.settings.cache_size,
    };
    let repo = Arc::new(ctx.open_repo(false)?);
    let (keys, made) = sealvol_serve::keys::Keys::open(&super::key::dir(ctx))?;
    if let Some(admin) = made {
        // The path, never the key: logs are read by more people than keys should be.
        errln!(
            "created an admin API key in {} (mode 0600): callers set SEALVOL_API_KEY to a key; make scoped ones with `sealvol key create`",
            admin.display()
        );
    }
    let cache = Arc::new(ChunkCache::open(&dir, bytes)?);
    // What a caller is told never names the server's own folders.
    sealvol_serve::reply::hide_paths(vec![
        repo.location().to_string(),
        dir.display().to_string(),
        ctx.settings.state.display().to_string(),
    ]);
    let service = Arc::new(sealvol_serve::ChunkService::new(repo, cache));
    if let Some(text) = &metrics_listen {
        let at = metrics_address(text)?;
        let s = Arc::clone(&service);
        let render = Arc::new(move || {
            let cache = sealvol_serve::metrics::CacheState::of(s.cache());
            sealvol_serve::metrics::serve_text(&s.counters, cache)
        });
        let bound = sealvol_serve::metrics::expose("--metrics-listen", at, render)?;
        if !ctx.quiet {
            errln!("metrics without a key at http://{bound}/metrics");
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::usage(format!("cannot start the server's runtime: {e}")))?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
            Error::usage(format!("cannot listen on {addr}: {e}"))
                .hint("another process may hold the port: pick another with --listen")
        })?;
        let bound = listener.local_addr().unwrap_or(addr);
        // The first line on stdout is the address, for scripts (and port 0).
        let scheme = if tls.is_some() { "https" } else { "http" };
        println!("listening on {scheme}://{bound}");
        if !ctx.quiet {
            errln!(
                "serving chunks of {} from cache {} ({} bytes at most)",
                ctx.settings.repo,
                dir.display(),
                bytes
            );
        }
        let keys = Arc::new(keys);
        let served = async {
            match tls {
                Some(acceptor) => {
                    let l = sealvol_serve::tls::TlsListener::new(listener, acceptor)?;
                    sealvol_serve::run(l, service, keys).await
                }
                None => sealvol_serve::run(listener, service, keys).await,
            }
        };
        tokio::select! {
            r = served => r.map_err(|e| Error::usage(format!("the server stopped: {e}"))),
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })
}

/// `--metrics-listen`: an address, or a port alone for loopback (metrics name no data,
/// but what a node serves is still nobody else's business unless asked for).
fn metrics_address(text: &str) -> Result<SocketAddr> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| {
        Error::usage(format!(
            "--metrics-listen {text} is not an address or a port"
        ))
        .hint("give a port (9464, on loopback) or an IP and a port (0.0.0.0:9464)")
    })
}
