//! The console's state: a stack of screens (the volumes list at the bottom) and what
//! they share (`Ctx`). Keys become `Action`s; the model answers those every screen has
//! (moving, back, filter, palette, help, confirmations) and hands the rest to the
//! screen on top. Screens ask for engine work as `Effect`s, whose results come back as
//! `Loaded`. No terminal and no I/O here, so key scripts can drive it in tests.

use ratatui::crossterm::event::{KeyCode, KeyEvent, MouseButton, MouseEvent, MouseEventKind};
use sealvol_views::chrome::{Status, StatusKind};
use sealvol_views::format::short_digest;
use sealvol_views::{Body, FrameView};

pub use crate::screens::{Overlay, Prompt, PromptKind};

use crate::action::Action;
use crate::effects::{Effect, Loaded, Opened};
use crate::keymap::{Keymap, Mode};
use crate::palette::{self, To};
use crate::screens::deployments::Deployments;
use crate::screens::diff::Diff;
use crate::screens::files::Files;
use crate::screens::jobs::Jobs;
use crate::screens::mounts::Mounts;
use crate::screens::tags::Tags;
use crate::screens::trash::Trash;
use crate::screens::versions::Versions;
use crate::screens::volumes::Volumes;
use crate::screens::watch::Watches;
use crate::screens::{Ctx, Go, Kind, Reply, Screen};
use sealvol_node::api::Work;

pub struct Model {
    /// The bottom of the stack, always there.
    root: Volumes,
    /// The screens opened over it, the shown one last.
    above: Vec<Box<dyn Screen>>,
    ctx: Ctx,
    spinner: usize,
    pub quit: bool,
    /// Rows a page-down moves; set from the terminal height.
    pub page: usize,
    location: String,
    /// Deployment files (or folders) for the Deployments screen.
    deploy: Vec<std::path::PathBuf>,
    /// Stored secrets' names, for `:sync … --secret` completion (read as the palette
    /// opens).
    secrets: Vec<String>,
}

impl Model {
    pub fn new(
        location: String,
        readonly: bool,
        deploy: Vec<std::path::PathBuf>,
    ) -> (Model, Vec<Effect>) {
        let mut m = Model {
            secrets: Vec::new(),
            root: Volumes::default(),
            above: Vec::new(),
            ctx: Ctx {
                confirm_full: false,
                filter: String::new(),
                status: (StatusKind::Info, String::new()),
                readonly,
                busy: 0,
                mounts: Vec::new(),
                overlay: None,
                messages: Default::default(),
            },
            spinner: 0,
            quit: false,
            page: 20,
            location,
            deploy,
        };
        let e = m.request(vec![Effect::LoadVolumes, Effect::LoadMounts]);
        (m, e)
    }

    /// The confirmation, prompt or help shown over the screen, if any.
    #[cfg(test)]
    pub fn overlay(&self) -> Option<&Overlay> {
        self.ctx.overlay.as_ref()
    }

    fn top(&self) -> &dyn Screen {
        match self.above.last() {
            Some(s) => s.as_ref(),
            None => &self.root,
        }
    }

    /// The screen on top, and what screens share, borrowed apart.
    fn top_and_ctx(&mut self) -> (&mut dyn Screen, &mut Ctx) {
        let top: &mut dyn Screen = match self.above.last_mut() {
            Some(s) => s.as_mut(),
            None => &mut self.root,
        };
        (top, &mut self.ctx)
    }

    /// Back to the volumes list.
    fn back_to_root(&mut self) {
        if !self.above.is_empty() {
            self.above.clear();
            self.clear_status();
        }
    }

    /// Each screen owns its status line: what one said is gone when another is shown.
    fn clear_status(&mut self) {
        self.ctx.status = (StatusKind::Info, String::new());
    }

    /// Which screen is shown.
    fn screen(&self) -> Kind {
        self.top().kind()
    }

    /// Counts engine work in flight so the status line can show a spinner.
    fn request(&mut self, effects: Vec<Effect>) -> Vec<Effect> {
        self.ctx.busy += effects
            .iter()
            .filter(|e| !matches!(e, Effect::Copy(_)))
            .count();
        effects
    }

