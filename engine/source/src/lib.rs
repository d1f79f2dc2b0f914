//! sealvol's sync sources before any client touches them.
//!
//! Its one job is what a source is: its address, parsed strictly (`hf://`, `s3://`,
//! `r2://`, `cw://`, `gs://`, `az://`, `file://` and plain paths, `url`), where it is
//! reached (`endpoints`), which keys to take (`filter`), how its untrusted keys become
//! clean paths (`keys`), what it holds (`listing`), the secrets that open it
//! (`secrets`), and the seam to the clients that list and read remote ones
//! (`connector`, implemented by `sealvol-sources`), and how failures that may pass are
//! retried (`retry`), and
//! how a job that only waits out retries gives its agent's slot back (`pace`). It links no network client, so the
//! node, the S3 clients and the S3 repository share it without pulling each other in.

pub mod checks;
pub mod connector;
pub mod endpoints;
pub mod filter;
pub mod keys;
pub mod listing;
pub mod pace;
pub mod retry;
pub mod secrets;
pub mod url;

pub use connector::{Access, Connector, Fetch, FileTap, Notes, Remote, Tap};
pub use endpoints::Endpoints;
pub use filter::Filter;
pub use listing::{Listing, Object, RawObject};
pub use url::SourceUrl;
