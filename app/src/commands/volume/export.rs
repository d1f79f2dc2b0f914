//! `sealvol volume export REF oci:DIR[:NAME] | docker://HOST/REPO[:TAG]`: a version as a
//! CNCF ModelPack artifact, in an OCI image layout or pushed to a registry
//! (`sealvol_oci`).

use std::path::PathBuf;
use std::sync::Arc;

use sealvol_core::read::Tiers;
use sealvol_core::refs::{Ref, Target};
use sealvol_core::{Error, Result};

use crate::commands::Ctx;
use crate::output::json;

/// Where an export goes.
#[derive(Debug, PartialEq, Eq)]
enum Dest {
    /// An OCI image layout, and the name of the image in its index.
    Layout(PathBuf, Option<String>),
    /// A registry.
    Registry(sealvol_oci::destination::Destination),
}

impl Dest {
    /// `oci:DIR[:NAME]`; anything else is refused, never read as a path.
    fn parse(s: &str) -> Result<Dest> {
        if let Some(rest) = s.strip_prefix("oci:") {
            let (dir, name) = sealvol_source::url::oci_layout(rest)
                .map_err(|why| Error::usage(format!("{s:.200}: {why}")))?;
            return Ok(Dest::Layout(dir, name));
        }
        if s.starts_with("docker://") {
            return Ok(Dest::Registry(
                sealvol_oci::destination::Destination::parse(s)?,
            ));
        }
        Err(
            Error::usage(format!("{s:.200} is not an export destination"))
                .hint("give oci:DIR[:NAME], an OCI image layout"),
        )
    }
}

/// How a registry is reached.
pub struct Reach {
    /// A stored secret holding USER:PASSWORD.
    pub secret: Option<String>,
    pub tls_verify: bool,
    /// Blobs larger than this go up in resumable pieces of this size.
    pub piece: u64,
    /// Repositories of the registry to mount blobs from.
    pub mount_from: Vec<String>,
}

pub fn export(ctx: &Ctx, reference: &str, dest: &str, reach: Reach, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let dest = Dest::parse(dest)?;
    let tag = match &r.target {
        Target::Tag(t) => Some(t.to_string()),
        _ => None,
    };
    let repo = Arc::new(ctx.open_repo(false)?);
    let digest = repo.resolve(&r)?;
    // A version the policy refuses is never exported.
    ctx.settings.policy()?.admit(&repo, &r.volume, &digest)?;
    let m = repo.manifest(&r.volume, &digest)?;
    let art = sealvol_oci::export::artifact_of(&repo, &r.volume, &digest, &m)?;
    let tiers = Arc::new(Tiers::new(Arc::clone(&repo), None));
    let pinned = Ref::pinned(r.volume.clone(), digest);
    let mut mounted = 0;
    let (shown, blobs, kept, bytes) = match dest {
        Dest::Layout(dir, name) => {
            let name = name.or(tag);
            let w = sealvol_oci::export::to_layout(&tiers, &m, &art, &dir, name.as_deref())?;
            let shown = match &name {
                Some(n) => format!("oci:{}:{n}", dir.display()),
                None => format!("oci:{}", dir.display()),
            };
            (shown, w.blobs, w.kept, w.bytes)
        }
        Dest::Registry(d) => {
            let Some(tag) = d.tag.clone().or(tag) else {
                return Err(Error::usage(format!(
                    "docker://{}/{} names no tag, and neither does {reference}",
                    d.host, d.repo
                ))
                .hint("add :TAG to the destination"));
            };
            let o = sealvol_oci::push::Options {
                credentials: credentials(ctx, &d.host, reach.secret.as_deref())?,
                plain_http: !reach.tls_verify,
                timeout: ctx.settings.timeout,
                piece: reach.piece,
                mount_from: reach.mount_from,
                memory: Some(ctx.settings.state.join("oci")),
            };
            let p = sealvol_oci::push::push(&art, &d, &tag, &o, &mut |layer, at| {
                sealvol_oci::export::layer_reader(Arc::clone(&tiers), &m, layer, at)
            })?;
            let shown = format!("docker://{}/{}:{tag}", d.host, d.repo);
            mounted = p.mounted;
            (shown, p.blobs, p.present, p.bytes)
        }
    };
    if as_json {
        return json(&serde_json::json!({
            "ref": pinned.to_string(),
            "dest": shown,
            "manifest_digest": art.manifest_digest,
            "layers": art.layers.len(),
            "blobs_written": blobs,
            "blobs_kept": kept,
            "blobs_mounted": mounted,
            "bytes_written": bytes,
        }));
    }
    if !ctx.quiet {
        errln!(
            "exported {pinned} to {shown}: {} layer(s), {blobs} blob(s) written ({bytes} bytes), {kept} already there, {mounted} mounted from another repository",
            art.layers.len(),
        );
    }
    println!("{}", art.manifest_digest);
    Ok(())
}

/// A registry's `USER:PASSWORD`: the stored secret named, else the host's entry in the
/// auth file container tools write, else none (a registry that asks is then refused
/// with how to log in).
fn credentials(ctx: &Ctx, host: &str, secret: Option<&str>) -> Result<Option<String>> {
    if let Some(name) = secret {
        let s = sealvol_source::secrets::get(&ctx.settings.state, name)?;
        let value = String::from_utf8_lossy(s.expose()).trim().to_string();
        if !value.contains(':') {
            return Err(
                Error::invalid(format!("secret {name} is not USER:PASSWORD")).hint(
                    "store it as the registry's user name, a colon, and its password or token",
                ),
            );
        }
        return Ok(Some(value));
    }
    sealvol_oci::auth::credentials_from_auth_file(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_destination_is_a_layout_or_refused() {
        assert_eq!(
            Dest::parse("oci:/srv/x").unwrap(),
            Dest::Layout("/srv/x".into(), None)
        );
        assert_eq!(
            Dest::parse("oci:./x:v1").unwrap(),
            Dest::Layout("./x".into(), Some("v1".into()))
        );
        assert_eq!(
            Dest::parse("oci:a:b/c").unwrap(),
            Dest::Layout("a:b/c".into(), None)
        );
        assert!(matches!(
            Dest::parse("docker://h:5000/r:t").unwrap(),
            Dest::Registry(_)
        ));
        for bad in [
            "/srv/x",
            "x",
            "oci:",
            "oci::v1",
            "oci:x:bad name",
            "docker://h",
            "file:///x",
        ] {
            assert!(Dest::parse(bad).is_err(), "{bad}");
        }
    }
}
