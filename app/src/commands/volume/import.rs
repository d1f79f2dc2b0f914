//! `sealvol volume import oci:DIR[:NAME] | docker://HOST/REPO[:TAG|@sha256:…] NS/VOL`: a
//! CNCF ModelPack artifact as a new version. It is a sync job of the `oci:` or
//! `oci://` source (engine/sources: `layout.rs`, `oci.rs`), so it is pinned, checked,
//! resumable and deduplicated as every sync is; this only reads the command's
//! spelling, skopeo's.

use clap::Args;
use sealvol_core::{Error, Result};
use sealvol_source::SourceUrl;
use sealvol_source::endpoints::Resolved;

use super::sync::Destination;
use crate::commands::jobs::{self, SyncRequest};
use crate::commands::{Ctx, Run};

/// Import a CNCF ModelPack artifact (OCI) as a new version: each raw layer a file at its path.
#[derive(Args, Debug)]
#[command(
    after_help = "SOURCE is oci:DIR[:NAME], an OCI image layout (skopeo's spelling; NAME may be left out when the layout holds one image), or docker://HOST/REPO[:TAG|@sha256:DIGEST], a registry.

The manifest is read once and pinned by its digest, so a tag that moves during the import changes nothing. Each layer is a file at its org.cncf.model.filepath, checked against its SHA-256 as it streams; only chunks the repository lacks are stored. Refused by name: manifest lists, tar layers (KitOps ModelKits, container images), layers without a path or whose path climbs out or repeats.
It runs as a sync job (`sealvol volume sync oci:DIR` and `oci://HOST/REPO:TAG` are the same), on this machine: a server never reads a registry a key names, nor its own files.

Examples:
  sealvol volume import oci:./qwen3-8b:prod weights/qwen3-8b --tag prod
  sealvol volume import docker://registry.internal/models/qwen3-8b:v1 weights/qwen3-8b
  sealvol volume import docker://127.0.0.1:5000/qwen:v1 weights/qwen --tls-verify=false"
)]
pub struct Import {
    /// Where: oci:DIR[:NAME], or docker://HOST/REPO[:TAG|@sha256:DIGEST].
    source: String,
    #[command(flatten)]
    into: Destination,
    /// A registry's credentials in a stored secret (`sealvol secret set NAME`), USER:PASSWORD; else the registry's entry in $REGISTRY_AUTH_FILE or ~/.docker/config.json.
    #[arg(long = "registry-secret", value_name = "NAME")]
    secret: Option<String>,
    /// false: speak plain HTTP to the registry (a registry on loopback), as skopeo spells it.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    tls_verify: bool,
    /// Hand the job to the agent, print its id, return.
    #[arg(long)]
    detach: bool,
    /// Print the finished job as one JSON document.
    #[arg(long)]
    json: bool,
}

/// The sync source an import's address names, and where it is reached when the
/// command says.
fn source(s: &str, tls_verify: bool) -> Result<(SourceUrl, Option<Resolved>)> {
    if s.starts_with("oci:") && !s.starts_with("oci://") {
        if !tls_verify {
            return Err(Error::usage("--tls-verify applies to docker:// registries")
                .hint("leave it out for an OCI image layout"));
        }
        return Ok((SourceUrl::parse(s)?, None));
    }
    if let Some(rest) = s.strip_prefix("docker://") {
        let url = SourceUrl::parse(&format!("oci://{rest}")).map_err(|e| {
            let why = e.message().split_once(": ").map_or(e.message(), |(_, w)| w);
            Error::usage(format!("{s:.200}: {why}"))
                .hint("give docker://HOST/REPO[:TAG|@sha256:DIGEST]")
        })?;
        let SourceUrl::Oci { host, .. } = &url else {
            return Err(Error::usage(format!("{s:.200} names no registry")));
        };
        let plain = (!tls_verify).then(|| Resolved {
            url: Some(format!("http://{host}")),
            path_style: true,
        });
        return Ok((url, plain));
    }
    Err(Error::usage(format!("{s:.200} is not an import source"))
        .hint("give oci:DIR[:NAME], an OCI image layout, or docker://HOST/REPO[:TAG], a registry"))
}

impl Run for Import {
    fn run(self, ctx: &Ctx) -> Result<()> {
        import(ctx, self)
    }
}

fn import(ctx: &Ctx, r: Import) -> Result<()> {
    let (url, endpoint) = source(&r.source, r.tls_verify)?;
    if ctx.settings.remote.is_some() {
        return Err(Error::invalid(
            "volume import reads a layout or a registry from this machine; a server never does",
        )
        .hint(
            "import into a local repository, then copy it: sealvol volume mirror REF --to REPO",
        ));
    }
    jobs::sync(
        ctx,
        SyncRequest {
            source: url.to_string(),
            volume: r.into.volume,
            tags: r.into.tags,
            secret: r.secret,
            include: Vec::new(),
            exclude: Vec::new(),
            detach: r.detach,
            json: r.json,
            endpoint,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_a_layout_or_a_registry_or_refused() {
        let (url, at) = source("oci:./lay:v1", true).unwrap();
        assert_eq!(url.to_string(), "oci:./lay:v1");
        assert!(at.is_none());
        let (url, at) = source("docker://127.0.0.1:5000/m/q:v1", false).unwrap();
        assert_eq!(url.to_string(), "oci://127.0.0.1:5000/m/q:v1");
        assert_eq!(at.unwrap().url.as_deref(), Some("http://127.0.0.1:5000"));
        let d = format!("docker://r.example/m@sha256:{}", "a".repeat(64));
        assert!(source(&d, true).unwrap().1.is_none());
        for bad in [
            "./folder",
            "s3://bucket/x",
            "docker://",
            "docker://host",
            "docker://host/repo:bad:tag",
            "oci:",
        ] {
            let e = source(bad, true).unwrap_err();
            assert!(!e.to_string().contains('\n'), "{bad}: {e}");
        }
        assert!(source("oci:./lay", false).is_err());
    }
}
