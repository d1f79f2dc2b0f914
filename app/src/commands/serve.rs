//! `sealvol serve`: the in-cluster cache tier and the remote engine (`sealvol_serve`)
//! over this repository, for the holders of its API keys, with an agent of its own
//! that runs their sync jobs (in `<state>/serve/agent`, apart from this machine's agent).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use sealvol_core::cache::ChunkCache;
use sealvol_core::error::{Error, Result};
use sealvol_node::agent::schedule::Limits;
use sealvol_node::agent::{Agent, AgentSettings};
use sealvol_node::sync::Trust;
use sealvol_setup::settings::parse_size;

use super::{Ctx, Run};
use crate::args::{namespace_name, quota_arg};

/// Serve this repository: the in-cluster cache tier for nodes, and the remote engine for API-key holders.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol serve --cache /var/cache/sealvol-serve --cache-size 200G\n  sealvol serve --listen 10.0.0.5:7420 --tls-cert cert.pem --tls-key key.pem\n  sealvol serve --listen 10.0.0.5:7420 --insecure-http\n\nThe first start makes an admin API key in <state>/serve/admin.key (0600); `sealvol key create` makes scoped ones.\nEvery route needs a key (Authorization: Bearer KEY): GET /v1/chunks/<hash>, POST /v1/runs, the remote engine's\n/v1/objects/…, /v1/list, /metrics; but not the probes /healthz (the process is up) and /readyz (the repository answers).\n--metrics-listen serves /metrics without a key on an address of its own. Off loopback it needs TLS or --insecure-http."
)]
pub struct Serve {
    /// The server's own chunk cache (default: the node cache's directory + `-serve`). A
    /// repository in a bucket always has one; a local one only when --cache or
    /// --cache-size is given (its packs are already on this machine's disks).
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Bound on the cache (e.g. 200G); default: the node cache's size.
    #[arg(long, value_name = "SIZE")]
    cache_size: Option<String>,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7420")]
    listen: String,
    /// The server's certificate chain, PEM: serve HTTPS (rustls). With --tls-key.
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, PEM.
    #[arg(long, value_name = "FILE")]
    tls_key: Option<PathBuf>,
    /// Allow a non-loopback address without TLS (a network you trust).
    #[arg(long)]
    insecure_http: bool,
    /// Also serve /metrics without a key, on this address, for a Prometheus that holds none (a port alone: 127.0.0.1:PORT)
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// Run no sync jobs for the holders of keys (a cache tier only).
    #[arg(long)]
    no_jobs: bool,
    /// Connections open at once, idle ones included; when all are open, the oldest idle one is closed to make room [default: 4096, within the open-files limit].
    #[arg(long, value_name = "N")]
    connections: Option<usize>,
    /// Requests one key may have under way at once; past it, 429 [default: 256].
    #[arg(long, value_name = "N")]
    requests_per_key: Option<usize>,
    /// How long a connection may take to send a request's head, or stay idle between requests, before it is closed (1s to 1h) [default: 20s].
    #[arg(long, value_name = "DURATION", value_parser = header_timeout)]
    header_timeout: Option<std::time::Duration>,
    /// Set a namespace's quota in the repository's settings as the server starts, NS=SIZE or NS=none (repeatable; the same as `sealvol settings --quota`, kept for every server and writer of the repository).
    #[arg(long = "quota", value_name = "NS=SIZE", value_parser = quota_arg)]
    quotas: Vec<(String, Option<u64>)>,
    /// Sync jobs running at once, every namespace together [default: 4; config.toml [jobs] running]. Namespaces take turns for them.
    #[arg(long = "jobs", value_name = "N")]
    jobs: Option<usize>,
    /// Jobs of one namespace running at once [default: 2; [jobs] per_namespace].
    #[arg(long, value_name = "N")]
    jobs_per_namespace: Option<usize>,
    /// Jobs one key's holder started running at once [default: 2; [jobs] per_key].
    #[arg(long, value_name = "N")]
    jobs_per_key: Option<usize>,
    /// Jobs one namespace may have queued; past it a submission gets 429 [default: 64; [jobs] queue_per_namespace].
    #[arg(long, value_name = "N")]
    queue_per_namespace: Option<usize>,
    /// Jobs one key may have queued [default: 32; [jobs] queue_per_key].
    #[arg(long, value_name = "N")]
    queue_per_key: Option<usize>,
    /// A registry (HOST[:PORT]) the keys' jobs may read oci:// images from (repeatable); none by default, since a key could otherwise aim the server at any host. Plain HTTP only where [endpoints] oci_plain_http says.
    #[arg(long = "jobs-oci-registry", value_name = "HOST[:PORT]", value_parser = registry_host)]
    jobs_oci_registries: Vec<String>,
    /// Let jobs that name no secret use the server's own credentials (its environment, profile, web identity). Off: such jobs reach public sources only, so no key reads what the server's identity can.
    #[arg(long)]
    jobs_use_server_credentials: bool,
    /// Run a garbage collection this often (e.g. 6h), the first one that long after the start: logged, and in /metrics as sealvol_serve_gc_*. Off by default.
    #[arg(long, value_name = "DURATION", value_parser = gc_interval)]
    gc_every: Option<std::time::Duration>,
    /// A repository the keys' mirror jobs may copy versions to, by name (repeatable): NAME=REPO, a folder or s3://BUCKET/PREFIX. A job names it (`--remote URL volume mirror REF --to NAME`), never an address.
    #[arg(long = "mirror-to", value_name = "NAME=REPO")]
    mirror_to: Vec<String>,
    /// A server of this one's ring, as http://HOST:PORT (repeatable; list every server, this one too, as the nodes do): a run another server owns is asked of it before the origin, so a cold chunk costs one origin read across the ring.
    #[arg(long = "peer", value_name = "URL")]
    peers: Vec<String>,
    /// The ring's servers in a file, one http://HOST:PORT per line, looked at again each second (the nodes' peers file will do).
    #[arg(long, value_name = "FILE", conflicts_with = "peers")]
    peers_file: Option<std::path::PathBuf>,
    /// A namespace never told that a chunk it pushes is held outside it (repeatable): its pushes upload every such chunk, and the server still keeps one copy. Other namespaces learn that some namespace holds a chunk with exactly those bytes, and prove they hold them.
    #[arg(long = "private-dedup", value_name = "NS", value_parser = namespace_name)]
    private_dedup: Vec<String>,
    /// Be a pull-through mirror of this Hugging Face Hub (e.g. https://huggingface.co): a request under /hf/ for a repo the server does not hold starts a job of the server's own that seals that revision, and is answered while it runs; later ones from the sealed version. Off by default.
    #[arg(long, value_name = "URL")]
    hf_upstream: Option<String>,
    /// The namespace mirrored repos are sealed in, as NS/org--name tagged hf-COMMIT [default: hf]. Keys that see it may read (and so start) mirrored repos.
    #[arg(long, value_name = "NS", value_parser = namespace_name, requires = "hf_upstream")]
    hf_namespace: Option<String>,
    /// How long the commit a branch or tag named upstream is believed before it is asked again [default: 10m].
    #[arg(long, value_name = "DURATION", value_parser = refresh_interval, requires = "hf_upstream")]
    hf_refresh: Option<std::time::Duration>,
    /// The stored secret (of the mirror's namespace: `sealvol secret set NAME --namespace NS`) holding the token the mirror reads the upstream with.
    #[arg(long, value_name = "NAME", requires = "hf_upstream")]
    hf_secret: Option<String>,
}

