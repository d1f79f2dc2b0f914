//! `sealvol volume import oci:DIR[:NAME] | docker://HOST/REPO[:TAG|@sha256:…] NS/VOL`: a
//! CNCF ModelPack artifact as a new version. It is a sync job of the `oci:` or
//! `oci://` source (engine/sources: `layout.rs`, `oci.rs`), so it is pinned, checked,
//! resumable and deduplicated as every sync is; this only reads the command's
//! spelling, skopeo's.

use sealvol_core::{Error, Result};
use sealvol_source::SourceUrl;
use sealvol_source::endpoints::Resolved;

use crate::commands::Ctx;

pub struct Request {
    pub source: String,
    pub volume: String,
    pub tags: Vec<String>,
    pub secret: Option<String>,
    pub tls_verify: bool,
    pub detach: bool,
    pub json: bool,
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

pub fn import(ctx: &Ctx, r: Request) -> Result<()> {
    let (url, endpoint) = source(&r.source, r.tls_verify)?;
    if ctx.settings.remote.is_some() {
        return Err(Error::invalid(
            "volume import reads a layout or a registry from this machine; a server never does",
        )
        .hint(
            "import into a local repository, then copy it: sealvol volume mirror REF --to REPO",
        ));
    }
    super::super::jobs::sync(
        ctx,
        super::super::jobs::SyncRequest {
            source: url.to_string(),
            volume: r.volume,
            tags: r.tags,
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
