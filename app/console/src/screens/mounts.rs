//! Every live mount on this node: mount point, the digest it serves and the ref it was
//! mounted as, bytes served, where chunks came from, errors, and the cache servers the
//! selected one reads through; refreshed every second.

use sealvol_core::refs::{Digest, VolumeName};
use sealvol_views::Body;
use sealvol_views::mounts::{MountRow, MountsView, RingRow};

use super::Hint;
use super::files::Files;
use super::list::{pick, shown};
use super::{Ctx, Go, Kind, Reply, Screen};
use crate::action::Action;
use crate::effects::{Effect, Loaded};

/// Its rows are `Ctx::mounts`, which the volumes and versions screens also mark with.
#[derive(Default)]
pub struct Mounts {
    sel: usize,
}

impl Mounts {
    fn visible(&self, ctx: &Ctx) -> Vec<usize> {
        shown(&ctx.mounts, &ctx.filter, |m| {
            format!("{} {} {} {}", m.dir, m.volume, m.digest, m.requested)
        })
    }

    /// The selected mount's volume and the digest it serves.
    fn selected_mount(&self, ctx: &Ctx) -> Option<(VolumeName, Digest)> {
        let m = &ctx.mounts[pick(&self.visible(ctx), self.sel)?];
        Some((
            VolumeName::parse(&m.volume).ok()?,
            Digest::parse(&m.digest).ok()?,
        ))
    }
}

impl Screen for Mounts {
    fn crumb(&self) -> String {
        "mounts".into()
    }

    fn crumbs(&self) -> Vec<String> {
        vec!["mounts".into()]
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        vec![Effect::LoadMounts]
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, _on_top: bool) {
        if let Loaded::Mounts(m) = l {
            ctx.mounts = m;
            if !ctx.status_is_error() {
                ctx.info(format!("{} mount(s) on this node", ctx.mounts.len()));
            }
        }
    }

    fn len(&self, ctx: &Ctx) -> usize {
        self.visible(ctx).len()
    }

    fn selected(&self) -> usize {
        self.sel
    }

    fn select(&mut self, i: usize, _ctx: &Ctx) {
        self.sel = i;
    }

    fn on_action(&mut self, a: Action, ctx: &mut Ctx) -> Option<Reply> {
        match a {
            // What a mount serves: the files of that exact version.
            Action::Open => Some(match self.selected_mount(ctx) {
                Some((v, d)) => Reply::go(Go::Push(Box::new(Files::new(v, d)))),
                None => Reply::default(),
            }),
            _ => None,
        }
    }

    fn body(&self, ctx: &Ctx) -> Body {
        let visible = self.visible(ctx);
        let empty = if ctx.mounts.is_empty() {
            "no mounts on this node: `sealvol volume mount REF DIR` makes one".to_string()
        } else {
            format!("no mount matches /{}", ctx.filter)
        };
        Body::Mounts(MountsView {
            empty,
            rows: visible
                .into_iter()
                .map(|i| &ctx.mounts[i])
                .map(|m| MountRow {
                    dir: m.dir.clone(),
                    volume: m.volume.clone(),
                    digest: m.digest.clone(),
                    requested: m.requested.clone(),
                    pid: m.pid,
                    started: m.started.clone(),
                    bytes_served: m.stats.bytes_served,
                    memory_hits: m.stats.memory_hits,
                    cache_hits: m.stats.cache_hits,
                    peer_chunks: m.stats.peer_chunks,
                    peer_faults: m.stats.peer_errors + m.stats.peer_bad_chunks,
                    peer_refused: m.stats.peer_refused,
                    peers: m.peers.len(),
                    origin_chunks: m.stats.origin_chunks,
                    memory_peak: m.stats.memory_peak,
                    memory_bound: m.stats.memory_bound,
                    process_peak: m.stats.process_peak,
                    prefetched_bytes: m.stats.prefetched_bytes,
                    prefetch_wasted_bytes: m.stats.prefetch_wasted_bytes,
                    errors: m.stats.errors,
                    ring: m
                        .ring
                        .iter()
                        .map(|r| RingRow {
                            url: r.url.clone(),
                            up: r.up,
                            share_ppm: r.share_ppm,
                            requests: r.requests,
                            bytes: r.bytes,
                            errors: r.errors,
                        })
                        .collect(),
                })
                .collect(),
            selected: self.sel,
        })
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Open], "files"),
            (&[Action::Copy], "copy ref"),
            (&[Action::Filter], "filter"),
            (&[Action::Back], "back"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, ctx: &Ctx) -> Option<VolumeName> {
        self.selected_mount(ctx).map(|(v, _)| v)
    }

    fn digest(&self, ctx: &Ctx) -> Option<String> {
        self.selected_mount(ctx).map(|(_, d)| d.to_string())
    }

    fn live(&self) -> bool {
        true
    }

    fn kind(&self) -> Kind {
        Kind::Mounts
    }
}
