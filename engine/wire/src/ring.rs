//! What a server and its clients (`peer.rs`, a node's read path and a fellow server)
//! say to each other beyond a route's name: the shapes both sides build and read, so
//! that the client needs nothing of the server's routes (`http.rs`).

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
