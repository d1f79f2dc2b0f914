//! What a server is told to keep to beyond its defaults (`serve`'s flags): private
//! dedup, its connections' limits, whether it speaks TLS, the Hub mirror.

use std::sync::Arc;

use crate::conn;
use crate::hub;

/// What a server is told to keep to beyond its defaults.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Namespaces never told of chunks held outside their reach (`--private-dedup`).
    pub private_dedup: Vec<String>,
    /// What connections may hold, and each caller's share of them (`conn`).
    pub connections: conn::Limits,
    /// The server speaks TLS: the absolute links it sends (the next page of a Hub tree
    /// listing, `hub/tree.rs`) say `https`.
    pub https: bool,
    /// The pull-through mirror of an upstream Hub (`serve --hf-upstream`).
    pub hub_mirror: Option<Arc<hub::mirror::Mirror>>,
}
