//! `volume tag | tags`: point a tag, list tags and their histories (newest move first,
//! in the text and in JSON alike).

use clap::Args;
use clap_complete::ArgValueCompleter;
use sealvol_core::registry::TagChange;
use sealvol_core::{Name, Ref, Result, VolumeName};
use sealvol_views::format::short_digest;

use crate::args::{JSON_HELP, REF_HELP};
use crate::commands::{Ctx, Run};
use crate::complete;
use crate::output::{json, name, table, when};

/// Point TAG at the version REF names (REF may itself be a tag).
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sealvol volume tag weights/qwen3-8b@b3:9f3c1a2b prod\n  sealvol volume tag weights/qwen3-8b:canary prod"
)]
pub struct Tag {
    #[arg(value_name = "REF", help = REF_HELP, add = ArgValueCompleter::new(complete::refs))]
    reference: String,
    /// The tag to point (created if new): 1-63 characters of a-z 0-9 . _ -
    tag: String,
    /// The tag stops resolving after this long (30d, 12h) or at this time (RFC 3339); it stays in the history. A move without it makes the tag permanent.
    #[arg(long, value_name = "WHEN")]
    expires: Option<String>,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Tag {
    fn run(self, ctx: &Ctx) -> Result<()> {
        tag(
            ctx,
            &self.reference,
            &self.tag,
            self.expires.as_deref(),
            self.json,
        )
    }
}

/// List the tags of a volume, optionally with every move.
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  sealvol volume tags weights/qwen3-8b --history")]
pub struct Tags {
    /// Volume: NAMESPACE/NAME.
    #[arg(add = ArgValueCompleter::new(complete::volumes))]
    volume: String,
    /// Show each tag's move history.
    #[arg(long)]
    history: bool,
    #[arg(long, help = JSON_HELP)]
    json: bool,
}

impl Run for Tags {
    fn run(self, ctx: &Ctx) -> Result<()> {
        tags(ctx, &self.volume, self.history, self.json)
    }
}

pub fn tag(
    ctx: &Ctx,
    reference: &str,
    tag: &str,
    expires: Option<&str>,
    as_json: bool,
) -> Result<()> {
    let r = Ref::parse(reference)?;
    let tag = Name::parse("tag", tag)?;
    let repo = ctx.open_repo(false)?;
    let now = sealvol_core::stamp::now();
    let expires = expires
        .map(|w| sealvol_core::stamp::expiry("--expires", w, now))
        .transpose()?;
    let to = repo.resolve(&r)?;
    let moved = repo.move_tag_until(&r.volume, &tag, &to, None, expires.clone())?;
    let change = TagChange {
        tag: tag.to_string(),
        from: moved.from,
        to: to.to_string(),
        moved: moved.moved,
        kept_damaged: moved.kept_damaged,
    };
    let pinned = Ref::pinned(r.volume.clone(), to);
    if as_json {
        return json(&serde_json::json!({
            "volume": r.volume.to_string(),
            "ref": pinned.to_string(),
            "tag": change,
        }));
    }
    if !ctx.quiet {
        errln!("{}", tag_line(&change));
        if let Some(at) = &expires {
            errln!(
                "tag {tag} expires at {at} (in {})",
                sealvol_views::format::expires_in(at, now)
            );
        }
    }
    outln!("{pinned}")
}

/// What a tag move did, as its compare-and-swap saw it (push prints these too).
pub fn tag_line(t: &TagChange) -> String {
    let to = short_digest(&t.to);
    let line = match (&t.from, t.moved) {
        (_, false) => format!("tag {} already points at {to}", t.tag),
        (Some(from), true) => format!("tag {}: {} -> {to}", t.tag, short_digest(from)),
        (None, true) => format!("tag {} -> {to} (new)", t.tag),
    };
    match &t.kept_damaged {
        Some(at) => format!("{line} (its damaged file was kept at {at})"),
        None => line,
    }
}

pub fn tags(ctx: &Ctx, volume: &str, history: bool, as_json: bool) -> Result<()> {
    let volume = VolumeName::parse(volume)?;
    let repo = ctx.open_repo(false)?;
    repo.require_volume(&volume)?;
    // The history shows removed tags too: their removal is undone by tagging again.
    let mut tags = match history {
        true => repo.tags_with_removed(&volume)?,
        false => repo.tags(&volume)?,
    };
    for t in &mut tags {
        t.history.reverse();
    }
    if as_json {
        return json(&serde_json::json!({ "volume": volume.to_string(), "tags": tags }));
    }
    if tags.is_empty() {
        errln!("{volume} has no tags; add one with `sealvol volume tag REF TAG`");
        return Ok(());
    }
    let damaged = tags.iter().filter(|t| t.damaged.is_some()).count();
    if damaged > 0 {
        errln!(
            "warning: {damaged} damaged tag(s); `sealvol volume verify` says what is wrong, `sealvol repair` restores them"
        );
    }
    if history {
        for t in &tags {
            match &t.damaged {
                Some(why) => outln!("{} damaged: {}", t.tag, why)?,
                None if t.removed() => outln!("{} (removed)", t.tag)?,
                None => outln!("{} -> {}", t.tag, short_digest(&t.digest))?,
            }
            for m in &t.history {
                outln!(
                    "  {}  {} -> {}  by {}",
                    when(&m.at),
                    m.from
                        .as_deref()
                        .map(short_digest)
                        .unwrap_or_else(|| "(new)".into()),
                    match m.to.is_empty() {
                        true => "(removed)".to_string(),
                        false => short_digest(&m.to),
                    },
                    name(&m.by)
                )?;
            }
        }
        return Ok(());
    }
    let now = sealvol_core::stamp::now();
    let rows: Vec<Vec<String>> = tags
        .iter()
        .map(|t| {
            vec![
                t.tag.clone(),
                match (&t.damaged, t.digest.is_empty()) {
                    (Some(_), true) => "damaged".to_string(),
                    (Some(_), false) => format!("{} (missing)", short_digest(&t.digest)),
                    (None, _) => short_digest(&t.digest),
                },
                t.history.first().map(|m| when(&m.at)).unwrap_or_default(),
                t.history.len().to_string(),
                match &t.expires {
                    None => "-".to_string(),
                    Some(at) => sealvol_views::format::expires_in(at, now),
                },
            ]
        })
        .collect();
    table(&["TAG", "DIGEST", "MOVED", "MOVES", "EXPIRES"], &rows)
}
