//! Server-side jobs as they travel: a job as a client submits it, a stored secret as
//! listed (never its value), and how often a job's feed says it is alive.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A job as a caller asks for it: what to sync where. Where the source is reached is
/// not the caller's to say.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Submit {
    pub source: String,
    pub volume: String,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The name of a secret stored on the server in the volume's namespace.
    #[serde(default)]
    pub secret: Option<String>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    /// A mirror job: the server's destination to copy the version `source` names to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_to: Option<String>,
}

/// A secret as `GET /v1/secrets` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Listed {
    pub namespace: String,
    pub name: String,
    pub bytes: u64,
    pub updated: String,
}

/// How often an idle stream says it is alive, so that proxies and the client's read
/// timeout see a live connection.
pub const KEEP_ALIVE: Duration = Duration::from_secs(10);
