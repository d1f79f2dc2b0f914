//! `volume delete | untag | trash | restore`: the trash and tag removal.

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::refs::Target;
use sealvol_core::trash::TrashedVersion;
use sealvol_core::{Error, Ref, Result, VolumeName};
use sealvol_views::format::{short_digest, span, tags, time_left};

use crate::args::{JSON_HELP, REF_HELP};
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::{json, name, size, table, when};

/// Move a version to the trash; it stays restorable for the retention window (7 days).
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume delete weights/qwen3-8b@b3:9f3c1a2b\n  sealvol volume delete weights/qwen3-8b@9f3c1a2b --untag --yes\n\nA version a tag points at is refused: move the tag first, or pass --untag.\nA mount already serving the version keeps serving it until gc purges it."
)]
pub struct Delete {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    /// Remove the tags that point at it (each removal is kept in the tag's history).
    #[arg(long)]
    untag: bool,
    /// Do not ask (needed when standard input is not a terminal).
    #[arg(long, short = 'y')]
    yes: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Delete {
    fn run(self, ctx: &Ctx) -> Result<()> {
        delete(ctx, &self.reference, self.untag, self.yes, self.json)
    }
}

/// Remove a tag; the removal is a move to nothing in its history, undone by tagging again.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume untag weights/qwen3-8b:canary\n  sealvol volume tag weights/qwen3-8b@b3:9f3c1a2b canary   (undoes it)"
)]
pub struct Untag {
    /// NS/NAME:TAG
    #[arg(value_name = "NS/NAME:TAG", add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Untag {
    fn run(self, ctx: &Ctx) -> Result<()> {
        untag(ctx, &self.reference, self.json)
    }
}

/// List deleted versions: who deleted them, when, time left, size, the tags they had.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume trash\n  sealvol volume trash weights/qwen3-8b --json"
)]
pub struct Trash {
    /// Only this volume (an error if there is no such volume).
    #[arg(value_name = "NS/NAME", add = ArgValueCompleter::new(complete::volumes))]
    volume: Option<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Trash {
    fn run(self, ctx: &Ctx) -> Result<()> {
        trash(ctx, self.volume.as_deref(), self.json)
    }
}

/// Bring a deleted version back from the trash, exactly as it was sealed.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol volume restore weights/qwen3-8b@b3:9f3c1a2b")]
pub struct Restore {
    /// NS/NAME@DIGEST of a version in the trash (8+ hex digits will do).
    #[arg(value_name = "REF")]
    reference: String,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Restore {
    fn run(self, ctx: &Ctx) -> Result<()> {
        restore(ctx, &self.reference, self.json)
    }
}

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
