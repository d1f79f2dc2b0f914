//! `sealvol volume export REF oci:DIR[:NAME]`: a version as a CNCF ModelPack artifact in
//! an OCI image layout (`sealvol_oci`).

use std::path::PathBuf;
use std::sync::Arc;

use sealvol_core::read::Tiers;
use sealvol_core::refs::{Ref, Target};
use sealvol_core::{Error, Result};

use super::Ctx;
use crate::output::json;

/// Where an export goes.
#[derive(Debug, PartialEq, Eq)]
enum Dest {
    /// An OCI image layout, and the name of the image in its index.
    Layout(PathBuf, Option<String>),
}

impl Dest {
    /// `oci:DIR[:NAME]`; anything else is refused, never read as a path.
    fn parse(s: &str) -> Result<Dest> {
        if let Some(rest) = s.strip_prefix("oci:") {
            let (dir, name) = match rest.rsplit_once(':') {
                Some((d, n)) if !d.is_empty() && !n.contains('/') => (d, Some(n)),
                _ => (rest, None),
            };
            if dir.is_empty() {
                return Err(Error::usage(format!("{s}: no folder after oci:"))
                    .hint("give oci:DIR or oci:DIR:NAME"));
            }
            if let Some(n) = name {
                let ok = !n.is_empty()
                    && n.len() <= 128
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
                if !ok {
                    return Err(Error::usage(format!(
                        "{n:.80} is not an image name: 1-128 of A-Z a-z 0-9 . _ -"
                    )));
                }
            }
            return Ok(Dest::Layout(dir.into(), name.map(str::to_string)));
        }
        if s.starts_with("docker://") {
            return Err(Error::usage(format!(
                "{s}: pushing to a registry is not built yet"
            ))
            .hint("export to a layout, then copy it: sealvol volume export REF oci:DIR:NAME && skopeo copy oci:DIR:NAME docker://HOST/REPO:TAG"));
        }
        Err(
            Error::usage(format!("{s:.200} is not an export destination"))
                .hint("give oci:DIR[:NAME], an OCI image layout"),
        )
    }
}

pub fn export(ctx: &Ctx, reference: &str, dest: &str, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let Dest::Layout(dir, name) = Dest::parse(dest)?;
    let name = name.or(match &r.target {
        Target::Tag(t) => Some(t.to_string()),
        _ => None,
    });
    let repo = Arc::new(ctx.open_repo(false)?);
    let digest = repo.resolve(&r)?;
    // A version the policy refuses is never exported.
    ctx.settings.policy()?.admit(&repo, &r.volume, &digest)?;
    let m = repo.manifest(&r.volume, &digest)?;
    let art = sealvol_oci::export::artifact_of(&repo, &r.volume, &digest, &m)?;
    let tiers = Tiers::new(Arc::clone(&repo), None);
    let written = sealvol_oci::export::to_layout(&tiers, &m, &art, &dir, name.as_deref())?;
    let pinned = Ref::pinned(r.volume.clone(), digest);
    let shown = match &name {
        Some(n) => format!("oci:{}:{n}", dir.display()),
        None => format!("oci:{}", dir.display()),
    };
    if as_json {
        return json(&serde_json::json!({
            "ref": pinned.to_string(),
            "dest": shown,
            "manifest_digest": art.manifest_digest,
            "layers": art.layers.len(),
            "blobs_written": written.blobs,
            "blobs_kept": written.kept,
            "bytes_written": written.bytes,
        }));
    }
    if !ctx.quiet {
        errln!(
            "exported {pinned} to {shown}: {} layer(s), {} blob(s) written ({} bytes), {} already there",
            art.layers.len(),
            written.blobs,
            written.bytes,
            written.kept
        );
    }
    println!("{}", art.manifest_digest);
    Ok(())
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
        for bad in [
            "/srv/x",
            "x",
            "oci:",
            "oci::v1",
            "oci:x:bad name",
            "docker://h/r:t",
            "file:///x",
        ] {
            assert!(Dest::parse(bad).is_err(), "{bad}");
        }
        let e = Dest::parse("docker://h/r:t").unwrap_err();
        assert!(e.to_string().contains("not built yet"), "{e}");
    }
}
