//! The console's state and everything that changes it. Keys become `Action`s, actions
//! change the model and may ask for engine work (`Effect`s); the results come back as
//! `Loaded`. No terminal and no I/O here, so key scripts can drive it in tests.

use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseButton, MouseEvent, MouseEventKind};
use sealvol_core::refs::{Digest, Name, Ref, VolumeName};
use sealvol_core::registry::{TagFile, VersionInfo, VolumeInfo};
use sealvol_node::jobs::{FileState, Job, JobEvent, JobState};
use sealvol_node::mounts::MountRecord;
use sealvol_themes::Role;
use sealvol_views::chrome::{Overlay as ViewOverlay, Status, StatusKind};
use sealvol_views::format::short_digest;
use sealvol_views::mounts::{MountRow, MountsView};
use sealvol_views::tags::{MoveRow, TagRow, TagsFocus, TagsView};
use sealvol_views::versions::{VersionRow, VersionsView};
use sealvol_views::volumes::{VolumeRow, VolumesView};
use sealvol_views::{Body, FrameView};

use super::action::Action;
use super::effects::{Effect, Loaded, TagMovePlan};
use super::keymap::{Keymap, Mode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screen {
    Volumes,
    Versions(VolumeName),
    Tags(VolumeName),
    /// The files of one version.
    Files(VolumeName, Digest),
    /// The diff of two versions, as typed or marked (resolved on every load).
    Diff(Ref, Ref),
    /// Live mounts on this node, refreshed every second while shown.
    Mounts,
    /// The agent's sync jobs, refreshed every second while shown.
    Jobs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptKind {
    Filter,
    Command,
    TagName,
}

#[derive(Debug, Clone)]
pub enum Overlay {
    Help,
    Confirm(TagMovePlan),
    /// Cancel this job (id, and what it syncs, as shown).
    ConfirmCancel(u64, String),
    Prompt {
        kind: PromptKind,
        input: String,
    },
}

pub struct Model {
    pub stack: Vec<Screen>,
    volumes: Vec<VolumeInfo>,
    vol_sel: usize,
    versions: Vec<VersionInfo>,
    ver_sel: usize,
    marked: Option<String>,
    tags: Vec<TagFile>,
    tag_sel: usize,
    focus: TagsFocus,
    move_sel: usize,
    diff: Option<sealvol_core::diff::VersionDiff>,
    diff_sel: usize,
    /// The files screen's tree, built once per load; and what "shared" compares with.
    file_rows: Vec<sealvol_views::files::Row>,
    file_previous: Option<String>,
    file_sel: usize,
    mounts: Vec<MountRecord>,
    mount_sel: usize,
    jobs: Vec<Job>,
    job_sel: usize,
    job_event: Option<JobEvent>,
    filter: String,
    status: (StatusKind, String),
    busy: usize,
    spinner: usize,
    pub overlay: Option<Overlay>,
    readonly: bool,
    pub quit: bool,
    /// Rows a page-down moves; set from the terminal height.
    pub page: usize,
    location: String,
}

impl Model {
    pub fn new(location: String, readonly: bool) -> (Model, Vec<Effect>) {
        let mut m = Model {
            stack: vec![Screen::Volumes],
            volumes: Vec::new(),
            vol_sel: 0,
            versions: Vec::new(),
            ver_sel: 0,
            marked: None,
            tags: Vec::new(),
            tag_sel: 0,
            focus: TagsFocus::Tags,
            move_sel: 0,
            diff: None,
            diff_sel: 0,
            file_rows: Vec::new(),
            file_previous: None,
            file_sel: 0,
            mounts: Vec::new(),
            mount_sel: 0,
            jobs: Vec::new(),
            job_sel: 0,
            job_event: None,
            filter: String::new(),
            status: (StatusKind::Info, String::new()),
            busy: 0,
            spinner: 0,
            overlay: None,
            readonly,
            quit: false,
            page: 20,
            location,
        };
        let mut e = m.request(Effect::LoadVolumes);
        e.extend(m.request(Effect::LoadMounts));
        (m, e)
    }

    fn screen(&self) -> &Screen {
        self.stack.last().unwrap_or(&Screen::Volumes)
    }

    fn info(&mut self, text: impl Into<String>) {
        self.status = (StatusKind::Info, text.into());
    }

    fn error(&mut self, text: impl Into<String>) {
        self.status = (StatusKind::Error, text.into());
    }

    /// Counts engine work in flight so the status line can show a spinner.
    fn request(&mut self, e: Effect) -> Vec<Effect> {
        if !matches!(e, Effect::Copy(_)) {
            self.busy += 1;
        }
        vec![e]
    }

    pub fn is_busy(&self) -> bool {
        self.busy > 0
    }

    pub fn tick(&mut self) {
        self.spinner = self.spinner.wrapping_add(1);
    }

    pub fn mode(&self) -> Mode {
        match self.overlay {
            Some(Overlay::Confirm(_) | Overlay::ConfirmCancel(..)) => Mode::Confirm,
            _ => Mode::Normal,
        }
    }

    /// Mouse: the wheel moves the selection; a click selects a row of a list screen, and
    /// a click on the selected row opens it; a click on a breadcrumb goes back to it.
    /// `row` is the terminal row, counted from the top.
    pub fn on_mouse(&mut self, ev: &MouseEvent, size: (u16, u16), keymap: &Keymap) -> Vec<Effect> {
        if self.overlay.is_some() {
            return Vec::new();
        }
        let (width, height) = size;
        let body_height = sealvol_views::body_height(height);
        match ev.kind {
            MouseEventKind::Down(MouseButton::Left) if ev.row + 1 == height => {
                // A key hint in the status line does what its key does.
                let status = self.frame(keymap).status;
                let Some(i) = sealvol_views::chrome::hint_at(&status, width, ev.column) else {
                    return Vec::new();
                };
                let key = status.hints[i].0.clone();
                match super::keymap::Key::parse(&key).map(|k| k.to_event()) {
                    Some(ev) => self.on_key(&ev, keymap),
                    None => Vec::new(),
                }
            }
            MouseEventKind::ScrollDown => self.on_action(Action::Down),
            MouseEventKind::ScrollUp => self.on_action(Action::Up),
            MouseEventKind::Down(MouseButton::Left) if ev.row == 0 => {
                // Breadcrumbs: " sealvol › volumes › ns/name › versions".
                let depth = self.crumb_at(ev.column);
                let mut effects = Vec::new();
                while depth.is_some_and(|d| self.stack.len() > d + 1) {
                    effects = self.back();
                }
                effects
            }
            MouseEventKind::Down(MouseButton::Left) => {
                // Single-table screens: row 1 is the table header, rows follow.
                if !matches!(
                    self.screen(),
                    Screen::Volumes
                        | Screen::Versions(_)
                        | Screen::Files(..)
                        | Screen::Mounts
                        | Screen::Jobs
                ) {
                    return Vec::new();
                }
                let Some(line) = (ev.row as usize).checked_sub(2) else {
                    return Vec::new();
                };
                let len = self.len();
                let height = body_height.saturating_sub(1) as usize;
                let offset = sealvol_views::list::scroll_offset(self.sel(), len, height);
                let i = offset + line;
                if line >= height || i >= len {
                    return Vec::new();
                }
                if i == self.sel() {
                    return self.open();
                }
                self.set_sel(i);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Which breadcrumb (0 = volumes) a click at `column` of the header lands on.
    fn crumb_at(&self, column: u16) -> Option<usize> {
        let frame_crumbs = self.stack.len();
        // Mirrors chrome::draw_header: " sealvol" then " › " before each crumb.
        let mut x = " sealvol".chars().count();
        let names: Vec<String> = self
            .stack
            .iter()
            .map(|s| match s {
                Screen::Volumes => "volumes".to_string(),
                Screen::Versions(v) | Screen::Tags(v) => v.to_string(),
                Screen::Files(_, d) => format!("b3:{}", d.short(12)),
                Screen::Diff(_, b) => b.volume.to_string(),
                Screen::Mounts => "mounts".to_string(),
                Screen::Jobs => "jobs".to_string(),
            })
            .collect();
        for (depth, name) in names.iter().enumerate().take(frame_crumbs) {
            x += 3;
            let end = x + name.chars().count();
            if (x..end).contains(&(column as usize)) {
                return Some(depth);
            }
            x = end;
        }
        None
    }

    pub fn on_key(&mut self, ev: &KeyEvent, keymap: &Keymap) -> Vec<Effect> {
        if let Some(Overlay::Prompt { kind, input }) = &mut self.overlay {
            let kind = *kind;
            match ev.code {
                KeyCode::Esc => {
                    if kind == PromptKind::Filter {
                        self.filter.clear();
                    }
                    self.overlay = None;
                }
                KeyCode::Enter => {
                    let text = input.trim().to_string();
                    self.overlay = None;
                    return self.submit(kind, &text);
                }
                KeyCode::Backspace => {
                    input.pop();
                    if kind == PromptKind::Filter {
                        self.filter = input.clone();
                        self.clamp();
                    }
                }
                KeyCode::Char(c) => {
                    input.push(c);
                    if kind == PromptKind::Filter {
                        self.filter = input.clone();
                        self.clamp();
                    }
                }
                _ => {}
            }
            return Vec::new();
        }
        if matches!(self.overlay, Some(Overlay::Help)) {
            // Any key closes help; `q` still quits.
            self.overlay = None;
            return match keymap.action(Mode::Normal, ev) {
                Some(Action::Quit) => self.on_action(Action::Quit),
                _ => Vec::new(),
            };
        }
        match keymap.action(self.mode(), ev) {
            Some(a) => self.on_action(a),
            None => Vec::new(),
        }
    }

    pub fn on_action(&mut self, a: Action) -> Vec<Effect> {
        if let Some(Overlay::ConfirmCancel(id, _)) = &self.overlay {
            let id = *id;
            return match a {
                Action::Confirm => {
                    self.overlay = None;
                    self.info(format!("cancelling job {id}…"));
                    self.request(Effect::CancelJob(id))
                }
                Action::Cancel => {
                    self.overlay = None;
                    self.info(format!("job {id} goes on"));
                    Vec::new()
                }
                _ => Vec::new(),
            };
        }
        if let Some(Overlay::Confirm(plan)) = &self.overlay {
            let plan = plan.clone();
            return match a {
                Action::Confirm => {
                    self.overlay = None;
                    self.info(format!("moving {}…", plan.tag));
                    self.request(Effect::MoveTag(plan))
                }
                Action::Cancel => {
                    self.overlay = None;
                    self.info("cancelled; nothing changed");
                    Vec::new()
                }
                _ => Vec::new(),
            };
        }
        let len = self.len();
        match a {
            Action::Down => self.set_sel(self.sel().saturating_add(1).min(len.saturating_sub(1))),
            Action::Up => self.set_sel(self.sel().saturating_sub(1)),
            Action::Top => self.set_sel(0),
            Action::Bottom => self.set_sel(len.saturating_sub(1)),
            Action::PageDown => self.set_sel((self.sel() + self.page).min(len.saturating_sub(1))),
            Action::PageUp => self.set_sel(self.sel().saturating_sub(self.page)),
            Action::Open => return self.open(),
            Action::Back => return self.back(),
            Action::Tags => return self.open_tags(),
            Action::Mounts => return self.open_mounts(),
            Action::Jobs => return self.open_jobs(),
            Action::CancelJob => return self.plan_cancel(),
            Action::RetryJob => return self.retry_job(),
            Action::Focus => {
                if matches!(self.screen(), Screen::Tags(_)) {
                    self.focus = match self.focus {
                        TagsFocus::Tags => TagsFocus::History,
                        TagsFocus::History => TagsFocus::Tags,
                    };
                    self.move_sel = 0;
                }
            }
            Action::PointTag => {
                if self.refuse_if_readonly() {
                    return Vec::new();
                }
                if self.selected_version().is_some() {
                    self.overlay = Some(Overlay::Prompt {
                        kind: PromptKind::TagName,
                        input: String::new(),
                    });
                    self.info("tag to point at this version (enter to continue, esc to cancel)");
                } else {
                    self.info("select a version first (open a volume)");
                }
            }
            Action::UndoMove => return self.plan_undo(),
            Action::Mark => return self.mark(),
            Action::Copy => return self.copy(),
            Action::Filter => {
                self.overlay = Some(Overlay::Prompt {
                    kind: PromptKind::Filter,
                    input: self.filter.clone(),
                })
            }
            Action::Command => {
                self.overlay = Some(Overlay::Prompt {
                    kind: PromptKind::Command,
                    input: String::new(),
                })
            }
            Action::Refresh => return self.reload(),
            Action::Help => self.overlay = Some(Overlay::Help),
            Action::Quit => self.quit = true,
            Action::Confirm | Action::Cancel => {}
        }
        Vec::new()
    }

    pub fn on_loaded(&mut self, l: Loaded) -> Vec<Effect> {
        self.busy = self.busy.saturating_sub(1);
        match l {
            Loaded::Volumes(v) => {
                self.volumes = v;
                let n = self.volumes.len();
                let ns: std::collections::BTreeSet<&str> =
                    self.volumes.iter().map(|v| v.namespace.as_str()).collect();
                if matches!(self.screen(), Screen::Volumes) {
                    self.info(format!("{n} volume(s) in {} namespace(s)", ns.len()));
                }
            }
            Loaded::Versions(vol, v) => {
                if self.screen() == &Screen::Versions(vol.clone()) {
                    self.versions = v;
                    self.info(format!("{} version(s) of {vol}", self.versions.len()));
                }
            }
            Loaded::Tags(vol, t) => {
                if self.screen() == &Screen::Tags(vol.clone()) {
                    self.tags = t;
                    if self.status.1.is_empty() || self.status.1.ends_with('…') {
                        self.info(format!("{} tag(s) on {vol}", self.tags.len()));
                    }
                }
            }
            Loaded::Mounts(m) => {
                self.mounts = m;
                if matches!(self.screen(), Screen::Mounts) && !self.status_is_error() {
                    self.info(format!("{} mount(s) on this node", self.mounts.len()));
                }
            }
            Loaded::Jobs(jobs, ev) => {
                self.jobs = jobs;
                self.job_event = ev.map(|e| *e);
                // The summary, unless the status says something else (a job just
                // cancelled or retried, an error).
                let summary = self.status.1.is_empty() || self.status.1.contains(" job(s): ");
                if matches!(self.screen(), Screen::Jobs) && summary && !self.status_is_error() {
                    let running = self
                        .jobs
                        .iter()
                        .filter(|j| matches!(j.state, JobState::Running | JobState::Sealing))
                        .count();
                    let queued = self
                        .jobs
                        .iter()
                        .filter(|j| j.state == JobState::Queued)
                        .count();
                    self.info(format!(
                        "{} job(s): {running} running, {queued} queued",
                        self.jobs.len()
                    ));
                }
            }
            Loaded::JobChanged(job) => {
                self.info(format!("job {} is {}", job.id, job.state));
                self.clamp();
                return self.reload();
            }
            Loaded::Diff(d) => {
                if matches!(self.screen(), Screen::Diff(..)) {
                    let t = &d.totals;
                    self.info(format!(
                        "{} added, {} removed, {} modified, {} unchanged",
                        t.added, t.removed, t.modified, t.unchanged
                    ));
                    self.diff = Some(*d);
                }
            }
            Loaded::Files(vol, digest, f) => {
                if self.stack.len() == 1 {
                    // Arrived by `:files REF`: open the screen now that the digest is known.
                    self.stack.push(Screen::Files(vol.clone(), digest));
                }
                if self.screen() == &Screen::Files(vol, digest) {
                    use sealvol_views::files::{Entry, Kind, tree};
                    let entries: Vec<Entry> = f
                        .files
                        .iter()
                        .map(|x| Entry {
                            path: x.path.clone(),
                            kind: match x.kind {
                                "dir" => Kind::EmptyDir,
                                "symlink" => Kind::Symlink,
                                _ => Kind::File { exec: x.exec },
                            },
                            size: x.size,
                            chunks: x.chunks,
                            shared_bytes: x.shared_bytes,
                            target: x.target.clone(),
                        })
                        .collect();
                    self.file_rows = tree(&entries);
                    self.file_previous = f.previous.clone();
                    self.info(match &f.previous {
                        Some(p) => format!(
                            "{} entries · shared = already in {}",
                            entries.len(),
                            short_digest(p)
                        ),
                        None => format!(
                            "{} entries · the first version: nothing to compare with",
                            entries.len()
                        ),
                    });
                }
            }
            Loaded::Moved(plan) => {
                self.info(format!(
                    "{}:{} now points at {} (was {}); undo from its history with u",
                    plan.volume,
                    plan.tag,
                    short_digest(&plan.to.to_string()),
                    plan.from
                        .map(|d| short_digest(&d.to_string()))
                        .unwrap_or_else(|| "nothing".into())
                ));
                return self.reload();
            }
            Loaded::Failed(msg) => {
                self.error(msg);
            }
        }
        self.clamp();
        Vec::new()
    }

    fn refuse_if_readonly(&mut self) -> bool {
        if self.readonly {
            self.error("read-only console (--readonly): tags cannot be moved");
        }
        self.readonly
    }

    fn status_is_error(&self) -> bool {
        self.status.0 == StatusKind::Error
    }

    /// The Mounts and Jobs screens show live figures: the loop asks every second.
    pub fn wants_live_refresh(&self) -> bool {
        matches!(self.screen(), Screen::Mounts | Screen::Jobs)
            && self.busy == 0
            && self.overlay.is_none()
    }

    pub fn refresh_live(&mut self) -> Vec<Effect> {
        if matches!(self.screen(), Screen::Jobs) {
            let id = self.selected_job().map(|j| j.id);
            return self.request(Effect::LoadJobs(id));
        }
        self.request(Effect::LoadMounts)
    }

    fn reload(&mut self) -> Vec<Effect> {
        let e = match self.screen().clone() {
            Screen::Mounts => Effect::LoadMounts,
            Screen::Jobs => Effect::LoadJobs(self.selected_job().map(|j| j.id)),
            Screen::Volumes => {
                let mut e = self.request(Effect::LoadMounts);
                e.extend(self.request(Effect::LoadVolumes));
                return e;
            }
            Screen::Versions(v) => {
                let mut e = self.request(Effect::LoadMounts);
                e.extend(self.request(Effect::LoadVersions(v)));
                return e;
            }
            Screen::Tags(v) => Effect::LoadTags(v),
            Screen::Diff(a, b) => Effect::Diff(a, b),
            Screen::Files(v, d) => Effect::LoadFiles(v, d),
        };
        self.request(e)
    }

    fn matches(&self, hay: &str) -> bool {
        self.filter.is_empty() || hay.to_lowercase().contains(&self.filter.to_lowercase())
    }

    fn visible_volumes(&self) -> Vec<usize> {
        if self.filter.is_empty() {
            return (0..self.volumes.len()).collect();
        }
        (0..self.volumes.len())
            .filter(|&i| {
                let v = &self.volumes[i];
                self.matches(&format!("{}/{} {}", v.namespace, v.name, v.tags.join(" ")))
            })
            .collect()
    }

    fn visible_mounts(&self) -> Vec<usize> {
        (0..self.mounts.len())
            .filter(|&i| {
                let m = &self.mounts[i];
                self.filter.is_empty()
                    || self.matches(&format!(
                        "{} {} {} {}",
                        m.dir, m.volume, m.digest, m.requested
                    ))
            })
            .collect()
    }

    fn visible_jobs(&self) -> Vec<usize> {
        (0..self.jobs.len())
            .filter(|&i| {
                let j = &self.jobs[i];
                self.filter.is_empty()
                    || self.matches(&format!(
                        "{} {} {} {}",
                        j.id, j.state, j.spec.source, j.spec.volume
                    ))
            })
            .collect()
    }

    fn selected_job(&self) -> Option<&Job> {
        self.jobs.get(*self.visible_jobs().get(self.job_sel)?)
    }

    fn visible_versions(&self) -> Vec<usize> {
        // No filter: no per-row formatting (10,000 versions are drawn every frame).
        if self.filter.is_empty() {
            return (0..self.versions.len()).collect();
        }
        (0..self.versions.len())
            .filter(|&i| {
                let v = &self.versions[i];
                self.matches(&format!("{} {} {}", v.digest, v.tags.join(" "), v.source))
            })
            .collect()
    }

    fn visible_diff_files(&self) -> Vec<usize> {
        let Some(d) = &self.diff else {
            return Vec::new();
        };
        (0..d.files.len())
            .filter(|&i| self.matches(&d.files[i].path))
            .collect()
    }

    fn len(&self) -> usize {
        match self.screen() {
            Screen::Diff(..) => self.visible_diff_files().len(),
            Screen::Files(..) => self.file_rows.len(),
            Screen::Mounts => self.visible_mounts().len(),
            Screen::Jobs => self.visible_jobs().len(),
            Screen::Volumes => self.visible_volumes().len(),
            Screen::Versions(_) => self.visible_versions().len(),
            Screen::Tags(_) => match self.focus {
                TagsFocus::Tags => self.tags.len(),
                TagsFocus::History => self.tags.get(self.tag_sel).map_or(0, |t| t.history.len()),
            },
        }
    }

    fn sel(&self) -> usize {
        match self.screen() {
            Screen::Diff(..) => self.diff_sel,
            Screen::Files(..) => self.file_sel,
            Screen::Mounts => self.mount_sel,
            Screen::Jobs => self.job_sel,
            Screen::Volumes => self.vol_sel,
            Screen::Versions(_) => self.ver_sel,
            Screen::Tags(_) => match self.focus {
                TagsFocus::Tags => self.tag_sel,
                TagsFocus::History => self.move_sel,
            },
        }
    }

    fn set_sel(&mut self, i: usize) {
        match self.screen() {
            Screen::Diff(..) => self.diff_sel = i,
            Screen::Files(..) => self.file_sel = i,
            Screen::Mounts => self.mount_sel = i,
            Screen::Jobs => {
                if self.job_sel != i {
                    self.job_event = None;
                }
                self.job_sel = i;
            }
            Screen::Volumes => self.vol_sel = i,
            Screen::Versions(_) => self.ver_sel = i,
            Screen::Tags(_) => match self.focus {
                TagsFocus::Tags => {
                    self.tag_sel = i;
                    self.move_sel = 0;
                }
                TagsFocus::History => self.move_sel = i,
            },
        }
    }

    fn clamp(&mut self) {
        let len = self.len();
        if self.sel() >= len {
            self.set_sel(len.saturating_sub(1));
        }
    }

    fn selected_volume(&self) -> Option<VolumeName> {
        let i = *self.visible_volumes().get(self.vol_sel)?;
        let v = &self.volumes[i];
        VolumeName::parse(&format!("{}/{}", v.namespace, v.name)).ok()
    }

    fn selected_version(&self) -> Option<&VersionInfo> {
        if !matches!(self.screen(), Screen::Versions(_)) {
            return None;
        }
        let i = *self.visible_versions().get(self.ver_sel)?;
        self.versions.get(i)
    }

    fn current_volume(&self) -> Option<VolumeName> {
        match self.screen() {
            Screen::Volumes => self.selected_volume(),
            Screen::Versions(v) | Screen::Tags(v) => Some(v.clone()),
            Screen::Diff(_, b) => Some(b.volume.clone()),
            Screen::Files(v, _) => Some(v.clone()),
            Screen::Mounts => self.selected_mount().map(|(v, _)| v),
            Screen::Jobs => self.sealed_job().map(|(v, _)| v),
        }
    }

    /// The version a READY job sealed.
    fn sealed_job(&self) -> Option<(VolumeName, Digest)> {
        let r = Ref::parse(self.selected_job()?.sealed.as_deref()?).ok()?;
        let sealed = self.selected_job()?.sealed.as_deref()?;
        let digest = Digest::parse(sealed.rsplit_once('@')?.1).ok()?;
        Some((r.volume, digest))
    }

    /// The selected mount's volume and the digest it serves.
    fn selected_mount(&self) -> Option<(VolumeName, Digest)> {
        let m = &self.mounts[*self.visible_mounts().get(self.mount_sel)?];
        Some((
            VolumeName::parse(&m.volume).ok()?,
            Digest::parse(&m.digest).ok()?,
        ))
    }

    fn push_screen(&mut self, s: Screen) -> Vec<Effect> {
        self.filter.clear();
        self.stack.push(s);
        self.reload()
    }

    fn open(&mut self) -> Vec<Effect> {
        match self.screen().clone() {
            Screen::Volumes => match self.selected_volume() {
                Some(v) => {
                    self.versions.clear();
                    self.ver_sel = 0;
                    self.marked = None;
                    self.push_screen(Screen::Versions(v))
                }
                None => Vec::new(),
            },
            Screen::Versions(vol) => {
                match self.selected_version().map(|v| Digest::parse(&v.digest)) {
                    Some(Ok(d)) => {
                        self.file_rows.clear();
                        self.file_sel = 0;
                        self.push_screen(Screen::Files(vol, d))
                    }
                    _ => Vec::new(),
                }
            }
            Screen::Tags(_) => {
                self.on_action(Action::Focus);
                Vec::new()
            }
            // What a mount serves: the files of that exact version.
            Screen::Mounts => match self.selected_mount() {
                Some((v, d)) => {
                    self.file_rows.clear();
                    self.file_sel = 0;
                    self.push_screen(Screen::Files(v, d))
                }
                None => Vec::new(),
            },
            // A sealed job: the files of the version it made.
            Screen::Jobs => match self.sealed_job() {
                Some((v, d)) => {
                    self.file_rows.clear();
                    self.file_sel = 0;
                    self.push_screen(Screen::Files(v, d))
                }
                None => Vec::new(),
            },
            Screen::Diff(..) | Screen::Files(..) => Vec::new(),
        }
    }

    fn back(&mut self) -> Vec<Effect> {
        if !self.filter.is_empty() {
            self.filter.clear();
            return Vec::new();
        }
        if self.stack.len() > 1 {
            self.stack.pop();
            self.focus = TagsFocus::Tags;
            return self.reload();
        }
        Vec::new()
    }

    fn open_mounts(&mut self) -> Vec<Effect> {
        if matches!(self.screen(), Screen::Mounts) {
            return Vec::new();
        }
        self.stack.truncate(1);
        self.mount_sel = 0;
        self.push_screen(Screen::Mounts)
    }

    fn open_jobs(&mut self) -> Vec<Effect> {
        if matches!(self.screen(), Screen::Jobs) {
            return Vec::new();
        }
        self.stack.truncate(1);
        self.job_sel = 0;
        self.job_event = None;
        self.push_screen(Screen::Jobs)
    }

    fn plan_cancel(&mut self) -> Vec<Effect> {
        if self.refuse_if_readonly() || !matches!(self.screen(), Screen::Jobs) {
            return Vec::new();
        }
        let Some(j) = self.selected_job() else {
            return Vec::new();
        };
        match j.state {
            JobState::Queued | JobState::Running => {
                let what = format!("{} → {}", j.spec.source, j.spec.volume);
                self.overlay = Some(Overlay::ConfirmCancel(j.id, what));
            }
            other => {
                let id = j.id;
                self.info(format!(
                    "job {id} is {other}: only queued or running jobs can be cancelled"
                ));
            }
        }
        Vec::new()
    }

    fn retry_job(&mut self) -> Vec<Effect> {
        if self.refuse_if_readonly() || !matches!(self.screen(), Screen::Jobs) {
            return Vec::new();
        }
        let Some(j) = self.selected_job() else {
            return Vec::new();
        };
        let id = j.id;
        if matches!(j.state, JobState::Failed | JobState::Cancelled) {
            self.info(format!("queueing job {id} again…"));
            return self.request(Effect::RetryJob(id));
        }
        let state = j.state;
        self.info(format!(
            "job {id} is {state}: only failed or cancelled jobs can be retried"
        ));
        Vec::new()
    }

    fn open_tags(&mut self) -> Vec<Effect> {
        match self.current_volume() {
            Some(v) if !matches!(self.screen(), Screen::Tags(_)) => {
                self.tags.clear();
                self.tag_sel = 0;
                self.move_sel = 0;
                self.focus = TagsFocus::Tags;
                self.push_screen(Screen::Tags(v))
            }
            _ => Vec::new(),
        }
    }

    fn open_diff(&mut self, a: Ref, b: Ref) -> Vec<Effect> {
        self.diff = None;
        self.diff_sel = 0;
        self.info(format!("comparing {a} → {b}…"));
        self.push_screen(Screen::Diff(a, b))
    }

    /// Mark one version, then another: the diff from the first to the second opens.
    fn mark(&mut self) -> Vec<Effect> {
        let Some(v) = self.selected_version() else {
            return Vec::new();
        };
        let d = v.digest.clone();
        if self.marked.as_deref() == Some(d.as_str()) {
            self.marked = None;
            self.info("unmarked");
        } else if let Some(first) = self.marked.take() {
            let Screen::Versions(vol) = self.screen().clone() else {
                return Vec::new();
            };
            let pinned = |digest: &str| Ref::parse(&format!("vol:{vol}@{digest}"));
            if let (Ok(a), Ok(b)) = (pinned(&first), pinned(&d)) {
                return self.open_diff(a, b);
            }
        } else {
            self.info(format!(
                "marked {}: mark another version to diff",
                short_digest(&d)
            ));
            self.marked = Some(d);
        }
        Vec::new()
    }

    fn copy(&mut self) -> Vec<Effect> {
        let Some(vol) = self.current_volume() else {
            return Vec::new();
        };
        let digest = match self.screen() {
            Screen::Versions(_) => self.selected_version().map(|v| v.digest.clone()),
            Screen::Tags(_) => self.tags.get(self.tag_sel).map(|t| t.digest.clone()),
            Screen::Files(_, d) => Some(d.to_string()),
            Screen::Mounts => self.selected_mount().map(|(_, d)| d.to_string()),
            Screen::Jobs => self.sealed_job().map(|(_, d)| d.to_string()),
            Screen::Volumes | Screen::Diff(..) => None,
        };
        let Some(d) = digest else {
            self.info("open a volume and select a version to copy its pinned ref");
            return Vec::new();
        };
        let r = format!("vol:{vol}@{d}");
        self.info(format!("copied {r}"));
        vec![Effect::Copy(r)]
    }

    fn current_tag_target(&self, tag: &Name) -> Option<Digest> {
        // From what this screen loaded: the confirmation must match what was shown.
        self.versions
            .iter()
            .find(|v| v.tags.iter().any(|t| t == tag.as_str()))
            .and_then(|v| Digest::parse(&v.digest).ok())
    }

    fn plan_undo(&mut self) -> Vec<Effect> {
        if self.refuse_if_readonly() {
            return Vec::new();
        }
        let Screen::Tags(vol) = self.screen().clone() else {
            self.info("undo works on a tag's history: press t, select the tag, tab, then u");
            return Vec::new();
        };
        let Some(tag) = self.tags.get(self.tag_sel) else {
            return Vec::new();
        };
        if self.focus != TagsFocus::History {
            self.info("tab into the history, select the move to undo, then u");
            return Vec::new();
        }
        let n = tag.history.len();
        let Some(m) = n
            .checked_sub(1 + self.move_sel)
            .and_then(|i| tag.history.get(i))
        else {
            return Vec::new();
        };
        let Some(back_to) = m.from.as_deref().and_then(|d| Digest::parse(d).ok()) else {
            self.info(format!(
                "that move created {}; there is nothing before it",
                tag.tag
            ));
            return Vec::new();
        };
        let (Ok(name), Ok(current)) = (Name::parse("tag", &tag.tag), Digest::parse(&tag.digest))
        else {
            self.error("this tag's record is damaged; run `sealvol volume verify`");
            return Vec::new();
        };
        if current == back_to {
            self.info(format!(
                "{} already points at {}",
                tag.tag,
                short_digest(&tag.digest)
            ));
            return Vec::new();
        }
        self.overlay = Some(Overlay::Confirm(TagMovePlan {
            volume: vol,
            tag: name,
            from: Some(current),
            to: back_to,
        }));
        Vec::new()
    }

    fn submit(&mut self, kind: PromptKind, text: &str) -> Vec<Effect> {
        match kind {
            PromptKind::Filter => {
                self.filter = text.to_string();
                self.clamp();
                Vec::new()
            }
            PromptKind::TagName => {
                let (Some(v), Screen::Versions(vol)) =
                    (self.selected_version(), self.screen().clone())
                else {
                    return Vec::new();
                };
                let Ok(to) = Digest::parse(&v.digest) else {
                    return Vec::new();
                };
                match Name::parse("tag", text) {
                    Ok(tag) => {
                        let from = self.current_tag_target(&tag);
                        if from == Some(to) {
                            self.info(format!("{tag} already points at this version"));
                            return Vec::new();
                        }
                        self.overlay = Some(Overlay::Confirm(TagMovePlan {
                            volume: vol,
                            tag,
                            from,
                            to,
                        }));
                    }
                    Err(e) => self.error(e.to_string()),
                }
                Vec::new()
            }
            PromptKind::Command => self.command(text),
        }
    }

    fn command(&mut self, text: &str) -> Vec<Effect> {
        let mut words = text.split_whitespace();
        let cmd = words.next().unwrap_or("");
        let arg = words.next();
        let vol = |a: Option<&str>| -> Result<VolumeName, String> {
            match a {
                Some(s) => Ref::parse(s).map(|r| r.volume).map_err(|e| e.to_string()),
                None => Err("name a volume: NS/NAME".into()),
            }
        };
        match cmd {
            "q" | "quit" => {
                self.quit = true;
                Vec::new()
            }
            "mounts" | "mnt" => self.open_mounts(),
            "jobs" => self.open_jobs(),
            "volumes" | "vol" | "ls" => {
                self.stack.truncate(1);
                self.filter.clear();
                self.reload()
            }
            "versions" | "ver" => match vol(arg) {
                Ok(v) => {
                    self.stack.truncate(1);
                    self.versions.clear();
                    self.ver_sel = 0;
                    self.push_screen(Screen::Versions(v))
                }
                Err(e) => {
                    self.error(e);
                    Vec::new()
                }
            },
            "files" => match arg.map(Ref::parse) {
                Some(Ok(r)) => {
                    self.stack.truncate(1);
                    self.file_rows.clear();
                    self.file_sel = 0;
                    self.request(Effect::ResolveFiles(r))
                }
                Some(Err(e)) => {
                    self.error(e.to_string());
                    Vec::new()
                }
                None => {
                    self.error("files needs a ref: :files NS/NAME:TAG");
                    Vec::new()
                }
            },
            "tags" => match vol(arg).or_else(|e| self.current_volume().ok_or(e)) {
                Ok(v) => {
                    self.stack.truncate(1);
                    self.tags.clear();
                    self.tag_sel = 0;
                    self.focus = TagsFocus::Tags;
                    self.push_screen(Screen::Tags(v))
                }
                Err(e) => {
                    self.error(e);
                    Vec::new()
                }
            },
            "diff" => {
                let second = words.next();
                match (arg.map(Ref::parse), second.map(Ref::parse)) {
                    (Some(Ok(a)), Some(Ok(b))) => {
                        self.stack.truncate(1);
                        self.open_diff(a, b)
                    }
                    (Some(Err(e)), _) | (_, Some(Err(e))) => {
                        self.error(e.to_string());
                        Vec::new()
                    }
                    _ => {
                        self.error("diff needs two refs: :diff NS/NAME@DIGEST NS/NAME:TAG");
                        Vec::new()
                    }
                }
            }
            "" => Vec::new(),
            other => {
                self.error(format!(
                    "unknown command {other:?}: try volumes, versions NS/NAME, files REF, tags NS/NAME, diff A B, mounts, jobs, quit"
                ));
                Vec::new()
            }
        }
    }

    fn jobs_view(&self, visible: &[usize]) -> sealvol_views::jobs::JobsView {
        use sealvol_views::jobs::{FileLine, JobDetail, JobRow, JobsView};
        let rows = visible
            .iter()
            .map(|&i| {
                let j = &self.jobs[i];
                JobRow {
                    id: j.id,
                    state: j.state.to_string(),
                    source: j.spec.source.clone(),
                    volume: j.spec.volume.clone(),
                    bytes_done: j.progress.bytes_done,
                    bytes_total: j.progress.bytes_total,
                    updated: j.updated.clone(),
                }
            })
            .collect();
        let detail = self.selected_job().map(|j| {
            // The live view when it is this job's; else what the list knows.
            let ev = self.job_event.as_ref().filter(|e| e.job.id == j.id);
            let job = ev.map_or(j, |e| &e.job);
            let p = &job.progress;
            JobDetail {
                id: job.id,
                state: job.state.to_string(),
                source: job.spec.source.clone(),
                volume: job.spec.volume.clone(),
                tags: job.spec.tags.clone(),
                attempts: job.attempts,
                bytes_done: p.bytes_done,
                bytes_total: p.bytes_total,
                files_done: p.files_done,
                files_total: p.files_total,
                chunks_new: p.chunks_new,
                chunks_reused: p.chunks_reused,
                rate: ev.map_or(0, |e| e.rate),
                eta_secs: ev.and_then(|e| e.eta_secs),
                rate_history: ev.map(|e| e.rate_history.clone()).unwrap_or_default(),
                files: ev
                    .map(|e| {
                        e.files
                            .iter()
                            .map(|f| FileLine {
                                path: f.path.clone(),
                                size: f.size,
                                state: match f.state {
                                    FileState::Kept => "kept",
                                    FileState::Done => "done",
                                    FileState::Reading => "reading",
                                    FileState::Waiting => "waiting",
                                }
                                .into(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                queued_ahead: ev.map_or(0, |e| e.queued_ahead),
                sealed: job.sealed.clone(),
                reason: job.reason.clone(),
            }
        });
        JobsView {
            rows,
            selected: self.job_sel,
            detail,
        }
    }

    fn diff_view(&self, d: &sealvol_core::diff::VersionDiff) -> sealvol_views::diff::DiffView {
        use sealvol_core::diff::Status;
        use sealvol_views::diff::{Change, DiffFile, DiffTensor, DiffView};
        let change = |s: Status| match s {
            Status::Added => Change::Added,
            Status::Removed => Change::Removed,
            Status::Modified => Change::Modified,
            Status::Unchanged => Change::Unchanged,
        };
        let t = &d.totals;
        let idx = self.visible_diff_files();
        let selected = idx.get(self.diff_sel).map(|&i| &d.files[i]);
        let (tensors, note) = match selected {
            Some(f) => (
                f.tensors
                    .iter()
                    .flatten()
                    .map(|x| DiffTensor {
                        name: x.name.clone(),
                        change: change(x.status),
                        kind: format!("{} {:?}", x.dtype, x.shape),
                        bytes: x.bytes,
                    })
                    .collect(),
                f.tensor_note.clone(),
            ),
            None => (Vec::new(), None),
        };
        // `vol:ns/name@b3:<64 hex>` → 12 hex digits, as everywhere else on screen.
        let short = |r: &str| match r.split_once("@") {
            Some((vol, digest)) => format!("{vol}@{}", short_digest(digest)),
            None => r.to_string(),
        };
        DiffView {
            from: short(&d.from),
            to: short(&d.to),
            summary: format!(
                "{} added · {} removed · {} modified · {} unchanged · {} in {} chunks new",
                t.added,
                t.removed,
                t.modified,
                t.unchanged,
                sealvol_views::format::size(t.changed_bytes),
                t.changed_chunks
            ),
            files: idx
                .iter()
                .map(|&i| {
                    let f = &d.files[i];
                    DiffFile {
                        path: f.path.clone(),
                        change: change(f.status),
                        size: f.size_to.or(f.size_from).unwrap_or(0),
                        changed_bytes: f.changed_bytes,
                        chunks: f.chunks,
                        changed_chunks: f.changed_chunks,
                        spans: f
                            .spans
                            .iter()
                            .map(|s| (s.offset, s.len, s.changed))
                            .collect(),
                    }
                })
                .collect(),
            selected: self.diff_sel,
            tensors,
            note,
        }
    }

    /// Everything on screen, as a view-model.
    pub fn frame(&self, keymap: &Keymap) -> FrameView {
        let mut crumbs = vec!["volumes".to_string()];
        let body = match self.screen() {
            Screen::Volumes => {
                let rows: Vec<VolumeRow> = self
                    .visible_volumes()
                    .into_iter()
                    .map(|i| {
                        let v = &self.volumes[i];
                        VolumeRow {
                            namespace: v.namespace.clone(),
                            name: v.name.clone(),
                            versions: v.versions,
                            tags: v.tags.clone(),
                            latest_bytes: v.latest_bytes,
                            updated: v.updated.clone(),
                            mounted: self
                                .mounts
                                .iter()
                                .filter(|m| m.volume == format!("{}/{}", v.namespace, v.name))
                                .map(|m| m.digest.clone())
                                .collect(),
                        }
                    })
                    .collect();
                if rows.is_empty() && self.busy == 0 {
                    Body::Empty(if self.filter.is_empty() {
                        "no volumes yet: push one with `sealvol volume push DIR NS/NAME`, or run `sealvol --demo`".into()
                    } else {
                        format!("nothing matches /{}", self.filter)
                    })
                } else {
                    Body::Volumes(VolumesView {
                        rows,
                        selected: self.vol_sel,
                    })
                }
            }
            Screen::Versions(vol) => {
                crumbs.push(vol.to_string());
                crumbs.push("versions".into());
                let idx = self.visible_versions();
                let marked = self
                    .marked
                    .as_ref()
                    .and_then(|m| idx.iter().position(|&i| &self.versions[i].digest == m));
                Body::Versions(VersionsView {
                    volume: vol.to_string(),
                    rows: idx
                        .into_iter()
                        .map(|i| {
                            let v = &self.versions[i];
                            VersionRow {
                                digest: v.digest.clone(),
                                created: v.created.clone(),
                                bytes: v.bytes,
                                files: v.files,
                                new_bytes: v.new_bytes,
                                source: v.source.clone(),
                                tags: v.tags.clone(),
                                mounts: self
                                    .mounts
                                    .iter()
                                    .filter(|m| m.volume == vol.to_string() && m.digest == v.digest)
                                    .count(),
                            }
                        })
                        .collect(),
                    selected: self.ver_sel,
                    marked,
                })
            }
            Screen::Tags(vol) => {
                crumbs.push(vol.to_string());
                crumbs.push("tags".into());
                Body::Tags(TagsView {
                    volume: vol.to_string(),
                    tags: self
                        .tags
                        .iter()
                        .map(|t| TagRow {
                            tag: t.tag.clone(),
                            digest: t.digest.clone(),
                            history: t
                                .history
                                .iter()
                                .map(|m| MoveRow {
                                    from: m.from.clone(),
                                    to: m.to.clone(),
                                    at: m.at.clone(),
                                    by: m.by.clone(),
                                })
                                .collect(),
                        })
                        .collect(),
                    selected: self.tag_sel,
                    focus: self.focus,
                    selected_move: self.move_sel,
                })
            }
            Screen::Files(vol, d) => {
                crumbs.push(vol.to_string());
                crumbs.push(format!("b3:{}", d.short(12)));
                Body::Files(sealvol_views::files::FilesView {
                    version: format!("vol:{vol}@{d}"),
                    previous: self.file_previous.clone(),
                    rows: self.file_rows.clone(),
                    selected: self.file_sel,
                })
            }
            Screen::Mounts => {
                crumbs.push("mounts".into());
                let visible = self.visible_mounts();
                if self.mounts.is_empty() {
                    Body::Empty(
                        "no mounts on this node: `sealvol volume mount REF DIR` makes one".into(),
                    )
                } else if visible.is_empty() {
                    Body::Empty(format!("no mount matches /{}", self.filter))
                } else {
                    Body::Mounts(MountsView {
                        rows: visible
                            .into_iter()
                            .map(|i| &self.mounts[i])
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
                                origin_chunks: m.stats.origin_chunks,
                                errors: m.stats.errors,
                            })
                            .collect(),
                        selected: self.mount_sel,
                    })
                }
            }
            Screen::Jobs => {
                crumbs.push("jobs".into());
                let visible = self.visible_jobs();
                if self.jobs.is_empty() {
                    Body::Empty(
                        "no sync jobs: `sealvol volume sync SOURCE NS/NAME --detach` queues one"
                            .into(),
                    )
                } else if visible.is_empty() {
                    Body::Empty(format!("no job matches /{}", self.filter))
                } else {
                    Body::Jobs(self.jobs_view(&visible))
                }
            }
            Screen::Diff(a, b) => {
                crumbs.push(b.volume.to_string());
                crumbs.push("diff".into());
                match &self.diff {
                    Some(d) => Body::Diff(self.diff_view(d)),
                    None => Body::Empty(format!("comparing {a} → {b}…")),
                }
            }
        };
        let kind = if self.busy > 0 {
            StatusKind::Busy(self.spinner)
        } else {
            self.status.0.clone()
        };
        let mut text = self.status.1.clone();
        if !self.filter.is_empty() && !matches!(self.overlay, Some(Overlay::Prompt { .. })) {
            text = format!("/{}  {text}", self.filter);
        }
        let hints: Vec<(&str, &str)> = match self.screen() {
            Screen::Volumes => vec![
                ("enter", "versions"),
                ("t", "tags"),
                ("M", "mounts"),
                ("J", "jobs"),
                ("/", "filter"),
                ("?", "help"),
            ],
            Screen::Versions(_) => vec![
                ("c", "copy ref"),
                ("m", "mark/diff"),
                ("p", "tag"),
                ("t", "tags"),
                ("?", "help"),
            ],
            Screen::Tags(_) => vec![
                ("tab", "history"),
                ("u", "undo move"),
                ("esc", "back"),
                ("?", "help"),
            ],
            Screen::Files(..) => vec![("c", "copy ref"), ("esc", "back"), ("?", "help")],
            Screen::Mounts => vec![
                ("enter", "files"),
                ("c", "copy ref"),
                ("/", "filter"),
                ("esc", "back"),
                ("?", "help"),
            ],
            Screen::Jobs => vec![
                ("enter", "files"),
                ("x", "cancel"),
                ("R", "retry"),
                ("/", "filter"),
                ("?", "help"),
            ],
            Screen::Diff(..) => vec![
                ("j/k", "file"),
                ("/", "filter"),
                ("esc", "back"),
                ("?", "help"),
            ],
        };
        let overlay = self.overlay.as_ref().map(|o| match o {
            Overlay::Help => ViewOverlay::Help(keymap.help(Mode::Normal)),
            Overlay::Prompt { kind, input } => ViewOverlay::Prompt {
                prefix: match kind {
                    PromptKind::Filter => '/',
                    PromptKind::Command => ':',
                    PromptKind::TagName => '@',
                },
                input: input.clone(),
            },
            Overlay::ConfirmCancel(id, what) => ViewOverlay::Confirm {
                title: format!("cancel job {id}"),
                lines: vec![
                    (what.clone(), Role::Text),
                    (
                        "it stops at its next read; nothing is sealed".into(),
                        Role::Dim,
                    ),
                    (
                        "what it stored stays, so a retry does not fetch it again".into(),
                        Role::Dim,
                    ),
                ],
                yes: format!("cancel job {id}"),
            },
            Overlay::Confirm(p) => ViewOverlay::Confirm {
                title: format!("move tag {}", p.tag),
                lines: vec![
                    (format!("vol:{}:{}", p.volume, p.tag), Role::Tag),
                    (
                        format!(
                            "from {}",
                            p.from
                                .map(|d| format!("b3:{}", d.short(16)))
                                .unwrap_or_else(|| "(new tag)".into())
                        ),
                        Role::Removed,
                    ),
                    (format!("to   b3:{}", p.to.short(16)), Role::Added),
                    (
                        format!("everything that resolves :{} will get the new bytes", p.tag),
                        Role::Dim,
                    ),
                ],
                yes: format!("move {}", p.tag),
            },
        });
        let context = if self.readonly {
            format!("{} · read-only", self.location)
        } else {
            self.location.clone()
        };
        FrameView {
            crumbs,
            context,
            body,
            status: Status {
                kind,
                text,
                hints: hints
                    .into_iter()
                    .map(|(k, d)| (k.to_string(), d.to_string()))
                    .collect(),
            },
            overlay,
        }
    }
}
