//! Console themes: views ask for a semantic role (`danger`, `added`, `selection`…),
//! never for a colour. Presets live in TOML files (dark, light, high-contrast); a user
//! file in `<config>/themes/<name>.toml` overrides only the roles it names, either of
//! a preset of the same name or of the preset it `extends`. Terminals without
//! truecolor get the nearest of the 16 ANSI colours; `NO_COLOR` keeps only modifiers.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

/// Every role a view may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Text,
    Dim,
    Title,
    Header,
    Border,
    Selection,
    /// A row marked for a two-sided action (the first side of a diff).
    Mark,
    Key,
    Status,
    Error,
    /// Destructive actions and their confirmations.
    Danger,
    Ok,
    /// Pinned digests.
    Pinned,
    Tag,
    Added,
    Removed,
    Modified,
    Unchanged,
    Gauge,
}

impl Role {
    pub const ALL: [Role; 19] = [
        Role::Text,
        Role::Dim,
        Role::Title,
        Role::Header,
        Role::Border,
        Role::Selection,
        Role::Mark,
        Role::Key,
        Role::Status,
        Role::Error,
        Role::Danger,
        Role::Ok,
        Role::Pinned,
        Role::Tag,
        Role::Added,
        Role::Removed,
        Role::Modified,
        Role::Unchanged,
        Role::Gauge,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Role::Text => "text",
            Role::Dim => "dim",
            Role::Title => "title",
            Role::Header => "header",
            Role::Border => "border",
            Role::Selection => "selection",
            Role::Mark => "mark",
            Role::Key => "key",
            Role::Status => "status",
            Role::Error => "error",
            Role::Danger => "danger",
            Role::Ok => "ok",
            Role::Pinned => "pinned",
            Role::Tag => "tag",
            Role::Added => "added",
            Role::Removed => "removed",
            Role::Modified => "modified",
            Role::Unchanged => "unchanged",
            Role::Gauge => "gauge",
        }
    }

    fn from_name(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.name() == s)
    }
}

/// What the terminal can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColorMode {
    TrueColor,
    /// The 16 ANSI colours (the terminal's own palette).
    Ansi16,
    /// `NO_COLOR`: modifiers only.
    None,
}

impl ColorMode {
    /// From the environment: `NO_COLOR` wins; `COLORTERM=truecolor|24bit` means truecolor.
    pub fn detect() -> ColorMode {
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            return ColorMode::None;
        }
        match std::env::var("COLORTERM").as_deref() {
            Ok("truecolor") | Ok("24bit") => ColorMode::TrueColor,
            _ => ColorMode::Ansi16,
        }
    }
}

pub const PRESETS: [&str; 3] = ["dark", "light", "high-contrast"];

fn preset_text(name: &str) -> Option<&'static str> {
    match name {
        "dark" => Some(include_str!("../presets/dark.toml")),
        "light" => Some(include_str!("../presets/light.toml")),
        "high-contrast" => Some(include_str!("../presets/high-contrast.toml")),
        _ => None,
    }
}

#[derive(Debug)]
pub struct ThemeError(String);

impl fmt::Display for ThemeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ThemeError {}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    /// Informational: the file's own name for itself.
    #[allow(dead_code)]
    name: Option<String>,
    extends: Option<String>,
    #[serde(default)]
    roles: BTreeMap<String, RoleSpec>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleSpec {
    fg: Option<String>,
    bg: Option<String>,
    #[serde(default)]
    bold: bool,
    #[serde(default)]
    italic: bool,
    #[serde(default)]
    underlined: bool,
    #[serde(default)]
    reversed: bool,
}

#[derive(Debug, Clone)]
pub struct Theme {
    name: String,
    mode: ColorMode,
    styles: BTreeMap<Role, Style>,
}

impl Theme {
    /// A built-in preset, in truecolor.
    pub fn preset(name: &str) -> Result<Theme, ThemeError> {
        Theme::load(name, None, ColorMode::TrueColor)
    }