    /// The engine is being opened: the spinner turns, the status line says where.
    pub fn opening(&mut self) {
        self.ctx.busy += 1;
        self.ctx.status = (StatusKind::Info, format!("opening {}…", self.location));
    }

    /// The engine is open at `location`; a read-only key makes the console read-only.
    pub fn opened(&mut self, location: String, readonly: bool) {
        self.ctx.busy = self.ctx.busy.saturating_sub(1);
        self.location = location;
        self.ctx.readonly |= readonly;
        self.clear_status();
    }

    /// The engine could not be opened: the `waiting` effects asked for meanwhile will
    /// never run, and the status line says why (the console stays, `q` quits).
    pub fn open_failed(&mut self, e: &sealvol_core::Error, waiting: usize) {
        self.ctx.busy = self.ctx.busy.saturating_sub(1);
        self.forget(waiting);
        self.ctx.error(match e.hint_text() {
            Some(h) => format!("{e} ({h})"),
            None => e.to_string(),
        });
    }

    /// Effects counted as in flight that will never run.
    pub fn forget(&mut self, n: usize) {
        self.ctx.busy = self.ctx.busy.saturating_sub(n);
    }

    pub fn is_busy(&self) -> bool {
        self.ctx.busy > 0
    }

    pub fn tick(&mut self) {
        self.spinner = self.spinner.wrapping_add(1);
    }

    pub fn mode(&self) -> Mode {
        match self.ctx.overlay {
            Some(
                Overlay::Confirm(_)
                | Overlay::ConfirmCancel(..)
                | Overlay::ConfirmRetry(..)
                | Overlay::ConfirmStopWatch(..)
                | Overlay::ConfirmDelete(_)
                | Overlay::ConfirmRestore(_)
                | Overlay::ConfirmRollback(_),
            ) => Mode::Confirm,
            _ => Mode::Normal,
        }
    }

    fn len(&self) -> usize {
        self.top().len(&self.ctx)
    }

    fn sel(&self) -> usize {
        self.top().selected()
    }

    fn set_sel(&mut self, i: usize) {
        let (top, ctx) = self.top_and_ctx();
        top.select(i, ctx);
    }

    fn clamp(&mut self) {
        let len = self.len();
        if self.sel() >= len {
            self.set_sel(len.saturating_sub(1));
        }
    }

