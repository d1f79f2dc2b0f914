//! Pure drawing for the sealvol console: `fn(&ViewModel, &Theme, Rect, &mut Buffer)`.
//! No engine calls, no I/O, no async: the app builds view-models, these draw them, and
//! tests draw them into ratatui's `TestBackend`.

pub mod chrome;
pub mod deployments;
pub mod diff;
pub mod files;
#[cfg(feature = "fixtures")]
pub mod fixtures;
pub mod format;
pub mod jobs;
pub mod list;
pub mod mounts;
pub mod svg;
pub mod tags;
pub mod trash;
pub mod versions;
pub mod volumes;
pub mod watch;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use sealvol_themes::{Role, Theme};

pub use chrome::{Overlay, Status, StatusKind};

/// The body of the current screen.
#[derive(Debug, Clone)]
pub enum Body {
    Volumes(volumes::VolumesView),
    Versions(versions::VersionsView),
    Tags(tags::TagsView),
    Diff(diff::DiffView),
    Files(files::FilesView),
    Mounts(mounts::MountsView),
    Jobs(jobs::JobsView),
    Trash(trash::TrashView),
    Watch(watch::WatchesView),
    Deployments(deployments::DeploymentsView),
    Rollback(deployments::RollbackView),
    /// Nothing loaded yet, or nothing to show: a sentence saying why.
    Empty(String),
}

/// Everything on screen, as data.
#[derive(Debug, Clone)]
pub struct FrameView {
    pub crumbs: Vec<String>,
    /// Shown at the top right: the repository, `readonly`.
    pub context: String,
    pub body: Body,
    pub status: Status,
    pub overlay: Option<Overlay>,
}

/// Rows the body gets in a terminal of `height` rows: the header and status take two.
pub fn body_height(height: u16) -> u16 {
    height.saturating_sub(2)
}

pub fn draw(frame: &FrameView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    buf.set_style(area, theme.style(Role::Text));
    let [header, body, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    chrome::draw_header(&frame.crumbs, &frame.context, theme, header, buf);
    match &frame.body {
        Body::Volumes(vm) => volumes::draw(vm, theme, body, buf),
        Body::Versions(vm) => versions::draw(vm, theme, body, buf),
        Body::Tags(vm) => tags::draw(vm, theme, body, buf),
        Body::Diff(vm) => diff::draw(vm, theme, body, buf),
        Body::Files(vm) => files::draw(vm, theme, body, buf),
        Body::Mounts(vm) => mounts::draw(vm, theme, body, buf),
        Body::Jobs(vm) => jobs::draw(vm, theme, body, buf),
        Body::Trash(vm) => trash::draw(vm, theme, body, buf),
        Body::Watch(vm) => watch::draw(vm, theme, body, buf),
        Body::Deployments(vm) => deployments::draw(vm, theme, body, buf),
        Body::Rollback(vm) => deployments::draw_rollback(vm, theme, body, buf),
        Body::Empty(why) => {
            let y = body.y + body.height / 2;
            let x = body.x + body.width.saturating_sub(why.chars().count() as u16) / 2;
            buf.set_string(x, y, why, theme.style(Role::Dim));
        }
    }
    chrome::draw_status(&frame.status, theme, status, buf);
    if let Some(o) = &frame.overlay {
        chrome::draw_overlay(o, theme, area, buf);
    }
}