    /// Loads `name` (a preset, or a user theme in `config_dir/themes/<name>.toml`),
    /// applies the user's partial overrides, and adapts colours to `mode`.
    pub fn load(
        name: &str,
        config_dir: Option<&Path>,
        mode: ColorMode,
    ) -> Result<Theme, ThemeError> {
        let user = match config_dir {
            Some(dir) => {
                let path = dir.join("themes").join(format!("{name}.toml"));
                match std::fs::read_to_string(&path) {
                    Ok(text) => Some((
                        path.display().to_string(),
                        parse(&path.display().to_string(), &text)?,
                    )),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                    Err(e) => {
                        return Err(ThemeError(format!("cannot read {}: {e}", path.display())));
                    }
                }
            }
            None => None,
        };
        let base_name = match &user {
            Some((_, f)) if preset_text(name).is_none() => f.extends.clone().ok_or_else(|| {
                ThemeError(format!(
                    "theme {name:?} is not a preset and its file does not say `extends = \"dark\"` (or light, high-contrast)"
                ))
            })?,
            _ => name.to_string(),
        };
        let base_text = preset_text(&base_name).ok_or_else(|| {
            if base_name == name {
                ThemeError(format!("unknown theme {name:?}"))
            } else {
                ThemeError(format!(
                    "theme {name:?} extends {base_name:?}, which is not one: the presets are {}",
                    PRESETS.join(", ")
                ))
            }
        })?;
        let base = parse(&format!("preset {base_name}"), base_text)?;
        let mut specs = base.roles;
        if let Some((_, f)) = user {
            specs.extend(f.roles);
        }
        let mut styles = BTreeMap::new();
        for role in Role::ALL {
            let spec = specs.get(role.name()).cloned().unwrap_or_default();
            styles.insert(role, to_style(&spec, mode)?);
        }
        Ok(Theme {
            name: name.to_string(),
            mode,
            styles,
        })
    }

    /// Every theme `load` can find: the presets, then the user's files in
    /// `config_dir/themes/`, sorted.
    pub fn available(config_dir: Option<&Path>) -> Vec<String> {
        let mut names: Vec<String> = PRESETS.iter().map(|p| p.to_string()).collect();
        let mut user: Vec<String> = config_dir
            .and_then(|d| std::fs::read_dir(d.join("themes")).ok())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_str()?.strip_suffix(".toml")?.to_string();
                (!names.contains(&name)).then_some(name)
            })
            .collect();
        user.sort();
        names.extend(user);
        names
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn mode(&self) -> ColorMode {
        self.mode
    }

    pub fn style(&self, role: Role) -> Style {
        self.styles.get(&role).copied().unwrap_or_default()
    }

    /// The foreground colour of a role as `#rrggbb`, for rendering screenshots.
    pub fn rgb(color: Color) -> Option<(u8, u8, u8)> {
        match color {
            Color::Rgb(r, g, b) => Some((r, g, b)),
            c => ANSI16.iter().find(|(ac, _)| *ac == c).map(|(_, rgb)| *rgb),
        }
    }
}

fn parse(what: &str, text: &str) -> Result<ThemeFile, ThemeError> {
    let f: ThemeFile = toml::from_str(text).map_err(|e| {
        let first = e.to_string().lines().next().unwrap_or_default().to_string();
        ThemeError(format!("theme file {what} is invalid: {first}"))
    })?;
    for key in f.roles.keys() {
        if Role::from_name(key).is_none() {
            let names: Vec<&str> = Role::ALL.iter().map(|r| r.name()).collect();
            return Err(ThemeError(format!(
                "theme file {what}: unknown role {key:?}; roles are {}",
                names.join(", ")
            )));
        }
    }
    Ok(f)
}

