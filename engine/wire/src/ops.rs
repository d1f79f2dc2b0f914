//! The `/v1/ops/` bodies as they travel: what a push and the registry's operations send
//! (`sealvol_serve::ops` says what the server checks of each) and what comes back.

use sealvol_core::digest::Entry;
use sealvol_core::registry::{Provenance, TagChange, TagFile, VersionStats};
use serde::{Deserialize, Serialize};

/// The header of a have-chunks answer that carries the key's challenge (hex).
pub const CHALLENGE_HEADER: &str = "x-sealvol-challenge";

/// The most hashes one question names (2 MiB of them).
pub const MAX_ASK: usize = sealvol_core::push::ASK_AT_ONCE;

/// The largest operation body: a chunk list of about 1.8 million chunks (a file of
/// about 230 GiB), or a manifest of some 300,000 files.
pub const MAX_OP_BODY: usize = 64 << 20;

/// Per file asked: its chunk count when its list is stored, proven, names only usable
/// copies and the key may read it; else `null` (the push reads the file again).
#[derive(Serialize, Deserialize)]
pub struct StoredFiles {
    pub chunks: Vec<Option<u64>>,
}

/// A seal as it travels.
#[derive(Serialize, Deserialize)]
pub struct SealBody {
    pub volume: String,
    pub tags: Vec<String>,
    pub entries: Vec<Entry>,
    pub stats: VersionStats,
    pub provenance: Provenance,
}

/// What a seal did, as it travels back.
#[derive(Serialize, Deserialize)]
pub struct SealedBody {
    pub digest: String,
    pub new: bool,
    pub restored: bool,
    pub tags: Vec<TagChange>,
}

/// What storing a signature did, as it travels back.
#[derive(Serialize, Deserialize)]
pub struct SignedBody {
    pub key: String,
    pub new: bool,
}

/// A tag change as it travels: a move (`to`) or a removal; `expected` as
/// `Repository::move_tag` takes it (`Some(None)`: only if the tag points nowhere).
#[derive(Serialize, Deserialize)]
pub struct TagBody {
    pub volume: String,
    pub tag: String,
    pub to: Option<String>,
    pub expected: Option<Option<String>>,
    #[serde(default)]
    pub by: Option<String>,
    /// When the tag stops resolving (RFC 3339).
    #[serde(default)]
    pub expires: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub struct TagMovedBody {
    pub file: TagFile,
    pub from: Option<String>,
    pub moved: bool,
    pub kept_damaged: Option<String>,
}

/// A label change as it travels.
#[derive(Serialize, Deserialize)]
pub struct LabelBody {
    pub volume: String,
    pub digest: String,
    #[serde(default)]
    pub set: sealvol_core::labels::Labels,
    #[serde(default)]
    pub remove: Vec<String>,
    #[serde(default)]
    pub by: Option<String>,
}

/// A delete or restore as it travels.
#[derive(Serialize, Deserialize)]
pub struct TrashBody {
    #[serde(rename = "ref")]
    pub r: String,
    #[serde(default)]
    pub untag: bool,
    #[serde(default)]
    pub by: Option<String>,
}

/// A chunk copy a reader found bad, as it travels.
#[derive(Serialize, Deserialize)]
pub struct DamageBody {
    pub pack: String,
    pub chunk: String,
    pub offset: u64,
    pub len: u32,
}

#[derive(Serialize, Deserialize)]
pub struct GcBody {
    #[serde(default)]
    pub dry_run: bool,
}
