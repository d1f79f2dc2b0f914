//! Numbers, times and names the way people read them, shared by the console and the CLI.

use std::borrow::Cow;
use std::fmt::Write;

/// Bytes in binary units: `218.0 MiB`.
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A namespace's usage against its quota: `3.0 MiB of 10.0 MiB (30%)`.
pub fn quota(used: u64, quota: u64) -> String {
    format!(
        "{} of {} ({:.0}%)",
        size(used),
        size(quota),
        used as f64 * 100.0 / quota.max(1) as f64
    )
}

/// `2026-11-29T23:45:08.123Z` → `2026-11-29 23:45`.
pub fn when(rfc3339: &str) -> String {
    rfc3339.replace('T', " ").chars().take(16).collect()
}

/// How long from `now` until `until` (RFC 3339): `6d 23h`, `5h 12m`, `40m`; `0m` once
/// it has passed. The trash shows a deleted version's time left this way.
pub fn time_left(until: &str, now: std::time::SystemTime) -> String {
    let Ok(end) = humantime::parse_rfc3339_weak(until) else {
        return String::new();
    };
    let secs = end.duration_since(now).map(|d| d.as_secs()).unwrap_or(0);
    let (d, h, m) = (secs / 86_400, secs % 86_400 / 3600, secs % 3600 / 60);
    match (d, h) {
        // Under a minute: the seconds, never "0m" for time that is left.
        (0, 0) if m == 0 => format!("{secs}s"),
        (0, 0) => format!("{m}m"),
        (0, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// A tag's time left until it expires at `at` (RFC 3339): `29d 23h`, or `expired`.
pub fn expires_in(at: &str, now: std::time::SystemTime) -> String {
    match humantime::parse_rfc3339_weak(at).is_ok_and(|t| t > now) {
        true => time_left(at, now),
        false => "expired".into(),
    }
}

/// `b3:9f3c…` shortened to `b3:` + 12 hex digits, the width tables give a digest.
pub fn short_digest(digest: &str) -> String {
    digest.chars().take(15).collect()
}

/// A name (a file's path, a link's target, a directory) as it is safe to print or
/// draw. Control characters would forge rows (a newline) or drive the terminal (ESC),
/// and bidirectional overrides would reorder what is shown; a name holding any is
/// shown in double quotes with C escapes, as `ls` and git show them. A name starting
/// with `"` is quoted too, so that a quoted name is never ambiguous. `--json` carries
/// names exactly.
pub fn name(s: &str) -> Cow<'_, str> {
    if !s.starts_with('"') && !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x100 && unsafe_char(c) => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    Cow::Owned(out)
}

fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A version's tags in one table cell, the same in the console and the CLI's tables:
/// `canary,prod` (no space, so a cell stays one word where columns are split on them).
pub fn tags(tags: &[String]) -> String {
    tags.iter().map(|t| name(t)).collect::<Vec<_>>().join(",")
}

/// A duration as people write it: its two largest units, `7 days`, `1 day 12 hours`,
/// `15 minutes`, `90 seconds` under two minutes (humantime's `7days` reads as a typo).
pub fn span(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    let unit = |n: u64, one: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {one}s"),
    };
    if secs < 120 {
        return unit(secs, "second");
    }
    let parts = [
        (secs / 86_400, "day"),
        (secs / 3_600 % 24, "hour"),
        (secs / 60 % 60, "minute"),
    ];
    let mut shown: Vec<String> = Vec::new();
    for (i, (n, one)) in parts.iter().enumerate() {
        if *n == 0 {
            if shown.is_empty() {
                continue;
            }
            break;
        }
        shown.push(unit(*n, one));
        if shown.len() == 2 || i == parts.len() - 1 {
            break;
        }
    }
    shown.join(" ")
}

/// What a mount's ref named besides its volume, as a table shows it: `:prod`,
/// `@b3:0202d4a8e3c1` (a digest shortened as everywhere), or `newest`.
pub fn as_given(volume: &str, requested: &str) -> String {
    let rest = requested
        .trim_start_matches("vol:")
        .strip_prefix(volume)
        .unwrap_or(requested);
    match rest.strip_prefix('@') {
        _ if rest.is_empty() => "newest".into(),
        Some(digest) => format!("@{}", short_digest(digest)),
        None => rest.to_string(),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn under_a_minute_is_said_in_seconds() {
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        let at = |secs: u64| {
            humantime::format_rfc3339(now + std::time::Duration::from_secs(secs)).to_string()
        };
        assert_eq!(super::expires_in(&at(30), now), "30s");
        assert_eq!(super::expires_in(&at(90), now), "1m");
        assert_eq!(super::expires_in(&at(3 * 86_400 + 7200), now), "3d 2h");
    }

    #[test]
    fn a_mounts_ref_is_shown_as_given_with_its_digest_short() {
        let hex = "0202d4a8e3c1".repeat(5) + "abcd";
        assert_eq!(super::as_given("w/t", "w/t:prod"), ":prod");
        assert_eq!(super::as_given("w/t", "vol:w/t"), "newest");
        assert_eq!(
            super::as_given("w/t", &format!("vol:w/t@b3:{hex}")),
            "@b3:0202d4a8e3c1"
        );
        assert_eq!(super::as_given("w/t", "w/t@9f3c1a2b"), "@9f3c1a2b");
    }

    #[test]
    fn spans_read_as_people_write_them() {
        use std::time::Duration;
        let d = |s: u64| super::span(Duration::from_secs(s));
        assert_eq!(d(7 * 86_400), "7 days");
        assert_eq!(d(86_400 + 12 * 3_600), "1 day 12 hours");
        assert_eq!(d(86_400 + 30), "1 day");
        assert_eq!(d(15 * 60), "15 minutes");
        assert_eq!(d(3_600 + 60), "1 hour 1 minute");
        assert_eq!(d(90), "90 seconds");
        assert_eq!(d(1), "1 second");
    }

    #[test]
    fn sizes_and_times() {
        assert_eq!(super::size(0), "0 B");
        assert_eq!(super::size(1536), "1.5 KiB");
        assert_eq!(super::size(218 << 20), "218.0 MiB");
        assert_eq!(super::when("2026-11-29T23:45:08.123Z"), "2026-11-29 23:45");
        assert_eq!(
            super::short_digest(&format!("b3:{}", "a".repeat(64))),
            "b3:aaaaaaaaaaaa"
        );
    }

    #[test]
    fn names_with_control_characters_are_quoted_and_escaped() {
        use super::name;
        assert_eq!(name("weights/model.bin"), "weights/model.bin");
        assert_eq!(name("día/ünï.txt"), "día/ünï.txt");
        assert_eq!(
            name("model.bin\n1 B      b3:0000  innocent.txt"),
            "\"model.bin\\n1 B      b3:0000  innocent.txt\""
        );
        assert_eq!(name("a\x1b[31mred"), "\"a\\x1b[31mred\"");
        assert_eq!(name("tab\there\\"), "\"tab\\there\\\\\"");
        assert_eq!(name("\"quoted\""), "\"\\\"quoted\\\"\"");
        assert_eq!(name("evil\u{202e}txt.exe"), "\"evil\\u{202e}txt.exe\"");
        assert_eq!(name("del\x7f"), "\"del\\x7f\"");
    }
}
