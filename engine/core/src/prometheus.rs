//! Prometheus's text format, written one family at a time: the one writer behind a
//! mount's metrics (`sealvol-mount`) and a server's (`sealvol-serve`), and the node
//! cache's state both report.

use std::fmt::Write as _;

use crate::read::{LATENCY_BOUNDS_US, Latency};

/// A label value, escaped.
pub fn quote(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Families written one after another, named `PREFIX_NAME`, each row with the same
/// labels (none for the server, the mount's for a mount).
pub struct Text {
    pub prefix: &'static str,
    pub labels: String,
    pub out: String,
}

impl Text {
    /// `name{labels,extra}`, or `name` alone without labels.
    pub fn series(&self, name: &str, extra: &str) -> String {
        let sep = if self.labels.is_empty() || extra.is_empty() {
            ""
        } else {
            ","
        };
        match (self.labels.is_empty(), extra.is_empty()) {
            (true, true) => format!("{}_{name}", self.prefix),
            _ => format!("{}_{name}{{{}{sep}{extra}}}", self.prefix, self.labels),
        }
    }

    pub fn family(&mut self, name: &str, kind: &str, help: &str, rows: &[(String, f64)]) {
        let _ = writeln!(self.out, "# HELP {}_{name} {help}", self.prefix);
        let _ = writeln!(self.out, "# TYPE {}_{name} {kind}", self.prefix);
        for (extra, v) in rows {
            let series = self.series(name, extra);
            let _ = writeln!(self.out, "{series} {v}");
        }
    }

    pub fn one(&mut self, name: &str, kind: &str, help: &str, v: u64) {
        self.family(name, kind, help, &[(String::new(), v as f64)]);
    }

    /// A histogram with cumulative buckets, in seconds.
    pub fn histogram(&mut self, name: &str, help: &str, l: &Latency) {
        let _ = writeln!(self.out, "# HELP {}_{name} {help}", self.prefix);
        let _ = writeln!(self.out, "# TYPE {}_{name} histogram", self.prefix);
        let mut seen = 0;
        for (i, n) in l.buckets.iter().enumerate() {
            seen += n;
            let le = match LATENCY_BOUNDS_US.get(i) {
                Some(us) => format!("{}", *us as f64 / 1e6),
                None => "+Inf".into(),
            };
            let series = self.series(&format!("{name}_bucket"), &format!("le=\"{le}\""));
            let _ = writeln!(self.out, "{series} {seen}");
        }
        let sum = self.series(&format!("{name}_sum"), "");
        let count = self.series(&format!("{name}_count"), "");
        let _ = writeln!(self.out, "{sum} {}", l.sum_us as f64 / 1e6);
        let _ = writeln!(self.out, "{count} {seen}");
    }
}

/// The node cache as a mount's metrics show it.
#[derive(Default)]
pub struct CacheState {
    pub used: u64,
    pub max: u64,
    /// Objects and bytes this process evicted.
    pub evicted: (u64, u64),
    /// Chunks this process found damaged in the cache (never served; fetched again).
    pub damaged: u64,
}

impl CacheState {
    pub fn of(c: &crate::cache::ChunkCache) -> CacheState {
        CacheState {
            used: c.used_bytes(),
            max: c.max_bytes(),
            evicted: c.evicted(),
            damaged: c.damaged_chunks(),
        }
    }
}
