//! A sync's source as the node knows it: its address, parsed strictly (`hf://`,
//! `s3://`, `r2://`, `cw://`, `gs://`, `az://`, `file://` and plain paths), where it is
//! reached (`endpoints`), which keys to take (`filter`), how its untrusted keys become
//! clean paths (`keys`), what it holds (`listing`), and the seam to the clients that
//! list and read remote ones (`connector`, implemented by `sealvol-sources`).

pub mod connector;
pub mod endpoints;
pub mod filter;
pub mod keys;
pub mod listing;
pub mod url;

pub use connector::{Connector, Fetch, Notes, Remote};
pub use endpoints::Endpoints;
pub use filter::Filter;
pub use listing::{Listing, Object, RawObject};
pub use url::SourceUrl;
