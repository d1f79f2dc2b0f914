//! Plain-text tables and sizes for people; `--json` output is built by the commands.

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

/// Prints rows as left-aligned columns under a header; the last column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let n = cells.len();
        let mut s = String::new();
        for (i, (cell, w)) in cells.into_iter().zip(&widths).enumerate() {
            if i + 1 == n {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  "));
            }
        }
        println!("{}", s.trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

pub fn json(value: &impl serde::Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("error: cannot encode JSON: {e}"),
    }
}

/// `2026-11-29T23:45:08Z` → `2026-11-29 23:45`.
pub fn when(rfc3339: &str) -> String {
    rfc3339.replace('T', " ").chars().take(16).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::size(0), "0 B");
        assert_eq!(super::size(1536), "1.5 KiB");
        assert_eq!(super::size(218 << 20), "218.0 MiB");
    }
}
