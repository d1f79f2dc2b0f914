//! The object routes' shapes: a listing page, what a key may do, the version header.

/// The header that carries an object's version (`get_versioned`) to the client.
pub const VERSION_HEADER: &str = "x-sealvol-version";

/// One page of a listing, as it travels.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct ListPage {
    pub objects: Vec<(String, u64, Option<u64>)>,
    pub next: Option<String>,
}

/// What the caller's key may do, for its console's title line.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KeyInfo {
    pub name: String,
    pub scope: String,
    pub admin: bool,
    pub read_only: bool,
    pub namespaces: Vec<String>,
}
