//! The console's screens, one module each. A screen owns its rows, its selection, the
//! keys only it answers, the engine work that loads it and the view-model it draws;
//! the model (`model.rs`) keeps the stack of screens and what they share (`Ctx`), and
//! answers the keys every screen has (moving, back, filter, palette, help).
//!
//! Adding a screen: a module here implementing `Screen`, and its line in the palette
//! (`palette.rs`) and, if it has one, its key in `keymap.toml`.

pub mod deployments;
pub mod diff;
pub mod files;
pub mod jobs;
pub mod list;
pub mod mounts;
pub mod rollback;
pub mod tags;
pub mod trash;
pub mod versions;
pub mod volumes;
pub mod watch;

use sealvol_core::refs::VolumeName;
use sealvol_deploy::rollback::RollbackPlan;
use sealvol_mount::records::MountRecord;
use sealvol_views::Body;
use sealvol_views::chrome::StatusKind;

use crate::action::Action;
use crate::effects::{DeletePlan, Effect, Loaded, RestorePlan, TagMovePlan};

/// What every screen may read and change besides its own state.
pub struct Ctx {
    /// The `/` filter, applied by each screen to its own rows.
    pub filter: String,
    pub status: (StatusKind, String),
    pub readonly: bool,
    /// Engine work in flight, for the spinner (and for "nothing yet" versus "empty").
    pub busy: usize,
    /// Live mounts on this node: the Mounts screen's rows, and the `◉` marks of the
    /// volumes and versions screens.
    pub mounts: Vec<MountRecord>,
    /// A confirmation or prompt a screen has opened.
    pub overlay: Option<Overlay>,
    /// A confirmation's lines shown whole (`f`), not cut to the terminal's width.
    pub confirm_full: bool,
    /// The status line's messages, newest last, in full (the line may cut them): `L`.
    pub messages: std::collections::VecDeque<(StatusKind, String)>,
}

/// How many status messages `L` keeps.
pub const MESSAGES_KEPT: usize = 100;

impl Ctx {
    pub fn info(&mut self, text: impl Into<String>) {
        self.say(StatusKind::Info, text.into());
    }

    pub fn error(&mut self, text: impl Into<String>) {
        self.say(StatusKind::Error, text.into());
    }

    fn say(&mut self, kind: StatusKind, text: String) {
        let repeated = self
            .messages
            .back()
            .is_some_and(|(k, t)| *k == kind && *t == text);
        if !text.is_empty() && !repeated {
            if self.messages.len() == MESSAGES_KEPT {
                self.messages.pop_front();
            }
            self.messages.push_back((kind.clone(), text.clone()));
        }
        self.status = (kind, text);
    }

    pub fn status_is_error(&self) -> bool {
        self.status.0 == StatusKind::Error
    }

    /// Whether a row described by `hay` passes the filter (case-insensitive).
    pub fn matches(&self, hay: &str) -> bool {
        list::matches(&self.filter, hay)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptKind {
    Filter,
    Command,
    TagName,
}

#[derive(Debug, Clone)]
pub enum Overlay {
    /// The keys: this screen's first, scrolled down by this many lines.
    Help(usize),
    /// The status line's recent messages in full, newest first, scrolled down by this
    /// many lines.
    Messages(usize),
    Confirm(TagMovePlan),
    /// Cancel this job (id, and what it syncs, as shown).
    ConfirmCancel(u64, String),
    /// Queue this job again (id, and what it syncs, as shown).
    ConfirmRetry(u64, String),
    /// Stop this watch (id, and what it watches, as shown).
    ConfirmStopWatch(u64, String),
    /// Move this version to the trash.
    ConfirmDelete(DeletePlan),
    /// Bring this version back from the trash.
    ConfirmRestore(RestorePlan),
    /// Write this change to a deployment file.
    ConfirmRollback(Box<RollbackPlan>),
    Prompt(Prompt),
}

/// A line being typed at the bottom: a filter, a command, a tag name.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub kind: PromptKind,
    pub input: String,
    /// What it asks for, shown before the input (`point a tag at b3:…`).
    pub label: String,
    /// The input is an earlier value shown for editing: the first character typed
    /// replaces it, backspace or an arrow key edits it instead.
    pub fresh: bool,
}

impl Prompt {
    pub fn new(kind: PromptKind, label: impl Into<String>) -> Prompt {
        Prompt {
            kind,
            input: String::new(),
            label: label.into(),
            fresh: false,
        }
    }