    /// Mouse: the wheel moves the selection; a click selects a row of a list screen, and
    /// a click on the selected row opens it; a click on a breadcrumb goes back to it.
    /// `row` is the terminal row, counted from the top.
    pub fn on_mouse(&mut self, ev: &MouseEvent, size: (u16, u16), keymap: &Keymap) -> Vec<Effect> {
        if self.ctx.overlay.is_some() {
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
                match self.shown_hints(keymap).get(i) {
                    Some((action, _, _)) => {
                        if self.ctx.status_is_error() {
                            self.clear_status();
                        }
                        self.on_action(*action)
                    }
                    None => Vec::new(),
                }
            }
            MouseEventKind::ScrollDown => self.on_action(Action::Down),
            MouseEventKind::ScrollUp => self.on_action(Action::Up),
            MouseEventKind::Down(MouseButton::Left) if ev.row == 0 => {
                // Breadcrumbs: " sealvol › volumes › ns/name › versions".
                let depth = self.crumb_at(ev.column);
                let mut effects = Vec::new();
                while depth.is_some_and(|d| self.above.len() > d) {
                    effects = self.back();
                }
                effects
            }
            MouseEventKind::Down(MouseButton::Left) => {
                // Single-table screens: row 1 is the table header, rows follow.
                if !self.top().clickable() {
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
                    return self.on_action(Action::Open);
                }
                self.set_sel(i);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    /// Which breadcrumb (0 = volumes) a click at `column` of the header lands on.
    fn crumb_at(&self, column: u16) -> Option<usize> {
        // Mirrors chrome::draw_header: " sealvol" then " › " before each crumb.
        let mut x = " sealvol".chars().count();
        let stack =
            std::iter::once(&self.root as &dyn Screen).chain(self.above.iter().map(|s| s.as_ref()));
        for (depth, s) in stack.enumerate() {
            let name = s.crumb();
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
        // An error stays until the next key, whatever that key does.
        if self.ctx.status_is_error() {
            self.clear_status();
        }
        if let Some(Overlay::Prompt(_)) = &self.ctx.overlay {
            return self.on_prompt_key(ev);
        }
        if let Some(Overlay::Help(offset) | Overlay::Messages(offset)) = self.ctx.overlay {
            // The moving keys scroll a window longer than the terminal; any other key
            // closes it, and `q` still quits.
            let help = matches!(self.ctx.overlay, Some(Overlay::Help(_)));
            let lines = match help {
                true => self.help_lines(keymap).len(),
                // Wrapped lines, at least; scrolling past the end shows the frame.
                false => (self.ctx.messages.iter())
                    .map(|(_, t)| t.chars().count() / 40 + 2)
                    .sum(),
            };
            let last = lines.saturating_sub(1);
            let to = match keymap.action(Mode::Normal, ev) {
                Some(Action::Down) => Some((offset + 1).min(last)),
                Some(Action::Up) => Some(offset.saturating_sub(1)),
                Some(Action::PageDown) => Some((offset + self.page).min(last)),
                Some(Action::PageUp) => Some(offset.saturating_sub(self.page)),
                Some(Action::Top) => Some(0),
                Some(Action::Bottom) => Some(last),
                Some(Action::Quit) => {
                    self.ctx.overlay = None;
                    return self.on_action(Action::Quit);
                }
                _ => None,
            };
            self.ctx.overlay = to.map(|o| match help {
                true => Overlay::Help(o),
                false => Overlay::Messages(o),
            });
            return Vec::new();
        }
        match keymap.action(self.mode(), ev) {
            Some(a) => self.on_action(a),
            None => Vec::new(),
        }
    }

    /// A key while a line is being typed.
    fn on_prompt_key(&mut self, ev: &KeyEvent) -> Vec<Effect> {
        let Some(Overlay::Prompt(p)) = &mut self.ctx.overlay else {
            return Vec::new();
        };
        let kind = p.kind;
        match ev.code {
            KeyCode::Esc => {
                if kind == PromptKind::Filter {
                    self.ctx.filter.clear();
                }
                self.ctx.overlay = None;
                return Vec::new();
            }
            KeyCode::Enter => {
                let text = p.input.trim().to_string();
                self.ctx.overlay = None;
                return self.submit(kind, &text);
            }
            KeyCode::Tab if kind == PromptKind::Command => {
                if let Some(line) = palette::complete(&p.input, &self.root.names(), &self.secrets) {
                    p.input = line;
                }
                p.fresh = false;
            }
            KeyCode::Backspace => {
                if p.fresh {
                    p.input.clear();
                } else {
                    p.input.pop();
                }
                p.fresh = false;
            }
            KeyCode::Left | KeyCode::Right | KeyCode::End | KeyCode::Home => p.fresh = false,
            KeyCode::Char(c) => {
                if p.fresh {
                    p.input.clear();
                }
                p.input.push(c);
                p.fresh = false;
            }
            _ => {}
        }
        if kind == PromptKind::Filter {
            self.ctx.filter = p.input.clone();
            self.clamp();
        }
        Vec::new()
    }

    pub fn on_action(&mut self, a: Action) -> Vec<Effect> {
        if let Some(effects) = self.on_confirmation(a) {
            return effects;
        }
        let len = self.len();
        let last = len.saturating_sub(1);
        match a {
            Action::Down => self.set_sel(self.sel().saturating_add(1).min(last)),
            Action::Up => self.set_sel(self.sel().saturating_sub(1)),
            Action::Top => self.set_sel(0),
            Action::Bottom => self.set_sel(last),
            Action::PageDown => self.set_sel((self.sel() + self.page).min(last)),
            Action::PageUp => self.set_sel(self.sel().saturating_sub(self.page)),
            Action::Back => return self.back(),
            Action::Tags => return self.open_tags(),
            Action::Mounts => return self.open_live(Kind::Mounts),
            Action::Jobs => return self.open_live(Kind::Jobs),
            Action::Watch => return self.open_live(Kind::Watch),
            Action::Deployments => return self.open_live(Kind::Deployments),
            Action::Trash => return self.open_trash(),
            Action::Copy => return self.copy(),
            Action::Filter => {
                self.ctx.overlay = Some(Overlay::Prompt(Prompt::editing(
                    PromptKind::Filter,
                    "",
                    self.ctx.filter.clone(),
                )))
            }
            Action::Command => {
                self.ctx.overlay = Some(Overlay::Prompt(Prompt::new(PromptKind::Command, "")));
                return self.request(vec![Effect::LoadSecretNames]);
            }
            Action::Refresh => return self.reload(),
            Action::Help => self.ctx.overlay = Some(Overlay::Help(0)),
            Action::Messages => match self.ctx.messages.is_empty() {
                true => self.ctx.info("no messages yet"),
                false => self.ctx.overlay = Some(Overlay::Messages(0)),
            },
            Action::Quit => self.quit = true,
            Action::Confirm | Action::Cancel => {}
            // A change refused in a read-only console, whatever the screen.
            a if a.changes_repository() && self.refuse_if_readonly() => {}
            // Open, focus, mark and every change: the screen shown carries them out.
            a => {
                let (top, ctx) = self.top_and_ctx();
                match top.on_action(a, ctx) {
                    Some(r) => return self.apply(r),
                    None => self.not_here(a),
                }
            }
        }
        Vec::new()
    }

    /// Answers a pending confirmation; `None` when none is shown.
    fn on_confirmation(&mut self, a: Action) -> Option<Vec<Effect>> {
        if a == Action::Full {
            self.ctx.overlay.as_ref()?;
            self.ctx.confirm_full = !self.ctx.confirm_full;
            return Some(Vec::new());
        }
        let (effect, yes, no) = match self.ctx.overlay.as_ref()? {
            Overlay::ConfirmCancel(id, _) => {
                let id = *id;
                (
                    Effect::CancelJob(id),
                    format!("cancelling job {id}…"),
                    format!("job {id} goes on"),
                )
            }
            Overlay::ConfirmRetry(id, _) => {
                let id = *id;
                (
                    Effect::RetryJob(id),
                    format!("queueing job {id} again…"),
                    format!("job {id} stays as it is"),
                )
            }
            Overlay::ConfirmStopWatch(id, _) => {
                let id = *id;
                (
                    Effect::StopWatch(id),
                    format!("stopping watch {id}…"),
                    format!("watch {id} goes on"),
                )
            }
            Overlay::Confirm(plan) => (
                Effect::MoveTag(plan.clone()),
                format!("moving {}…", plan.tag),
                "cancelled; nothing changed".to_string(),
            ),
            Overlay::ConfirmDelete(plan) => (
                Effect::Delete(plan.clone()),
                format!("moving b3:{} to the trash…", plan.digest.short(12)),
                "cancelled; nothing changed".to_string(),
            ),
            Overlay::ConfirmRestore(plan) => (
                Effect::Restore(plan.clone()),
                format!("restoring b3:{}…", plan.digest.short(12)),
                "cancelled; it stays in the trash".to_string(),
            ),
            Overlay::ConfirmRollback(plan) => (
                Effect::ApplyRollback(plan.clone()),
                format!("writing {}…", plan.file.display()),
                format!("cancelled; {} is unchanged", plan.file.display()),
            ),
            Overlay::Help(_) | Overlay::Messages(_) | Overlay::Prompt(_) => return None,
        };
        Some(match a {
            Action::Confirm => {
                self.ctx.overlay = None;
                self.ctx.confirm_full = false;
                self.ctx.info(yes);
                self.request(vec![effect])
            }
            Action::Cancel => {
                self.ctx.overlay = None;
                self.ctx.confirm_full = false;
                self.ctx.info(no);
                Vec::new()
            }
            _ => Vec::new(),
        })
    }

    /// A screen key pressed where it means nothing: say what would.
    fn not_here(&mut self, a: Action) {
        match a {
            Action::PointTag => self.ctx.info("select a version first (open a volume)"),
            Action::UndoMove => self
                .ctx
                .info("undo works on a tag's history: press t, select the tag, tab, then u"),
            Action::Delete => self
                .ctx
                .info("delete works on a version: open a volume, select it, then d"),
            Action::Restore => self
                .ctx
                .info("restore works in the trash: press T, select the version, then U"),
            Action::Rollback => self
                .ctx
                .info("rollback works on a deployment: press D, select a volume and a deployment (tab), then b"),
            _ => {}
        }
    }

    fn refuse_if_readonly(&mut self) -> bool {
        if self.ctx.readonly {
            self.ctx.error(
                "read-only console (--readonly): nothing can be changed (tags, jobs, deletes, restores)",
            );
        }
        self.ctx.readonly
    }

    /// Carries out a screen's reply: its effects, then where it goes.
    fn apply(&mut self, r: Reply) -> Vec<Effect> {
        let mut effects = self.request(r.effects);
        match r.go {
            Some(Go::Push(s)) => effects.extend(self.push_screen(s)),
            Some(Go::FromRoot(s)) => {
                self.back_to_root();
                effects.extend(self.push_screen(s));
            }
            None => {}
        }
        effects
    }

    pub fn on_loaded(&mut self, l: Loaded) -> Vec<Effect> {
        self.ctx.busy = self.ctx.busy.saturating_sub(1);
        match l {
            Loaded::Failed(msg) => self.ctx.error(msg),
            Loaded::SecretNames(names) => self.secrets = names,
            Loaded::Launched(work, said) => {
                self.ctx.info(said);
                let kind = match work {
                    Work::Sync { .. } => Kind::Jobs,
                    Work::Mount { .. } => Kind::Mounts,
                    Work::Watch { .. } => Kind::Watch,
                };
                return match self.screen() == kind {
                    true => self.reload(),
                    false => self.open_live(kind),
                };
            }
            Loaded::Refused(msg) => {
                self.ctx.error(msg);
                return self.reload();
            }
            Loaded::Moved(plan) => {
                self.ctx.info(format!(
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
            Loaded::Deleted(plan, expires) => {
                self.ctx.info(format!(
                    "moved {}@b3:{} to the trash until {}{}; undo: T, then U",
                    plan.volume,
                    plan.digest.short(12),
                    sealvol_views::format::when(&expires),
                    match plan.tags.is_empty() {
                        true => String::new(),
                        false => format!(" (removed tag {})", plan.tags.join(", ")),
                    }
                ));
                return self.reload();
            }
            Loaded::Restored(plan) => {
                self.ctx.info(format!(
                    "restored {}@b3:{}{}",
                    plan.volume,
                    plan.digest.short(12),
                    match plan.tags.is_empty() {
                        true => String::new(),
                        false => format!(
                            "; it had tag {}: point it again with p on the versions screen",
                            plan.tags.join(", ")
                        ),
                    }
                ));
                return self.reload();
            }
            Loaded::RolledBack(plan) => {
                self.ctx.info(format!(
                    "wrote {}: {} at {} is pinned to {} (was {})",
                    plan.file.display(),
                    plan.volume,
                    plan.path,
                    short_digest(&plan.to.to_string()),
                    plan.from
                        .map(|d| short_digest(&d.to_string()))
                        .unwrap_or_else(|| "an unresolved ref".into())
                ));
                // Back to the matrix, which shows the file as it is now.
                if self.screen() == Kind::Rollback {
                    self.above.pop();
                }
                return self.reload();
            }
            Loaded::JobChanged(job) => {
                self.ctx.info(format!("job {} is {}", job.id, job.state));
                self.clamp();
                return self.reload();
            }
            Loaded::WatchStopped(w) => {
                self.ctx.info(format!(
                    "watch {} stopped; the {} version(s) it sealed stay",
                    w.id,
                    w.sealed.len()
                ));
                return self.reload();
            }
            // The volumes list takes its data wherever the console is.
            l @ (Loaded::Volumes(_) | Loaded::Quotas(_)) => {
                let on_top = self.above.is_empty();
                self.root.on_loaded(l, &mut self.ctx, on_top);
            }
            // The Mounts screen's rows, and the marks of the others.
            l @ Loaded::Mounts(_) if self.screen() == Kind::Mounts => self.offer(l),
            Loaded::Mounts(m) => self.ctx.mounts = m,
            // What the palette named exists: only now does the console move.
            Loaded::Opened(o) => {
                let s: Box<dyn Screen> = match o {
                    Opened::Versions(v) => Box::new(Versions::new(v)),
                    Opened::Tags(v) => Box::new(Tags::new(v)),
                    Opened::Files(v, d) => Box::new(Files::new(v, d)),
                    Opened::Diff(a, b) => Box::new(Diff::new(a, b)),
                    Opened::Trash(v) => Box::new(Trash::new(v)),
                };
                return self.apply(Reply::go(Go::FromRoot(s)));
            }
            l => self.offer(l),
        }
        self.clamp();
        Vec::new()
    }

    /// Gives a result to the screen on top, which takes it if it is for that screen.
    fn offer(&mut self, l: Loaded) {
        let (top, ctx) = self.top_and_ctx();
        top.on_loaded(l, ctx, true);
    }

    /// The Mounts and Jobs screens show live figures: the loop asks every second.
    pub fn wants_live_refresh(&self) -> bool {
        self.top().live() && self.ctx.busy == 0 && self.ctx.overlay.is_none()
    }

    pub fn refresh_live(&mut self) -> Vec<Effect> {
        self.reload()
    }

    fn reload(&mut self) -> Vec<Effect> {
        let e = self.top().load(&self.ctx);
        self.request(e)
    }

    fn push_screen(&mut self, mut s: Box<dyn Screen>) -> Vec<Effect> {
        self.ctx.filter.clear();
        self.clear_status();
        s.entered(&mut self.ctx);
        self.above.push(s);
        self.reload()
    }

    fn back(&mut self) -> Vec<Effect> {
        if !self.ctx.filter.is_empty() {
            self.ctx.filter.clear();
            return Vec::new();
        }
        // A screen of two lists takes the keys back to its first before it closes.
        let (top, ctx) = self.top_and_ctx();
        if let Some(r) = top.on_action(Action::Back, ctx) {
            return self.apply(r);
        }
        if self.above.pop().is_some() {
            self.clear_status();
            return self.reload();
        }
        Vec::new()
    }

    /// The Mounts, Jobs or Watch screen, over the volumes list, unless it is shown already.
    fn open_live(&mut self, kind: Kind) -> Vec<Effect> {
        if self.screen() == kind {
            return Vec::new();
        }
        let s: Box<dyn Screen> = match kind {
            Kind::Jobs => Box::new(Jobs::default()),
            Kind::Watch => Box::new(Watches::default()),
            Kind::Deployments => Box::new(Deployments::new(self.deploy.clone())),
            _ => Box::new(Mounts::default()),
        };
        self.back_to_root();
        self.push_screen(s)
    }

    /// The trash: of the volume shown (on its versions or tags screen), else of all.
    fn open_trash(&mut self) -> Vec<Effect> {
        if self.screen() == Kind::Trash {
            return Vec::new();
        }
        let volume = match self.screen() {
            Kind::Volumes => None,
            _ => self.top().volume(&self.ctx),
        };
        self.push_screen(Box::new(Trash::new(volume)))
    }

    fn open_tags(&mut self) -> Vec<Effect> {
        match self.top().volume(&self.ctx) {
            Some(v) if self.screen() != Kind::Tags => self.push_screen(Box::new(Tags::new(v))),
            _ => Vec::new(),
        }
    }

    fn copy(&mut self) -> Vec<Effect> {
        let Some(vol) = self.top().volume(&self.ctx) else {
            return Vec::new();
        };
        let Some(d) = self.top().digest(&self.ctx) else {
            self.ctx
                .info("open a volume and select a version to copy its pinned ref");
            return Vec::new();
        };
        let r = format!("vol:{vol}@{d}");
        self.ctx.info(format!("copied {r}"));
        vec![Effect::Copy(r)]
    }

    fn submit(&mut self, kind: PromptKind, text: &str) -> Vec<Effect> {
        match kind {
            PromptKind::Filter => {
                self.ctx.filter = text.to_string();
                self.clamp();
                Vec::new()
            }
            PromptKind::Command => self.command(text),
            PromptKind::TagName => {
                let (top, ctx) = self.top_and_ctx();
                top.on_prompt(kind, text, ctx);
                Vec::new()
            }
        }
    }

    fn command(&mut self, line: &str) -> Vec<Effect> {
        let current = self.top().volume(&self.ctx);
        match palette::parse(line, current.as_ref()) {
            None => Vec::new(),
            Some(Err(e)) => {
                self.ctx.error(e);
                Vec::new()
            }
            Some(Ok(To::Quit)) => {
                self.quit = true;
                Vec::new()
            }
            Some(Ok(To::Volumes)) => {
                self.back_to_root();
                self.ctx.filter.clear();
                self.reload()
            }
            Some(Ok(To::Live(kind))) => self.open_live(kind),
            Some(Ok(To::Open(o))) => self.request(vec![Effect::Open(o)]),
            Some(Ok(To::Launch(_))) if self.refuse_if_readonly() => Vec::new(),
            Some(Ok(To::Launch(w))) => {
                self.ctx.info(format!("starting: {}", launching(&w)));
                self.request(vec![Effect::Launch(w)])
            }
        }
    }

    /// The screen's hints with the keys the keymap binds them to: (the action a click
    /// does, the keys, the label). A hint whose action no key triggers is left out.
    fn shown_hints(&self, keymap: &Keymap) -> Vec<(Action, String, &'static str)> {
        let mut hints: Vec<(Action, String, &'static str)> = self
            .top()
            .hints()
            .iter()
            .filter_map(|(actions, label)| {
                let keys: Option<Vec<&str>> = actions
                    .iter()
                    .map(|a| keymap.key(Mode::Normal, *a))
                    .collect();
                Some((*actions.first()?, keys?.join("/"), *label))
            })
            .collect();
        // How to find everything else, on every screen: the last to give way to a
        // narrow terminal (the status line keeps them).
        for (action, label) in [(Action::Command, "command"), (Action::Help, "help")] {
            if !hints.iter().any(|(a, _, _)| *a == action)
                && let Some(key) = keymap.key(Mode::Normal, action)
            {
                hints.push((action, key.to_string(), label));
            }
        }
        hints
    }

    /// Help for the screen shown: its own keys first, then every other key.
    fn help_lines(&self, keymap: &Keymap) -> Vec<(String, String)> {
        let mut lines: Vec<(String, String)> = vec![("".into(), "on this screen".into())];
        let here = self.shown_hints(keymap);
        lines.extend(
            here.iter()
                .filter(|(a, _, _)| !matches!(a, Action::Help | Action::Back))
                .map(|(_, k, d)| (k.clone(), d.to_string())),
        );
        lines.push(("".into(), "everywhere".into()));
        lines.extend(
            keymap
                .help(Mode::Normal)
                .into_iter()
                .filter(|(k, _)| !here.iter().any(|(_, h, _)| k.split(' ').next() == Some(h))),
        );
        lines
    }

    /// Everything on screen, as a view-model.
    pub fn frame(&self, keymap: &Keymap) -> FrameView {
        let top = self.top();
        let mut crumbs = vec!["volumes".to_string()];
        crumbs.extend(top.crumbs());
        let body: Body = top.body(&self.ctx);
        let kind = if self.ctx.busy > 0 {
            StatusKind::Busy(self.spinner)
        } else {
            self.ctx.status.0.clone()
        };
        let mut text = self.ctx.status.1.clone();
        if !self.ctx.filter.is_empty() && !matches!(self.ctx.overlay, Some(Overlay::Prompt(_))) {
            // What the filter leaves, beside a screen's own counts of all its rows.
            let n = top.len(&self.ctx);
            let matched = match n {
                1 => "1 match".to_string(),
                n => format!("{n} matches"),
            };
            text = match text.is_empty() {
                true => format!("/{}: {matched}", self.ctx.filter),
                false => format!("/{}: {matched} · {text}", self.ctx.filter),
            };
        }
        let overlay = self.ctx.overlay.as_ref().map(|o| {
            crate::overlay::view(
                o,
                || self.help_lines(keymap),
                &self.ctx.messages,
                self.ctx.confirm_full,
            )
        });
        let context = if self.ctx.readonly {
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
                hints: self
                    .shown_hints(keymap)
                    .into_iter()
                    .map(|(_, k, d)| (k, d.to_string()))
                    .collect(),
            },
            overlay,
        }
    }
}

/// What the status line says while work starts.
fn launching(w: &Work) -> String {
    match w {
        Work::Sync { source, volume, .. } => format!("sync {source} -> {volume}"),
        Work::Mount { reference, dir } => format!("mount {reference} at {}", dir.display()),
        Work::Watch { dir, volume } => format!("watch {} -> {volume}", dir.display()),
    }
}
