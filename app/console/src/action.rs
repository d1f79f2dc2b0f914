//! What a key (or a click, or a palette command) asks the console to do. The keymap
//! maps keys to these by name; the model carries them out.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    Down,
    Up,
    Top,
    Bottom,
    PageDown,
    PageUp,
    Open,
    Back,
    Tags,
    Mounts,
    Jobs,
    Watch,
    Deployments,
    /// Roll the selected deployment back to another version of the selected volume.
    Rollback,
    /// Cancel the selected job, or stop the selected watch (asks first).
    Stop,
    RetryJob,
    /// Start a sync: the palette with `:sync ` typed.
    NewSync,
    Trash,
    Delete,
    Restore,
    Focus,
    PointTag,
    UndoMove,
    Mark,
    Copy,
    Filter,
    Command,
    Refresh,
    Help,
    /// The status line's recent messages, in full.
    Messages,
    Quit,
    Confirm,
    Cancel,
    /// In a confirmation: its lines whole (full digests and paths), or cut again.
    Full,
}

impl Action {
    /// Whether it changes the repository or this machine's jobs: what a read-only
    /// console refuses.
    pub fn changes_repository(self) -> bool {
        matches!(
            self,
            Action::PointTag
                | Action::UndoMove
                | Action::Stop
                | Action::RetryJob
                | Action::NewSync
                | Action::Delete
                | Action::Restore
                | Action::Rollback
        )
    }

    pub fn from_name(s: &str) -> Option<Action> {
        Some(match s {
            "down" => Action::Down,
            "up" => Action::Up,
            "top" => Action::Top,
            "bottom" => Action::Bottom,
            "page-down" => Action::PageDown,
            "page-up" => Action::PageUp,
            "open" => Action::Open,
            "back" => Action::Back,
            "tags" => Action::Tags,
            "mounts" => Action::Mounts,
            "jobs" => Action::Jobs,
            "watch" => Action::Watch,
            "deployments" => Action::Deployments,
            "rollback" => Action::Rollback,
            // `cancel-job` is its name from before watches, kept for users' keymaps.
            "stop" | "cancel-job" => Action::Stop,
            "retry-job" => Action::RetryJob,
            "new-sync" => Action::NewSync,
            "trash" => Action::Trash,
            "delete-version" => Action::Delete,
            "restore-version" => Action::Restore,
            "focus" => Action::Focus,
            "point-tag" => Action::PointTag,
            "undo-move" => Action::UndoMove,
            "mark" => Action::Mark,
            "copy" => Action::Copy,
            "filter" => Action::Filter,
            "command" => Action::Command,
            "refresh" => Action::Refresh,
            "help" => Action::Help,
            "messages" => Action::Messages,
            "quit" => Action::Quit,
            "confirm" => Action::Confirm,
            "cancel" => Action::Cancel,
            "full" => Action::Full,
            _ => return None,
        })
    }
}
