//! Numbers and times the way people read them, shared by the console and the CLI.

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

/// `2026-11-29T23:45:08.123Z` → `2026-11-29 23:45`.
pub fn when(rfc3339: &str) -> String {
    rfc3339.replace('T', " ").chars().take(16).collect()
}

/// `b3:9f3c…` shortened to `b3:` + 12 hex digits, the width tables give a digest.
pub fn short_digest(digest: &str) -> String {
    digest.chars().take(15).collect()
}

#[cfg(test)]
mod tests {
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
}