impl Run for Serve {
    fn run(self, ctx: &Ctx) -> Result<()> {
        serve(ctx, self)
    }
}

/// `--jobs-oci-registry`: a registry's HOST[:PORT], as an `oci://` address names it.
fn registry_host(s: &str) -> std::result::Result<String, String> {
    match sealvol_source::SourceUrl::parse(&format!("oci://{s}/r:t")) {
        Ok(sealvol_source::SourceUrl::Oci { host, .. }) if host == s => Ok(host),
        _ => Err(format!("{s:.100} is not a registry's HOST[:PORT]")),
    }
}

/// `--hf-refresh`: any duration (0s asks upstream for each request's branch).
fn refresh_interval(s: &str) -> std::result::Result<std::time::Duration, String> {
    humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write 10m, 1h, 30s"))
}

/// `--gc-every`: a duration of at least a second.
fn gc_interval(s: &str) -> std::result::Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write 6h, 30m, 1d"))?;
    if d < std::time::Duration::from_secs(1) {
        return Err(format!(
            "{s}: at least 1s (a collection reads every index; 6h is usual)"
        ));
    }
    Ok(d)
}

fn header_timeout(s: &str) -> std::result::Result<std::time::Duration, String> {
    let d = humantime::parse_duration(s)
        .map_err(|e| format!("{s:?} is not a duration ({e}); write 20s, 2m"))?;
    let (least, most) = (
        std::time::Duration::from_secs(1),
        std::time::Duration::from_secs(3600),
    );
    if d < least || d > most {
        return Err(format!(
            "{s}: give 1s to 1h (a client slower than that to send a request's head is stalled)"
        ));
    }
    Ok(d)
}

