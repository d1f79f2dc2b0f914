//! `sealvol volume export REF oci:DIR[:NAME] | docker://HOST/REPO[:TAG]`: a version as a
//! CNCF ModelPack artifact, in an OCI image layout or pushed to a registry
//! (`sealvol_oci`).

use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::read::Tiers;
use sealvol_core::refs::{Ref, Target};
use sealvol_core::{Error, Result};

use crate::args::{JSON_HELP, REF_HELP};
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::json;

/// Export a version as a CNCF ModelPack artifact (OCI): one raw layer per file, the same manifest digest every time.
#[derive(Args, Debug)]
#[command(
    after_help = "DEST is oci:DIR[:NAME], an OCI image layout (skopeo's spelling; NAME defaults to REF's tag), or docker://HOST/REPO[:TAG], a registry (TAG defaults to REF's tag; blobs it has are not sent again).

Each file is read from the repository, every byte proven, and written once: a blob already in the layout is kept if its bytes hash to its name. Links to files are exported as their files; links to folders are refused.

Examples:
  sealvol volume export weights/qwen3-8b:prod oci:./qwen3-8b
  sealvol volume export weights/qwen3-8b@9f3c1a2b oci:/srv/layouts/qwen:v1"
)]
pub struct Export {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    /// Where: oci:DIR[:NAME], or docker://HOST/REPO[:TAG].
    #[arg(value_name = "DEST")]
    dest: String,
    /// A registry's credentials in a stored secret (`sealvol secret set NAME`), USER:PASSWORD; else the registry's entry in $REGISTRY_AUTH_FILE or ~/.docker/config.json (what `docker login` and `skopeo login` write).
    #[arg(long, value_name = "NAME")]
    registry_secret: Option<String>,
    /// false: speak plain HTTP to the registry (a registry on loopback), as skopeo spells it.
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    tls_verify: bool,
    /// A blob larger than this goes to the registry in pieces of this size, each resumable: a failed piece is sent again from where the registry stands, and an export run again resumes an unfinished upload. Smaller pieces cost time (64M: 1.2x the whole export to a distribution registry; 256M: as fast as whole blobs); a proxy that limits request bodies needs them below its limit.
    #[arg(long, value_name = "SIZE", default_value = "256M", value_parser = piece_size)]
    piece_size: u64,
    /// A repository of the same registry to mount blobs from rather than send them (repeatable); the repositories this machine pushed to lately are tried too.
    #[arg(long, value_name = "REPO", value_parser = registry_repo)]
    mount_from: Vec<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Export {
    fn run(self, ctx: &Ctx) -> Result<()> {
        let reach = Reach {
            secret: self.registry_secret,
            tls_verify: self.tls_verify,
            piece: self.piece_size,
            mount_from: self.mount_from,
        };
        export(ctx, &self.reference, &self.dest, reach, self.json)
    }
}

/// `--piece-size`: at least 1 MiB (registries refuse smaller pieces but the last).
fn piece_size(s: &str) -> std::result::Result<u64, String> {
    let bytes = sealvol_setup::settings::parse_size(s).map_err(|e| e.message().to_string())?;
    if bytes < 1 << 20 {
        return Err(format!("{s}: a piece is at least 1M"));
    }
    Ok(bytes)
}

/// `--mount-from`: a registry's repository name (lowercase path components), never read
/// otherwise.
fn registry_repo(s: &str) -> std::result::Result<String, String> {
    match sealvol_oci::destination::repository_name_ok(s) {
        true => Ok(s.to_string()),
        false => Err(format!(
            "{s:.100}: not a repository name: lowercase path components of a-z 0-9 . _ -"
        )),
    }
}

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
