//! The repository's format file, `sealvol.repo`: its format, the chunker, the pack
//! size, the trash's retention, garbage collection's grace and the namespaces'
//! quotas; read and checked with no I/O (`Repository::open` reads the object).

use serde::{Deserialize, Serialize};

use crate::chunk::ChunkParams;
use crate::error::{Error, ErrorKind, Result};

impl RepoConfig {
    /// The settings of a new repository.
    pub fn default_new() -> RepoConfig {
        RepoConfig {
            format: FORMAT,
            chunker: ChunkerConfig {
                algorithm: "fastcdc-2020".into(),
                params: ChunkParams::DEFAULT,
            },
            pack_target: PACK_TARGET,
            retention: RETENTION,
            gc_grace: GC_GRACE,
            quotas: Default::default(),
        }
    }
}

/// The newest repository format this build reads and writes.
pub const FORMAT: u32 = 1;

/// The repository's format file, the one object every repository has.
pub const CONFIG_KEY: &str = "sealvol.repo";

/// Packs are closed when they reach this size: tens of MiB, so that an object store
/// sees few large objects rather than many small ones (docs/FORMAT.md, packs).
pub const PACK_TARGET: u64 = 64 << 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoConfig {
    pub format: u32,
    pub chunker: ChunkerConfig,
    pub pack_target: u64,
    /// How long a deleted version stays in the trash, restorable (docs/GC.md).
    #[serde(default = "default_retention", with = "duration_text")]
    pub retention: std::time::Duration,
    /// Garbage collection's grace period: objects younger than this are never
    /// condemned, and a sweep waits this long after condemning (docs/GC.md).
    #[serde(default = "default_gc_grace", with = "duration_text")]
    pub gc_grace: std::time::Duration,
    /// Namespace → the most bytes its versions may store (`usage.rs`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub quotas: std::collections::BTreeMap<String, u64>,
}

/// A deleted version is restorable for 7 days.
pub const RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// Far longer than a push takes from its last check to its manifest (milliseconds), and
/// long enough that most pushes finish before their unsealed objects could be condemned.
pub const GC_GRACE: std::time::Duration = std::time::Duration::from_secs(15 * 60);

fn default_retention() -> std::time::Duration {
    RETENTION
}

fn default_gc_grace() -> std::time::Duration {
    GC_GRACE
}

/// Durations in `sealvol.repo` as people write them: `"7days"`, `"15m"`.
mod duration_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map_err(serde::de::Error::custom)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunkerConfig {
    pub algorithm: String,
    #[serde(flatten)]
    pub params: ChunkParams,
}

pub(crate) fn parse_config(location: &str, bytes: &[u8]) -> Result<RepoConfig> {
    #[derive(Deserialize)]
    struct Version {
        format: u32,
    }
    let damaged = |e: serde_json::Error| {
        Error::corrupt(format!("{location}/{CONFIG_KEY} is damaged: {e}")).hint(
            "`sealvol volume verify` shows what else is damaged; `sealvol repair` writes it anew",
        )
    };
    let v: Version = serde_json::from_slice(bytes).map_err(damaged)?;
    if v.format > FORMAT {
        return Err(Error::new(
            ErrorKind::Format,
            format!(
                "repository {location} has format {}, newer than this sealvol understands ({FORMAT})",
                v.format
            ),
        )
        .hint("upgrade sealvol to use this repository"));
    }
    let config: RepoConfig = serde_json::from_slice(bytes).map_err(damaged)?;
    if !config.chunker.params.is_valid() || config.chunker.algorithm != "fastcdc-2020" {
        return Err(Error::corrupt(format!(
            "{location}/{CONFIG_KEY}: unsupported chunker settings"
        )));
    }
    Ok(config)
}