fn serve(ctx: &Ctx, args: Serve) -> Result<()> {
    let Serve {
        cache,
        cache_size,
        listen,
        tls_cert,
        tls_key,
        insecure_http,
        metrics_listen,
        no_jobs,
        connections,
        requests_per_key,
        header_timeout,
        quotas,
        jobs,
        jobs_per_namespace,
        jobs_per_key,
        queue_per_namespace,
        queue_per_key,
        jobs_use_server_credentials,
        jobs_oci_registries,
        gc_every,
        mirror_to,
        peers,
        peers_file,
        private_dedup,
        hf_upstream,
        hf_namespace,
        hf_refresh,
        hf_secret,
    } = args;
    let policy = sealvol_serve::Policy {
        private_dedup,
        connections: connection_limits(connections, requests_per_key, header_timeout)?,
        https: tls_cert.is_some(),
        hub_mirror: None,
    };
    let mut policy = policy;
    let file = &ctx.settings.jobs;
    let server = Limits::SERVER;
    let limits = Limits {
        running: jobs.or(file.running).unwrap_or(server.running),
        running_per_namespace: jobs_per_namespace
            .or(file.per_namespace)
            .unwrap_or(server.running_per_namespace),
        running_per_key: jobs_per_key
            .or(file.per_key)
            .unwrap_or(server.running_per_key),
        queued_per_namespace: queue_per_namespace
            .or(file.queue_per_namespace)
            .unwrap_or(server.queued_per_namespace),
        queued_per_key: queue_per_key
            .or(file.queue_per_key)
            .unwrap_or(server.queued_per_key),
    };
    limits.check()?;
    let mirrors = Destinations::parse(ctx, &mirror_to)?;
    if !no_jobs && !jobs_use_server_credentials {
        // hf-hub looks for a token of this process (HF_TOKEN, a login file) when a job
        // gives none: the server's jobs must not find one.
        // SAFETY: no other thread runs yet (nothing is opened before this), so none
        // reads the environment while it changes.
        unsafe { std::env::set_var("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1") };
    }
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
    // Over a repository on this machine's own disks, a chunk cache would be a second
    // copy on the same kind of disk, costing a file per chunk to save nothing
    // (`sealvol_serve::chunks`): one is kept there only when asked for.
    let keep_cache = cache.is_some()
        || cache_size.is_some()
        || !matches!(ctx.settings.repo, sealvol_s3repo::Address::Local(_));
    let dir = cache.unwrap_or_else(|| {
        let mut d = ctx.settings.cache.clone().into_os_string();
        d.push("-serve");
        d.into()
    });
    let bytes = match &cache_size {
        Some(s) => parse_size(s)?,
        None => ctx.settings.cache_size,
    };
    let mut repo = ctx.open_repo(false)?;
    if !quotas.is_empty() {
        repo.change_settings(|c| super::info::set_quotas(c, &quotas))?;
    }
    let repo = Arc::new(repo);
    let (keys, made) =
        sealvol_serve::keys::Keys::open(&super::key::dir(ctx), Some(Arc::clone(&repo)))?;
    if let Some(admin) = made {
        // The path, never the key: logs are read by more people than keys should be.
        errln!(
            "created an admin API key in {} (mode 0600): callers set SEALVOL_API_KEY to a key; make scoped ones with `sealvol key create`",
            admin.display()
        );
    }
    let cache = match keep_cache {
        true => Some(Arc::new(ChunkCache::open(&dir, bytes)?)),
        false => None,
    };
    // What a caller is told never names the server's own folders, nor where it reaches
    // sources (an internal endpoint's address is the operator's business).
    sealvol_serve::reply::hide_paths(
        vec![
            repo.location().to_string(),
            dir.display().to_string(),
            ctx.settings.state.display().to_string(),
        ],
        ctx.settings.endpoints.addresses(),
    );
    let service = sealvol_serve::ChunkService::new(repo, cache);
    let service = Arc::new(match fellows(&peers, peers_file.as_deref())? {
        Some(ring) => service.with_fellows(ring),
        None => service,
    });
    // Before the server says it listens: a node that reads the repository then finds
    // the ring's key to check this server with.
    sealvol_serve::take_credential(&service);
    // The Hub mirror's spool and taps go to the agent as it starts; the mirror itself
    // asks the agent for jobs.
    let hub_spool = match &hf_upstream {
        None => None,
        Some(_) if no_jobs => {
            return Err(Error::usage(
                "--hf-upstream needs the server's jobs: it seals what it mirrors with them",
            )
            .hint("drop --no-jobs, or --hf-upstream"));
        }
        Some(_) => {
            let dir = super::key::dir(ctx).join("hub-spool");
            let spool = sealvol_serve::hub::spool::Spool::open(&dir).map_err(|e| {
                Error::usage(format!("cannot make the Hub mirror's spool folder: {e}"))
            })?;
            Some(Arc::new(spool))
        }
    };
    let taps = hub_spool.as_ref().map(|spool| {
        Arc::new(sealvol_serve::hub::mirror::MirrorTaps {
            spool: Arc::clone(spool),
            upstream_bytes: Arc::clone(&service.counters.hub_upstream_bytes),
        }) as Arc<dyn sealvol_node::sync::TapFor>
    });
    let (agent, desk) = match no_jobs {
        true => (None, None),
        false => {
            let (agent, mut desk) =
                jobs_desk(ctx, jobs_use_server_credentials, mirrors, limits, taps)?;
            desk.oci_registries = jobs_oci_registries;
            (Some(agent), Some(Arc::new(desk)))
        }
    };
    if let (Some(url), Some(spool), Some(agent)) = (&hf_upstream, hub_spool, &agent) {
        policy.hub_mirror = Some(hub_mirror(
            ctx,
            url,
            hf_namespace.as_deref().unwrap_or("hf"),
            hf_refresh.unwrap_or(std::time::Duration::from_secs(600)),
            hf_secret,
            spool,
            Arc::clone(agent) as Arc<dyn sealvol_node::jobs::JobsApi>,
        )?);
        if !ctx.quiet {
            errln!("a pull-through mirror of the Hub at {url}: /hf/ answers its repos too");
        }
    }
    if let Some(text) = &metrics_listen {
        let at = metrics_address(text)?;
        let s = Arc::clone(&service);
        let k = Arc::clone(&keys);
        let render = Arc::new(move || sealvol_serve::metrics::serve_text(&s, &k));
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
            match keep_cache {
                true => errln!(
                    "serving chunks of {} from cache {} ({} bytes at most)",
                    ctx.settings.repo,
                    dir.display(),
                    bytes
                ),
                false => errln!(
                    "serving chunks of {} straight from its packs (a local repository: no chunk cache unless --cache or --cache-size asks for one)",
                    ctx.settings.repo
                ),
            }
        }
        if let Some(every) = gc_every {
            tokio::spawn(sealvol_serve::maintenance::gc_every(
                Arc::clone(service.repository()),
                every,
                Arc::clone(&service.gc),
            ));
            if !ctx.quiet {
                errln!(
                    "garbage collection every {}",
                    humantime::format_duration(every)
                );
            }
        }
        let served = async {
            match tls {
                Some(acceptor) => {
                    let l = sealvol_serve::tls::TlsListener::new(listener, acceptor)?;
                    sealvol_serve::run_with(l, service, keys, desk, &policy).await
                }
                None => sealvol_serve::run_with(listener, service, keys, desk, &policy).await,
            }
        };
        tokio::select! {
            r = served => r.map_err(|e| Error::usage(format!("the server stopped: {e}"))),
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    })?;
    // A job still running is interrupted and queued again for the next start.
    drop(agent);
    Ok(())
}

