//! `volume delete | untag | trash | restore`: the trash and tag removal.

use sealvol_core::refs::Target;
use sealvol_core::trash::TrashedVersion;
use sealvol_core::{Error, Ref, Result, VolumeName};
use sealvol_views::format::{short_digest, span, tags, time_left};

use crate::commands::Ctx;
use crate::output::{json, name, size, table, when};

pub fn delete(ctx: &Ctx, reference: &str, untag: bool, yes: bool, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let repo = ctx.open_repo(false)?;
    let d = repo.resolve(&r)?;
    let pinned = Ref::pinned(r.volume.clone(), d);
    if !yes {
        let retention = span(repo.config().retention);
        crate::output::ask(
            "pass --yes to delete without asking",
            "not deleted",
            &format!("move {pinned} to the trash (restorable for {retention})?"),
        )?;
    }
    // By digest from here on: what was asked about is what goes.
    let deleted = repo.delete_version(&pinned, untag)?;
    if as_json {
        return json(&deleted);
    }
    if !ctx.quiet {
        for t in &deleted.untagged {
            errln!("tag {t} removed (undo: `sealvol volume tag {pinned} {t}`)");
        }
        errln!(
            "moved to the trash until {}; undo: `sealvol volume restore {}@b3:{}`",
            when(&deleted.expires),
            r.volume,
            d.short(16)
        );
    }
    outln!("{pinned}")
}

pub fn untag(ctx: &Ctx, reference: &str, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let Target::Tag(tag) = &r.target else {
        return Err(Error::invalid(format!("{reference} names no tag"))
            .hint("give NS/NAME:TAG, e.g. weights/qwen3-8b:canary"));
    };
    let repo = ctx.open_repo(false)?;
    repo.check_writable()?;
    let moved = repo.remove_tag(&r.volume, tag, None)?;
    let was = moved.from.clone().unwrap_or_default();
    if as_json {
        return json(&serde_json::json!({
            "volume": r.volume.to_string(),
            "tag": tag.to_string(),
            "was": was,
        }));
    }
    if !ctx.quiet {
        errln!(
            "tag {tag} removed (it pointed at {}); undo: `sealvol volume tag {}@b3:{} {tag}`",
            short_digest(&was),
            r.volume,
            was.strip_prefix("b3:")
                .unwrap_or(&was)
                .get(..16)
                .unwrap_or("")
        );
    }
    Ok(())
}

pub fn trash(ctx: &Ctx, volume: Option<&str>, as_json: bool) -> Result<()> {
    let vol = volume.map(VolumeName::parse).transpose()?;
    let repo = ctx.open_repo(false)?;
    let items = repo.trash(vol.as_ref())?;
    if as_json {
        return json(&serde_json::json!({
            "retention_secs": repo.config().retention.as_secs(),
            "trash": items,
        }));
    }
    if items.is_empty() {
        errln!(
            "the trash is empty (deleted versions stay {})",
            span(repo.config().retention)
        );
        return Ok(());
    }
    let now = sealvol_core::stamp::now();
    let rows: Vec<Vec<String>> = items.iter().map(|t| row(t, now)).collect();
    table(
        &["VOLUME", "DIGEST", "DELETED", "BY", "LEFT", "SIZE", "TAGS"],
        &rows,
    )
}

fn row(t: &TrashedVersion, now: std::time::SystemTime) -> Vec<String> {
    vec![
        t.volume.clone(),
        short_digest(&t.digest),
        when(&t.deleted_at),
        name(&t.deleted_by).into_owned(),
        match (t.purging, t.expired) {
            (true, _) => "purging".into(),
            (false, true) => "expired".into(),
            (false, false) => time_left(&t.expires, now),
        },
        size(t.bytes),
        tags(&t.tags),
    ]
}

pub fn restore(ctx: &Ctx, reference: &str, as_json: bool) -> Result<()> {
    let r = Ref::parse(reference)?;
    let repo = ctx.open_repo(false)?;
    let restored = repo.restore_version(&r)?;
    if as_json {
        return json(&restored);
    }
    let pinned = format!("vol:{}@{}", restored.volume, restored.digest);
    if !ctx.quiet {
        errln!("restored {pinned}");
        if !restored.retagged.is_empty() {
            errln!("tag(s) {} point at it again", restored.retagged.join(", "));
        }
        for t in &restored.not_retagged {
            errln!(
                "tag {} left as it is: {}; point it here with `sealvol volume tag {pinned} {}`",
                t.tag,
                t.why,
                t.tag
            );
        }
    }
    outln!("{pinned}")
}
