//! sealvol's interactive console over the engine's `Api`.
//!
//! Its one job is the console: one loop over key input, engine results and a render
//! tick. The model (`model.rs`) keeps a stack of screens (`screens/`, one module each)
//! and decides; `effects.rs` carries out the engine work it asks for, on blocking tasks
//! so input is never blocked; the views (`sealvol-views`) draw; this file only wires
//! them. It knows nothing of how the engine reaches its repository or its sources.

mod action;
mod effects;
mod keymap;
mod model;
mod overlay;
mod palette;
mod screens;
mod terminal;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use ratatui::crossterm::event::{self, Event, KeyEventKind};
use sealvol_node::api::Api;
use sealvol_themes::Theme;
use tokio::sync::mpsc;

use effects::{Effect, Loaded};
pub use keymap::Keymap;
use model::Model;

pub struct Options {
    pub readonly: bool,
    /// Deployment files, or folders of them, for the Deployments screen.
    pub deploy: Vec<std::path::PathBuf>,
    pub theme: Theme,
    pub keymap: Keymap,
}

/// How the console gets its engine: opened on a thread of its own while the console
/// is already drawn, so that a repository that does not answer (a frozen bucket, a
/// remote engine that hangs) shows a spinner and then its error, and `q` quits at any
/// time. It gives the engine and whether it may only be read (a read-only key).
pub type Open = Box<dyn FnOnce() -> sealvol_core::Result<(Arc<dyn Api>, bool)> + Send>;

enum Msg {
    Input(Event),
    Loaded(Loaded),
    Opened(sealvol_core::Result<(Arc<dyn Api>, bool)>),
}

/// The engine once it is open; what was asked of it before.
enum Engine {
    Opening(Vec<Effect>),
    Open(Arc<dyn Api>),
    Failed,
}

/// Runs the console on the engine `open` gives, shown as `location` until it is open.
pub fn run(location: String, open: Open, opts: Options) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        // Timers for the tick, I/O for the SIGTERM handler.
        .enable_all()
        .build()?;
    let mut term = terminal::enter()?;
    let result = rt.block_on(event_loop(&mut term, location, open, &opts));
    terminal::restore();
    // Engine calls still waiting on a backend that does not answer are left behind:
    // quitting never waits for them.
    rt.shutdown_background();
    result
}

async fn event_loop(
    term: &mut terminal::Term,
    location: String,
    open: Open,
    opts: &Options,
) -> std::io::Result<()> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
    // crossterm's reads block; a plain thread feeds them into the loop.
    let input_tx = tx.clone();
    std::thread::spawn(move || {
        while let Ok(ev) = event::read() {
            if input_tx.send(Msg::Input(ev)).is_err() {
                break;
            }
        }
    });
    let (mut model, effects) = Model::new(location, opts.readonly, opts.deploy.clone());
    let mut engine = Engine::Opening(Vec::new());
    dispatch(&mut engine, &mut model, &tx, effects);
    model.opening();
    let opened_tx = tx.clone();
    // A thread of its own, not a blocking task: quitting must not wait for it.
    std::thread::spawn(move || {
        let _ = opened_tx.send(Msg::Opened(open()));
    });
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut live = tokio::time::interval(Duration::from_secs(1));
    // `kill` (SIGTERM) ends the console like `q`, so the terminal is restored; Ctrl-C
    // arrives as a key in raw mode and is bound to quit.
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        model.page = sealvol_views::body_height(term.size()?.height).saturating_sub(2) as usize;
        let frame = model.frame(&opts.keymap);
        term.draw(|f| sealvol_views::draw(&frame, &opts.theme, f.area(), f.buffer_mut()))?;
        let effects = tokio::select! {
            msg = rx.recv() => match msg {
                Some(Msg::Input(Event::Key(k))) if k.kind != KeyEventKind::Release => {
                    model.on_key(&k, &opts.keymap)
                }
                Some(Msg::Input(Event::Mouse(m))) => {
                    let size = term.size()?;
                    model.on_mouse(&m, (size.width, size.height), &opts.keymap)
                }
                Some(Msg::Input(_)) => Vec::new(),
                Some(Msg::Loaded(l)) => model.on_loaded(l),
                Some(Msg::Opened(Ok((api, readonly)))) => {
                    model.opened(api.location(), readonly);
                    match std::mem::replace(&mut engine, Engine::Open(api)) {
                        Engine::Opening(asked) => asked,
                        _ => Vec::new(),
                    }
                }
                Some(Msg::Opened(Err(e))) => {
                    if let Engine::Opening(asked) = std::mem::replace(&mut engine, Engine::Failed) {
                        model.open_failed(&e, asked.len());
                    }
                    Vec::new()
                }
                None => break,
            },
            _ = sigterm.recv() => break,
            _ = tick.tick(), if model.is_busy() => {
                model.tick();
                Vec::new()
            }
            _ = live.tick(), if model.wants_live_refresh() => model.refresh_live(),
        };
        dispatch(&mut engine, &mut model, &tx, effects);
        if model.quit {
            break;
        }
    }
    Ok(())
}

/// Hands `effects` to the engine; before it is open they wait, and once it has failed
/// to open they are dropped (the status line says why). Copying needs no engine.
fn dispatch(
    engine: &mut Engine,
    model: &mut Model,
    tx: &mpsc::UnboundedSender<Msg>,
    effects: Vec<Effect>,
) {
    let (copies, work): (Vec<Effect>, Vec<Effect>) = effects
        .into_iter()
        .partition(|e| matches!(e, Effect::Copy(_)));
    for e in copies {
        if let Effect::Copy(text) = &e {
            terminal::copy_osc52(text);
        }
    }
    match engine {
        Engine::Open(api) => spawn_effects(api, tx, work),
        Engine::Opening(asked) => asked.extend(work),
        Engine::Failed => model.forget(work.len()),
    }
}

fn spawn_effects(api: &Arc<dyn Api>, tx: &mpsc::UnboundedSender<Msg>, effects: Vec<Effect>) {
    for e in effects {
        let api = Arc::clone(api);
        let tx = tx.clone();
        tokio::task::spawn_blocking(move || {
            if let Some(l) = effects::perform(api.as_ref(), e) {
                let _ = tx.send(Msg::Loaded(l));
            }
        });
    }
}