fn to_style(spec: &RoleSpec, mode: ColorMode) -> Result<Style, ThemeError> {
    let mut style = Style::default();
    if mode != ColorMode::None {
        if let Some(fg) = &spec.fg {
            style = style.fg(adapt(parse_color(fg)?, mode));
        }
        if let Some(bg) = &spec.bg {
            style = style.bg(adapt(parse_color(bg)?, mode));
        }
    } else if spec.bg.is_some() {
        // Without colour, a role that stands out by its background is shown reversed.
        style = style.add_modifier(Modifier::REVERSED);
    }
    for (on, m) in [
        (spec.bold, Modifier::BOLD),
        (spec.italic, Modifier::ITALIC),
        (spec.underlined, Modifier::UNDERLINED),
        (spec.reversed, Modifier::REVERSED),
    ] {
        if on {
            style = style.add_modifier(m);
        }
    }
    Ok(style)
}

fn parse_color(s: &str) -> Result<Color, ThemeError> {
    if let Some(hex) = s.strip_prefix('#')
        && hex.len() == 6
        && let Ok(v) = u32::from_str_radix(hex, 16)
    {
        return Ok(Color::Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
    }
    s.parse::<Color>().map_err(|_| {
        ThemeError(format!(
            "invalid colour {s:?}: use #rrggbb or a name such as red, lightblue, reset"
        ))
    })
}

/// The xterm default palette, used to pick the nearest ANSI colour.
const ANSI16: [(Color, (u8, u8, u8)); 16] = [
    (Color::Black, (0, 0, 0)),
    (Color::Red, (205, 0, 0)),
    (Color::Green, (0, 205, 0)),
    (Color::Yellow, (205, 205, 0)),
    (Color::Blue, (0, 0, 238)),
    (Color::Magenta, (205, 0, 205)),
    (Color::Cyan, (0, 205, 205)),
    (Color::Gray, (229, 229, 229)),
    (Color::DarkGray, (127, 127, 127)),
    (Color::LightRed, (255, 0, 0)),
    (Color::LightGreen, (0, 255, 0)),
    (Color::LightYellow, (255, 255, 0)),
    (Color::LightBlue, (92, 92, 255)),
    (Color::LightMagenta, (255, 0, 255)),
    (Color::LightCyan, (0, 255, 255)),
    (Color::White, (255, 255, 255)),
];

fn adapt(c: Color, mode: ColorMode) -> Color {
    match (c, mode) {
        (Color::Rgb(r, g, b), ColorMode::Ansi16) => nearest_ansi(r, g, b),
        _ => c,
    }
}

/// Maps a colour to the ANSI colour with the same meaning: by hue for saturated
/// colours (a green stays green, whatever its shade), by brightness for greys.
/// Nearest-RGB matching would turn a muted green into grey and lose the role.
fn nearest_ansi(r: u8, g: u8, b: u8) -> Color {
    let (r, g, b) = (r as f32 / 255.0, g as f32 / 255.0, b as f32 / 255.0);
    let max = r.max(g).max(b);
    let min = r.min(g).min(b);
    let (v, s) = (max, if max > 0.0 { (max - min) / max } else { 0.0 });
    if s < 0.3 {
        return match v {
            v if v < 0.2 => Color::Black,
            v if v < 0.65 => Color::DarkGray,
            v if v < 0.9 => Color::Gray,
            _ => Color::White,
        };
    }
    let d = max - min;
    let hue = if max == r {
        60.0 * (((g - b) / d).rem_euclid(6.0))
    } else if max == g {
        60.0 * ((b - r) / d + 2.0)
    } else {
        60.0 * ((r - g) / d + 4.0)
    };
    let bright = v >= 0.7;
    let pick = |dark: Color, light: Color| if bright { light } else { dark };
    match hue {
        h if !(30.0..330.0).contains(&h) => pick(Color::Red, Color::LightRed),
        h if h < 90.0 => pick(Color::Yellow, Color::LightYellow),
        h if h < 150.0 => pick(Color::Green, Color::LightGreen),
        h if h < 210.0 => pick(Color::Cyan, Color::LightCyan),
        h if h < 270.0 => pick(Color::Blue, Color::LightBlue),
        _ => pick(Color::Magenta, Color::LightMagenta),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_defines_every_role() {
        for name in PRESETS {
            let f = parse(name, preset_text(name).unwrap()).unwrap();
            for role in Role::ALL {
                assert!(
                    f.roles.contains_key(role.name()),
                    "{name} lacks {}",
                    role.name()
                );
            }
            assert_eq!(f.name.as_deref(), Some(name));
        }
    }

    #[test]
    fn user_files_override_only_what_they_name() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("themes")).unwrap();
        std::fs::write(
            dir.path().join("themes/dark.toml"),
            "[roles]\ndanger = { fg = \"#000000\", bg = \"#ffff00\" }\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("themes/mine.toml"),
            "extends = \"light\"\n[roles]\nadded = { fg = \"blue\" }\n",
        )
        .unwrap();
        let dark = Theme::load("dark", Some(dir.path()), ColorMode::TrueColor).unwrap();
        let preset = Theme::preset("dark").unwrap();
        assert_eq!(dark.style(Role::Danger).bg, Some(Color::Rgb(255, 255, 0)));
        assert_eq!(dark.style(Role::Added), preset.style(Role::Added));
        let mine = Theme::load("mine", Some(dir.path()), ColorMode::TrueColor).unwrap();
        assert_eq!(mine.style(Role::Added).fg, Some(Color::Blue));
        assert_eq!(
            mine.style(Role::Removed),
            Theme::preset("light").unwrap().style(Role::Removed)
        );
    }

    #[test]
    fn bad_theme_files_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("themes")).unwrap();
        for (name, text, wanted) in [
            ("a", "[roles]\nfoo = { fg = \"red\" }\n", "unknown role"),
            (
                "b",
                "extends = \"dark\"\n[roles]\nadded = { fg = \"#12\" }\n",
                "invalid colour",
            ),
            ("c", "[roles]\n", "extends"),
            ("d", "extends = \"nope\"\n", "the presets are"),
        ] {
            std::fs::write(dir.path().join(format!("themes/{name}.toml")), text).unwrap();
            let e = Theme::load(name, Some(dir.path()), ColorMode::TrueColor).unwrap_err();
            assert!(e.to_string().contains(wanted), "{name}: {e}");
        }
        // The app lists what is available in the hint (Theme::available).
        assert_eq!(
            Theme::preset("solarized").unwrap_err().to_string(),
            "unknown theme \"solarized\""
        );
        let names = Theme::available(Some(dir.path()));
        assert_eq!(names[..3], PRESETS);
        assert!(names.contains(&"d".to_string()), "{names:?}");
    }

    #[test]
    fn sixteen_colour_fallback_and_no_color() {
        let t = Theme::load("dark", None, ColorMode::Ansi16).unwrap();
        for role in Role::ALL {
            let s = t.style(role);
            for c in [s.fg, s.bg].into_iter().flatten() {
                assert!(!matches!(c, Color::Rgb(..)), "{role:?} still truecolor");
            }
        }
        // Roles keep their meaning in 16 colours, in every preset.
        for name in PRESETS {
            let t = Theme::load(name, None, ColorMode::Ansi16).unwrap();
            let fg = |r: Role| t.style(r).fg;
            assert!(
                matches!(fg(Role::Removed), Some(Color::Red | Color::LightRed)),
                "{name}"
            );
            assert!(
                matches!(fg(Role::Added), Some(Color::Green | Color::LightGreen)),
                "{name}"
            );
            assert!(
                matches!(fg(Role::Modified), Some(Color::Yellow | Color::LightYellow)),
                "{name}"
            );
            assert!(
                matches!(t.style(Role::Danger).bg, Some(Color::Red | Color::LightRed)),
                "{name}"
            );
        }
        let n = Theme::load("dark", None, ColorMode::None).unwrap();
        let sel = n.style(Role::Selection);
        assert_eq!((sel.fg, sel.bg), (None, None));
        assert!(sel.add_modifier.contains(Modifier::REVERSED));
    }
}
