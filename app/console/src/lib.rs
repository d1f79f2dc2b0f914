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

enum Msg {
    Input(Event),
    Loaded(Loaded),
}

pub fn run(api: Arc<dyn Api>, opts: Options) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        // Timers for the tick, I/O for the SIGTERM handler.
        .enable_all()
        .build()?;
    let mut term = terminal::enter()?;
    let result = rt.block_on(event_loop(&mut term, api, &opts));
    terminal::restore();
    result
}

async fn event_loop(
    term: &mut terminal::Term,
    api: Arc<dyn Api>,
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
    let (mut model, effects) = Model::new(api.location(), opts.readonly, opts.deploy.clone());
    spawn_effects(&api, &tx, effects);
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
                None => break,
            },
            _ = sigterm.recv() => break,
            _ = tick.tick(), if model.is_busy() => {
                model.tick();
                Vec::new()
            }
            _ = live.tick(), if model.wants_live_refresh() => model.refresh_live(),
        };
        spawn_effects(&api, &tx, effects);
        if model.quit {
            break;
        }
    }
    Ok(())
}

fn spawn_effects(api: &Arc<dyn Api>, tx: &mpsc::UnboundedSender<Msg>, effects: Vec<Effect>) {
    for e in effects {
        if let Effect::Copy(text) = &e {
            terminal::copy_osc52(text);
            continue;
        }
        let api = Arc::clone(api);
        let tx = tx.clone();
        tokio::task::spawn_blocking(move || {
            if let Some(l) = effects::perform(api.as_ref(), e) {
                let _ = tx.send(Msg::Loaded(l));
            }
        });
    }
}
