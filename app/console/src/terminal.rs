//! Raw mode and the alternate screen, restored on every way out: normal return,
//! error, and panic (the hook restores before the message prints, so it is readable).

use std::io::{Stdout, Write, stdout};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, event, execute, terminal};

pub type Term = Terminal<CrosstermBackend<Stdout>>;

pub fn enter() -> std::io::Result<Term> {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        previous(info);
    }));
    terminal::enable_raw_mode()?;
    execute!(
        stdout(),
        terminal::EnterAlternateScreen,
        event::EnableMouseCapture,
        cursor::Hide
    )?;
    Terminal::new(CrosstermBackend::new(stdout()))
}

/// Idempotent: safe to call from the panic hook and again on the way out.
pub fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        stdout(),
        event::DisableMouseCapture,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
    let _ = stdout().flush();
}

/// Puts text on the clipboard with OSC 52, which most terminals (and tmux with
/// `set-clipboard on`) honour; the status line shows the text as the fallback.
pub fn copy_osc52(text: &str) {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(text);
    let mut out = stdout();
    let _ = write!(out, "\x1b]52;c;{b64}\x07");
    let _ = out.flush();
}
