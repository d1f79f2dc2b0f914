//! Keys → actions, loaded from TOML (the built-in `keymap.toml`, then the user's
//! `keymap.toml` in the config directory, whose bindings replace those of the actions
//! they name). Every binding carries the description the `?` screen shows.

use std::collections::HashMap;
use std::path::Path;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde::Deserialize;

use super::action::Action;

const DEFAULT: &str = include_str!("keymap.toml");

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    Normal,
    Confirm,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    normal: Vec<Binding>,
    #[serde(default)]
    confirm: Vec<Binding>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Binding {
    keys: Vec<String>,
    action: String,
    desc: String,
}

/// A key as the keymap spells it: `j`, `G`, `ctrl-c`, `enter`, `pagedown`…
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    code: KeyCode,
    ctrl: bool,
}

impl Key {
    pub fn from_event(ev: &KeyEvent) -> Key {
        // Shifted letters arrive as uppercase chars; SHIFT itself carries nothing more.
        Key {
            code: ev.code,
            ctrl: ev.modifiers.contains(KeyModifiers::CONTROL),
        }
    }

    pub fn parse(s: &str) -> Option<Key> {
        let (ctrl, rest) = match s.strip_prefix("ctrl-") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let code = match rest {
            "enter" => KeyCode::Enter,
            "esc" => KeyCode::Esc,
            "tab" => KeyCode::Tab,
            "backspace" => KeyCode::Backspace,
            "space" => KeyCode::Char(' '),
            "up" => KeyCode::Up,
            "down" => KeyCode::Down,
            "left" => KeyCode::Left,
            "right" => KeyCode::Right,
            "home" => KeyCode::Home,
            "end" => KeyCode::End,
            "pageup" => KeyCode::PageUp,
            "pagedown" => KeyCode::PageDown,
            "delete" => KeyCode::Delete,
            c if c.chars().count() == 1 => KeyCode::Char(c.chars().next()?),
            _ => return None,
        };
        Some(Key { code, ctrl })
    }
}

#[derive(Debug)]
pub struct Keymap {
    map: HashMap<(Mode, Key), Action>,
    /// The first key of each action's binding, as written: what hints show.
    first: HashMap<(Mode, Action), String>,
    /// (mode, keys as written, description), in file order, for the help screen.
    help: Vec<(Mode, String, String)>,
}

impl Keymap {
    /// The built-in keymap with the user's file (if any) applied.
    pub fn load(user_file: Option<&Path>) -> Result<Keymap, String> {
        let mut file = parse("built-in keymap", DEFAULT)?;
        if let Some(p) = user_file {
            match std::fs::read_to_string(p) {
                Ok(text) => {
                    let user = parse(&p.display().to_string(), &text)?;
                    merge(&mut file.normal, user.normal);
                    merge(&mut file.confirm, user.confirm);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot read {}: {e}", p.display())),
            }
        }
        let mut map = HashMap::new();
        let mut first = HashMap::new();
        let mut help = Vec::new();
        for (mode, bindings) in [(Mode::Normal, &file.normal), (Mode::Confirm, &file.confirm)] {
            for b in bindings {
                let action = Action::from_name(&b.action)
                    .ok_or_else(|| format!("keymap: unknown action {:?}", b.action))?;
                for k in &b.keys {
                    let key =
                        Key::parse(k).ok_or_else(|| format!("keymap: cannot read key {k:?}"))?;
                    map.insert((mode, key), action);
                }
                help.push((mode, b.keys.join(" "), b.desc.clone()));
            }
        }
        // A key a later binding took is not shown for the earlier action.
        for (mode, bindings) in [(Mode::Normal, &file.normal), (Mode::Confirm, &file.confirm)] {
            for b in bindings {
                let Some(action) = Action::from_name(&b.action) else {
                    continue;
                };
                let still = b
                    .keys
                    .iter()
                    .find(|k| Key::parse(k).and_then(|key| map.get(&(mode, key))) == Some(&action));
                if let Some(k) = still {
                    first.entry((mode, action)).or_insert_with(|| k.clone());
                }
            }
        }
        Ok(Keymap { map, first, help })
    }

    pub fn action(&self, mode: Mode, ev: &KeyEvent) -> Option<Action> {
        self.map.get(&(mode, Key::from_event(ev))).copied()
    }

    /// The key that triggers `action`, as the keymap writes it (`None`: unbound).
    pub fn key(&self, mode: Mode, action: Action) -> Option<&str> {
        self.first.get(&(mode, action)).map(String::as_str)
    }

    pub fn help(&self, mode: Mode) -> Vec<(String, String)> {
        self.help
            .iter()
            .filter(|(m, _, _)| *m == mode)
            .map(|(_, k, d)| (k.clone(), d.clone()))
            .collect()
    }
}

fn parse(what: &str, text: &str) -> Result<File, String> {
    toml::from_str(text).map_err(|e| {
        format!(
            "{what} is invalid: {}",
            e.to_string().lines().next().unwrap_or_default()
        )
    })
}

fn merge(base: &mut Vec<Binding>, user: Vec<Binding>) {
    for u in user {
        base.retain(|b| b.action != u.action);
        base.push(u);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_keymap_loads_and_user_files_rebind() {
        let k = Keymap::load(None).unwrap();
        let ev = KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE);
        assert_eq!(k.action(Mode::Normal, &ev), Some(Action::Down));
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(k.action(Mode::Normal, &ctrl_c), Some(Action::Quit));
        assert!(k.help(Mode::Normal).iter().any(|(_, d)| d == "quit"));

        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("keymap.toml");
        std::fs::write(
            &p,
            "[[normal]]\nkeys = [\"x\"]\naction = \"quit\"\ndesc = \"leave\"\n",
        )
        .unwrap();
        let k = Keymap::load(Some(&p)).unwrap();
        let x = KeyEvent::new(KeyCode::Char('x'), KeyModifiers::NONE);
        assert_eq!(k.action(Mode::Normal, &x), Some(Action::Quit));
        let q = KeyEvent::new(KeyCode::Char('q'), KeyModifiers::NONE);
        assert_eq!(
            k.action(Mode::Normal, &q),
            None,
            "rebinding replaces the old keys"
        );

        std::fs::write(
            &p,
            "[[normal]]\nkeys = [\"x\"]\naction = \"fly\"\ndesc = \"?\"\n",
        )
        .unwrap();
        assert!(
            Keymap::load(Some(&p))
                .unwrap_err()
                .contains("unknown action")
        );
    }
}
