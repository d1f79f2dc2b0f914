//! Sync: a source becomes a sealed version, as a durable job of the agent.
//!
//! - `url`: source addresses, parsed strictly (`hf://`, `s3://`, `r2://`, `cw://`,
//!   `gs://`, `az://`, `file://` and plain paths);
//! - `endpoints`: where each kind of source is reached;
//! - `filter`: `--include`/`--exclude` globs; `keys`: untrusted keys → clean paths;
//! - `listing`: what a source holds, as the sync sees it;
//! - `connector`: the seam to the remote clients (`sealvol-sources`);
//! - `runner`: listing → batches → the push pipeline → a sealed version, resumable.

pub mod connector;
pub mod endpoints;
pub mod filter;
pub mod keys;
pub mod listing;
mod runner;
pub mod url;

pub use connector::{Connector, Fetch, Notes, Remote};
pub use endpoints::Endpoints;
pub use filter::Filter;
pub use listing::{Listing, Object, RawObject};
pub use runner::{DEFAULT_BATCH, DEFAULT_STREAMS, SyncOptions, check_spec, run};
pub use url::SourceUrl;
