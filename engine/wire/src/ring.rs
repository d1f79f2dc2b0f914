//! What a server and its readers (`sealvol_client::peer`: a node's read path, a fellow
//! server) say to each other beyond a route's name: the shapes both sides build and
//! read, so that the client needs nothing of the server's routes.

/// A server's instance id, random at each start, by which a server of a ring finds
/// itself in the ring's list (`fellows.rs`). Open: it says nothing but that id.
pub const RING_ID_ROUTE: &str = "/v1/ring/id";

/// A run request as it travels: what `peer::HttpPeer` sends. `file` names the file
/// whose chunk list names the chunks: they are served only as that file's, to a key
/// that may read it, and proven to be its bytes first.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct RunRequest {
    pub file: String,
    pub pack: String,
    pub offset: u64,
    pub chunks: Vec<(String, u32)>,
}

/// The header a server sets on a run it forwards to a fellow (`fellows.rs`).
pub const FORWARDED: &str = "x-sealvol-forwarded";

/// One server's report (docs/JSON.md, `sealvol peers --json`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// Its instance id (`/v1/ring/id`), random at each start.
    pub id: String,
    /// Servers in its own ring (`serve --peer`), itself included; 0 when it has none.
    pub ring: u64,
    pub bytes_served: u64,
    pub chunks_asked: u64,
    pub cache_hits: u64,
    /// Chunks asked for that its cache held, of all asked (0 when none were).
    pub hit_ratio: f64,
    pub origin_bytes: u64,
    /// Bytes its fellows answered its misses with.
    pub fellow_bytes: u64,
    /// Runs its fellows asked of it.
    pub forwarded_in: u64,
}
