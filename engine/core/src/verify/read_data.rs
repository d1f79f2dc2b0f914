//! How much of the packs' data a verify reads and hashes (`--read-data`).

use crate::error::Result;

impl ReadData {
    /// Parses `--read-data-subset`: `N/T` (1 ≤ N ≤ T) or `P%` (0 < P ≤ 100).
    pub fn parse_subset(s: &str) -> Result<ReadData> {
        let bad = || {
            crate::error::Error::invalid(format!("--read-data-subset {s:?} is not N/T or P%")).hint(
                "for example 1/10 (the first of ten runs that together read every pack) or 5%",
            )
        };
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(p > 0.0 && p <= 100.0) {
                return Err(bad());
            }
            return Ok(ReadData::Share(p / 100.0));
        }
        let (n, t) = s.split_once('/').ok_or_else(bad)?;
        let (n, t): (u32, u32) = (
            n.trim().parse().map_err(|_| bad())?,
            t.trim().parse().map_err(|_| bad())?,
        );
        if n == 0 || t == 0 || n > t || t > 256 {
            return Err(bad());
        }
        Ok(ReadData::Subset { n, t })
    }

    pub(super) fn describe(&self) -> String {
        match self {
            ReadData::None => "none".into(),
            ReadData::All => "all".into(),
            ReadData::Subset { n, t } => format!("subset {n}/{t}"),
            ReadData::Share(p) => format!("{:.1}%", p * 100.0),
            ReadData::Sample => "sample".into(),
        }
    }
}

/// How much chunk data a verify reads and hashes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReadData {
    /// Structure only: names, trailers, indexes, chunk lists, manifests, tags, records.
    None,
    /// Every pack (`--read-data`).
    All,
    /// Packs whose id's first byte is `n - 1` modulo `t` (`--read-data-subset n/t`): `t`
    /// runs with `n` = 1…t read everything once.
    Subset { n: u32, t: u32 },
    /// A random share of the packs (`--read-data-subset 10%`).
    Share(f64),
    /// The default: a random sample of packs, at least 1/16 of the pack bytes and at least
    /// `SAMPLE_MIN` (so a small repository is read whole).
    Sample,
}

/// The least the default sample reads.
pub const SAMPLE_MIN: u64 = 256 << 20;