    /// Opens with `input` to edit (the current filter, for a second `/`).
    pub fn editing(kind: PromptKind, label: impl Into<String>, input: String) -> Prompt {
        Prompt {
            fresh: !input.is_empty(),
            input,
            ..Prompt::new(kind, label)
        }
    }
}

/// Where the console goes next.
pub enum Go {
    /// This screen, over the current one.
    Push(Box<dyn Screen>),
    /// Back to the volumes list, then this screen over it.
    FromRoot(Box<dyn Screen>),
}

/// What a screen's answer to a key is.
#[derive(Default)]
pub struct Reply {
    pub effects: Vec<Effect>,
    pub go: Option<Go>,
}

impl Reply {
    pub fn effects(effects: Vec<Effect>) -> Reply {
        Reply { effects, go: None }
    }

    pub fn go(go: Go) -> Reply {
        Reply {
            effects: Vec::new(),
            go: Some(go),
        }
    }
}

/// A status-line hint: the actions it stands for (two for a pair such as `j/k`; a
/// click does the first) and what it says.
pub type Hint = (&'static [Action], &'static str);

pub trait Screen {
    /// The screen's name on its breadcrumb in the stack (`volumes`, `ns/name`, `b3:…`).
    fn crumb(&self) -> String;

    /// The breadcrumbs after `volumes` while this screen is shown.
    fn crumbs(&self) -> Vec<String>;

    /// Engine work that loads (or reloads) what it shows.
    fn load(&self, ctx: &Ctx) -> Vec<Effect>;

    /// Called when it is pushed, before it loads.
    fn entered(&mut self, _ctx: &mut Ctx) {}

    /// Takes a result meant for it (checking it is for this screen's volume, digest…).
    /// `on_top`: whether it is the screen shown (the volumes list also gets its data
    /// while another screen is on top).
    fn on_loaded(&mut self, l: Loaded, ctx: &mut Ctx, on_top: bool);

    /// Rows the selection moves over, after the filter.
    fn len(&self, ctx: &Ctx) -> usize;

    fn selected(&self) -> usize;

    fn select(&mut self, i: usize, ctx: &Ctx);

    /// The keys only this screen answers (opening a row, marking, moving a tag…);
    /// `None` for a key it has nothing to do with.
    fn on_action(&mut self, _a: Action, _ctx: &mut Ctx) -> Option<Reply> {
        None
    }

    /// The text a prompt this screen opened was answered with.
    fn on_prompt(&mut self, _kind: PromptKind, _text: &str, _ctx: &mut Ctx) {}

    fn body(&self, ctx: &Ctx) -> Body;

    /// Key hints for the status line: actions, drawn with the keys the keymap binds
    /// them to (so a rebound key shows as bound, and a click does the action).
    fn hints(&self) -> &'static [Hint];

    /// The volume the screen is about (or its selected row is): what `t` opens the
    /// tags of, and what `c` copies a ref of.
    fn volume(&self, _ctx: &Ctx) -> Option<VolumeName> {
        None
    }

    /// The digest of the version the selection names, for `c`.
    fn digest(&self, _ctx: &Ctx) -> Option<String> {
        None
    }

    /// Figures that change by themselves (mounts, jobs): reloaded every second.
    fn live(&self) -> bool {
        false
    }

    /// A single table whose rows a click selects.
    fn clickable(&self) -> bool {
        true
    }

    /// Which screen this is, for "already there" checks and tests.
    fn kind(&self) -> Kind;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Volumes,
    Versions,
    Tags,
    Files,
    Diff,
    Mounts,
    Jobs,
    Watch,
    Trash,
    Deployments,
    Rollback,
}