/// The server's agent, in its own state folder, and what the job routes need of it.
fn jobs_desk(
    ctx: &Ctx,
    ambient: bool,
    mirrors: Option<Arc<dyn sealvol_node::jobs::Mirrors>>,
    limits: Limits,
    taps: Option<Arc<dyn sealvol_node::sync::TapFor>>,
) -> Result<(Arc<Agent>, sealvol_serve::jobs::Desk)> {
    let state = super::key::dir(ctx).join("agent");
    sealvol_core::private::dir(&state)?;
    let settings = AgentSettings {
        batch_bytes: ctx.settings.sync_batch,
        streams: ctx.settings.sync_streams,
        run_queue: true,
        trust: Trust::Server { ambient },
        mirrors,
        limits,
        taps,
    };
    let connector: Arc<dyn sealvol_source::Connector> = Arc::new(sealvol_sources::Sources);
    let agent = Agent::start(ctx.open_repo(false)?, &state, settings, Some(connector))?
        .ok_or_else(|| {
            Error::new(
                sealvol_core::ErrorKind::Conflict,
                format!(
                    "another server's agent holds {}",
                    crate::output::shown(&state)
                ),
            )
            .hint("one `sealvol serve` per state folder: stop the other, or give this one --state DIR")
        })?;
    let agent = Arc::new(agent);
    let desk = sealvol_serve::jobs::Desk::new(
        Arc::clone(&agent) as Arc<dyn sealvol_node::jobs::JobsApi>,
        ctx.settings.endpoints.clone(),
        state,
    );
    Ok((agent, desk))
}

