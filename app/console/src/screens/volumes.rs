//! Every namespace's volumes: versions, latest size, last update, tags, and which
//! digests are mounted on this node. The bottom of the stack, always there.

use sealvol_core::refs::VolumeName;
use sealvol_core::registry::VolumeInfo;
use sealvol_views::Body;
use sealvol_views::volumes::{QuotaLine, VolumeRow, VolumesView};

use super::Hint;
use super::list::List;
use super::{Ctx, Go, Kind, Reply, Screen, versions::Versions};
use crate::action::Action;
use crate::effects::{Effect, Loaded};

pub struct Volumes {
    list: List<VolumeInfo>,
    quotas: Vec<sealvol_core::usage::QuotaUsage>,
}

impl Default for Volumes {
    fn default() -> Volumes {
        Volumes {
            list: List::new(row_text),
            quotas: Vec::new(),
        }
    }
}

impl Volumes {
    /// Every volume and `volume:tag` the console knows, for the palette's Tab.
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for v in self.list.rows() {
            let name = format!("{}/{}", v.namespace, v.name);
            out.extend(v.tags.iter().map(|t| format!("{name}:{t}")));
            out.push(name);
        }
        out.sort();
        out
    }

    fn selected_volume(&self, ctx: &Ctx) -> Option<VolumeName> {
        let v = self.list.selected(&ctx.filter)?;
        VolumeName::parse(&format!("{}/{}", v.namespace, v.name)).ok()
    }
}

/// What the `/` filter matches a row by.
fn row_text(v: &VolumeInfo) -> String {
    format!("{}/{} {}", v.namespace, v.name, v.tags.join(" "))
}

impl Screen for Volumes {
    fn crumb(&self) -> String {
        "volumes".into()
    }

    fn crumbs(&self) -> Vec<String> {
        Vec::new()
    }

    fn load(&self, _ctx: &Ctx) -> Vec<Effect> {
        vec![Effect::LoadMounts, Effect::LoadVolumes, Effect::LoadQuotas]
    }

    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, on_top: bool) {
        if let Loaded::Quotas(q) = l {
            self.quotas = q;
            return;
        }
        if let Loaded::Volumes(v) = l {
            self.list.set_rows(v);
            let n = self.list.rows().len();
            let ns: std::collections::BTreeSet<&str> = self
                .list
                .rows()
                .iter()
                .map(|v| v.namespace.as_str())
                .collect();
            if on_top {
                ctx.info(format!("{n} volume(s) in {} namespace(s)", ns.len()));
            }
        }
    }

    fn len(&self, ctx: &Ctx) -> usize {
        self.list.len(&ctx.filter)
    }

    fn selected(&self) -> usize {
        self.list.sel
    }

    fn select(&mut self, i: usize, _ctx: &Ctx) {
        self.list.sel = i;
    }

    fn on_action(&mut self, a: Action, ctx: &mut Ctx) -> Option<Reply> {
        match a {
            Action::Open => Some(match self.selected_volume(ctx) {
                Some(v) => Reply::go(Go::Push(Box::new(Versions::new(v)))),
                None => Reply::default(),
            }),
            _ => None,
        }
    }

    fn body(&self, ctx: &Ctx) -> Body {
        let rows: Vec<VolumeRow> = self
            .list
            .shown(&ctx.filter)
            .into_iter()
            .map(|i| {
                let v = &self.list.rows()[i];
                VolumeRow {
                    namespace: v.namespace.clone(),
                    name: v.name.clone(),
                    versions: v.versions,
                    tags: v.tags.clone(),
                    latest_bytes: v.latest_bytes,
                    damaged: v.damaged,
                    updated: v.updated.clone(),
                    mounted: ctx
                        .mounts
                        .iter()
                        .filter(|m| m.volume == format!("{}/{}", v.namespace, v.name))
                        .map(|m| m.digest.clone())
                        .collect(),
                }
            })
            .collect();
        let empty = match (ctx.busy, ctx.filter.is_empty()) {
            (0, true) => "no volumes yet: push one with `sealvol volume push DIR NS/NAME`, or run `sealvol --demo`".to_string(),
            (0, false) => format!("nothing matches /{}", ctx.filter),
            _ => String::new(),
        };
        {
            Body::Volumes(VolumesView {
                empty,
                rows,
                selected: self.list.sel,
                quotas: self
                    .quotas
                    .iter()
                    .map(|q| QuotaLine {
                        namespace: q.namespace.clone(),
                        used: q.usage.bytes,
                        quota: q.quota,
                    })
                    .collect(),
            })
        }
    }

    fn hints(&self) -> &'static [Hint] {
        &[
            (&[Action::Open], "versions"),
            (&[Action::Tags], "tags"),
            (&[Action::Mounts], "mounts"),
            (&[Action::Jobs], "jobs"),
            (&[Action::Watch], "watch"),
            (&[Action::Trash], "trash"),
            (&[Action::Help], "help"),
        ]
    }

    fn volume(&self, ctx: &Ctx) -> Option<VolumeName> {
        self.selected_volume(ctx)
    }

    fn kind(&self) -> Kind {
        Kind::Volumes
    }
}