/// The Hub mirror of `serve --hf-upstream URL`: sealing into namespace `ns`, reading
/// the upstream with the token in stored secret `secret` of that namespace, if any.
fn hub_mirror(
    ctx: &Ctx,
    url: &str,
    ns: &str,
    refresh: std::time::Duration,
    secret: Option<String>,
    spool: Arc<sealvol_serve::hub::spool::Spool>,
    jobs: Arc<dyn sealvol_node::jobs::JobsApi>,
) -> Result<Arc<sealvol_serve::hub::mirror::Mirror>> {
    let namespace = sealvol_core::refs::Name::parse("namespace", ns)?;
    let mut upstream = sealvol_serve::hub::upstream::Upstream::new(url, None, ctx.settings.timeout)
        .map_err(|e| Error::usage(format!("--hf-upstream: {e}")))?;
    if let Some(name) = &secret {
        sealvol_core::refs::Name::parse("secret name", name)?;
        let shelf = sealvol_source::secrets::Shelf::namespace(
            &super::key::dir(ctx).join("agent"),
            &namespace,
        );
        let name = name.clone();
        upstream = upstream.with_token_from(move || {
            let s = shelf.get(&name).ok()?;
            Some(String::from_utf8_lossy(s.expose()).trim().to_string())
        });
    }
    Ok(sealvol_serve::hub::mirror::Mirror::new(
        sealvol_serve::hub::mirror::MirrorSettings {
            namespace,
            upstream,
            secret,
            refresh,
            patience: ctx.settings.timeout,
            spool,
            jobs,
        },
    ))
}

/// `--connections` and `--requests-per-key` over the defaults, within the open-files
/// limit this process raises as far as it may (a connection is a file descriptor; a
/// quarter of them are kept for the repository's files and the server's own).
fn connection_limits(
    connections: Option<usize>,
    per_key: Option<usize>,
    header_timeout: Option<std::time::Duration>,
) -> Result<sealvol_serve::conn::Limits> {
    let d = sealvol_serve::conn::Limits::DEFAULT;
    let files = raise_open_files();
    let room = (files / 4 * 3).max(64);
    let wanted = connections.unwrap_or(d.connections);
    if wanted == 0 || per_key == Some(0) {
        return Err(Error::usage(
            "--connections and --requests-per-key take at least 1",
        ));
    }
    if connections.is_some() && wanted > room {
        return Err(Error::usage(format!(
            "--connections {wanted} is more than this process can open ({files} files at most)"
        ))
        .hint(format!(
            "raise the open-files limit (ulimit -n, LimitNOFILE=) or give at most {room}"
        )));
    }
    let connections = wanted.min(room);
    Ok(sealvol_serve::conn::Limits {
        connections,
        per_key: per_key.unwrap_or(d.per_key).min(connections),
        header_timeout: header_timeout.unwrap_or(d.header_timeout),
        ..d
    })
}

/// Raises this process's soft limit on open files to its hard limit; returns the soft
/// limit in effect.
fn raise_open_files() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
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

/// `--mirror-to NAME=REPO`: where the server's mirror jobs may copy versions, by name.
struct Destinations {
    ctx: Ctx,
    by_name: std::collections::BTreeMap<String, sealvol_s3repo::Address>,
}

impl Destinations {
    fn parse(ctx: &Ctx, given: &[String]) -> Result<Option<Arc<dyn sealvol_node::jobs::Mirrors>>> {
        if given.is_empty() {
            return Ok(None);
        }
        let mut by_name = std::collections::BTreeMap::new();
        for g in given {
            let Some((name, repo)) = g.split_once('=') else {
                return Err(Error::usage(format!("--mirror-to {g}: give NAME=REPO"))
                    .hint("e.g. --mirror-to eu=s3://models-eu/sealvol"));
            };
            sealvol_core::Name::parse("mirror destination", name)?;
            let address = sealvol_s3repo::Address::parse(repo)?;
            if address.is_same_repository(&ctx.settings.repo) {
                return Err(Error::usage(format!(
                    "--mirror-to {name}={repo} is the repository this server serves"
                ))
                .hint("name another repository: a folder, or s3://BUCKET/PREFIX"));
            }
            if by_name.insert(name.to_string(), address).is_some() {
                return Err(Error::usage(format!("--mirror-to {name} is given twice")));
            }
        }
        let ctx = Ctx::new(ctx.settings.clone(), ctx.quiet);
        Ok(Some(Arc::new(Destinations { ctx, by_name })))
    }
}

impl sealvol_node::jobs::Mirrors for Destinations {
    fn names(&self) -> Vec<String> {
        self.by_name.keys().cloned().collect()
    }

    fn open(&self, name: &str) -> Result<sealvol_core::Repository> {
        let address = self.by_name.get(name).ok_or_else(|| {
            sealvol_core::Error::not_found(format!("no mirror destination named {name}"))
        })?;
        self.ctx.open_at(address, sealvol_s3repo::Mode::CreateLocal)
    }
}

/// The ring this server belongs to (`--peer`, `--peers-file`), if any. Its fellows are
/// asked with each caller's own key, so the ring holds no key of its own, and a fellow
/// that is down now is only passed over: it may come up.
fn fellows(
    peers: &[String],
    file: Option<&std::path::Path>,
) -> Result<Option<Arc<sealvol_core::read::ring::Ring>>> {
    use sealvol_client::peer::{HttpPeer, PeersFile};
    use sealvol_core::read::ring::Ring;
    if let Some(f) = file {
        let (source, _) = PeersFile::open(f, None, sealvol_client::peer::Trust::Unknown)?;
        return Ok(Some(Arc::new(Ring::following(Box::new(source)))));
    }
    if peers.is_empty() {
        return Ok(None);
    }
    let ring: Vec<Arc<dyn sealvol_core::read::Peer>> = peers
        .iter()
        .map(|u| Ok(Arc::new(HttpPeer::new(u, None)?) as Arc<dyn sealvol_core::read::Peer>))
        .collect::<Result<_>>()?;
    Ok(Some(Arc::new(Ring::fixed(ring))))
}
